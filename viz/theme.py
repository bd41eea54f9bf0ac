"""The projector theme: large type, high contrast, readable from the back row."""

from __future__ import annotations

import gradio as gr

THEME = gr.themes.Default(
    primary_hue="blue",
    neutral_hue="slate",
    font=["ui-sans-serif", "system-ui", "sans-serif"],
    font_mono=["ui-monospace", "DejaVu Sans Mono", "monospace"],
).set(body_text_size="20px", block_label_text_size="18px", block_title_text_size="18px")

CSS = """
.rl-header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0.4em 1.5em; }
.rl-title { font-size: 2rem; font-weight: 700; }
.rl-subtitle { font-size: 1rem; font-weight: 400; margin-left: 0.8em; opacity: 0.75; }
.rl-facts { display: flex; flex-wrap: wrap; gap: 0.3em 1.1em; font-size: 0.95rem; }
.rl-facts .fact-key { opacity: 0.7; }
.rl-facts .fact-value { font-weight: 600; }
.mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
"""
