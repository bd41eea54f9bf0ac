"""What fills the context besides the history: exemplars, retrieved documents, memory, compaction,
and the repetition check — each through the real loop, the real tools and the real tokenizer."""

import dataclasses
import json
import random

import pytest

from agent.backends import BackendReply, ScriptedBackend, Settings
from agent.budget import breakdown, shares
from agent.context.compaction import choose_cut, compact
from agent.context.exemplars import EXEMPLARS, exemplar_block
from agent.context.memory import MAX_FACTS, REMEMBER, Memory, after_run, pin
from agent.context.retrieval import retrieve
from agent.loop import LINE_COMPACT, StopReason, build_prompt, new_state, run, step
from agent.messages import (
    AssistantMessage,
    Origin,
    ResultKind,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    pairing_violations,
)
from agent.recording import load_run, replay, shipped_runs, tools_of
from agent.template import BLOCK_CATEGORIES, CATEGORIES, Fmt, Mode, Prompt, render
from agent.tools import SEARCH_TOOL, TOOLS, WEATHER_TOOL


def _weather(city: str) -> BackendReply:
    return BackendReply("", (ToolCall("x", "get_weather", json.dumps({"city": city})),))


# --- compaction never separates a call from its results ------------------------------------------

def _random_history(rng: random.Random) -> tuple:
    """A well-paired history: system, user input, then turns of calls with results, answers,
    runtime notes, summaries and follow-up user messages."""
    history, n = [SystemMessage("s"), UserMessage("q")], 1
    for _ in range(rng.randint(0, 12)):
        kind = rng.random()
        if kind < 0.6:
            calls = tuple(ToolCall(f"call_{n + i}", "get_weather", "{}") for i in range(rng.randint(1, 3)))
            n += len(calls)
            history += [AssistantMessage(thought="t", tool_calls=calls)]
            history += [ToolResultMessage(c.id, "r" * rng.randint(1, 40)) for c in calls]
        elif kind < 0.75:
            history += [AssistantMessage("an answer")]
        elif kind < 0.85:
            history += [UserMessage("ERROR: could not parse", Origin.RUNTIME)]
        elif kind < 0.92:
            history += [UserMessage("Summary of …", Origin.SUMMARY, rng.randint(1, 3))]
        else:
            history += [UserMessage("and Paris?")]
    return tuple(history)


@pytest.mark.parametrize("seed", range(300))
def test_after_any_compaction_every_result_has_its_earlier_call_and_every_call_its_result(seed):
    rng = random.Random(seed)
    history = _random_history(rng)
    for _ in range(rng.randint(1, 4)):  # repeated compactions, as thresholds are crossed again
        cut = choose_cut(history)
        if cut is None:
            break
        before = len(history)
        history = compact(history, cut)
        assert len(history) <= before
        assert pairing_violations(history) == [], history
        calls = {c.id for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls}
        assert all(m.tool_call_id in calls for m in history if isinstance(m, ToolResultMessage))
        assert history[:2] == (SystemMessage("s"), UserMessage("q"))


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_with_random_thresholds_keep_calls_and_results_paired(seed):
    rng = random.Random(seed)
    cities = ["Berlin", "Paris", "Rome", "Madrid", "Vienna", "Lisbon", "Tokyo", "Oslo"]
    rng.shuffle(cities)
    replies = [_weather(c) for c in cities[:rng.randint(2, 8)]] + [BackendReply("Done.")]
    settings = Settings(max_steps=12, max_new_tokens=64, context_budget=rng.randint(500, 900),
                        compact_at=rng.uniform(0.5, 0.95))
    states = run(new_state("Weather?", "act", "native", settings), ScriptedBackend(tuple(replies)), TOOLS)
    for s in states:
        assert pairing_violations(s.history, allow_pending=True) == []


# --- the long recorded run -----------------------------------------------------------------------

