"""Deep links: the current tab, prompt and settings as a URL query a teacher pastes into slides.

    ?tab=sampling&prompt=The+capital+of+France+is&temperature=0.7&top_k=50&top_p=0.9&seed=3
    ?tab=react&task=berlin-weather&backend=Scripted+replay&react_mode=ReAct&max_steps=8

Pure functions, no Gradio: ``parse`` turns query parameters into checked values (anything unknown,
out of range or malformed is dropped and named in ``problems``, never raised), ``query`` writes
them back. The same seed gives the same draws, so a link restores the same view. A number's key,
bounds and check are its control's in the registry (agent/controls.py `LINKED`); keys are stable
names, never display labels, so a label may change without breaking a link already pasted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from agent.controls import LINKED

TABS = ("sampling", "react")
MAX_PROMPT_CHARS = 2_000  # a link stays a link; longer prompts are typed, not linked
Choices = dict[str, dict[str, str]]  # a field → {stable name: the label its control shows}

@dataclass(frozen=True)
class Link:
    values: dict = field(default_factory=dict)  # name → checked value
    problems: tuple[str, ...] = ()


def _number(key: str, raw: str):
    """(value, None) or (None, the problem) for one numeric parameter: its control's check, the
    message naming the key the link wrote."""
    try:
        return LINKED[key].check(raw, name=key), None
    except ValueError as e:
        return None, str(e)


def named(labels, names=None) -> dict[str, str]:
    """{stable name: label} for a field's options; without `names` a label is its own name.

    >>> named(("Raw text", "Chat message"), ("raw", "chat"))
    {'raw': 'Raw text', 'chat': 'Chat message'}
    """
    labels = tuple(labels)
    return dict(zip(labels if names is None else tuple(names), labels, strict=True))


def _choice(raw: str, options) -> str | None:
    """The label a link's value names: a stable name, or (a link written before the names) the
    label itself; None when it names neither. Options without names: a tuple of labels."""
    options = options if isinstance(options, dict) else named(options)
    if raw in options:
        return options[raw]
    return raw if raw in options.values() else None


def parse(params: dict[str, str], choices: Choices) -> Link:
    """Checked values from query parameters; ``choices`` gives the options of each text field with
    fixed options (mode, constraint, task, backend, …) as {stable name: label}: a link may name
    either, and the value is the label the control shows. Free text: prompt, task_text.

    >>> parse({"task": "berlin-weather"}, {"task": {"berlin-weather": "Berlin (the trace)"}}).values
    {'task': 'Berlin (the trace)'}
    """
    values, problems = {}, []
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
        elif name in LINKED:
            value, problem = _number(name, raw)
            if problem:
                problems.append(problem)
            else:
                values[name] = value
        elif name in choices:
            if (label := _choice(raw, choices[name])) is not None:
                values[name] = label
            else:
                problems.append(f"{name}={raw!r} is not one of the choices")
        elif not name.startswith("__"):  # Gradio's own (__theme) pass through silently
            problems.append(f"unknown parameter {name!r}")
    return Link(values, tuple(problems))


def query(values: dict, choices: Choices | None = None) -> str:
    """'?tab=sampling&temperature=0.7…' for a dict of values (None left out); a label of `choices`
    is written as its stable name, so the link outlives a renamed label."""
    names = {field: {label: name for name, label in options.items()} for field, options in (choices or {}).items()}

    def written(k, v):
        return f"{v:g}" if isinstance(v, float) else names.get(k, {}).get(v, v)

    return "?" + urlencode({k: written(k, v) for k, v in values.items() if v is not None})
