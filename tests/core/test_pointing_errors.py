"""Mistakes a new user makes get an error that names the fix, before anything expensive runs;
and the small things the own-loop review found (issue 27)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import yaml
from requirements_guard import need

import rubricgym
from rubricgym.cli import main
from rubricgym.registration import UnknownBenchmark, operator_library
from rubricgym.trca.validate import check_library
from rubricgym.trainers.config import load_config


def test_an_unknown_env_id_names_the_nearest_rubricgym_ids():
    with pytest.raises(UnknownBenchmark, match="did you mean ALFWorld-Rubric-v0"):
        rubricgym.make("Alfworld-Rubric-v0")
    with pytest.raises(UnknownBenchmark, match="did you mean ALFWorld-Rubric-v0"):
        rubricgym.check_env_id("alfworld-rubric-v0")
    assert rubricgym.nearest_env_ids("WebShop-Rubric-v1")[0] == "WebShop-Rubric-v0"


def test_train_refuses_an_unknown_env_id_before_any_model_loads(capsys, monkeypatch):
    import rubricgym.trainers.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "load_causal_lm", lambda *a, **k: pytest.fail("the model was loaded"))
    assert main(["train", "--set", "env.id=Alfworld-Rubric-v0", "--set", "model.name=tiny"]) == 2
    err = capsys.readouterr().err
    assert "bad configuration" in err and "did you mean ALFWorld-Rubric-v0" in err


def test_demo_names_env_ids_not_benchmarks(capsys):
    assert main(["demo", "--env", "Alfworld-Rubric-v0"]) == 2
    out = capsys.readouterr().out
    assert "did you mean ALFWorld-Rubric-v0" in out and "ALFWorld-Rubric-Eval-v0" in out


@pytest.mark.parametrize("key, unknown, near", [("algorithm.grup_size", "algorithm.grup_size", "algorithm.group_size"),
                                                ("envv.id", "envv", "env"), ("run.iteration", "run.iteration", "run.iterations")])
def test_an_unknown_setting_names_the_nearest_valid_keys(key, unknown, near):
    with pytest.raises(ValueError, match=rf"unknown setting '{unknown}': did you mean {near}\b"):
        load_config(None, [f"{key}=3"])


def test_every_problem_of_a_library_file_is_reported_in_one_run():
    data = yaml.safe_load(operator_library("ALFWorld").read_text())
    data["operators"][0]["category"] = "evidense"  # a typo pydantic refuses
    data["operators"][1]["condition"] = "facts.no_such_fact == true"  # and a second, unrelated problem
    compiled, problems = check_library(data)
    kinds = {p.kind for p in problems}
    assert compiled is None
    assert "format" in kinds and "unknown_fact" in kinds, problems
    assert any(p.operator == data["operators"][1]["id"] for p in problems if p.kind == "unknown_fact")


def test_a_named_alfworld_data_location_without_games_is_an_error_not_a_fallback(tmp_path, monkeypatch):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    typo = tmp_path / "alfworld-data-typo"
    monkeypatch.setenv("ALFWORLD_DATA", str(typo))
    with pytest.raises(FileNotFoundError, match="ALFWORLD_DATA=.*holds no ALFWorld games.*unset ALFWORLD_DATA"):
        gym.make("ALFWorld-Rubric-v0")
    assert not typo.exists()  # nothing created at a path named for reading
    monkeypatch.delenv("ALFWORLD_DATA")
    with pytest.raises(FileNotFoundError, match="no ALFWorld games"):
        gym.make("ALFWorld-Rubric-v0", data_path=str(typo))
    assert not typo.exists()


def test_named_searchqa_files_that_are_missing_or_empty_are_errors(tmp_path):
    need("bm25s", "pip install 'rubricgym[searchqa]'")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        gym.make("SearchQA-Rubric-v0", questions=str(tmp_path / "typo.jsonl"))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="no questions"):
        gym.make("SearchQA-Rubric-v0", questions=str(empty))


def test_a_data_location_is_checked_before_the_model_loads(tmp_path, monkeypatch):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    import rubricgym.trainers.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "load_causal_lm", lambda *a, **k: pytest.fail("the model was loaded"))
    config = load_config(None, ["model.name=tiny", "env.id=ALFWorld-Rubric-v0",
                                f"env.kwargs={{data_path: {tmp_path / 'nowhere'}}}", f"run.output_dir={tmp_path}"])
    with pytest.raises(FileNotFoundError, match="no ALFWorld games"):
        trainer_module.Trainer(config)


def test_the_demo_shows_what_the_rubric_paid_and_plays_every_task_of_a_small_benchmark(capsys):
    import trainer.split_word_env  # noqa: F401  (registers WordPickSplit: 3 held-out tasks and an expert)

    assert main(["demo", "--env", "WordPickSplit-Rubric-Eval-v0", "--plain"]) == 0
    assert "3 task(s)" in capsys.readouterr().out
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    assert main(["demo", "--env", "ALFWorld-Rubric-v0", "--games", "1", "--plain", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "(engine 0, trca " in out  # a step the rubric paid and the engine did not


def test_webshop_lists_only_sendable_actions_and_the_search_template_apart():
    need("bm25s", "pip install 'rubricgym[webshop]'")
    from rubricgym.prompts import EpisodeView, PromptSettings, build_messages

    env = gym.make("WebShop-Rubric-v0")
    try:
        obs, info = env.reset(seed=0)
        assert info["action_templates"] == ["search[<keywords>]"]
        assert all(not a.startswith("search[") for a in info["admissible_actions"] or [])
        prompt = build_messages(EpisodeView.start(env, obs, info), PromptSettings())[0]["content"]
        assert "'search[<keywords>]'" in prompt  # the prompt still offers the search
        _, _, _, _, info = env.step("<think>x</think><action>search[yoga mat]</action>")
        assert info["transition"].facts.admissible and info["transition"].facts.accepted
        for action in info["admissible_actions"][:3]:  # what is listed can be sent as it is
            env.reset(seed=0)
            env.step("<think>x</think><action>search[yoga mat]</action>")
            _, _, _, _, step_info = env.step(f"<think>x</think><action>{action}</action>")
            assert step_info["transition"].facts.admissible, action
    finally:
        env.close()


def test_the_report_shows_the_page_not_the_reprinted_instruction():
    from rubricgym.report.views import page_text

    instruction = "i need a yoga mat with a carrying strap, and price lower than 40.00 dollars"
    page = f"WebShop [SEP] Instruction: [SEP] {instruction} [SEP] Back to Search [SEP] Page 1 (Total results: 50)"
    assert page_text(page, instruction) == "… Back to Search [SEP] Page 1 (Total results: 50)"
    assert page_text("You are in the middle of a room.", "put a vase in the cabinet.") == \
        "You are in the middle of a room."
