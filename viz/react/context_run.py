"""What fills the context, on the ReAct tab's run side (no page): the Context controls' values
checked into Settings, a recording's context kept, and the compaction marks of the views.

    settings, memory = checked_context(settings, choices)   # ValueError: a sentence to act on
    settings = recorded_context(settings, recorded.settings)
    pseudocode(state)        compaction_line(states, index, tools, tokenizer, window)

What it knows: the bounds of the Context controls (few-shot exemplars 0–3, Compact at 50–95 %
of the budget, off by default), that the session's facts are injected only with Memory on, and
where compaction runs in the pseudo-code (agent.loop.LINE_COMPACT, PSEUDO_CODE_NOTES).
What it does not know: Gradio, or how exemplars, retrieval, memory or compaction work inside.

>>> from agent.settings import Settings
>>> recorded_context(Settings(max_steps=12), Settings(compact_at=0.6, few_shot=1)).compact_at
0.6
"""

from __future__ import annotations

from dataclasses import replace

from agent.budget import breakdown
from agent.context.memory import Memory
from agent.controls import REACT
from agent.loop import LINE_COMPACT, PSEUDO_CODE_NOTES, State, budget_of, build_prompt
from agent.settings import Settings
from agent.tools import Tool
from viz.react import views as rv
from viz.render import esc

FEW_SHOT_CHOICES = tuple(range(REACT["few_shot"].low, REACT["few_shot"].high + 1))
CONTEXT_FIELDS = ("few_shot", "retrieve", "retrieve_k", "memory", "compact_at")


def checked_context(settings: Settings, c) -> tuple[Settings, Memory]:
    """The Context controls of Choices `c` added to `settings`, every value bounded; and the
    memory the run re-sends (the session's facts with Memory on, none with it off).

    >>> from viz.react.run import Choices
    >>> checked_context(Settings(), Choices(compact=True, compact_at=70))[0].compact_at
    0.7
    >>> checked_context(Settings(), Choices(few_shot=7))
    Traceback (most recent call last):
    ValueError: Few-shot exemplars must lie in 0 … 3, got 7
    """
    few = REACT["few_shot"].check(c.few_shot)
    for value, name in ((c.retrieve, "Retrieved documents"), (c.memory, "Memory"), (c.compact, "Compact")):
        if not isinstance(value, bool):
            raise ValueError(f"{name} is on or off (true/false), got {value!r}")
    at = REACT["compact_at"].check(c.compact_at) / 100 if c.compact else None
    settings = replace(settings, few_shot=few, retrieve=c.retrieve, memory=c.memory,
                       compact_at=round(at, 4) if at is not None else None)
    settings.check()
    facts = c.facts if isinstance(c.facts, Memory) else Memory()
    return settings, facts if c.memory else Memory()


def recorded_context(settings: Settings, recorded: Settings) -> Settings:
    """`settings` with the recording's context (exemplars, documents, memory, Compact at): its
    replies were written for that context; a bad value raises ValueError (Settings.check)."""
    kept = replace(settings, **{f: getattr(recorded, f) for f in CONTEXT_FIELDS})
    kept.check()
    return kept


def compact_percent(recorded: Settings) -> tuple[bool, int]:
    """(Compact on?, its slider value) of a recording's settings.

    >>> compact_percent(Settings(compact_at=0.6)), compact_percent(Settings())
    ((True, 60), (False, 80))
    """
    at = recorded.compact_at
    return (at is not None, round(100 * at) if at is not None else REACT["compact_at"].default)


def compacted_here(state: State) -> bool:
    return state.lines == (LINE_COMPACT,)


def pseudocode(state: State, *, running: bool = False) -> str:
    """The lecture's nine lines (react_views), with a line under them saying where compaction runs
    once it is on; it is highlighted when the phase just shown was a compaction."""
    if state.settings.compact_at is None and not state.compactions:
        return rv.pseudocode_view(state, running=running)
    now = compacted_here(state) and not running
    at = f"{100 * state.settings.compact_at:.0f} %" if state.settings.compact_at is not None else "off"
    mark = (f'<div class="rp-compact{" current" if now else ""}" data-compact="{int(now)}" '
            f'data-compactions="{state.compactions}">⤷ line {LINE_COMPACT}, '
            f'{esc(PSEUDO_CODE_NOTES[LINE_COMPACT])} · Compact at {at} · '
            f'{state.compactions} compaction(s) so far</div>')
    return rv.pseudocode_view(state, running=running, under_lines=mark)


def compaction_line(states: tuple[State, ...], index: int, tools: tuple[Tool, ...], tokenizer,
                    window: int | None) -> str:
    """Under the budget bar, from the last compaction up to the shown state: the prompt before it
    → after it (the same counts as the bar)."""
    j = next((k for k in range(index, 0, -1) if compacted_here(states[k])), None)
    if j is None:
        return ""

    def tokens(state: State) -> int:
        s = state.settings
        return breakdown(build_prompt(state, tools), tokenizer, budget_of(s.context_budget, window),
                         s.max_new_tokens).prompt_tokens

    before, after = tokens(states[j - 1]), tokens(states[j])
    where = "this phase" if j == index else f"state {j}"
    return (f'<div class="rb-compact" data-before="{before}" data-after="{after}">Compaction '
            f'({where}): the prompt <b>{before:,}</b> → <b>{after:,}</b> tokens — older turns '
            'replaced by one summary message</div>')
