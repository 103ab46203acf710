"""``--resume --retry-errors`` (issue 53, item 3): the episodes recorded as ``policy_error`` or
``env_error`` are dropped and played again, the others kept as they were; a plain ``--resume``
keeps them and says how many."""

from __future__ import annotations

import json

from requirements_guard import need

from rubricgym.cli import main
from rubricgym.registration import task_ids

ENV = "ALFWorld-Rubric-v0"


def record(task: str, sample: int, outcome: str, error: str | None) -> dict:
    """An episode record as a worker writes one for an episode that never started."""
    return {"env_id": ENV, "task_id": task, "sample": sample, "seed": sample, "outcome": outcome, "success": False,
            "score": None, "steps": 0, "return": 0.0, "env_return": 0.0, "prompt_tokens": 0,
            "completion_tokens": 0, "error": error, "step_records": [], "transcript": []}


def test_retry_errors_replays_the_errored_episodes_and_keeps_the_rest(tmp_path, capsys):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    task = task_ids(ENV)[0]
    out = tmp_path / "eval"
    out.mkdir()
    kept = record(task, 2, "failure", None)
    lines = [record(task, 0, "policy_error", "RuntimeError: the endpoint was down"),
             record(task, 1, "env_error", "EngineFailure: the engine died"), kept]
    (out / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    argv = ["eval", "--env", ENV, "--tasks", task, "--samples", "3", "--policy", "callable", "--callable",
            "eval_agents:junk", "--max-steps", "1", "--out", str(out), "--resume"]

    assert main(argv) == 0  # every pair is there: nothing is played, the errored ones are kept and counted
    err = capsys.readouterr().err
    assert "keeping 2 errored episode(s) (policy_error 1, env_error 1)" in err and "--retry-errors" in err, err
    assert [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()] == lines

    assert main([*argv, "--retry-errors"]) == 0
    assert "playing 2 errored episode(s) (policy_error 1, env_error 1) again" in capsys.readouterr().err
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert records[0] == kept and sorted(r["sample"] for r in records[1:]) == [0, 1]
    assert all(r["outcome"] == "truncated" and r["steps"] == 1 and r["error"] is None for r in records[1:]), records
    summary = json.loads((out / "summary.json").read_text())
    assert summary["outcomes"]["policy_error"] == summary["outcomes"]["env_error"] == 0 and summary["episodes"] == 3


def test_retry_errors_without_resume_is_refused(tmp_path, capsys):
    need("alfworld", "pip install 'rubricgym[alfworld]'")  # the env is made to check its data first
    assert main(["eval", "--env", ENV, "--tasks", "t", "--policy", "callable", "--callable", "eval_agents:junk",
                 "--retry-errors", "--out", str(tmp_path / "eval")]) == 2
    assert "--retry-errors replays the errored episodes of an existing run: add --resume" in capsys.readouterr().err
    assert not (tmp_path / "eval").exists()
