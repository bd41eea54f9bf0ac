"""The ReAct loop tab (lecture Parts II–IV)."""

from __future__ import annotations

import gradio as gr


def build(lm) -> None:
    gr.Markdown("## The ReAct loop: Prompt-ToolLoop step by step")
