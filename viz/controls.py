"""The registry's controls (agent/controls.py) as Gradio components: bounds, step, label, default
and element id come from the `Control`; only the layout (scale, width, info) is given here.

What it does not know: what a control means, or where a tab places it.
"""

from __future__ import annotations

import gradio as gr

from agent.controls import Control


def slider(c: Control, value=None, *, high: float | None = None, label: str | None = None, **layout) -> gr.Slider:
    """A slider for `c`: its bounds (or `high` for a model-given bound), its step, its id."""
    top = c.high if high is None else high
    return gr.Slider(c.low, top, value=c.default if value is None else value, step=c.step,
                     label=label or c.label, elem_id=c.elem_id, **layout)


def number_box(c: Control, value=None, *, high: float | None = None, **layout) -> gr.Number:
    """A number box for `c` (whole numbers: precision 0)."""
    return gr.Number(c.default if value is None else value, precision=0 if c.integer else None,
                     minimum=c.low, maximum=c.high if high is None else high, label=c.label,
                     elem_id=c.elem_id, **layout)
