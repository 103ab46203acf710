"""tau-bench's observable facts and the binding its operators read (what the user wants, the ids they give).

Facts come from the agent's action text, tau2's tool results, the user's replies and database
fingerprints; never from the task's evaluation criteria, gold actions or tau2's reward.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from rubricgym import Facts, TaskBinding


class TauBenchFacts(Facts):
    benchmark: ClassVar[str] = "TauBench"

    domain: str = Field("", description="retail | airline | telecom | mock")
    call_kind: str = Field("", description="tool | message | stop | invalid (what the action was read as)")
    call_error: str = Field("", description="why the action was not executed: malformed_json, multiple_calls, bad_call_shape, too_deep, empty")
    num_calls: int = Field(0, description="tool calls in the action (more than one: none executed)")
    tool_name: str = Field("", description="the tool called ('' for messages)")
    tool_arguments: dict[str, Any] = Field(default_factory=dict, description="the call's arguments")
    argument_values: list[str] = Field(default_factory=list, description="scalar argument values as strings")
    tool_known: bool = Field(False, description="the tool exists among the agent's tools")
    tool_type: str = Field("", description="tau2's declared tool type: read | write | think | generic ('' unknown)")
    user_side_tool: bool = Field(False, description="the agent called a tool only the user's device has")
    arguments_valid: bool = Field(False, description="the arguments match the tool's JSON schema (required, names, types)")
    argument_problems: list[str] = Field(default_factory=list, description="'missing: x', 'unknown: y', 'type: z'")
    tool_error: bool = Field(False, description="tau2 answered the call with an error")
    result_text: str = Field("", description="the tool result (truncated)")
    result_entities: list[str] = Field(default_factory=list, description="entity ids in this step's tool result")
    db_changed: bool = Field(False, description="the agent-side database fingerprint changed this step")
    user_db_changed: bool = Field(False, description="the user-side (device) database fingerprint changed this step")
    message_text: str = Field("", description="the agent's message to the user (truncated)")
    asked_user: bool = Field(False, description="the agent's message asks the user something")
    user_reply: str = Field("", description="what the user answered this step (truncated)")
    user_entities: list[str] = Field(default_factory=list, description="entity ids the user stated this step")
    user_tool_calls: list[str] = Field(default_factory=list, description="device tools the user ran this step (telecom)")
    user_tool_errors: int = Field(0, description="how many of those device tool calls failed")
    transferred: bool = Field(False, description="the agent transferred the user to a human agent")
    user_stopped: bool = Field(False, description="the user ended the conversation (###STOP###, transfer, out of scope)")
    agent_stopped: bool = Field(False, description="the agent ended the conversation (done / ###STOP###)")
    termination: str = Field("", description="tau2's termination reason when the conversation ended this step")
    write_calls: int = Field(0, description="accepted write-tool calls this episode, including this step")
    errors_so_far: int = Field(0, description="tau2's count of tool errors this episode (it ends the episode at its limit)")


class TauBenchBinding(TaskBinding):
    """Extracted from the user scenario by ``bind_task`` (deterministic, no model, no evaluation criteria).

    Empty fields mean the rules could not determine them; operators then return 0.
    """

    domain: str = Field("", description="retail | airline | telecom | mock, when the scenario states it")
    intent: str = Field("", description="the first request: cancel, modify, return, exchange, book, update, refund, ...")
    intents: list[str] = Field(default_factory=list, description="every request, in order of first mention")
    order_ids: list[str] = Field(default_factory=list, description="retail order ids, e.g. '#W1234567'")
    user_ids: list[str] = Field(default_factory=list, description="user ids, e.g. 'yusuf_rossi_9620'")
    reservation_ids: list[str] = Field(default_factory=list, description="airline reservation codes, e.g. 'EHGLP3'")
    flight_numbers: list[str] = Field(default_factory=list, description="e.g. 'HAT170'")
    emails: list[str] = Field(default_factory=list)
    zip_codes: list[str] = Field(default_factory=list)
    phone_numbers: list[str] = Field(default_factory=list)
    person_names: list[str] = Field(default_factory=list, description="from 'You are X Y' / 'Your name is X Y'")
    quoted_items: list[str] = Field(default_factory=list, description="product or item names given in quotes")
    customer_ids: list[str] = Field(default_factory=list, description="telecom customer ids, e.g. 'C1001'")
    line_ids: list[str] = Field(default_factory=list, description="telecom line ids, e.g. 'L1002'")
