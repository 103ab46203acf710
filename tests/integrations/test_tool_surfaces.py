"""Each benchmark's tool surface (``BenchmarkSpec.tool_surface``): what a tool-calling agent is
offered, and that one call steps the env exactly as the action it stands for."""

from __future__ import annotations

import inspect
import json

import gymnasium as gym
import pytest
from requirements_guard import need

from rubricgym.benchmark import BenchmarkSpec
from rubricgym.tool_surface import ACT_TOOL, NoToolSurface, ToolSpec, tool_surface


def public_tools(cls: type) -> dict:
    return {n: f for n, f in inspect.getmembers(cls, predicate=inspect.isfunction)
            if not n.startswith("_") and n not in ("reset", "get_reward")}


def test_a_benchmark_that_declares_nothing_gets_one_act_tool():
    need("alfworld", "pip install 'rubricgym[alfworld]'")
    assert tool_surface("ALFWorld-Rubric-v0") == [ACT_TOOL]
    assert tool_surface("SearchQA-Rubric-v0") == [ACT_TOOL]


def test_tau_bench_offers_its_domain_tools_with_tau2_s_schemas_and_respond():
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    from rubricgym.adapters.tau_bench.engine import domain

    retail = domain("retail")
    schemas = {s["function"]["name"]: s["function"] for s in retail.tool_schemas(retail.environment())}
    tools = {t.name: t for t in tool_surface("TauBench-Retail-Rubric-v0")}
    assert set(tools) == set(schemas) | {"respond"} and len(schemas) >= 10
    for name, schema in schemas.items():
        assert tools[name].content == "json_call" and tools[name].parameters == schema["parameters"]
    assert tools["respond"].content == "argument" and tools["respond"].argument == "message"
    airline = {t.name for t in tool_surface("TauBench-Airline-Rubric-v0")}
    assert "book_reservation" in airline and "cancel_pending_order" not in airline  # the env id's domain decides


def test_appworld_offers_execute():
    assert [t.name for t in tool_surface("AppWorld-Rubric-v0")] == ["execute"]


def test_every_generated_method_has_the_schema_transformers_reads():
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    from transformers.utils import get_json_schema

    from rubricgym.integrations.trl_tools import rubricgym_environment

    for env_id in ("TauBench-Retail-Rubric-v0", "TauBench-Airline-Rubric-v0", "TauBench-Telecom-Rubric-v0",
                   "AppWorld-Rubric-v0", "ALFWorld-Rubric-v0"):
        cls = rubricgym_environment(env_id)
        methods = public_tools(cls)
        assert set(methods) == {t.name for t in cls.tool_specs}, env_id
        for spec in cls.tool_specs:
            schema = get_json_schema(methods[spec.name])["function"]
            assert schema["name"] == spec.name
            assert set(schema["parameters"]["properties"]) == set(spec.properties), (env_id, spec.name)
            assert set(schema["parameters"].get("required", [])) == set(spec.required), (env_id, spec.name)


def test_a_tool_call_steps_the_env_as_the_action_it_stands_for():
    """The same calls through the TRL class and as rendered actions through gym.make give the
    same observations and rewards; step records name the tool and its arguments."""
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    from rubricgym.integrations.trl_tools import ENDED, rubricgym_environment

    cls = rubricgym_environment("TauBench-Retail-Rubric-v0", max_steps=3)
    played = cls()
    played.reset(seed=0, task_id=None)
    outputs = [played.find_user_id_by_name_zip(first_name="Yusuf", last_name="Rossi", zip="19122"),
               played.respond(message="Thank you. Which order is it about?"),
               played.get_user_details(user_id="yusuf_rossi_9620")]
    assert outputs[-1].endswith(ENDED) and played.get_user_details(user_id="x") == ENDED
    assert [r["tool"] for r in played.step_records] == ["find_user_id_by_name_zip", "respond", "get_user_details"]
    assert played.step_records[1]["command"] == "Thank you. Which order is it about?"
    direct = gym.make("TauBench-Retail-Rubric-v0", max_steps=3)
    direct.reset(seed=0)
    actions = [json.dumps({"name": "find_user_id_by_name_zip",
                           "arguments": {"first_name": "Yusuf", "last_name": "Rossi", "zip": "19122"}}),
               "Thank you. Which order is it about?",
               json.dumps({"name": "get_user_details", "arguments": {"user_id": "yusuf_rossi_9620"}})]
    rewards = [direct.step(f"<think>tool call</think><action>{a}</action>")[1] for a in actions]
    assert [r["reward"] for r in played.step_records] == pytest.approx(rewards)
    assert played.get_reward() == pytest.approx(sum(rewards)) and "yusuf_rossi_9620" in outputs[0]
    direct.close()
    played._close()


