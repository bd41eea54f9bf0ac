"""Backends: scripted replay of recorded runs and the bundled model (marked `model`). The
OpenAI-compatible server's backend and its guard are tests/test_remote.py's."""

import dataclasses
import json

import pytest

from agent.backends import (
    BackendError,
    BackendReply,
    LocalBackend,
    ScriptedBackend,
    Settings,
    _Stream,
)
from agent.loop import StopReason, build_prompt, new_state, run, step
from agent.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage, pairing_violations
from agent.parsing import parse_reply
from agent.recording import FORMAT, load_run, record_run, replay, run_from_dict, save_run, shipped_runs, tools_of
from agent.template import Fmt, Prompt, render_prompt
from agent.tools import TOOLS, WEATHER_TOOL
from agent.validation import validate_call

# --- scripted replay and recorded runs -----------------------------------------------------------


def test_shipped_runs_include_the_lecture_trace_and_a_search_and_an_arithmetic_run():
    assert {"berlin-weather", "two-hop-search", "arithmetic"} <= set(shipped_runs())


def test_shipped_berlin_run_is_the_lectures_trace():
    recorded = load_run(shipped_runs()["berlin-weather"])
    assert recorded.history[1:] == (
        UserMessage("What's the weather in Berlin?"),
        AssistantMessage(tool_calls=(ToolCall("call_1", "get_weather", '{"city": "Berlin"}'),)),
        ToolResultMessage("call_1", "12°C, rainy"),
        AssistantMessage("It's 12°C and rainy in Berlin."))


@pytest.mark.parametrize("stem", sorted(shipped_runs()))
def test_every_shipped_run_replays_to_its_recorded_history(stem):
    recorded = load_run(shipped_runs()[stem])
    final = replay(recorded)[-1]
    assert final.history == recorded.history
    assert (final.stop_reason, final.final_answer) == (recorded.stop_reason, recorded.final_answer)
    assert pairing_violations(final.history) == []


def test_two_hop_run_answers_from_the_encyclopedia():
    final = replay(load_run(shipped_runs()["two-hop-search"]))[-1]
    assert (final.stop_reason, final.final_answer) == (StopReason.FINISH, "Cuba")
    assert "Santiago de las Vegas, near Havana, Cuba" in final.history[5].content


def test_record_save_load_round_trip(tmp_path):
    recorded = load_run(shipped_runs()["arithmetic"])
    final = replay(recorded)[-1]
    path = save_run(record_run(final, tools_of(recorded), recorded.title, recorded.description), tmp_path / "r.json")
    again = load_run(path)
    assert again.usage == final.usage  # counted anew: estimates here, the tokenizer's when recorded
    assert dataclasses.replace(again, usage=recorded.usage) == recorded
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == FORMAT


def test_loading_refuses_another_format():
    with pytest.raises(ValueError, match="not a recorded run"):
        run_from_dict({"format": "something-else/2"})


def test_scripted_reply_depends_on_the_prompt_not_on_call_order():
    backend = ScriptedBackend((BackendReply("first"), BackendReply("second")))
    prompt1 = Prompt((UserMessage("q"),))
    prompt2 = Prompt((UserMessage("q"), AssistantMessage("first"), UserMessage("again")))
    assert [backend.complete(p, Settings()).text for p in (prompt2, prompt1, prompt2)] == ["second", "first", "second"]


def test_scripted_backend_streams_the_reply_and_reports_an_exhausted_script():
    pieces = []
    backend = ScriptedBackend((BackendReply("It's 12°C and rainy."),))
    backend.complete(Prompt((UserMessage("q"),)), Settings(), pieces.append)
    assert "".join(pieces) == "It's 12°C and rainy." and len(pieces) == 4
    with pytest.raises(BackendError, match="the script has no reply #2: it holds 1"):
        backend.complete(Prompt((UserMessage("q"), AssistantMessage("x"))), Settings())


