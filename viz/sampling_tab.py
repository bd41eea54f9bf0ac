"""The Sampling tab (lecture Part I)."""

from __future__ import annotations

import gradio as gr


def build(lm) -> None:
    gr.Markdown("## Sampling: from logits to a token")
