"""Prompt-ToolLoop as a state machine, driven by the scripted backend (the real replay backend)."""

import dataclasses

import pytest

from agent.backends import BackendReply, ScriptedBackend, Settings
from agent.budget import prompt_tokens
from agent.loop import (
    LINE_APPEND_RESULT,
    LINE_APPEND_USER,
    LINE_CALL_LLM,
    LINE_FOR_STEP,
    LINE_STEP_BUDGET,
    PSEUDO_CODE,
    Phase,
    StopReason,
    build_prompt,
    new_state,
    run,
    step,
)
from agent.messages import (
    AssistantMessage,
    Origin,
    ResultKind,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    pairing_violations,
)
from agent.template import render
from agent.tools import TOOLS, WEATHER_TOOL
from agent.validation import EUROPE_ONLY

BERLIN_Q = "What's the weather in Berlin?"


def _call(name: str, arguments: str) -> ToolCall:
    return ToolCall("ignored", name, arguments)  # the runtime numbers calls itself


def _weather(*arguments: str) -> BackendReply:
    return BackendReply("", tuple(_call("get_weather", a) for a in arguments))


BERLIN_REPLIES = (_weather('{"city": "Berlin"}'), BackendReply("It's 12°C and rainy in Berlin."))


def _run(replies, question=BERLIN_Q, mode="act", fmt="native", tools=TOOLS, **kwargs):
    settings = kwargs.pop("settings", Settings())
    return run(new_state(question, mode, fmt, settings), ScriptedBackend(tuple(replies)), tools, **kwargs)


def test_lecture_berlin_trace_message_for_message():
    final = _run(BERLIN_REPLIES, tools=(WEATHER_TOOL,))[-1]
    assert final.history[1:] == (
        UserMessage("What's the weather in Berlin?"),
        AssistantMessage(tool_calls=(ToolCall("call_1", "get_weather", '{"city": "Berlin"}'),)),
        ToolResultMessage(tool_call_id="call_1", content="12°C, rainy"),
        AssistantMessage("It's 12°C and rainy in Berlin."),
    )
    assert final.stop_reason == StopReason.FINAL_ANSWER
    assert final.final_answer == "It's 12°C and rainy in Berlin."
    assert final.step == 2 and len(final.usage) == 2  # two turns, each sent the whole history


def test_berlin_trace_visits_the_pseudo_code_lines_in_order():
    states = _run(BERLIN_REPLIES)
    assert [s.lines for s in states[1:]] == [(1,), (2, 3, 4, 5), (6, 7, 8), (2, 3, 4, 5)]
    assert [s.phase for s in states] == [Phase.START, Phase.CALL_MODEL, Phase.EXECUTE, Phase.CALL_MODEL,
                                         Phase.DONE]


def test_pseudo_code_is_the_lectures_nine_lines():
    assert len(PSEUDO_CODE) == LINE_STEP_BUDGET == 9
    assert PSEUDO_CODE[LINE_APPEND_USER - 1] == "context.append(user_input)"
    assert PSEUDO_CODE[LINE_CALL_LLM - 1].strip() == "response ← LLM(context)"
    assert "tool_result(call.id, result)" in PSEUDO_CODE[LINE_APPEND_RESULT - 1]
    assert PSEUDO_CODE[LINE_STEP_BUDGET - 1] == 'return "stopped: step budget exhausted"'


def test_two_calls_in_one_turn_get_two_results_with_their_ids():
    replies = (_weather('{"city": "Berlin"}', '{"city": "Paris"}'), BackendReply("Both done."))
    states = _run(replies)
    final = states[-1]
    assert final.history[3:5] == (ToolResultMessage("call_1", "12°C, rainy"),
                                  ToolResultMessage("call_2", "15°C, cloudy"))
    assert [s.lines for s in states[3:5]] == [(6, 7, 8), (6, 7, 8)]  # one call per step
    assert states[3].pending == (ToolCall("call_2", "get_weather", '{"city": "Paris"}'),)
    assert pairing_violations(final.history) == []


