"""``rubricgym eval``'s summary and ``--compare`` on hand-made episode records: every statistic
checked by hand."""

from __future__ import annotations

import json

import pytest

from rubricgym.cli import main
from rubricgym.trainers.eval import EvalSettings, PolicySpec, compare_runs, summarize


def record(task: str, sample: int, success: bool, outcome: str | None = None, steps: int = 2,
           parsed: tuple[bool, ...] = (True, True), error: str | None = None) -> dict:
    outcome = outcome or ("success" if success else "failure")
    step_records = [{"reward": 0.1, "env_reward": 0.0, "trca_reward": 0.1, "parsed": p, "accepted": p}
                    for p in parsed[:steps]]
    return {"task_id": task, "sample": sample, "seed": sample, "outcome": outcome, "success": success, "score": None,
            "steps": steps, "return": 0.2, "env_return": float(success), "prompt_tokens": 10, "completion_tokens": 5,
            "error": error, "step_records": step_records, "transcript": []}


def settings(samples: int) -> EvalSettings:
    return EvalSettings(env_id="ALFWorld-Rubric-v0", tasks=["a", "b"], samples=samples,
                        policy=PolicySpec(kind="callable", callable="m:f"))


def test_summary_statistics_by_hand():
    records = [record("a", 0, True), record("a", 1, False, parsed=(False, True)), record("a", 2, True),
               record("b", 0, False), record("b", 1, False), record("b", 2, False, outcome="policy_error", error="boom"),
               record("b", 3, False, outcome="env_error", error="engine down")]
    summary = summarize(records, settings(3))
    assert summary["counted"] == 6 and summary["success_rate"] == pytest.approx(2 / 6)
    low, high = summary["success_ci95"]
    assert 0 < low < 2 / 6 < high < 1
    # task a: n=3, c=2; task b: n=3 counted (its env failure left out), c=0
    assert summary["pass_at"]["1"] == pytest.approx((2 / 3 + 0) / 2)
    assert summary["pass_at"]["3"] == pytest.approx((1 + 0) / 2)
    assert summary["pass_hat"]["2"] == pytest.approx((1 / 3 + 0) / 2) and summary["pass_hat"]["3"] == 0
    assert summary["action_parsed_rate"] == pytest.approx(11 / 12)
    assert summary["trca_reward_mean"] == pytest.approx(0.2) and summary["steps_mean"] == 2
    assert summary["per_task"]["a"] == {"episodes": 3, "successes": 2, "success_rate": pytest.approx(2 / 3),
                                        "env_return_mean": pytest.approx(2 / 3), "steps_mean": 2}
    assert summary["errors_by_outcome"] == {"policy_error": ["boom"], "env_error": ["engine down"]}


def write(folder, records):
    folder.mkdir()
    (folder / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_compare_runs_mcnemar_on_the_shared_pairs(tmp_path, capsys):
    a = [record("a", s, s < 1) for s in range(4)] + [record("b", s, False) for s in range(4)]
    b = [record("a", s, True) for s in range(4)] + [record("b", s, s < 3) for s in range(3)]
    write(tmp_path / "A", a)
    write(tmp_path / "B", b)
    result = compare_runs(tmp_path / "A", tmp_path / "B")
    assert result["pairs"] == 7 and (result["only_a"], result["only_b"]) == (0, 6)
    assert result["mcnemar_p"] == pytest.approx(2 / 64)
    assert result["per_task"]["a"]["difference"] == pytest.approx(0.75) and result["per_task"]["b"]["pairs"] == 3
    assert main(["eval", "--compare", str(tmp_path / "A"), str(tmp_path / "B")]) == 0
    assert "exact McNemar p = 0.03125" in capsys.readouterr().out
    assert main(["eval", "--compare", str(tmp_path / "A"), str(tmp_path / "none")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["eval", "--env", "ALFWorld-Rubric-v0"]) == 2
    assert "--policy are required" in capsys.readouterr().err


@pytest.mark.slow
def test_concurrency_4_and_1_give_the_same_episodes(tmp_path):
    """A deterministic policy (the expert plan, as module:function) on 4 tasks: 4 worker
    processes and 1 write the same records (only their order in the file may differ)."""
    from requirements_guard import need

    need("alfworld", "pip install 'rubricgym[alfworld]'")
    runs = {}
    for concurrency in (1, 4):
        out = tmp_path / f"c{concurrency}"
        assert main(["eval", "--env", "ALFWorld-Rubric-Eval-v0", "--n", "4", "--max-steps", "2", "--policy",
                     "callable", "--callable", "eval_agents:expert", "--concurrency", str(concurrency),
                     "--out", str(out)]) == 0
        records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
        runs[concurrency] = sorted(records, key=lambda r: (r["task_id"], r["sample"]))
    assert len(runs[1]) == 4 and runs[1] == runs[4]
    assert {r["outcome"] for r in runs[1]} == {"truncated"} and all(r["steps"] == 2 for r in runs[1])
    assert len({r["task_id"] for r in runs[1]}) == 4 and all(s["accepted"] for r in runs[1] for s in r["step_records"])


@pytest.mark.slow
def test_one_worker_keeps_its_episodes_endpoint_calls_in_flight_together(tmp_path, monkeypatch):
    """--concurrency 4 --workers 1: one worker process plays 4 episodes at once (an env each, the
    envs stepped on its one loop), the 4 endpoint calls in flight together at the server, and
    the episodes are those of one episode at a time."""
    from judge_test_servers import ScriptedJudgeServer

    monkeypatch.setenv("RUBRICGYM_TEST_EVAL_KEY", "no-key")
    server = ScriptedJudgeServer(delay_s=0.5)  # each answer takes a while: overlapping calls show
    server.answer = lambda body: "<action>search[capital of France]</action>"
    runs = {}
    try:
        for concurrency, workers in ((1, 1), (4, 1)):
            out = tmp_path / f"c{concurrency}"
            assert main(["eval", "--env", "SearchQA-Rubric-v0", "--n", "4", "--max-steps", "2", "--policy", "endpoint",
                         "--base-url", server.base_url, "--model", "scripted", "--api-key-env",
                         "RUBRICGYM_TEST_EVAL_KEY", "--concurrency", str(concurrency), "--workers", str(workers),
                         "--out", str(out)]) == 0
            if concurrency == 1:
                assert server.peak_in_flight == 1
            records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
            runs[concurrency] = sorted(records, key=lambda r: (r["task_id"], r["sample"]))
    finally:
        server.stop()
    assert server.peak_in_flight == 4  # one process, four calls at once
    assert len(runs[1]) == 4 and runs[1] == runs[4]
    assert all(r["steps"] == 2 and r["outcome"] == "truncated" for r in runs[1])
