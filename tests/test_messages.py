"""Typed messages: OpenAI chat format both ways, and the pairing invariant named violation by violation."""

import dataclasses

import pytest

from agent.messages import (
    AssistantMessage,
    Origin,
    ResultKind,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    history_from_dicts,
    history_to_dicts,
    message_from_dict,
    pairing_violations,
)

BERLIN = ToolCall("call_1", "get_weather", '{"city": "Berlin"}')
PARIS = ToolCall("call_2", "get_weather", '{"city": "Paris"}')
LECTURE_TRACE = (
    SystemMessage("You are a helpful assistant."),
    UserMessage("What's the weather in Berlin?"),
    AssistantMessage(tool_calls=(BERLIN,)),
    ToolResultMessage("call_1", "12°C, rainy"),
    AssistantMessage("It's 12°C and rainy in Berlin."),
)


def test_to_dict_is_the_openai_chat_format():
    assert history_to_dicts(LECTURE_TRACE) == [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What's the weather in Berlin?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Berlin"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12°C, rainy"},
        {"role": "assistant", "content": "It's 12°C and rainy in Berlin."},
    ]


def test_arguments_stay_a_json_string_in_the_wire_format():
    wire = AssistantMessage(tool_calls=(BERLIN,)).to_dict()["tool_calls"][0]["function"]["arguments"]
    assert isinstance(wire, str)


def test_from_dict_round_trips_every_type_with_extras():
    history = LECTURE_TRACE + (
        AssistantMessage("text", "a thought", (PARIS,)),
        ToolResultMessage("call_2", "ERROR: invalid arguments", ResultKind.VALIDATION_ERROR),
        UserMessage("ERROR: could not parse your reply", Origin.RUNTIME),
    )
    assert history_from_dicts(history_to_dicts(history, extras=True)) == history


def test_plain_dicts_carry_no_keys_beyond_openai():
    history = (AssistantMessage("t", "thought", (BERLIN,)),
               ToolResultMessage("call_1", "x", ResultKind.POLICY_REFUSAL),
               UserMessage("e", Origin.RUNTIME))
    keys = [set(d) for d in history_to_dicts(history)]
    assert keys == [{"role", "content", "tool_calls"}, {"role", "tool_call_id", "content"}, {"role", "content"}]


def test_unknown_role_is_refused():
    with pytest.raises(ValueError, match="unknown message role"):
        message_from_dict({"role": "narrator", "content": "x"})


def test_messages_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        LECTURE_TRACE[1].content = "changed"


def test_lecture_trace_is_well_paired():
    assert pairing_violations(LECTURE_TRACE) == []


def test_two_calls_answered_in_any_order_are_well_paired():
    history = [AssistantMessage(tool_calls=(BERLIN, PARIS)), ToolResultMessage("call_2", "15°C, cloudy"),
               ToolResultMessage("call_1", "12°C, rainy"), AssistantMessage("done")]
    assert pairing_violations(history) == []


def test_call_without_result_before_next_assistant_turn_is_named():
    history = [AssistantMessage(tool_calls=(BERLIN, PARIS)), ToolResultMessage("call_1", "12°C, rainy"),
               AssistantMessage("done")]
    assert pairing_violations(history) == [
        "message 2: call call_2 (get_weather) has no result before the next assistant turn"]


def test_orphan_result_is_named():
    history = [UserMessage("hi"), ToolResultMessage("call_7", "x")]
    assert pairing_violations(history) == ["message 1: orphan tool result: no call has tool_call_id 'call_7'"]


def test_second_result_for_one_call_is_named():
    history = [AssistantMessage(tool_calls=(BERLIN,)), ToolResultMessage("call_1", "a"),
               ToolResultMessage("call_1", "b")]
    assert pairing_violations(history) == ["message 2: second result for call call_1"]


def test_late_result_after_next_assistant_turn_is_named():
    history = [AssistantMessage(tool_calls=(BERLIN,)), AssistantMessage("x"), ToolResultMessage("call_1", "a")]
    assert pairing_violations(history) == [
        "message 1: call call_1 (get_weather) has no result before the next assistant turn",
        "message 2: result for call call_1 arrives after the next assistant turn"]


def test_reused_call_id_is_named():
    history = [AssistantMessage(tool_calls=(BERLIN,)), ToolResultMessage("call_1", "a"),
               AssistantMessage(tool_calls=(ToolCall("call_1", "get_weather", "{}"),)),
               ToolResultMessage("call_1", "b")]
    assert pairing_violations(history) == ["message 2: tool_call_id 'call_1' is used by an earlier call"]


def test_unanswered_calls_at_the_end_are_pending_mid_run_but_violations_when_sent():
    history = [UserMessage("q"), AssistantMessage(tool_calls=(BERLIN,))]
    assert pairing_violations(history, allow_pending=True) == []
    assert pairing_violations(history) == ["end of history: call call_1 (get_weather) has no result"]