def test_call_ids_count_through_the_run():
    replies = (_weather('{"city": "Berlin"}'), _weather('{"city": "Paris"}', '{"city": "Rome"}'),
               BackendReply("ok"))
    calls = [c.id for m in _run(replies)[-1].history if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert calls == ["call_1", "call_2", "call_3"]


@pytest.mark.parametrize("name, arguments, message", [
    ("get_weather", '{"city": "Berl', "ERROR: invalid arguments for get_weather: not valid JSON"),
    ("get_wether", '{"city": "Berlin"}', "ERROR: unknown tool 'get_wether'"),
    ("get_weather", '{"town": "Berlin"}', "ERROR: invalid arguments for get_weather: 'city' is a required"),
])
def test_each_validation_failure_reaches_the_model_and_the_loop_goes_on(name, arguments, message):
    replies = (BackendReply("", (_call(name, arguments),)), *BERLIN_REPLIES)
    states = _run(replies)
    result = states[-1].history[3]
    assert isinstance(result, ToolResultMessage) and result.kind == ResultKind.VALIDATION_ERROR
    assert result.tool_call_id == "call_1" and result.content.startswith(message)
    next_prompt = render(build_prompt(states[3], TOOLS)).text  # what the second model call is sent
    assert result.content in next_prompt
    assert states[-1].stop_reason == StopReason.FINAL_ANSWER and states[-1].step == 3


def test_policy_refusal_is_its_own_kind_and_comes_before_the_tool_runs():
    replies = (_weather('{"city": "Tokyo"}'), _weather('{"city": "Atlantis"}'), BackendReply("Sorry."))
    history = _run(replies, policy=EUROPE_ONLY)[-1].history
    listed, unknown = history[3], history[5]
    assert listed.kind == ResultKind.POLICY_REFUSAL and listed.content.startswith("POLICY: ")
    assert unknown.kind == ResultKind.POLICY_REFUSAL  # not on the allow-list: the tool never runs


def test_tool_error_becomes_an_error_result():
    replies = (_weather('{"city": "Atlantis"}'), BackendReply("I don't know."))
    result = _run(replies)[-1].history[3]
    assert result.kind == ResultKind.TOOL_ERROR
    assert result.content.startswith("ERROR: no weather data for 'Atlantis'")


def test_policy_refusal_differs_from_validation_failure():
    replies = (_weather('{"city": "Tokyo"}'), _weather('{"city": 7}'), BackendReply("Sorry."))
    history = _run(replies, policy=EUROPE_ONLY)[-1].history
    assert (history[3].kind, history[5].kind) == (ResultKind.POLICY_REFUSAL, ResultKind.VALIDATION_ERROR)
    assert history[3].content.split(":")[0] == "POLICY" and history[5].content.startswith("ERROR: invalid")


def test_step_cap_returns_step_budget_exhausted():
    replies = [_weather(f'{{"city": "{city}"}}') for city in ("Berlin", "Paris", "Rome", "Madrid", "Oslo")]
    final = _run(replies, settings=Settings(max_steps=3))[-1]
    assert final.final_answer == "stopped: step budget exhausted"
    assert final.stop_reason == StopReason.STEP_BUDGET
    assert final.lines == (LINE_FOR_STEP, LINE_STEP_BUDGET) and final.step == 3
    assert pairing_violations(final.history) == []


def test_finish_ends_the_run_with_its_answer():
    replies = (BackendReply("Thought: I know it.\nAction: finish[Cuba]"),)
    final = _run(replies, mode="react", fmt="react")[-1]
    assert (final.stop_reason, final.final_answer) == (StopReason.FINISH, "Cuba")
    assert final.history[-1] == ToolResultMessage("call_1", "Cuba")


def test_one_unparsable_reply_is_fed_back_then_the_run_continues():
    replies = (BackendReply("I will look it up."), BackendReply("Action: finish[12°C, rainy]"))
    final = _run(replies, mode="react", fmt="react")[-1]
    feedback = final.history[3]
    assert feedback == UserMessage("ERROR: could not parse your reply: no 'Action:' line; write Action: "
                                   "tool[argument], or Action: finish[answer] to answer", Origin.RUNTIME)
    assert final.stop_reason == StopReason.FINISH


def test_two_unparsable_replies_in_a_row_stop_the_run():
    replies = (BackendReply("<tool_call>{oops</tool_call>"), BackendReply("<tool_call>[1, 2]</tool_call>"))
    final = _run(replies)[-1]
    assert final.stop_reason == StopReason.NO_PARSABLE_OUTPUT and final.step == 2
    assert final.final_answer == "stopped: no parsable output twice in a row"


def test_context_window_full_stops_before_the_model_call():
    final = _run(BERLIN_REPLIES, settings=Settings(context_budget=300, max_new_tokens=256))[-1]
    assert final.stop_reason == StopReason.CONTEXT_FULL
    assert final.lines == (LINE_FOR_STEP, LINE_CALL_LLM) and final.step == 0
    assert not any(isinstance(m, AssistantMessage) for m in final.history)
    assert final.final_answer.startswith("stopped: context window full (")


def test_context_fills_up_mid_run():
    after_user = step(new_state(BERLIN_Q, "act"), ScriptedBackend(()), TOOLS)
    first = prompt_tokens(build_prompt(after_user, TOOLS))
    settings = Settings(context_budget=first + 256 + 5, max_new_tokens=256)  # the first call just fits
    final = _run(BERLIN_REPLIES, settings=settings)[-1]
    assert final.stop_reason == StopReason.CONTEXT_FULL and final.step == 1
    assert final.history[-1].kind == ResultKind.OK  # the tool result made it too long


def test_backend_error_is_a_stop_reason():
    final = _run(())[-1]
    assert final.stop_reason == StopReason.BACKEND_ERROR
    assert final.final_answer == "stopped: backend error: the script has no reply #1: it holds 0"


def test_states_are_never_mutated_and_replay_by_index():
    states = _run(BERLIN_REPLIES)
    snapshot = [dataclasses.replace(s) for s in states]
    backend = ScriptedBackend(BERLIN_REPLIES)
    for k in range(len(states) - 1):  # going back to state k and stepping again gives state k+1
        assert step(states[k], backend, TOOLS) == states[k + 1]
    assert states == tuple(snapshot)
    assert [len(s.history) for s in states] == [1, 2, 3, 4, 5]


def test_a_done_state_does_not_step():
    final = _run(BERLIN_REPLIES)[-1]
    assert step(final, ScriptedBackend(()), TOOLS) is final


def test_react_mode_asks_for_a_thought_and_act_mode_for_none():
    for fmt in ("native", "react"):
        react, act = new_state("q", "react", fmt).history[0].content, new_state("q", "act", fmt).history[0].content
        assert "Thought:" in react or "Thought," in react
        assert "Thought" not in act and "Do not explain your reasoning." in act


def test_react_mode_keeps_the_thought_of_each_turn():
    reply = BackendReply('Thought: 345 km in 2.5 h.\n<tool_call>{"name": "calculator", '
                         '"arguments": {"expression": "345 / 2.5"}}</tool_call>')
    final = _run((reply, BackendReply("Thought: done.\nAnswer: 138 km/h")), mode="react")[-1]
    assert final.history[2].thought == "345 km in 2.5 h." and final.history[3].content == "138"
    assert (final.history[4].thought, final.final_answer) == ("done.", "138 km/h")


def test_cot_mode_advertises_no_tools_and_answers_open_loop():
    state = new_state("What is the capital of France?", "cot")
    prompt = build_prompt(state, TOOLS)
    assert prompt.tools == () and "<tools>" not in render(prompt).text
    final = _run((BackendReply("Thought: France's capital is Paris.\nAnswer: Paris"),),
                 question="What is the capital of France?", mode="cot")[-1]
    assert (final.final_answer, final.history[-1].thought) == ("Paris", "France's capital is Paris.")


def test_cot_mode_cannot_execute_a_tool_it_never_advertised():
    replies = (_weather('{"city": "Berlin"}'), BackendReply("Answer: rainy"))
    result = _run(replies, mode="cot")[-1].history[3]
    assert result.kind == ResultKind.VALIDATION_ERROR and result.content.startswith("ERROR: unknown tool")


def test_usage_is_recorded_per_model_call_and_grows():
    final = _run(BERLIN_REPLIES)[-1]
    assert [u.source for u in final.usage] == ["estimate", "estimate"]
    assert final.usage[1].prompt_tokens > final.usage[0].prompt_tokens


def test_a_reply_cut_at_the_token_limit_is_never_a_final_answer():
    """Issue 23: a text-only reply with finish_reason "length" stops as the token limit, not line 5."""
    cut = BackendReply("Once upon a time, in the", finish_reason="length")
    final = _run([cut], question="Tell me a story.")[-1]
    assert final.stop_reason == StopReason.TOKEN_LIMIT and final.stop_reason != StopReason.FINAL_ANSWER
    assert final.final_answer == "stopped: token limit"


def test_a_call_cut_at_the_token_limit_says_so():
    cut = BackendReply('<tool_call>{"name": "get_weather", "arguments": {"city": "Ber', finish_reason="length")
    states = _run([cut, *BERLIN_REPLIES])
    assert any("reply limit cut the reply" in (s.note or "") for s in states)
    assert states[-1].stop_reason == StopReason.FINAL_ANSWER  # repaired after the validation error
