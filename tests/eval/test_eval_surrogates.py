"""One character no longer crashes an eval run (issue 54, item 3): an endpoint reply holding a
lone surrogate is normalized where it enters; the episode is recorded as a normal episode and
the run writes episodes.jsonl and summary.json. Record writing cannot fail on content."""

from __future__ import annotations

import json

import pytest
from judge_test_servers import ScriptedJudgeServer

from rubricgym.cli import main
from rubricgym.contract import Facts, ParsedAction, Trajectory, Transition
from rubricgym.trainers.run_files import append_run_line, write_run_file


@pytest.mark.slow
def test_a_lone_surrogate_in_a_reply_is_an_ordinary_episode(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_TEST_EVAL_KEY", "sk-test-not-secret")
    server = ScriptedJudgeServer(mode="ok")
    server.answer = lambda body: "<action>search[capital \ud800 of \udfff France]</action>"
    out = tmp_path / "surrogate"
    try:
        code = main(["eval", "--env", "SearchQA-Rubric-v0", "--n", "2", "--max-steps", "2", "--policy", "endpoint",
                     "--base-url", server.base_url, "--model", "scripted", "--api-key-env",
                     "RUBRICGYM_TEST_EVAL_KEY", "--out", str(out)])
    finally:
        server.stop()
    assert code == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == 2 and {r["outcome"] for r in records} <= {"failure", "truncated", "success"}
    responses = [t["response"] for r in records for t in r["trajectory"]["transitions"]]
    assert responses and all("\ufffd" in text and "France" in text for text in responses)
    assert json.loads((out / "summary.json").read_text())["counted"] == 2


def test_record_writers_cannot_fail_on_content(tmp_path):
    lone = "x\ud800y"
    trajectory = Trajectory(benchmark="base", task_id=lone, transitions=[
        Transition(step=0, response=lone, action=ParsedAction(ok=False), observation=lone, facts=Facts())])
    line = trajectory.to_json_line()  # a surrogate that got past the boundaries: a JSON escape
    assert Trajectory.from_json_line(line).task_id == lone
    write_run_file(tmp_path / "a.json", json.dumps({"k": lone}, ensure_ascii=False))
    append_run_line(tmp_path / "b.jsonl", json.dumps({"k": lone}, ensure_ascii=False))
    for name in ("a.json", "b.jsonl"):
        assert json.loads((tmp_path / name).read_text(encoding="utf-8").splitlines()[0]) == {"k": lone}


def test_the_env_normalizes_the_agent_s_text_where_it_enters():
    from trainer.word_env import make_word_env

    env = make_word_env(max_steps=2)
    env.reset(seed=0)
    _, _, _, _, info = env.step("<action>app\ud800le</action>")
    transition = info["transition"]
    assert transition.response == "<action>app\ufffdle</action>" and transition.action.action == "app\ufffdle"
    assert json.loads(env.unwrapped.trajectory.to_json_line())["transitions"][0]["response"].count("\ufffd") == 1