def test_the_long_recorded_run_reaches_compaction_instead_of_a_full_window(tok):
    stem = next(s for s in shipped_runs() if "compaction" in s)
    recorded = load_run(shipped_runs()[stem])
    assert "compaction" in recorded.title and len(recorded.replies) >= 8
    states = replay(recorded, tokenizer=tok)
    final = states[-1]
    assert final.stop_reason == StopReason.FINAL_ANSWER and final.history == recorded.history
    assert final.compactions >= 1 and len(final.usage) >= 8
    compacted = [s for s in states if s.lines == (LINE_COMPACT,)]
    assert compacted and all("compacted" in s.note for s in compacted)
    summaries = [m for m in final.history if isinstance(m, UserMessage) and m.origin == Origin.SUMMARY]
    assert summaries and summaries[0].content.startswith("Summary of ")
    assert "replaced by compaction" in summaries[0].content and "→ 12°C, rainy" in summaries[0].content
    sent = [u.prompt_tokens for u in final.usage]
    assert any(b < a for a, b in zip(sent, sent[1:], strict=False))  # the growth chart's drop
    without = dataclasses.replace(recorded.settings, compact_at=None)
    plain = run(new_state(recorded.user_input, recorded.mode, recorded.fmt, without,
                          system=recorded.history[0].content),
                ScriptedBackend(recorded.replies, tok), tools_of(recorded))[-1]
    assert plain.stop_reason == StopReason.CONTEXT_FULL


# --- exemplars -----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,fmt", [(m, f) for m in Mode for f in Fmt])
def test_exemplars_are_resent_with_every_call_and_never_enter_the_history(mode, fmt):
    settings = Settings(few_shot=3)
    replies = (BackendReply("Action: get_weather[Berlin]") if fmt == Fmt.REACT_TEXT else _weather("Berlin"),
               BackendReply("Action: finish[12°C, rainy]" if fmt == Fmt.REACT_TEXT else "It is 12°C, rainy."))
    states = run(new_state("What's the weather in Berlin?", mode, fmt, settings), ScriptedBackend(replies), TOOLS)
    block = exemplar_block(3, mode, fmt)
    assert block.count("Input: ") == 3 and block.count("Output: ") == 3
    for s in states:
        assert all(EXEMPLARS[0].question not in json.dumps(m.__dict__, default=str) for m in s.history)
    calls = [s for s in states[:-1] if s.phase.value == "call model"]
    assert calls and all(block in render(build_prompt(s, TOOLS)).text for s in calls)
    assert all(c["exemplars"] > 0 for c in states[-1].composition)


def test_exemplar_observations_are_what_the_real_tools_return():
    assert "Observation: 24°C, sunny" in exemplar_block(1, "react", "native")
    assert "Observation: 28\n" in exemplar_block(2, "act", "react")


# --- categories add up ---------------------------------------------------------------------------

def test_every_category_adds_up_to_the_rendered_token_count_with_all_blocks(tok):
    memory = pin(Memory(), "The user prefers Celsius.")
    settings = Settings(few_shot=2, retrieve=True, memory=True, max_new_tokens=64)
    replies = (_weather("Berlin"), _weather("Paris"), BackendReply("Both done."))
    state = new_state("Weather in Berlin and Paris? And who wrote Ulysses?", "react", "native", settings,
                      memory=memory)
    final = run(state, ScriptedBackend(replies), TOOLS)[-1]
    history = compact(final.history, choose_cut(final.history))
    for fmt in Fmt:
        prompt = Prompt(history, TOOLS, fmt, final.blocks)
        text = render(prompt, tok).text
        n = len(tok(text, add_special_tokens=False)["input_ids"])
        b = breakdown(prompt, tok, 4096, 64)
        assert sum(b.counts[c] for c in CATEGORIES) == b.prompt_tokens == n
        for c in (*BLOCK_CATEGORIES, "summary", "tools", "system", "user", "assistant_text"):
            assert b.counts[c] > 0, (fmt, c)
    for row in shares(final.composition):
        assert abs(sum(row.values()) - 1) < 1e-9


# --- retrieval -----------------------------------------------------------------------------------

def test_retrieved_documents_are_in_the_first_call_and_the_search_tool_stays():
    settings = Settings(retrieve=True)
    state = new_state("In which country was the author of Things Fall Apart born?", "react", "react", settings)
    assert [b.category for b in state.blocks] == ["documents"]
    assert "Chinua Achebe" in state.blocks[0].text
    prompt = build_prompt(step(state, ScriptedBackend(()), TOOLS), TOOLS)
    assert SEARCH_TOOL in prompt.tools and "Retrieved documents" in render(prompt).text
    assert [p.title for p in retrieve("Things Fall Apart author", 1)] == ["Things Fall Apart"]


