"""The ReAct tab's Context panel on real components (built, not launched): the controls flow into
Settings and are checked on the server; pinned facts enter the next run's context only with Memory
on; a recorded task keeps the context its replies were written for; the long recorded run steps
through compaction and its views show where and how much."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agent.context.memory import Memory
from agent.loop import LINE_COMPACT, StopReason
from tests.page_api import merged, values
from viz.react import context as ctx
from viz.react import handlers as h
from viz.react import run as react_run

COMPACTION_TASK = next(t for t, stem in react_run.TASKS.items() if stem == "compaction-long-run")



def test_the_shipped_compaction_run_is_a_task_whose_name_says_compaction():
    assert "compaction" in COMPACTION_TASK.lower()
    assert set(react_run.TASKS.values()) - {None} <= set(react_run.recorded_runs())


def test_the_context_controls_flow_into_the_runs_settings(tab, lm):
    p, first = tab
    c = replace(react_run.default_choices(lm), few_shot=2, retrieve=True, compact=True, compact_at=70)
    out = h.on_reset(p, lm, first, False, *values(c))
    settings = out[p.sess].state.settings
    assert (settings.few_shot, settings.retrieve, settings.compact_at) == (2, True, 0.7)
    kinds = [b.category for b in out[p.sess].state.blocks]
    assert "exemplars" in kinds and "documents" in kinds
    assert 'data-compact="0"' in out[p.pseudo]  # compaction is on: the pseudo-code says where it runs


def test_compaction_is_off_by_default_whatever_the_slider_says(tab, lm):
    p, first = tab
    c = replace(react_run.default_choices(lm), compact=False, compact_at=60)
    assert h.on_reset(p, lm, first, False, *values(c))[p.sess].state.settings.compact_at is None


@pytest.mark.parametrize("field, value, words", [
    ("few_shot", 4, "Few-shot exemplars must lie in 0 … 3"),
    ("few_shot", -1, "Few-shot exemplars must lie in 0 … 3"),
    ("few_shot", "many", "Few-shot exemplars must be a number"),
    ("compact_at", 40, "Compact at (%) must lie in 50 … 95"),
    ("compact_at", 1e308, "Compact at (%) must lie in 50 … 95"),
    ("retrieve", "yes", "Retrieved documents is on or off"),
    ("memory", 1, "Memory is on or off"),
])
def test_a_bad_context_value_is_a_message_and_the_run_stays(tab, lm, field, value, words):
    p, first = tab
    c = replace(react_run.default_choices(lm), compact=True, **{field: value})
    out = h.on_reset(p, lm, first, False, *values(c))
    assert words in out[p.msg] and out[p.sess].states == first.states


def test_a_pinned_fact_enters_the_next_run_only_with_memory_on(tab, lm):
    p, first = tab
    out = ctx.on_pin(p, Memory(), "The user lives in Lisbon.")
    facts = out[p.facts]
    assert facts.facts == ("The user lives in Lisbon.",) and "Lisbon" in out[p.facts_html]
    base = replace(react_run.default_choices(lm), facts=facts)
    on = h.on_reset(p, lm, first, False, *values(replace(base, memory=True)))
    off = h.on_reset(p, lm, first, False, *values(base))
    assert "Lisbon" in on[p.template] and "Lisbon" not in off[p.template]
    gone = ctx.on_forget(p, facts, "1. The user lives in Lisbon.")
    assert gone[p.facts].facts == () and "No facts" in gone[p.facts_html]


@pytest.mark.parametrize("text", ["", "   ", "x" * 201, None])
def test_a_bad_fact_is_not_pinned(tab, text):
    p, _ = tab
    out = ctx.on_pin(p, Memory(("kept",)), text)
    assert "Not pinned" in out[p.msg] and p.facts not in out


def test_forgetting_a_fact_of_another_list_is_refused(tab):
    p, _ = tab
    out = ctx.on_forget(p, Memory(("a",)), "1. someone else's fact")
    assert "Choose a fact" in out[p.msg] and p.facts not in out


def test_a_finished_runs_remember_calls_are_kept_once(tab, lm):
    p, first = tab
    s = replace(first, states=first.states[:-1] + (replace(first.state, stop_reason=StopReason.FINISH),))
    out = ctx.on_ran(p, s, Memory(), None)
    assert out[p.facts_from] is s.states[-1]
    again = ctx.on_ran(p, s, Memory(), s.states[-1])
    assert again == {p.facts_from: s.states[-1]}  # nothing new; never {} (a Gradio error for four outputs)
    assert ctx.on_ran(p, first, Memory(), None) == {p.facts_from: None}  # the run goes on: unchanged


def test_the_compaction_task_brings_its_budget_and_steps_through_compaction(tab, lm):
    p, first = tab
    c = replace(react_run.default_choices(lm), task=COMPACTION_TASK)
    out = h.on_task(p, lm, first, False, *values(c))
    assert (out[p.budget], out[p.compact], out[p.compact_at], out[p.max_steps]) == (800, True, 60, 12)
    s = out[p.sess]
    assert s.state.settings.compact_at == 0.6
    outs = list(h.on_run(p, lm, s, False))
    s = outs[-1][p.sess]
    final = s.states[-1]
    assert final.stop_reason in (StopReason.FINAL_ANSWER, StopReason.FINISH) and final.compactions >= 1
    k = next(i for i, st in enumerate(s.states) if st.lines == (LINE_COMPACT,))
    shown = h.views(p, lm, replace(s, index=k, shown=()), False)
    assert 'data-compact="1"' in shown[p.pseudo] and "rb-compact" in shown[p.budget_html]
    assert "compaction summary" in shown[p.history]
    end = h.views(p, lm, replace(s, index=len(s.states) - 1, shown=()), False)
    assert "rg-" in end[p.growth_html] or "data-category" in end[p.growth_html]


def test_a_loaded_recording_keeps_its_context(tab, lm, tmp_path):
    p, first = tab
    path = react_run.shipped_runs()["compaction-long-run"]
    s = react_run.load_session(str(path), lm)
    assert (s.state.settings.compact_at, s.state.settings.context_budget) == (0.6, 800)
    states = s.states
    while not states[-1].done:
        states += (next(react_run.one_phase(replace(s, states=states), lm))[0],)
    assert states[-1].stop_reason != StopReason.CONTEXT_FULL and states[-1].compactions >= 1


def test_every_react_tour_stop_names_a_task_of_the_list_by_its_run_id_and_two_are_about_the_context():
    from viz import tour
    assert all(react_run.TASK_LABELS[s.settings["task"]] in react_run.TASKS for s in tour.REACT_TOUR)
    titles = " ".join(s.title for s in tour.REACT_TOUR)
    assert "In-context learning vs post-training" in titles and "Compaction" in titles
    assert "compaction-long-run" in [s.settings["task"] for s in tour.REACT_TOUR]


def test_closing_a_streamed_local_reply_stops_the_model_at_its_next_token(lm):
    """Stop cancels the listener, which closes the generator: the reply must not run on in its
    worker thread (it would hold the model for the rest of its MAX_NEW_TOKENS)."""
    import threading
    import time

    c = replace(react_run.default_choices(lm), task=react_run.FREE_TEXT, backend=react_run.LOCAL,
                task_text="Write a long story about a lighthouse keeper.", constrained=False,
                reply_tokens=1024)
    s = react_run.start(react_run.checked(lm, c))
    s = replace(s, states=s.states + (react_run.loop.step(s.state, None, s.tools),))
    phase = react_run.one_phase(s, lm)
    new, text = next(phase)
    assert new is None  # the reply is streaming
    phase.close()
    end = time.monotonic() + 20
    while any(t.name == "react-model-call" for t in threading.enumerate()) and time.monotonic() < end:
        time.sleep(0.1)
    assert not any(t.name == "react-model-call" for t in threading.enumerate())


def test_fork_from_here_sends_the_new_context_from_the_next_call_on(tab, lm):
    p, first = tab
    s = next(h.on_next(p, lm, first, False))[p.sess]  # line 1 ran
    c = replace(react_run.default_choices(lm), few_shot=1, retrieve=True)
    out = h.on_fork(p, lm, s, False, *values(c))
    blocks = {b.category for b in out[p.sess].state.blocks}
    assert {"exemplars", "documents"} <= blocks and "Forked at state 1" in out[p.msg]


def test_every_tour_stop_starts_its_sentences_with_a_capital():
    from viz import tour

    for stop in (*tour.SAMPLING_TOUR, *tour.REACT_TOUR):
        for text in (stop.lecture, stop.action):
            assert not text[:1].islower(), (stop.title, text[:40])


def test_choosing_free_text_on_a_scripted_replay_moves_the_backend_to_the_local_model(tab, lm):
    """A student picks "Free text…", types a question and presses Next: the page must not answer
    "Scripted replay replays a recorded run" (a replay cannot answer a typed task). The Backend
    control moves to the Local model, and Next with the controls as the page now shows them runs
    the typed task on it."""
    p, first = tab
    c = replace(react_run.default_choices(lm), task=react_run.FREE_TEXT, backend=react_run.SCRIPTED)
    out = h.on_task(p, lm, first, False, *values(c))
    assert out[p.backend] == react_run.LOCAL and "Local model" in out[p.msg]
    c = replace(c, backend=out[p.backend], task_text="What is 17 * 23?")
    shown = merged(h.on_next(p, lm, first, False, out[p.pending], *values(c)))
    s = shown[p.sess]
    assert s.backend.kind == react_run.LOCAL and "What is 17 * 23?" in s.state.user_input
    kept = h.on_task(p, lm, first, False, *values(replace(c, backend=react_run.LOCAL)))
    assert p.backend not in kept  # a backend the student chose stays as it is
