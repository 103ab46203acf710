"""Action classification, schema checks and entity ids on recorded strings (no tau2 needed)."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from rubricgym.adapters.tau_bench.observe import (
    MAX_JSON_DEPTH,
    ObservedConversation,
    Replies,
    ToolResult,
    argument_values,
    asks_user,
    parse_agent_action,
    result_entities,
    schema_problems,
    text_entities,
)

ORDER_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}, "quantity": {"type": "integer"},
                                                 "item_ids": {"type": "array", "items": {"type": "string"}}},
                "required": ["order_id"]}


def test_our_json_call():
    c = parse_agent_action('{"name": "get_order_details", "arguments": {"order_id": "#W2378156"}}')
    assert (c.kind, c.name, c.arguments, c.num_calls) == ("tool", "get_order_details", {"order_id": "#W2378156"}, 1)


def test_openai_tool_call_shapes():
    fn = {"name": "get_user_details", "arguments": json.dumps({"user_id": "mia_li_3668"})}
    for text in (json.dumps({"type": "function", "function": fn}), json.dumps({"id": "c1", "function": fn}),
                 json.dumps({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                                    "function": fn}]})):
        c = parse_agent_action(text)
        assert (c.kind, c.name, c.arguments) == ("tool", "get_user_details", {"user_id": "mia_li_3668"}), text


def test_several_calls_execute_none():
    one = {"name": "a", "arguments": {}}
    for text in (json.dumps([one, one]), json.dumps({"tool_calls": [{"function": one}, {"function": one}]})):
        c = parse_agent_action(text)
        assert (c.kind, c.error, c.num_calls) == ("invalid", "multiple_calls", 2)


def test_messages_and_stop():
    assert parse_agent_action("Could you give me your zip code?").kind == "message"
    assert parse_agent_action("Thanks, bye ###STOP###").kind == "stop"
    assert parse_agent_action('{"name": "done", "arguments": {}}').kind == "stop"
    c = parse_agent_action('{"role": "assistant", "content": "Hello there", "tool_calls": null}')
    assert (c.kind, c.message) == ("message", "Hello there")


def test_malformed_calls_are_classified():
    cases = {
        '{"name": "x", "arguments": ': "malformed_json",
        '{"name": "x", "arguments": "{not json"}': "malformed_json",
        '{"name": 5, "arguments": {}}': "bad_call_shape",
        '{"name": "x", "arguments": [1, 2]}': "bad_call_shape",
        '{"arguments": {}}': "bad_call_shape",
        '{"tool_calls": []}': "bad_call_shape",
        "[" * 5000 + "]" * 5000: "too_deep",
        '{"name": "x", "arguments": ' + '{"a": ' * (MAX_JSON_DEPTH + 2) + "1" + "}" * (MAX_JSON_DEPTH + 3): "too_deep",
        "   ": "empty",
    }
    for text, error in cases.items():
        c = parse_agent_action(text)
        assert (c.kind, c.error) == ("invalid", error), text[:60]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300) | st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                                            lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                                            max_leaves=30).map(json.dumps))
def test_any_action_text_is_classified(text):
    c = parse_agent_action(text)
    assert c.kind in ("tool", "message", "stop", "invalid")
    assert (c.kind == "invalid") == bool(c.error)
    if c.kind == "tool":
        assert isinstance(c.arguments, dict) and c.name.strip() and c.num_calls == 1


def test_schema_problems():
    assert schema_problems(ORDER_SCHEMA, {"order_id": "#W1", "quantity": 2, "item_ids": ["1"]}) == []
    assert schema_problems(ORDER_SCHEMA, {}) == ["missing: order_id"]
    assert schema_problems(ORDER_SCHEMA, {"order_id": 5, "foo": 1}) == ["type: order_id", "unknown: foo"]
    assert schema_problems(ORDER_SCHEMA, {"order_id": "#W1", "quantity": True}) == ["type: quantity"]
    assert schema_problems(ORDER_SCHEMA, {"order_id": "#W1", "item_ids": [1]}) == ["type: item_ids"]


def test_entities_and_questions():
    result = json.dumps({"order_id": "#W2378156", "user_id": "yusuf_rossi_9620",
                         "items": [{"item_id": "1151293680", "product_id": "1656367028"}],
                         "payment_history": [{"payment_method_id": "credit_card_9513926"}]})
    assert set(result_entities(result)) == {"#W2378156", "yusuf_rossi_9620", "1151293680", "1656367028",
                                            "credit_card_9513926"}
    assert result_entities("Error: not found") == [] and result_entities("{broken") == []
    assert set(text_entities("My order is #W2378156 and my phone 555-123-2002, customer C1001, line L1002")) == {
        "#W2378156", "555-123-2002", "C1001", "L1002"}
    assert asks_user("Could you tell me your email?") and not asks_user("Your order has been cancelled.")
    assert sorted(argument_values({"a": "x", "b": [1, {"c": 2.5}], "d": True})) == ["1", "2.5", "x"]


def test_observed_conversation_builds_facts_from_plain_replies():
    seen = ObservedConversation("retail")
    assert seen.start(parameters={"get_order_details": ORDER_SCHEMA, "cancel_pending_order": ORDER_SCHEMA},
                      tool_types={"get_order_details": "read", "cancel_pending_order": "write"},
                      user_tools=["toggle_airplane_mode"], fingerprint=("a", "u"),
                      user_texts=["Hi, I want to cancel order #W2378156."]) == {"domain": "retail"}
    assert seen.entities() == ["#W2378156"] and seen.context_key() == "retail|after:start|writes:0"
    reads: list[int] = []

    def fingerprint() -> tuple[str, str]:
        reads.append(1)
        return ("b", "u")

    seen.act(parse_agent_action('{"name": "get_order_details", "arguments": {"order_id": "#W2378156"}}'), errors=0)
    read = seen.answered(Replies(agent_results=[ToolResult('{"order_id": "#W2378156", "user_id": "mia_li_3668"}', False)]),
                         errors=0, user_stopped=False, termination="", fingerprint=fingerprint)
    assert reads == [] and read["tool_type"] == "read" and read["arguments_valid"] and not read["tool_error"]
    assert read["result_entities"] == ["#W2378156", "mia_li_3668"] and "db_changed" not in read
    signature = seen.signature()
    seen.act(parse_agent_action('{"name": "cancel_pending_order", "arguments": {"order_id": "#W2378156"}}'), errors=0)
    write = seen.answered(Replies(agent_results=[ToolResult('{"status": "cancelled"}', False)], user_texts=["Thanks!"]),
                          errors=0, user_stopped=True, termination="user_stop", fingerprint=fingerprint)
    assert reads == [1] and write["db_changed"] and not write["user_db_changed"] and write["write_calls"] == 1
    assert write["termination"] == "user_stop" and write["user_reply"] == "Thanks!" and write["user_stopped"]
    assert seen.signature() != signature and seen.context_key() == "retail|after:cancel_pending_order|writes:1"
    seen.act(parse_agent_action('{"name": "toggle_airplane_mode", "arguments": {}}'), errors=0)
    device = seen.answered(Replies(), errors=1, user_stopped=False, termination="", fingerprint=fingerprint)
    assert device["user_side_tool"] and not device["tool_known"] and device["argument_problems"] == [
        "unknown tool: toggle_airplane_mode"] and device["errors_so_far"] == 1
    bad = seen.invalid_facts(parse_agent_action("[{}, {}]"), errors=1)
    assert bad == {"domain": "retail", "write_calls": 1, "errors_so_far": 1, "call_kind": "invalid",
                   "call_error": "multiple_calls", "num_calls": 2}
