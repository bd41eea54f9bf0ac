"""The one registry of the page's numeric controls: per control its stable name, label, bounds,
step, default and element id, and the one check a value sent for it goes through.

Built from it: the sliders and number boxes of the three tabs (viz/controls.py turns a `Control`
into a Gradio component), the deep-link checks (viz/deeplink.py reads `LINKED`), the server's
checks of every press and API call (`Control.check` → agent.parameters.number), and the page's
JavaScript (viz/sampling/tab.py passes `page_controls()` in: ids and defaults are never typed
twice). A link keys on `key` (the stable name), never on the label, so a label may change.

    >>> SAMPLING["top_k"].check("50")
    50
    >>> SAMPLING["n_draws"].check(2.5)
    Traceback (most recent call last):
    ...
    ValueError: N draws must be a whole number from 1 to 10000, got 2.5
    >>> REACT["max_steps"].check(21)
    Traceback (most recent call last):
    ...
    ValueError: MAX_STEPS must lie in 1 … 20, got 21

What it does not know: Gradio, what a value does once checked, or which tab lays it out where.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.enforcing import MAX_RUNS
from agent.llm.speculative import MAX_GAMMA
from agent.parameters import SEED_MAX, number
from agent.settings import COMPACT_RANGE, MAX_FEW_SHOT, Settings


@dataclass(frozen=True)
class Control:
    """One numeric control. `high` None: the bound depends on the model (given to `check`)."""

    name: str  # stable: the field of the tab's controls (Controls, Choices)
    label: str  # what the page shows; may change without breaking a link
    low: float
    high: float | None
    step: float
    default: float | None
    elem_id: str | None = None
    integer: bool = False
    key: str = ""  # the deep-link query key (stable, unique across tabs); "" = not linkable
    noun: str = ""  # how a message names it ("" = the label)

    def check(self, value: object, *, high: float | None = None, name: str = "",
              strings: bool = True) -> float | int:
        """The value as a number inside the bounds (an int for a whole-number control), else
        ValueError naming the control: 2.5 for a whole number is refused, never rounded."""
        top = self.high if high is None else high
        return number(value, name or self.noun or self.label, self.low, top, integer=self.integer,
                      strings=strings)


RUN = Settings()  # the ReAct tab's run defaults: MAX_STEPS, reply tokens, temperature, top-p, seed
MAX_N_DRAWS = 10_000
MAX_BARS = 100
MAX_LINKED_STATE = 200  # a link's step: a scripted replay's recorded states (MAX_STEPS 20 × a few phases)
MAX_SPEC_TOKENS = 64  # the Speculative tab's "Tokens to run"


def _seed(elem_id: str | None = None, key: str = "", noun: str = "") -> Control:
    return Control("seed", "Seed", 0, SEED_MAX, 1, 0, elem_id, integer=True, key=key, noun=noun)


def _by_name(*controls: Control) -> dict[str, Control]:
    return {c.name: c for c in controls}


SAMPLING = _by_name(
    Control("temperature", "Temperature", 0, 3, 0.05, 1.0, "sampling-temperature", key="temperature"),
    Control("top_k", "Top-k", 0, 200, 1, 0, "sampling-top-k", integer=True, key="top_k", noun="top_k"),
    Control("top_p", "Top-p", 0.05, 1, 0.01, 1.0, "sampling-top-p", key="top_p"),
    Control("min_p", "Min-p", 0, 1, 0.01, 0.0, "sampling-min-p", key="min_p"),
    Control("n_bars", "Bars shown", 5, MAX_BARS, 1, 20, "sampling-bars", integer=True),
    _seed("sampling-seed", key="seed", noun="The seed"),
    Control("n_draws", "N draws", 1, MAX_N_DRAWS, 1, 100, "sampling-n-draws", integer=True),
    Control("n_runs", "N runs", 1, MAX_RUNS, 1, 10, "sampling-n-runs", integer=True),
)
REACT = _by_name(
    Control("max_steps", "MAX_STEPS", 1, 20, 1, RUN.max_steps, integer=True, key="max_steps"),
    Control("budget", "Context budget (tokens)", 256, None, 1, None, integer=True,
            noun="Context budget"),  # high: the model's window
    Control("reply_tokens", "Reply tokens (reserved)", 8, 1024, 8, RUN.max_new_tokens, integer=True,
            noun="Reply tokens"),
    Control("temperature", "Temperature", 0, 2, 0.05, RUN.temperature, key="react_temperature"),
    Control("top_p", "Top-p", 0.05, 1, 0.01, RUN.top_p, key="react_top_p"),
    _seed(key="react_seed"),
    Control("few_shot", "Few-shot exemplars", 0, MAX_FEW_SHOT, 1, RUN.few_shot, integer=True),
    Control("scrub", "Recorded state", 0, MAX_LINKED_STATE, 1, 0, integer=True, key="step",
            noun="step"),  # a link restores a scripted replay at this state (the scrub slider's value)
    Control("compact_at", "Compact at (% of the budget)", round(100 * COMPACT_RANGE[0]),
            round(100 * COMPACT_RANGE[1]), 5, 80, noun="Compact at (%)"),
)
SPECULATIVE = _by_name(
    Control("layers", "Early-exit layers L", 1, None, 1, 24, integer=True, noun="L"),  # high: layers - 1
    Control("gamma", "γ (drafted tokens per round)", 1, MAX_GAMMA, 1, 4, integer=True, noun="γ"),
    Control("temperature", "Temperature", 0, 2, 0.05, 0.0),
    Control("top_k", "Top-k", 0, 100, 1, 0, integer=True),
    Control("top_p", "Top-p", 0.05, 1, 0.01, 1.0),
    _seed(),
    Control("tokens", "Tokens to run", 1, MAX_SPEC_TOKENS, 1, 32, integer=True, noun="Tokens"),
)
# Every control a deep link may set, by its query key.
LINKED = {c.key: c for tab in (SAMPLING, REACT, SPECULATIVE) for c in tab.values() if c.key}


def page_controls() -> dict:
    """What the Sampling tab's JavaScript reads, by name: each slider's element id and default."""
    return {c.name: {"id": c.elem_id, "default": c.default}
            for c in SAMPLING.values() if c.name in ("temperature", "top_k", "top_p", "min_p", "n_bars")}
