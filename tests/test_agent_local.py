"""The agent loop on the real bundled model (SmolLM2-135M-Instruct), with constrained decoding.

What it checks: the lecture's Berlin trace ("A Concrete Trace") comes out of the real model when
the tool call is constrained — a get_weather call, then a text-only turn with "12°C" — and the
other shipped tasks run to a stop reason without raising. Every run is deterministic (T = 0, a
fixed seed) and bounded (MAX_STEPS = 4, 64 new tokens a reply). The grammar of one turn
(agent.turn_grammar) is checked on the model's own tokenizer.
"""

import pytest

from agent.backends import LocalBackend, Settings, observed
from agent.constraints import Constraint, ConstraintViolation, compile_grammar
from agent.loop import StopReason, new_state, run
from agent.messages import AssistantMessage, Origin, ToolCall, ToolResultMessage, UserMessage, pairing_violations
from agent.parsing import parse_reply
from agent.recording import load_run, shipped_runs, tools_of
from agent.template import Fmt, Prompt
from agent.tools import TOOLS, WEATHER_TOOL
from agent.turn_grammar import turn_grammar

MAX_STEPS = 4
BOUNDED = Settings(max_steps=MAX_STEPS, max_new_tokens=64, constrained=True, timeout_s=120.0)
BERLIN_CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Berlin"}}'


def _run_task(stem: str, settings: Settings):
    """The shipped task's user input, mode, format and tools, run on the model to its end."""
    recorded = load_run(shipped_runs()[stem])
    state = new_state(recorded.user_input, recorded.mode, recorded.fmt, settings)
    return state, tools_of(recorded)


def _accepts(lm, grammar, text: str) -> bool:
    """Whether the grammar takes the model's own tokens of `text` and may end after them."""
    constraint = Constraint(grammar, lm)
    try:
        for token in lm.encode(text):
            constraint.consume(token)
    except ConstraintViolation:
        return False
    return constraint.is_accepting()


# --- which grammar a model call gets -------------------------------------------------------------

def test_the_first_model_call_of_a_task_has_observed_nothing():
    user = UserMessage("What's the weather in Berlin?")
    call = AssistantMessage(tool_calls=(ToolCall("call_1", "get_weather", '{"city": "Berlin"}'),))
    result = ToolResultMessage("call_1", "12°C, rainy")
    assert not observed(Prompt((user,)))
    assert observed(Prompt((user, call, result)))
    assert not observed(Prompt((user, call, result, UserMessage("And in Paris?"))))
    # the runtime's parse-error note is not a new task
    assert observed(Prompt((user, call, result, UserMessage("ERROR: could not parse", Origin.RUNTIME))))


@pytest.mark.parametrize("required", [True, False])
def test_turn_grammar_compiles_for_every_demo_tool(required):
    assert compile_grammar(turn_grammar(TOOLS, call_required=required))


@pytest.mark.model
@pytest.mark.parametrize("text, first, later", [
    (BERLIN_CALL, True, True),
    ("Thought: I need the weather.\n" + BERLIN_CALL, True, True),
    ("12°C, rainy", False, True),
    ("Thought: I have it.\nAnswer: 12°C, rainy", False, True),
    ('<tool_call>{"name": "get_weather", "arguments": {"town": "Berlin"}}', False, False),
    ("It is <tool_call_2> rainy", False, False),
    ("Thought: I have it.\n12°C", False, False),  # parse_reply would read it all as the thought
])
def test_turn_grammar_requires_a_call_first_and_allows_the_answer_after_a_result(lm, text, first, later):
    tools = (WEATHER_TOOL,)
    assert _accepts(lm, turn_grammar(tools, call_required=True), text) == first
    assert _accepts(lm, turn_grammar(tools, call_required=False), text) == later


@pytest.mark.model
def test_every_text_the_later_grammar_accepts_parses(lm):
    for text in (BERLIN_CALL + "</tool_call>", "12°C, rainy", "Thought: I have it.\nAnswer: 12°C, rainy"):
        assert _accepts(lm, turn_grammar(TOOLS, call_required=False), text.removesuffix("</tool_call>"))
        assert parse_reply(text, Fmt.NATIVE).error == ""


# --- whole runs on the model ---------------------------------------------------------------------

