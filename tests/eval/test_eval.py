"""``rubricgym eval`` on the real ALFWorld engine: a user's function, an OpenAI-compatible
endpoint on 127.0.0.1 (a 429 first), failures as labelled outcomes, resume, bad input."""

from __future__ import annotations

import json

import pytest
from judge_test_servers import ScriptedJudgeServer
from requirements_guard import need

from rubricgym.cli import main
from rubricgym.contract import load_jsonl

ENV = "ALFWorld-Rubric-v0"


def episodes(out) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_callable_agent_and_an_endpoint_agent_are_measured_with_per_step_credit(tmp_path, capsys):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    out = tmp_path / "expert"
    assert main(["eval", "--env", ENV, "--n", "2", "--samples", "2", "--policy", "callable",
                 "--callable", "eval_agents:expert", "--concurrency", "2", "--out", str(out)]) == 0
    records = episodes(out)
    assert sorted((r["task_id"], r["sample"]) for r in records) == sorted(
        (t, s) for t in {r["task_id"] for r in records} for s in (0, 1)) and len(records) == 4
    assert all(r["outcome"] == "success" and r["env_return"] == 1.0 for r in records)
    first = records[0]
    assert first["transcript"][0][0]["role"] in ("system", "user") and len(first["transcript"]) == first["steps"]
    assert all("trca" in s["rubric"] for s in first["step_records"])  # every rubric component's record, per step
    summary = json.loads((out / "summary.json").read_text())
    assert summary["success_rate"] == 1.0 and summary["pass_at"] == {"1": 1.0, "2": 1.0}
    assert summary["rubric_reward_by_step"]["0"] != 0.0  # where the rubric paid
    shown = capsys.readouterr()
    assert "success 1.000 over 4 episodes" in shown.out and "[4/4]" in shown.out  # a line per finished episode
    assert "success=1.00" in shown.err and "tokens=" in shown.err  # the running bar
    # the episodes reload as trajectories (what rubricgym judge and report read) and the report renders them
    reloaded = load_jsonl(out / "episodes.jsonl")
    assert [t.model_dump(mode="json") for t in reloaded] == [r["trajectory"] for r in records]
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert '<section id="eval">' in page and "all tasks" in page and f"eval {out.name}: {ENV}" in page
    for task in {r["task_id"] for r in records}:
        assert f"task {task} (2 samples)" in page and f"<td>task {task}</td>" in page
    capsys.readouterr()

    # --resume: only the missing (task, sample) pairs are played
    assert main(["eval", "--env", ENV, "--n", "2", "--samples", "3", "--policy", "callable",
                 "--callable", "eval_agents:expert", "--out", str(out), "--resume"]) == 0
    again = episodes(out)
    assert again[:4] == records and sorted(r["sample"] for r in again[4:]) == [2, 2]

    server = ScriptedJudgeServer(mode="text")
    server.reply_text = "<think>I look around.</think><action>look</action>"
    server.plan = ["429"]  # the first call is rate limited, then retried
    try:
        endpoint = tmp_path / "endpoint"
        assert main(["eval", "--env", ENV, "--tasks", records[0]["task_id"], "--policy", "endpoint",
                     "--base-url", server.base_url, "--model", "scripted", "--max-steps", "3",
                     "--price-prompt", "1.0", "--out", str(endpoint)]) == 0
    finally:
        server.stop()
    (looked,) = episodes(endpoint)
    bar = capsys.readouterr().err.replace("\r", "\n").splitlines()
    assert any("cost=$" in line and "tokens=" in line and "success=0.00" in line for line in bar)
    assert looked["outcome"] == "truncated" and looked["steps"] == 3
    assert all(s["response"] == server.reply_text and s["accepted"] for s in looked["step_records"])
    assert server.count() == 4  # 3 steps + the retried 429
    assert server.requests[-1]["messages"] == looked["transcript"][-1]  # the stored transcript is what was sent
    summary = json.loads((endpoint / "summary.json").read_text())
    assert summary["prompt_tokens"] > 0 and summary["cost_usd"] == pytest.approx(summary["prompt_tokens"] / 1e6)


@pytest.mark.slow
def test_the_expert_scores_every_eval_game_and_junk_none(tmp_path):
    """The success accounting end to end: the expert plan as module:function wins all 12
    ALFWorld eval games, a policy that never writes an action wins none."""
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    for policy, rate in (("expert", 1.0), ("junk", 0.0)):
        out = tmp_path / policy
        assert main(["eval", "--env", "ALFWorld-Rubric-Eval-v0", "--n", "12", "--policy",
                     "callable", "--callable", f"eval_agents:{policy}", "--concurrency", "2",
                     *(["--max-steps", "3"] if policy == "junk" else []), "--out", str(out)]) == 0
        records = episodes(out)
        summary = json.loads((out / "summary.json").read_text())
        assert len({r["task_id"] for r in records}) == 12 == summary["counted"]
        assert summary["success_rate"] == rate and summary["success_ci95"][0] <= rate <= summary["success_ci95"][1]
    assert all(s["accepted"] for r in episodes(tmp_path / "expert") for s in r["step_records"])
    assert not any(s["parsed"] for r in episodes(tmp_path / "junk") for s in r["step_records"])


