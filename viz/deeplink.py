"""Deep links: the current tab, prompt and settings as a URL query a teacher pastes into slides.

    ?tab=sampling&prompt=The+capital+of+France+is&temperature=0.7&top_k=50&top_p=0.9&seed=3
    ?tab=react&task=berlin&backend=scripted&mode=react

Pure functions, no Gradio: ``parse`` turns query parameters into checked values (anything unknown,
out of range or malformed is dropped and named in ``problems``, never raised), ``query`` writes
them back. The same seed gives the same draws, so a link restores the same view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from agent.parameters import SEED_MAX, number

TABS = ("sampling", "react")
MAX_PROMPT_CHARS = 2_000  # a link stays a link; longer prompts are typed, not linked


@dataclass(frozen=True)
class Number:
    low: float
    high: float
    integer: bool = False


SAMPLING_NUMBERS = {
    "temperature": Number(0, 3),
    "top_k": Number(0, 200, integer=True),
    "top_p": Number(0.05, 1),
    "min_p": Number(0, 1),
    "seed": Number(0, SEED_MAX, integer=True),
}
REACT_NUMBERS = {
    "react_temperature": Number(0, 2),
    "react_top_p": Number(0.05, 1),
    "react_seed": Number(0, SEED_MAX, integer=True),
    "max_steps": Number(1, 20, integer=True),
}


@dataclass(frozen=True)
class Link:
    values: dict = field(default_factory=dict)  # name → checked value
    problems: tuple[str, ...] = ()


def _number(name: str, raw: str, spec: Number):
    """(value, None) or (None, the problem) for one numeric parameter."""
    try:
        return number(raw, name, spec.low, spec.high, integer=spec.integer), None
    except ValueError as e:
        return None, str(e)


def parse(params: dict[str, str], choices: dict[str, tuple[str, ...]]) -> Link:
    """Checked values from query parameters; ``choices`` lists the allowed values of each text field
    with fixed options (mode, constraint, task, backend, …). Free text: prompt, task_text."""
    values, problems = {}, []
    numbers = SAMPLING_NUMBERS | REACT_NUMBERS
    for name, raw in params.items():
        raw = str(raw)
        if name == "tab":
            if raw in TABS:
                values["tab"] = raw
            else:
                problems.append(f"tab={raw!r} is not one of {', '.join(TABS)}")
        elif name in ("prompt", "task_text"):
            if len(raw) > MAX_PROMPT_CHARS:
                problems.append(f"{name} is longer than {MAX_PROMPT_CHARS:,} characters")
            else:
                values[name] = raw.replace("\x00", "")
        elif name in numbers:
            value, problem = _number(name, raw, numbers[name])
            if problem:
                problems.append(problem)
            else:
                values[name] = value
        elif name in choices:
            if raw in choices[name]:
                values[name] = raw
            else:
                problems.append(f"{name}={raw!r} is not one of the choices")
        elif not name.startswith("__"):  # Gradio's own (__theme) pass through silently
            problems.append(f"unknown parameter {name!r}")
    return Link(values, tuple(problems))


def query(values: dict) -> str:
    """'?tab=sampling&temperature=0.7…' for a dict of values (None left out)."""
    clean = {k: (f"{v:g}" if isinstance(v, float) else v) for k, v in values.items() if v is not None}
    return "?" + urlencode(clean)
