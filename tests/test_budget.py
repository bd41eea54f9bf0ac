"""Token accounting: categories that add up exactly to the rendered prompt's token count (real tokenizer)."""



from agent.backends import ScriptedBackend, Settings
from agent.budget import (
    BUDGET_CATEGORIES,
    FREE,
    RESERVED,
    Usage,
    breakdown,
    count_tokens,
    estimate_tokens,
    growth,
    prompt_tokens,
)
from agent.loop import Phase, StopReason, build_prompt, new_state, run
from agent.recording import load_run, replay, shipped_runs, tools_of
from agent.template import CATEGORIES, Fmt, Mode, Prompt, render


def _prompts():
    """The final prompt of every shipped run, in both output formats."""
    for stem, path in shipped_runs().items():
        run_ = load_run(path)
        for fmt in Fmt:
            yield f"{stem}-{fmt}", Prompt(run_.history, tools_of(run_), fmt)


def test_categories_add_up_exactly_to_the_rendered_token_count(tok):
    for name, prompt in _prompts():
        text = render(prompt, tok).text
        n = len(tok(text, add_special_tokens=False)["input_ids"])
        b = breakdown(prompt, tok, budget=2048, reserved=256)
        assert sum(b.counts[c] for c in CATEGORIES) == b.prompt_tokens == n, name
        assert b.prompt_tokens + b.counts[RESERVED] + b.counts[FREE] == 2048, name
        assert sum(b.per_message.values()) == n, name


def test_every_category_is_reported_and_each_message_text_is_counted(tok):
    b = breakdown(next(p for n, p in _prompts() if n == "two-hop-search-react"), tok, 2048, 256)
    assert tuple(b.counts) == BUDGET_CATEGORIES
    for category in ("system", "tools", "user", "thought", "tool_call", "tool_result", "template"):
        assert b.counts[category] > 0, category


def test_a_tool_result_costs_what_its_text_costs(tok):
    b = breakdown(next(p for n, p in _prompts() if n == "berlin-weather-native"), tok, 2048, 256)
    assert b.counts["tool_result"] == count_tokens("12°C, rainy", tok) == 6


def test_special_tokens_are_template_overhead(tok):
    prompt = next(p for n, p in _prompts() if n == "two-cities-native")
    ids = tok(render(prompt, tok).text, add_special_tokens=False)["input_ids"]
    b = breakdown(prompt, tok, 2048, 256)
    special = {tok.convert_tokens_to_ids(t) for t in ("<|im_start|>", "<|im_end|>")}
    marked = [c for i, c in zip(ids, b.token_categories, strict=True) if i in special]
    assert len(marked) == 2 * len(prompt.messages) + 1 and set(marked) == {"template"}


def test_over_budget_is_the_loops_context_full_condition(tok):
    prompt = next(p for n, p in _prompts() if n == "berlin-weather-native")
    n = breakdown(prompt, tok, 10_000, 0).prompt_tokens
    assert not breakdown(prompt, tok, n + 256, 256).over
    assert breakdown(prompt, tok, n + 255, 256).over
    assert breakdown(prompt, tok, n + 255, 256).counts[FREE] == 0


def test_loop_stops_when_rendered_prompt_plus_reserve_exceeds_the_budget(tok):
    run_ = load_run(shipped_runs()["berlin-weather"])
    state = new_state(run_.user_input, run_.mode, run_.fmt, Settings(context_budget=200, max_new_tokens=64))
    final = run(state, ScriptedBackend(run_.replies, tokenizer=tok), tools_of(run_))[-1]
    assert final.stop_reason == StopReason.CONTEXT_FULL
    used = prompt_tokens(build_prompt(final, tools_of(run_)), tok)
    assert final.final_answer == f"stopped: context window full ({used} prompt + 64 reserved > 200 tokens)"


def test_input_tokens_grow_and_the_total_is_their_running_sum(tok):
    recorded = load_run(shipped_runs()["two-hop-search"])
    states = replay(recorded, tokenizer=tok)
    usage = states[-1].usage
    assert [u.source for u in usage] == ["tokenizer"] * 3
    before_calls = [s for s in states if s.phase == Phase.CALL_MODEL]  # each call re-sends everything
    assert [u.prompt_tokens for u in usage] == [
        prompt_tokens(build_prompt(s, tools_of(recorded)), tok) for s in before_calls]
    points = growth(usage)
    inputs = [p.input_tokens for p in points]
    assert inputs == sorted(inputs) and len(set(inputs)) == 3
    assert [p.total for p in points] == [inputs[0], inputs[0] + inputs[1], sum(inputs)]


def test_total_grows_quadratically_when_each_turn_adds_the_same_amount():
    points = growth([Usage(100 + 50 * k, 10) for k in range(6)])
    totals = [p.total for p in points]
    second_differences = {totals[i + 2] - 2 * totals[i + 1] + totals[i] for i in range(4)}
    assert second_differences == {50}


def test_without_a_tokenizer_counts_are_estimates_that_still_add_up():
    prompt = Prompt(load_run(shipped_runs()["arithmetic"]).history, (), Fmt.NATIVE)
    b = breakdown(prompt, None, 4096, 256)
    assert not b.exact and sum(b.counts[c] for c in CATEGORIES) == b.prompt_tokens
    assert estimate_tokens("abcde") == 2


def test_cot_prompt_spends_nothing_on_tool_schemas(tok):
    state = new_state("What is the capital of France?", Mode.COT)
    b = breakdown(build_prompt(state, tools_of(load_run(shipped_runs()["two-hop-search"]))), tok, 2048, 256)
    assert b.counts["tools"] == 0 and b.counts["system"] > 0