@pytest.mark.model
def test_constrained_berlin_run_calls_get_weather_and_answers_12_degrees_in_at_most_4_steps(lm):
    state, tools = _run_task("berlin-weather", BOUNDED)
    final = run(state, LocalBackend(lm), tools)[-1]
    calls = [c for m in final.history if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert final.stop_reason == StopReason.FINAL_ANSWER and "12°C" in final.final_answer
    assert final.step <= MAX_STEPS
    assert any(c.name == "get_weather" for c in calls)
    assert final.replies[0].text == BERLIN_CALL + "</tool_call>"  # the runtime closed the tag
    assert pairing_violations(final.history) == []


@pytest.mark.model
def test_same_seed_same_sampled_reply(lm):
    state, tools = _run_task("berlin-weather", BOUNDED)
    prompt = Prompt(state.history + (UserMessage(state.user_input),), tools)
    settings = Settings(max_new_tokens=24, temperature=0.7, seed=11, constrained=True)
    backend = LocalBackend(lm)
    assert backend.complete(prompt, settings).text == backend.complete(prompt, settings).text


@pytest.mark.model
@pytest.mark.parametrize("constrained", [True, False], ids=["constrained", "free"])
@pytest.mark.parametrize("stem", ["arithmetic", "two-hop-search"])
def test_shipped_task_reaches_a_stop_reason_without_raising(lm, stem, constrained):
    settings = Settings(max_steps=MAX_STEPS, max_new_tokens=64, constrained=constrained, timeout_s=120.0)
    state, tools = _run_task(stem, settings)
    final = run(state, LocalBackend(lm), tools)[-1]
    assert final.done and final.stop_reason in set(StopReason)
    assert final.stop_reason != StopReason.BACKEND_ERROR
    assert final.step <= MAX_STEPS and len(final.usage) == final.step
    assert pairing_violations(final.history, allow_pending=True) == []


# --- the shipped system turn's KV, shared by every session (agent.backends.public_prompt) -----------

def test_only_the_shipped_system_turn_is_public():
    from agent.backends import public_prompt
    from agent.loop import build_prompt
    from agent.messages import SystemMessage
    from agent.tools import Tool

    state = new_state("What is the weather in Oslo?", settings=Settings(few_shot=2, retrieve=True))
    prompt = build_prompt(state, TOOLS)
    public = public_prompt(prompt)
    assert public.messages == prompt.messages[:1] and public.tools == prompt.tools
    assert [b.category for b in public.blocks] == ["exemplars"]  # not the documents retrieved for the question
    assert [b.category for b in prompt.blocks][:2] == ["exemplars", "documents"]
    typed = Prompt((SystemMessage("Answer as a pirate."),) + prompt.messages[1:], TOOLS)
    assert public_prompt(typed) is None
    foreign = Tool("get_weather", "A server's own description.", WEATHER_TOOL.parameters, lambda city: "")
    assert public_prompt(Prompt(prompt.messages, (foreign,))) is None
    forged = Prompt(prompt.messages, TOOLS, blocks=(type(prompt.blocks[0])("exemplars", "my own examples"),))
    assert public_prompt(forged).blocks == ()


@pytest.mark.model
def test_sessions_share_the_system_turn_and_reply_as_if_alone(lm, monkeypatch):
    from agent.llm.model import PUBLIC
    from agent.template import render_prompt

    settings = Settings(max_new_tokens=12)
    questions = ("What is 17 * 23?", "Is it warm in Lima?")
    prompts = [Prompt(new_state(q).history + (UserMessage(q),), TOOLS) for q in questions]
    replies = [LocalBackend(lm, session=f"share-{k}").complete(p, settings).text for k, p in enumerate(prompts)]
    ids = tuple(lm.encode(render_prompt(lm.tokenizer, prompts[1])))
    entry, n = lm._store.longest("someone-else", ids)  # a third session finds the common part …
    assert n >= 400 and lm._store.entries[(PUBLIC, entry.ids)] is entry  # … of the shared system turn
    assert lm.decode(list(ids[:n])).endswith("</tools><|im_end|>\n<|im_start|>")  # the system turn, no question
    monkeypatch.setattr(lm, "share_prefix", lambda *a, **k: None)  # now each reply computed alone
    for k, p in enumerate(prompts):
        assert LocalBackend(lm, session=f"alone-{k}").complete(p, settings).text == replies[k]