def test_a_replay_whose_tool_result_differs_from_the_recording_stops_instead_of_answering():
    from agent.validation import DEFAULT_POLICY, Policy

    recorded = load_run(shipped_runs()["berlin-weather"])
    refuse = Policy(untrusted_tools=frozenset({"get_weather"}), approval_required=True)
    for policy, reason in ((DEFAULT_POLICY, StopReason.FINAL_ANSWER), (refuse, StopReason.RECORDING_DIVERGED)):
        state = replay(recorded)[0]
        backend = ScriptedBackend(recorded.replies, recorded=recorded.history)
        final = run(state, backend, tools_of(recorded), policy=policy)[-1]
        assert final.stop_reason == reason
    assert "12°C" not in final.final_answer and "cannot follow" in final.final_answer


# --- the bundled model ---------------------------------------------------------------------------

def _berlin_prompt(fmt="native", tools=(WEATHER_TOOL,)):
    """The prompt of the first model call: system + user, after line 1."""
    after_user = step(new_state("What's the weather in Berlin?", "act", fmt), ScriptedBackend(()), tools)
    return build_prompt(after_user, tools)


@pytest.mark.model
def test_local_backend_counts_the_rendered_prompt_and_streams_its_reply(lm):
    prompt, pieces = _berlin_prompt(), []
    reply = LocalBackend(lm).complete(prompt, Settings(max_new_tokens=24), pieces.append)
    assert reply.usage.prompt_tokens == len(lm.encode(render_prompt(lm.tokenizer, prompt)))
    assert 0 < reply.usage.completion_tokens <= 24 and reply.finish_reason in ("stop", "length")
    assert "".join(pieces) == reply.text and "<|im_end|>" not in reply.text


@pytest.mark.model
def test_local_backend_greedy_is_deterministic(lm):
    backend = LocalBackend(lm)
    settings = Settings(max_new_tokens=12)
    assert backend.complete(_berlin_prompt(), settings).text == backend.complete(_berlin_prompt(), settings).text


def test_stream_cuts_at_the_stop_sequence_and_never_streams_part_of_it():
    pieces = []
    stream = _Stream(("\nObservation:", "<|im_end|>"), pieces.append)
    decoded = "Thought: t\nAction: search[X]\nObservation: invented"
    hits = [stream.update(decoded[:n]) for n in range(1, len(decoded) + 1)]
    assert hits.index(True) == decoded.index("\nObservation:") + len("\nObservation:") - 1
    assert stream.finish() == "".join(pieces) == "Thought: t\nAction: search[X]"


def test_stream_holds_back_an_unfinished_character():
    pieces = []
    stream = _Stream((), pieces.append)
    stream.update("12\ufffd")
    stream.update("12°C")
    assert pieces == ["12", "°C"]


@pytest.mark.model
def test_local_backend_react_reply_stops_before_inventing_the_observation(lm):
    reply = LocalBackend(lm).complete(_berlin_prompt("react"), Settings(max_new_tokens=24, temperature=0.8, seed=3))
    assert "\nObservation:" not in reply.text


@pytest.mark.model
def test_local_backend_wall_clock_limit(lm):
    reply = LocalBackend(lm).complete(_berlin_prompt(), Settings(timeout_s=0.0))
    assert reply.finish_reason == "time" and reply.usage.completion_tokens == 0


@pytest.mark.model
def test_constrained_native_reply_is_a_valid_tool_call(lm):
    reply = LocalBackend(lm).complete(_berlin_prompt(), Settings(max_new_tokens=40, constrained=True))
    parsed = parse_reply(reply.text, Fmt.NATIVE)
    assert parsed.error == "" and len(parsed.tool_calls) == 1
    assert validate_call(parsed.tool_calls[0], (WEATHER_TOOL,)).ok


@pytest.mark.model
def test_loop_runs_on_the_local_model_and_keeps_the_pairing_invariant(lm):
    state = new_state("What's the weather in Berlin?", "act", "native", Settings(max_steps=2, max_new_tokens=32))
    final = run(state, LocalBackend(lm), TOOLS)[-1]
    assert final.done and final.stop_reason != StopReason.BACKEND_ERROR
    assert pairing_violations(final.history, allow_pending=True) == []
    assert all(u.source == "model" for u in final.usage) and len(final.usage) == final.step
