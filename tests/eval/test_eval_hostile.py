"""``rubricgym eval`` against a hostile OpenAI-compatible endpoint on 127.0.0.1: 500s, 429s with
Retry-After, a body that is not JSON, a huge body, a hang, a slow drip, and a reply that echoes the key.
Every episode ends with a labelled outcome, the run completes, and the key never reaches disk."""

from __future__ import annotations

import json

import pytest
from judge_test_servers import ScriptedJudgeServer

from rubricgym.cli import main

ENV = "SearchQA-Rubric-v0"
KEY = "sk-hostile-eval-key-0123456789abcdef"
# one mode per episode (task), in the order the episodes run (concurrency 1)
MODES = ["500", "429_retry_after", "bad_body", "huge_declared", "hang", "drip", "echo_key"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_hostile_endpoint_gives_labelled_outcomes_and_keeps_the_key_off_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICGYM_TEST_EVAL_KEY", KEY)
    server = ScriptedJudgeServer(hang_s=30)
    server.answer = lambda body: "<action>search[capital of France]</action>"
    conversations: dict[str, str] = {}

    def mode_for(body: dict) -> str:  # retries of one episode's call repeat its conversation
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        return conversations.setdefault(first, MODES[len(conversations)] if len(conversations) < len(MODES) else "ok")

    server.mode_for = mode_for
    out = tmp_path / "hostile"
    try:
        code = main(["eval", "--env", ENV, "--n", str(len(MODES)), "--max-steps", "1", "--policy", "endpoint",
                     "--base-url", server.base_url, "--model", "scripted", "--api-key-env", "RUBRICGYM_TEST_EVAL_KEY",
                     "--timeout", "2", "--out", str(out)])
    finally:
        server.stop()
    assert code == 0
    records = {r["task_id"]: r for r in map(json.loads, (out / "episodes.jsonl").read_text().splitlines())}
    by_mode = dict(zip(MODES, (records[t] for t in sorted(records, key=list(records).index)), strict=True))
    assert len(records) == len(MODES)
    for mode in ("500", "429_retry_after", "bad_body", "huge_declared", "hang", "drip"):
        assert by_mode[mode]["outcome"] == "policy_error" and by_mode[mode]["error"], mode
    # the drip: a byte every 0.5 s keeps each read alive, so only the call's 2 s deadline ended each
    # attempt, a few bytes into a body of over 4,000
    assert server.bytes_dripped and max(server.bytes_dripped) <= 8, server.bytes_dripped
    echoed = by_mode["echo_key"]
    assert echoed["outcome"] == "truncated" and echoed["steps"] == 1  # an answer that also echoes the key
    summary = json.loads((out / "summary.json").read_text())
    assert summary["outcomes"]["policy_error"] == 6 and summary["counted"] == 7
    for path in out.iterdir():
        assert KEY not in path.read_text(), path.name
    assert "You sent the key" in (out / "episodes.jsonl").read_text()  # the echo happened, redacted