# --- memory --------------------------------------------------------------------------------------

def test_one_sessions_memory_never_appears_in_anothers():
    settings = Settings(memory=True)
    remember = BackendReply("", (ToolCall("x", REMEMBER, '{"fact": "Alice lives in Lisbon."}'),))
    alice = run(new_state("Remember that I live in Lisbon.", "act", "native", settings),
                ScriptedBackend((remember, BackendReply("Noted."))), TOOLS)[-1]
    alice_memory = after_run(Memory(), alice.history)
    assert alice_memory.facts == ("Alice lives in Lisbon.",)
    bob = new_state("Where do I live?", "act", "native", settings, memory=Memory())
    alice_next = new_state("Where do I live?", "act", "native", settings, memory=alice_memory)
    assert "Lisbon" not in render(build_prompt(bob, TOOLS)).text
    assert "Alice lives in Lisbon." in render(build_prompt(alice_next, TOOLS)).text
    assert Memory().facts == ()  # the default value is never shared state


def test_memory_is_bounded_in_count_and_size():
    memory = Memory()
    for i in range(MAX_FACTS + 5):
        memory = pin(memory, f"fact {i}")
    assert len(memory.facts) == MAX_FACTS and memory.facts[-1] == f"fact {MAX_FACTS + 4}"
    with pytest.raises(Exception, match="at most"):
        pin(memory, "x" * 1000)


# --- repetition check ----------------------------------------------------------------------------

def test_the_same_call_twice_is_an_error_observation_and_three_times_stops_the_run():
    replies = (_weather("Berlin"), _weather("Berlin"), _weather("Berlin"), BackendReply("never"))
    final = run(new_state("Weather in Berlin?", "act", "native"), ScriptedBackend(replies), (WEATHER_TOOL,))[-1]
    results = [m for m in final.history if isinstance(m, ToolResultMessage)]
    assert [r.kind for r in results] == [ResultKind.OK, ResultKind.VALIDATION_ERROR, ResultKind.VALIDATION_ERROR]
    assert results[0].content == "12°C, rainy" and results[1].content.startswith("ERROR: repeated call")
    assert final.stop_reason == StopReason.REPETITION and len(final.usage) == 3
    assert pairing_violations(final.history) == []


def test_a_different_call_in_between_resets_the_repetition_count():
    replies = (_weather("Berlin"), _weather("Paris"), _weather("Berlin"), BackendReply("ok"))
    final = run(new_state("Weather?", "act", "native"), ScriptedBackend(replies), (WEATHER_TOOL,))[-1]
    assert final.stop_reason == StopReason.FINAL_ANSWER
    assert all(m.kind == ResultKind.OK for m in final.history if isinstance(m, ToolResultMessage))


@pytest.mark.model
def test_the_local_model_writes_the_summary_when_it_is_not_a_scripted_replay(lm):
    from agent.backends import LocalBackend

    replies = (_weather("Berlin"), _weather("Paris"), _weather("Rome"))
    settings = Settings(max_steps=8, max_new_tokens=64, context_budget=500, compact_at=0.5)
    states = run(new_state("Weather in Berlin, Paris and Rome?", "act", "native", settings),
                 ScriptedBackend(replies, lm.tokenizer), (WEATHER_TOOL,))
    before = next(s for s in states if s.lines == (LINE_COMPACT,))
    state = states[states.index(before) - 1]
    after = step(state, LocalBackend(lm), (WEATHER_TOOL,))
    assert after.lines == (LINE_COMPACT,) and "written by the model" in after.note
    summary = next(m for m in after.history if isinstance(m, UserMessage) and m.origin == Origin.SUMMARY)
    assert summary.content.startswith("Summary of ") and summary.replaced >= 1
    assert pairing_violations(after.history) == [] and len(after.history) < len(state.history)


def test_retrieval_has_a_relevance_floor():
    assert "The Handmaid's Tale" not in [p.title for p in retrieve("What's the weather in Berlin?", 5)]
    assert retrieve("What is 17 * 23?", 2) == ()
    assert [p.title for p in retrieve("Who wrote Norwegian Wood?", 2)] == ["Norwegian Wood", "Haruki Murakami"]