@pytest.mark.slow
def test_failing_policies_are_labelled_outcomes_not_crashes(tmp_path):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    out = tmp_path / "failing"
    assert main(["eval", "--env", ENV, "--n", "1", "--policy", "callable", "--callable", "eval_agents:broken",
                 "--out", str(out)]) == 0
    dead = tmp_path / "dead"  # nothing listens there: connection errors after the retries
    assert main(["eval", "--env", ENV, "--n", "1", "--policy", "endpoint", "--base-url", "http://127.0.0.1:9/v1",
                 "--out", str(dead)]) == 0
    for folder in (out, dead):
        (record,) = episodes(folder)
        assert record["outcome"] == "policy_error" and not record["success"] and record["error"]
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["success_rate"] == 0.0 and summary["outcomes"]["policy_error"] == 1


def test_bad_input_is_refused_with_what_to_do(tmp_path, capsys):
    assert main(["eval", "--env", "Alfworld-Rubric-v0", "--policy", "callable", "--callable", "a:b"]) == 2
    assert "ALFWorld-Rubric-v0" in capsys.readouterr().err  # the nearest id
    assert main(["eval", "--env", ENV, "--policy", "endpoint"]) == 2
    assert "--base-url" in capsys.readouterr().err
    assert main(["eval", "--env", ENV, "--policy", "callable"]) == 2
    assert "module:function" in capsys.readouterr().err
    assert main(["eval", "--env", ENV, "--policy", "endpoint", "--base-url", "http://127.0.0.1:9/v1",
                 "--api-key-env", "sk-abcdefghijklmnopqrstuvwx"]) == 2
    assert "sk-abcdefghijklmnopqrstuvwx" not in capsys.readouterr().err
    (tmp_path / "episodes.jsonl").write_text("")
    assert main(["eval", "--env", ENV, "--n", "1", "--policy", "callable", "--callable", "eval_agents:expert",
                 "--out", str(tmp_path)]) == 2
    assert "--resume" in capsys.readouterr().err


@pytest.mark.slow
def test_a_trained_runs_adapter_plays_with_its_checkpointed_weights(tmp_path):
    """--adapter RUN_DIR: the base model its config names plus the LoRA weights of its newest
    checkpoint (safetensors, pickle-free), which the worker then plays with."""
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    import torch
    from peft import get_peft_model_state_dict
    from safetensors.torch import load_file

    from rubricgym.trainers.checkpoint import ADAPTER_FILE, latest_checkpoint
    from rubricgym.trainers.eval import trained_adapter

    output = tmp_path / "runs"
    assert main(["train", "--set", "model.name=tiny", "--set", f"env.id={ENV}", "--set", "env.max_steps=2",
                 "--set", "algorithm.group_size=2", "--set", "algorithm.advantage=grpo", "--set", "algorithm.lr=0.05", "--set", "algorithm.entropy_coef=0.5",
                 "--set", "algorithm.skip_zero_advantage=false", "--set", "generation.max_new_tokens=8",
                 "--set", "run.iterations=1", "--set", "run.checkpoint_every=1", "--set", "run.evaluate_after=false",
                 "--set", "run.progress=false", "--set", "warmup.enabled=false", "--output-dir", str(output)]) == 0
    (run,) = [p.parent for p in output.rglob("config.yaml")]
    saved = load_file(str(latest_checkpoint(run) / ADAPTER_FILE))
    model, _, label = trained_adapter(run)
    loaded = get_peft_model_state_dict(model)
    assert label.endswith("@1") and set(saved) <= set(loaded)
    assert all(torch.equal(saved[k], loaded[k]) for k in saved)
    assert any(v.abs().sum() > 0 for k, v in saved.items() if "lora_B" in k)  # trained: B moved off zero
    out = tmp_path / "eval"
    assert main(["eval", "--env", ENV, "--n", "1", "--policy", "adapter", "--adapter", str(run), "--max-steps", "2",
                 "--max-tokens", "8", "--out", str(out)]) == 0
    (record,) = episodes(out)
    assert record["outcome"] in ("truncated", "failure") and record["steps"] == 2
    assert main(["eval", "--env", ENV, "--n", "1", "--policy", "adapter", "--adapter", str(tmp_path),
                 "--out", str(tmp_path / "none")]) == 2  # not a run folder: refused before any worker starts
