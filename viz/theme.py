"""The projector theme: large type, high contrast, readable from the back row."""

from __future__ import annotations

import gradio as gr

THEME = gr.themes.Default(
    primary_hue="blue",
    neutral_hue="slate",
    font=[gr.themes.Font(f) for f in ("ui-sans-serif", "system-ui", "DejaVu Sans", "sans-serif")],
    font_mono=[gr.themes.Font(f) for f in ("ui-monospace", "DejaVu Sans Mono", "monospace")],
).set(body_text_size="20px", block_label_text_size="18px", block_title_text_size="18px")

CSS = """
.gradio-container { max-width: 100% !important; }
.rl-header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0.4em 1.5em; }
.rl-title { font-size: 2rem; font-weight: 700; }
.rl-subtitle { font-size: 1rem; font-weight: 400; margin-left: 0.8em; opacity: 0.75; }
.rl-facts { display: flex; flex-wrap: wrap; gap: 0.3em 1.1em; font-size: 0.95rem; }
.rl-facts .fact-key { opacity: 0.7; }
.rl-facts .fact-value { font-weight: 600; }
.rl-offscreen { position: absolute !important; left: -10000px !important; width: 1px !important;
  height: 1px !important; overflow: hidden !important; }
.mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
.explain { font-size: 0.85em; opacity: 0.85; margin-top: -0.4em; }

/* next-token chart */
.ntc { display: grid; gap: 2px; font-size: 1rem; }
.ntc-row { display: grid; grid-template-columns: 3.2em minmax(7em, 1.2fr) 2fr 2fr 1.5fr 7.5em;
  align-items: center; gap: 0.5em; padding: 1px 4px; border-radius: 4px; }
.ntc.masked .ntc-row { grid-template-columns: 3.2em minmax(7em, 1.2fr) 1.6fr 1.6fr 1.6fr 1.3fr 7.5em; }
.ntc-head { font-weight: 600; font-size: 0.85em; opacity: 0.8; }
.ntc-row.tok-row { cursor: pointer; }
.ntc-row.tok-row:hover, .ntc-row.tok-row:focus { background: rgba(37, 99, 235, 0.12); outline: none; }
.ntc-row.chosen { box-shadow: inset 0 0 0 2px #d97706; }
.ntc-row .rank { text-align: right; opacity: 0.7; font-variant-numeric: tabular-nums; }
.ntc-row .tok { white-space: pre; overflow: hidden; text-overflow: ellipsis; font-weight: 600; }
.ntc-row .tok.special { color: #7c3aed; }
.ntc-row.removed .tok, .ntc-row.removed .bar-cell.final .bar-num { opacity: 0.45; }
.ntc-row.removed .bar.final { background: #9ca3af; }
.ntc-row.forbidden .tok { text-decoration: line-through; text-decoration-thickness: 2px; color: #b91c1c; }
.vs { display: inline-block; position: relative; width: 0.62em; height: 1em; font-size: inherit;
  color: transparent; overflow: hidden; vertical-align: -0.1em; }
.vs::after { content: ""; position: absolute; left: 0.08em; right: 0.08em; bottom: 0.12em; height: 0.3em;
  border: 2px solid #64748b; border-top: none; }
.ntc-row.other .tok { white-space: normal; }
.ntc-row.other { font-style: italic; border-top: 1px solid rgba(127,127,127,0.4); }
.cell.bar-cell { position: relative; height: 1.5em; background: rgba(127,127,127,0.08); border-radius: 3px; }
.bar { position: absolute; left: 0; top: 0; bottom: 0; border-radius: 3px; }
.bar.model { background: #94a3b8; }
.bar.masked { background: #f59e0b; }
.bar.final { background: #2563eb; }
.bar.empirical { background: #059669; }
.bar-num { position: relative; padding-left: 0.4em; font-variant-numeric: tabular-nums; font-size: 0.9em;
  line-height: 1.5em; font-weight: 600; text-shadow: 0 0 3px rgba(255,255,255,0.9); }
.dark .bar-num { text-shadow: 0 0 3px rgba(0,0,0,0.9); }
.cell.cum { position: relative; height: 1.5em; }
.cumbar { position: absolute; left: 0; top: 30%; bottom: 30%; background: #a5b4fc; }
.pline { position: absolute; left: var(--p); top: -2px; bottom: -2px; border-left: 2px dashed #dc2626; }
.ntc-row .stage { font-size: 0.85em; }
.ntc-foot { font-size: 0.8em; opacity: 0.7; margin-top: 0.3em; }

/* readouts */
.readout table { border-collapse: collapse; font-size: 0.95rem; }
.readout td, .readout th { padding: 2px 10px; text-align: left; }
.readout td.num { text-align: right; font-variant-numeric: tabular-nums; }
.readout .facts { display: flex; gap: 1.5em; margin: 0.4em 0; }
.readout .draw { margin: 0.3em 0; }
.readout .note, .msg.info { color: #1d4ed8; }
.msg { padding: 0.3em 0.6em; border-radius: 4px; font-weight: 600; }
.msg.error { color: #b91c1c; background: rgba(220, 38, 38, 0.08); }
.cumcurve { width: 100%; max-width: 460px; }
.cumcurve .axis { stroke: currentColor; stroke-width: 1; opacity: 0.6; }
.cumcurve .curve { fill: none; stroke: #2563eb; stroke-width: 2.5; }
.cumcurve .uline { stroke: #d97706; stroke-width: 2; stroke-dasharray: 6 4; }
.cumcurve .ulabel, .cumcurve .tick { fill: currentColor; font-size: 14px; }
.cumcurve .umark { fill: #d97706; }
.creadout { display: grid; gap: 0.25em; font-size: 0.95rem; }
.creadout .ctitle { font-size: 1.05em; }

/* continuation */
.continuation { font-family: ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap;
  font-size: 1.1rem; line-height: 1.7; padding: 0.5em; border: 1px solid rgba(127,127,127,0.3); border-radius: 6px; }
.cprompt { opacity: 0.55; }
.ctok { background: rgba(37, 99, 235, var(--a)); color: inherit; border-radius: 3px; padding: 0 1px;
  margin-right: 1px; }
.caret { opacity: 0.6; }
.cend { color: #7c3aed; font-style: italic; }
.legend { font-size: 0.8em; opacity: 0.75; margin-top: 0.2em; }

/* Asking vs enforcing */
.avcols { display: grid; grid-template-columns: 1fr 1fr; gap: 1.5em; }
.avcol h4 { margin: 0.2em 0; }
.avcount { font-size: 1.05em; margin-bottom: 0.3em; }
.avcol ol { margin: 0; padding-left: 1.6em; font-size: 0.85em; }
.avcol li { margin: 0.2em 0; word-break: break-all; }
.avcol li.ok .mark { color: #059669; font-weight: 700; margin-right: 0.4em; }
.avcol li.bad .mark { color: #b91c1c; font-weight: 700; margin-right: 0.4em; }
.avcol .why { opacity: 0.7; font-size: 0.9em; }
.avstatus { opacity: 0.75; font-size: 0.9em; }

/* Sample ×N histogram */
.hist { display: grid; gap: 2px; }
.hrow { display: grid; grid-template-columns: minmax(7em, 1fr) 2fr 2fr 5em; gap: 0.5em; align-items: center; }
.hhead { font-weight: 600; font-size: 0.85em; opacity: 0.8; }
.hist .num { text-align: right; font-variant-numeric: tabular-nums; }
"""