def test_a_benchmark_without_a_tool_surface_asked_for_tools_names_the_text_route():
    import integrations.no_tools_env as no_tools

    from rubricgym.integrations.trl_tools import rubricgym_environment

    with pytest.raises(NoToolSurface, match="rubricgym_rollout_func"):
        rubricgym_environment(no_tools.ENV_ID)


def test_bad_tool_surfaces_are_refused():
    with pytest.raises(ValueError, match="reserved"):
        ToolSpec(name="reset", description="", parameters={"type": "object", "properties": {}}, content="json_call")
    with pytest.raises(ValueError, match="string parameter"):
        ToolSpec(name="act", description="", parameters={"type": "object", "properties": {}}, argument="command")
    from integrations.no_tools_env import NoToolsWordFacts

    from rubricgym.adapter import TaskBinding

    with pytest.raises(ValueError, match="tool_surface must be"):
        BenchmarkSpec(name="WordPickNoTools", facts_model=NoToolsWordFacts, binding_model=TaskBinding,
                      binder="m:f", tool_surface="not-a-reference")


def test_a_function_calling_reply_becomes_the_env_response_it_stands_for():
    from rubricgym.parsing import ACTION_GRAMMAR, parse_response
    from rubricgym.tool_surface import response_from_tool_calls

    act = [ACT_TOOL]
    one = response_from_tool_calls(act, [("act", '{"command": "go to desk 1"}')], "", ACTION_GRAMMAR)
    assert parse_response(one).action == "go to desk 1"
    assert response_from_tool_calls(act, [], "just words", ACTION_GRAMMAR) == "just words"  # no act: unparsed
    two = response_from_tool_calls(act, [("act", '{"command": "look"}'), ("act", '{"command": "inventory"}')], "",
                                   ACTION_GRAMMAR)
    assert not parse_response(two).ok and parse_response(two).error.value == "multiple_actions"
    unknown = parse_response(response_from_tool_calls(act, [("fly", '{"to": "moon"}')], "", ACTION_GRAMMAR))
    assert unknown.ok and json.loads(unknown.action) == {"name": "fly", "arguments": {"to": "moon"}}
    broken = parse_response(response_from_tool_calls(act, [("act", "{not json")], "", ACTION_GRAMMAR))
    assert json.loads(broken.action) == {"name": "act", "arguments": "{not json"}


def test_tau_bench_replies_of_words_or_bad_calls_are_scored_by_the_env():
    """Words without a call are words to the customer (respond); an unknown tool and arguments
    that are not JSON are actions tau-bench classifies, never dropped."""
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    from rubricgym.tool_surface import response_from_tool_calls

    env = gym.make("TauBench-Retail-Rubric-v0", reward="none")
    try:
        grammar, tools = env.unwrapped.adapter.grammar, tool_surface("TauBench-Retail-Rubric-v0")
        env.reset(seed=0)
        _, _, _, _, info = env.step(response_from_tool_calls(tools, [], "Hello, how can I help?", grammar))
        assert info["transition"].facts.call_kind == "message" and info["transition"].facts.accepted
        _, _, _, _, info = env.step(response_from_tool_calls(tools, [("get_user_details", "{oops")], "", grammar))
        assert not info["transition"].facts.accepted and "environment_failure" not in info
        _, _, _, _, info = env.step(response_from_tool_calls(tools, [("delete_everything", "{}")], "", grammar))
        assert info["transition"].facts.call_kind == "tool" and "environment_failure" not in info
    finally:
        env.close()


def test_a_served_env_offers_the_surface_of_the_env_it_names():
    need("tau2", "pip install 'rubricgym[tau_bench]'")
    import rubricgym.remote  # noqa: F401  (registers the client env id)

    assert tool_surface("rubricgym/Remote-v0", url="http://127.0.0.1:9") == [ACT_TOOL]
    served = tool_surface("rubricgym/Remote-v0", url="http://127.0.0.1:9", env_id="TauBench-Retail-Rubric-v0")
    assert [t.name for t in served] == [t.name for t in tool_surface("TauBench-Retail-Rubric-v0")]
