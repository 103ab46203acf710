"""``rubricgym eval --native-tools``: tau-bench's tools offered as an endpoint's function-calling
``tools=`` (a scripted OpenAI-compatible endpoint on 127.0.0.1 answering with tool calls), each
reply turned into the env response it stands for and scored by tau-bench itself."""

from __future__ import annotations

import json

import pytest
from judge_test_servers import ScriptedJudgeServer
from requirements_guard import need

from rubricgym.cli import main
from rubricgym.parsing import parse_response

ENV = "TauBench-Retail-Rubric-v0"


def call(name: str, arguments: str) -> dict:
    return {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.slow
def test_tool_calls_and_words_are_played_as_the_env_actions_they_stand_for(tmp_path, capsys):
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    server = ScriptedJudgeServer(mode="message")
    server.messages = [
        {"content": None, "tool_calls": [call("find_user_id_by_name_zip",
                                              '{"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}')]},
        {"content": "Thank you. Which order is it about?"},  # words: respond to the customer
        {"content": None, "tool_calls": [call("get_user_details", "{not json")]},  # the policy's malformed call
    ]
    out = tmp_path / "tools"
    try:
        code = main(["eval", "--env", ENV, "--n", "1", "--policy", "endpoint", "--base-url", server.base_url,
                     "--model", "scripted", "--native-tools", "--max-steps", "3", "--out", str(out)])
    finally:
        server.stop()
    assert code == 0, capsys.readouterr().err
    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {"find_user_id_by_name_zip", "get_user_details", "respond"} <= offered
    (record,) = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    steps = record["step_records"]
    assert [s["tool_calls"] for s in steps] == [
        [["find_user_id_by_name_zip", '{"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}']], [],
        [["get_user_details", "{not json"]]]
    first = json.loads(parse_response(steps[0]["response"]).action)
    assert first == {"name": "find_user_id_by_name_zip",
                     "arguments": {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}}
    assert parse_response(steps[1]["response"]).action == "Thank you. Which order is it about?"
    assert [s["accepted"] for s in steps] == [True, True, False]  # the malformed call is scored, not dropped
    assert record["outcome"] == "truncated" and record["error"] is None


def test_native_tools_need_an_endpoint_and_a_benchmark_with_tools(capsys):
    assert main(["eval", "--env", ENV, "--n", "1", "--policy", "callable", "--callable", "a:b",
                 "--native-tools"]) == 2
    assert "--policy endpoint" in capsys.readouterr().err
