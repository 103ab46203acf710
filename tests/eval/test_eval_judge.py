"""``rubricgym eval --judge``: the K samples of a task are one DRACO group, scored by a judge on
127.0.0.1 (a scripted OpenAI-compatible server whose verdicts pass a rollout that never
answered junk), written as ``rubricgym judge`` writes its groups, summarised per episode."""

from __future__ import annotations

import json

import pytest
from judge_test_servers import ScriptedJudgeServer, _schema_of, scripted_answer
from requirements_guard import need

from rubricgym.cli import main

ENV = "ALFWorld-Rubric-v0"


def junk_fails(body: dict) -> str:
    schema = _schema_of(body)
    if schema is None or "criteria" in schema.get("properties", {}):
        return scripted_answer(body)
    verdict = "fail" if "junk junk junk" in body["messages"][-1]["content"] else "pass"
    return json.dumps({cid: {"reason": "scripted", "verdict": verdict, "steps": [0]} for cid in schema["properties"]})


@pytest.mark.slow
def test_the_samples_of_a_task_are_judged_as_one_group(tmp_path, monkeypatch):
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    monkeypatch.setenv("RUBRICGYM_TEST_JUDGE_KEY", "sk-test-not-secret")
    server = ScriptedJudgeServer()
    server.answer = junk_fails
    out = tmp_path / "judged"
    try:
        code = main(["eval", "--env", ENV, "--n", "1", "--samples", "2", "--max-steps", "2", "--policy", "callable",
                     "--callable", "eval_agents:expert_then_junk", "--out", str(out), "--judge",
                     "--judge-base-url", server.base_url, "--judge-model", "scripted",
                     "--judge-api-key-env", "RUBRICGYM_TEST_JUDGE_KEY", "--judge-response-format", "json_object_schema"])
    finally:
        server.stop()
    assert code == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    (group,) = [json.loads(line) for line in (out / "judge.jsonl").read_text().splitlines()]
    assert group["task_id"] == records[0]["task_id"] and group["samples"] == [0, 1]
    assert group["variant"] == "dynamic/credit" and len(group["rollouts"]) == 2
    draco = json.loads((out / "summary.json").read_text())["draco"]
    task = records[0]["task_id"]
    expert, junk = draco["per_episode"][f"{task}#0"], draco["per_episode"][f"{task}#1"]
    assert expert["reward"] > junk["reward"] and expert["advantage"] > 0 > junk["advantage"]
    assert draco["groups"] == 1 and draco["episodes"] == 2 and draco["calls"] > 0
    assert "sk-test-not-secret" not in (out / "summary.json").read_text() + (out / "judge.jsonl").read_text()


def test_judge_needs_two_samples_and_an_endpoint(capsys):
    assert main(["eval", "--env", ENV, "--n", "1", "--policy", "callable", "--callable", "a:b", "--judge",
                 "--judge-base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "--samples 2" in capsys.readouterr().err
    assert main(["eval", "--env", ENV, "--n", "1", "--samples", "2", "--policy", "callable", "--callable", "a:b",
                 "--judge"]) == 2
    assert "--judge-base-url" in capsys.readouterr().err
