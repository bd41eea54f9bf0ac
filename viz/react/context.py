"""The ReAct tab's Context panel (issue 14): few-shot exemplars, retrieved documents (RAG),
long-term memory and compaction — its layout, its handlers and its listeners.

The four run controls are fields of react_run.Choices (`few_shot`, `retrieve`, `memory`,
`compact`, `compact_at`), so Reset, Fork, the Task list and the tour read them like any other;
their checks are viz/react/context_run.py. The browser session's facts are a Memory in their own
gr.State (`facts`, with a time to live): Choices' field `facts`, so a new run re-sends them,
never sent by a visitor (a State is not an API input) and never seen by another session. When a
run ends its successful `remember` calls are added (agent.context.memory.after_run), once per run.

What it does not know: how the loop, exemplars, retrieval, memory or compaction work inside.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import gradio as gr

from agent.context import memory as am
from agent.context.memory import Memory
from agent.controls import REACT
from agent.tools import ToolError
from viz.controls import slider
from viz.react import context_run as rc
from viz.render import esc, message

FACTS_TTL_S = 2 * 3600  # a tab's facts are forgotten this long after their last update
CONTEXT_TITLE = "Context: few-shot exemplars, retrieved documents, memory, compaction"
APPLY = "Reset (a new run) or Fork from here applies it."


def layout(d: dict, c) -> None:
    """The Context accordion (closed: it never pushes the views down) and the facts' State."""
    d["facts"] = gr.State(Memory(), time_to_live=FACTS_TTL_S)
    d["facts_from"] = gr.State(None, time_to_live=FACTS_TTL_S)  # the final State last absorbed
    with gr.Accordion(CONTEXT_TITLE, open=False, elem_id="react-context"):
        with gr.Row():
            d["few_shot"] = gr.Radio(list(rc.FEW_SHOT_CHOICES), value=c.few_shot, label=REACT["few_shot"].label,
                                     info="worked ⟨input, chain, output⟩ trajectories, re-sent every call")
            d["retrieve"] = gr.Checkbox(c.retrieve, label="Retrieved documents (RAG)",
                                        info="BM25 passages for the question, before the first call")
        with gr.Row():
            d["compact"] = gr.Checkbox(c.compact, label="Compact the history",
                                       info="older turns → one summary message")
            d["compact_at"] = slider(REACT["compact_at"], c.compact_at)
        d["memory"] = gr.Checkbox(c.memory, label="Memory",
                                  info="this tab's facts in every call, and the `remember` tool")
        with gr.Row(equal_height=True):
            d["fact_text"] = gr.Textbox(label="A fact to remember", max_length=am.MAX_FACT_CHARS,
                                        placeholder="The user lives in Lisbon.", scale=3)
            d["pin_btn"] = gr.Button("Pin", size="sm", min_width=80, elem_id="react-pin")
        d["facts_html"] = gr.HTML(facts_html(Memory()), elem_id="react-facts")
        with gr.Row(equal_height=True):
            d["forget_choice"] = gr.Dropdown([], value=None, label="Forget a fact", scale=3)
            d["forget_btn"] = gr.Button("Forget", size="sm", min_width=80, elem_id="react-forget")


def facts_html(m: Memory) -> str:
    if not m.facts:
        return '<div class="rm-facts" data-count="0">No facts kept in this tab yet.</div>'
    items = "".join(f'<li class="rm-fact">{esc(f)}</li>' for f in m.facts)
    return (f'<div class="rm-facts" data-count="{len(m.facts)}">Facts kept in this tab '
            f'({len(m.facts)} of {am.MAX_FACTS}):<ol>{items}</ol></div>')


def _facts(p, m: Memory, note: str = "", kind: str = "info") -> dict:
    labels = [f"{i + 1}. {f}" for i, f in enumerate(m.facts)]
    return {p.facts: m, p.facts_html: facts_html(m), p.msg: message(note, kind),
            p.forget_choice: gr.Dropdown(choices=labels, value=None)}


def on_pin(p, m, text) -> dict:
    """Pin a fact (bounded by agent.context.memory); it enters the context of the next run with Memory on."""
    m = m if isinstance(m, Memory) else Memory()
    try:
        kept = am.pin(m, text)
    except ToolError as e:
        return {p.msg: message(f"Not pinned: {e}.", "error")}
    return {**_facts(p, kept, f"Pinned. With Memory on, {APPLY}"), p.fact_text: ""}


def on_forget(p, m, choice) -> dict:
    m = m if isinstance(m, Memory) else Memory()
    labels = [f"{i + 1}. {f}" for i, f in enumerate(m.facts)]
    if choice not in labels:
        return {p.msg: message("Choose a fact of this tab under “Forget a fact”.", "error")}
    return _facts(p, am.forget(m, labels.index(choice)), f"Forgotten. {APPLY}")


def on_ran(p, s, m, absorbed) -> dict:
    """After Next or Run to end: a run that has just ended adds its `remember` calls, once."""
    final = s.states[-1]
    if not final.done or final is absorbed:
        return {p.facts_from: absorbed}  # unchanged; never {} (Gradio reads an empty dict as one value)
    m = m if isinstance(m, Memory) else Memory()
    kept = am.after_run(m, final.history)
    out = {p.facts_from: final}
    if kept != m:
        out.update(_facts(p, kept))
        del out[p.msg]  # the run's own message stays
    return out


def recorded_choices(p, c, recorded, window: int) -> tuple:
    """(Choices, {component: value}): a recorded task brings the settings its replies were
    written for — MAX_STEPS, budget, reply tokens and its context (the compaction run needs its
    800-token budget and Compact at 60 %)."""
    s = recorded.settings
    compact, at = rc.compact_percent(s)
    c = replace(c, max_steps=s.max_steps, budget=s.context_budget or window, reply_tokens=s.max_new_tokens,
                few_shot=s.few_shot, retrieve=s.retrieve, memory=s.memory, compact=compact, compact_at=at)
    return c, {getattr(p, k): getattr(c, k) for k in RECORDED}


RECORDED = ("max_steps", "budget", "reply_tokens", "few_shot", "retrieve", "memory", "compact", "compact_at")


def recorded_outputs(p) -> list:
    return [getattr(p, k) for k in RECORDED]


def wire(p, next_ev, run_ev) -> None:
    quiet = dict(show_progress="hidden")
    pin_outs = [p.facts, p.facts_html, p.msg, p.forget_choice, p.fact_text]
    p.pin_btn.click(partial(on_pin, p), [p.facts, p.fact_text], pin_outs, api_name="on_pin", **quiet)
    p.fact_text.submit(partial(on_pin, p), [p.facts, p.fact_text], pin_outs, api_name=False, **quiet)
    p.forget_btn.click(partial(on_forget, p), [p.facts, p.forget_choice], pin_outs[:4],
                       api_name="on_forget", **quiet)
    ran_outs = [p.facts, p.facts_from, p.facts_html, p.forget_choice]
    for ev in (next_ev, run_ev):
        ev.then(partial(on_ran, p), [p.sess, p.facts, p.facts_from], ran_outs, api_name=False, **quiet)
