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
/* Lecture mode (the default): body text ≥ 22 px at 1920×1080. Desk mode: compact, the views too
   (their own sizes are px × --rl-scale, so the toggle shrinks every part, not only Gradio's). */
:root, .dark {
  --rl-scale: 1;
  --body-text-size: 22px; --text-md: 22px; --text-lg: 24px; --text-sm: 19px; --text-xs: 17px;
  --block-label-text-size: 20px; --block-title-text-size: 20px; --block-info-text-size: 18px;
  --input-text-size: 22px; --button-large-text-size: 22px; --button-small-text-size: 18px;
  --section-header-text-size: 22px; --prose-text-size: 22px;
}
body.rl-desk {
  --rl-scale: 0.75;
  --body-text-size: 15px; --text-md: 15px; --text-lg: 17px; --text-sm: 13px; --text-xs: 12px;
  --block-label-text-size: 14px; --block-title-text-size: 14px; --block-info-text-size: 13px;
  --input-text-size: 15px; --button-large-text-size: 16px; --button-small-text-size: 13px;
  --section-header-text-size: 15px; --prose-text-size: 15px; --checkbox-label-text-size: 15px;
}
body { font-size: var(--body-text-size); }
.ntc, .readout, .creadout, .continuation, .hist, .asking { font-size: var(--body-text-size); }
.rl-toolbar { margin-left: auto; display: flex; gap: 0.5em; }
.rl-toolbar button { font-size: var(--text-sm); padding: 0.2em 0.8em; border-radius: 6px; cursor: pointer;
  border: 1px solid var(--border-color-primary); background: var(--button-secondary-background-fill);
  color: var(--body-text-color); }
#rl-help { position: fixed; right: 2em; top: 5em; z-index: 1000; padding: 1em 1.5em; border-radius: 10px;
  background: var(--background-fill-primary); color: var(--body-text-color);
  border: 2px solid var(--color-accent); box-shadow: 0 8px 30px rgba(0,0,0,0.3); font-size: var(--text-md); }
#rl-help kbd { display: inline-block; min-width: 1.4em; text-align: center; padding: 0 0.3em; margin-right: 0.5em;
  border: 1px solid currentColor; border-radius: 4px; font-family: ui-monospace, monospace; }
#rl-help[hidden] { display: none; }
.gradio-container { max-width: 100% !important; }
.rl-header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0.4em 1.5em; position: relative;
  padding-right: 24em; }
.rl-toolbar { position: absolute; right: 0; top: 0.2em; }
#link-message:not(:has(.msg)) { display: none; }
.rl-title { font-size: 2rem; font-weight: 700; }
.rl-subtitle { font-size: 1rem; font-weight: 400; margin-left: 0.8em; opacity: 0.75; }
.rl-facts { display: flex; flex-wrap: wrap; gap: 0.3em 1.1em; font-size: 0.95rem; }
.rl-facts .fact-key { opacity: 0.7; }
.rl-facts .fact-value { font-weight: 600; }
/* Lecture mode: the header folded to one line (title, the facts that fit, the toolbar); desk mode
   shows every fact. ":not(.rl-desk *)" — outside desk mode — because Gradio prefixes each rule. */
.rl-header:not(.rl-desk *) { flex-wrap: nowrap; align-items: center; padding-right: 0; }
.rl-subtitle:not(.rl-desk *) { display: none; }
.rl-title:not(.rl-desk *) { font-size: 1.5rem; line-height: 1.2; white-space: nowrap; }
.rl-facts:not(.rl-desk *) { flex: 1 1 auto; min-width: 0; flex-wrap: wrap; overflow: hidden;
  white-space: nowrap; line-height: 1.6em; height: 1.6em; }  /* a fact that does not fit goes whole
   to the hidden second line, never cut mid-word ("llm-smollm") */
/* A dropdown's text ends before its arrow. */
.gradio-container .secondary-wrap input { padding-right: 1.8em; text-overflow: ellipsis; }
.rl-toolbar:not(.rl-desk *) { position: static; flex: none; }
.rl-toolbar:not(.rl-desk *) button { padding: 0 0.6em; }
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
.ntc-head .cell.bar-cell, .ntc-head .cell.cum { height: auto; background: none; line-height: 1.2; }
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
.cumcurve .ulabel, .cumcurve .tick { fill: currentColor; font-size: calc(14px * var(--rl-scale)); }
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
/* ReAct tab */
#react-message:not(:has(.msg)) { display: none; }
.rp { font-size: calc(16px * var(--rl-scale)); }
.rp-title { font-weight: 700; font-family: ui-monospace, "DejaVu Sans Mono", monospace;
  border-bottom: 2px solid currentColor; padding-bottom: 0.1em; margin-bottom: 0.15em; }
.rp-lines { list-style: none; margin: 0; padding: 0;
  font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
.rp-line { display: grid; grid-template-columns: 1.7em minmax(0, 1fr); column-gap: 0.4em;
  padding: 0.03em 0.4em; border-radius: 5px; border-left: 5px solid transparent;
  line-height: 1.25; }
.rp-code code { font-family: inherit; background: none; padding: 0; font-size: 1em;
  white-space: pre-wrap; }
.rp-no { opacity: 0.6; text-align: right; }
.rp-comment { float: right; opacity: 0.6; font-size: 0.82em; margin-left: 1em; font-weight: 400; }
.rp-line.ran { background: rgba(37, 99, 235, 0.10); border-left-color: #93c5fd; }
.rp-line.current { background: rgba(37, 99, 235, 0.24); border-left-color: #1d4ed8;
  font-weight: 700; }
.rp[data-running="1"] .rp-line.current { background: rgba(217, 119, 6, 0.25);
  border-left-color: #d97706; }
.rp-step { display: flex; align-items: center; gap: 0.8em; margin-top: 0.25em; font-weight: 700;
  font-size: 1.1em; }
.rp-dots { display: flex; gap: 4px; flex-wrap: wrap; }
.rp-dot { width: 0.7em; height: 0.7em; border-radius: 50%; border: 2px solid #2563eb; }
.rp-dot.on { background: #2563eb; }
.rp-note { opacity: 0.8; font-style: italic; }
.rs { padding: 0.3em 0.6em; border-radius: 6px; font-size: calc(18px * var(--rl-scale));
  border: 2px solid rgba(127, 127, 127, 0.35); }
.rs.done { border-color: #059669; background: rgba(5, 150, 105, 0.08); }
.rs.done:not([data-stop="final answer"]):not([data-stop="finish"]) { border-color: #b91c1c;
  background: rgba(220, 38, 38, 0.07); }
.rs-why { font-size: 0.8em; opacity: 0.8; }
.rs-answer { font-size: 1.2em; font-weight: 700; margin-top: 0.1em; }
.rs-answer:empty { display: none; }
.cat-system { --cat: #64748b; } .cat-tools { --cat: #7c3aed; }
.cat-exemplars { --cat: #a16207; } .cat-documents { --cat: #4d7c0f; } .cat-memory { --cat: #9333ea; }
.cat-user { --cat: #2563eb; } .cat-thought { --cat: #d97706; }
.cat-tool_call { --cat: #059669; } .cat-assistant_text { --cat: #0891b2; }
.cat-tool_result { --cat: #db2777; } .cat-summary { --cat: #0f766e; } .cat-template { --cat: #cbd5e1; }
[class*="cat-"] { background: var(--cat); fill: var(--cat); }
.cat-reserved { background: repeating-linear-gradient(45deg, #fbbf24 0 6px, #fde68a 6px 12px); }
.cat-free { background: rgba(127, 127, 127, 0.12); }
.rb { font-size: calc(16px * var(--rl-scale)); }
#react-budget { margin-top: -14px; }
.rb-head { margin-bottom: 0.2em; }
.rb-tok { font-weight: 600; }
.rb-bar { position: relative; display: flex; height: 1.6em; border-radius: 4px; overflow: hidden;
  border: 1px solid rgba(127, 127, 127, 0.6); }
.rb-bar.zoom { height: 1.1em; }
.rb-seg { display: block; height: 100%; min-width: 0; }
.rb-limit { position: absolute; top: -2px; bottom: -2px; border-left: 3px solid #b91c1c; }
.rb-sub { font-size: 0.85em; margin-top: 0.1em; }
.rb-legend { display: flex; flex-wrap: wrap; gap: 0 0.9em; margin-top: 0.2em; font-size: calc(14px * var(--rl-scale)); }
.rb-row { display: flex; gap: 0.3em; align-items: center; }
.rb-swatch { width: 1em; height: 1em; border-radius: 3px; }
.rb-n { font-variant-numeric: tabular-nums; font-weight: 600; }
.rb-over { color: #b91c1c; font-weight: 700; margin-top: 0.2em; }
.rb-usage { margin-top: 0.2em; font-size: 0.9em; }
.rb-compact { margin-top: 0.2em; font-size: 0.85em; }
.rp-compact { font-size: 0.85em; opacity: 0.85; border-left: 4px solid transparent; padding-left: 0.3em; }
.rp-compact.current { opacity: 1; font-weight: 700; background: rgba(5, 150, 105, 0.18); border-left-color: #059669; }
.rm-facts { font-size: 0.9em; }
.rh-wrap { font-size: calc(17px * var(--rl-scale)); }
.rh-scroll { display: flex; flex-direction: column-reverse; max-height: 47vh; overflow-y: auto;
  padding-right: 4px; }
.rh { display: grid; column-gap: 3px; row-gap: 6px; }
.rh-msg { border: 1px solid rgba(127, 127, 127, 0.4); border-left: 5px solid #94a3b8;
  border-radius: 6px; padding: 0.2em 0.5em; min-width: 0; overflow-wrap: anywhere; }
.rh-msg.rh-user { border-left-color: #2563eb; }
.rh-msg.rh-assistant { border-left-color: #059669; }
.rh-msg.rh-tool { border-left-color: #db2777; }
.rh-msg.rh-event { background: rgba(220, 38, 38, 0.08); border-color: #b91c1c; }
.rh-msg.kind-policy_refusal { background: rgba(217, 119, 6, 0.10); border-color: #d97706; }
.rh-msg.new { box-shadow: 0 0 0 2px #16a34a; }
.rh-head { font-weight: 700; font-size: 0.85em; display: flex; flex-wrap: wrap; gap: 0.4em;
  align-items: center; }
.rh-no { opacity: 0.5; font-weight: 400; }
.rh-new { background: #16a34a; color: white; border-radius: 4px; padding: 0 0.35em;
  font-size: 0.85em; }
.rh-kind { color: #b91c1c; font-weight: 700; }
.kind-policy_refusal .rh-kind { color: #b45309; }
.rh-body { white-space: pre-wrap; }
.rh-body.small { font-size: 0.8em; opacity: 0.85; }
.rh-thought { font-style: italic; color: #b45309; white-space: pre-wrap; }
.rh-call { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 0.9em;
  margin-top: 0.15em; }
.rh-id { display: inline-block; border-width: 2px; border-style: solid; border-color: var(--c);
  color: var(--c); border-radius: 4px; padding: 0 0.3em; font-weight: 700;
  font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
.rh-args { opacity: 0.85; }
.rh-pending { margin-left: 0.5em; font-family: var(--font); font-style: italic; color: #b45309; }
.rh-link { border-width: 3px 0 3px 3px; border-style: solid; border-color: var(--c);
  border-radius: 8px 0 0 8px; margin: 0.7em 0 0.7em 2px; }
.rh-link.pending, .rh-link.missing { border-style: dashed; border-bottom-width: 0;
  border-radius: 8px 0 0 0; }
.rh-link.missing { border-color: #b91c1c; }
.rh-violations { color: #b91c1c; border: 2px solid #b91c1c; border-radius: 6px;
  padding: 0.2em 0.5em; margin-bottom: 0.3em; }
.rh-violations ul { margin: 0; padding-left: 1.2em; }
.rh-flag { color: #b91c1c; font-weight: 700; }
.rh-legend, .rt-legend { font-size: 0.75em; opacity: 0.8; margin-top: 0.3em; }
.rt { font-size: calc(15px * var(--rl-scale)); }
.rt-head { font-size: calc(17px * var(--rl-scale)); margin-bottom: 0.2em; }
.rt-note { color: #b45309; font-weight: 600; margin-bottom: 0.2em; }
.rt-scroll { display: flex; flex-direction: column-reverse; max-height: 52vh; overflow-y: auto;
  border: 1px solid rgba(127, 127, 127, 0.4); border-radius: 6px; }
.rt-text { font-family: ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap;
  overflow-wrap: anywhere; margin: 0; padding: 0.4em; line-height: 1.45; font-size: calc(15px * var(--rl-scale)); }
.rt-text .c-system { background: rgba(100, 116, 139, 0.14); }
.rt-text .c-tools { background: rgba(124, 58, 237, 0.12); }
.rt-text .c-user { background: rgba(37, 99, 235, 0.16); }
.rt-text .c-thought { background: rgba(217, 119, 6, 0.18); }
.rt-text .c-tool_call { background: rgba(5, 150, 105, 0.18); }
.rt-text .c-assistant_text { background: rgba(8, 145, 178, 0.18); }
.rt-text .c-tool_result { background: rgba(219, 39, 119, 0.16); }
.rt .sp { color: #7c3aed; font-weight: 700; background: rgba(124, 58, 237, 0.12);
  border-radius: 3px; }
.rt .nw { text-decoration: underline; text-decoration-color: #16a34a;
  text-decoration-thickness: 3px; text-underline-offset: 3px; }
.rt .rt-reply { background: rgba(250, 204, 21, 0.35); outline: 2px dashed #ca8a04;
  border-radius: 3px; }
.rt-caret { animation: rt-blink 1s steps(1) infinite; }
@keyframes rt-blink { 50% { opacity: 0; } }
.rt-text .tb { box-shadow: inset 2px 0 0 rgba(15, 23, 42, 0.7); }
.rt-text .to { background-image: linear-gradient(rgba(15, 23, 42, 0.1), rgba(15, 23, 42, 0.1)); }
.rg { font-size: calc(16px * var(--rl-scale)); display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr);
  gap: 0.3em 1em; }
.rg.empty { display: block; opacity: 0.75; }
.rg-svg { width: 100%; max-height: 230px; }
.rg-bar { fill: #2563eb; }
.rg-line { fill: none; stroke: #d97706; stroke-width: 3; }
.rg-axis { stroke: currentColor; opacity: 0.6; }
.rg-tick { fill: currentColor; font-size: calc(13px * var(--rl-scale)); text-anchor: middle; }
.rg-tick.end { text-anchor: end; }
.rg-table { border-collapse: collapse; font-variant-numeric: tabular-nums; align-self: start; }
.rg-table td, .rg-table th { padding: 1px 10px; text-align: right; }
.rg-note { grid-column: 1 / -1; font-size: 0.85em; opacity: 0.85; }
.rg-key { margin-left: 0.6em; }
.rg-key.k-bar { color: #2563eb; }
.rg-key.k-line { color: #d97706; }
/* The growth chart with its category shares: the table under the chart, each share on one line,
   the rows scrolled past a dozen calls (the compaction task). */
.rg.split { grid-template-columns: minmax(0, 1fr); }
.rg-rows { max-height: 13em; overflow-y: auto; align-self: start; }
.rg.split .rg-table td:nth-child(4) { text-align: left; }
.rg.split .rg-table td:nth-child(4) span { white-space: nowrap; }
/* Approve / Deny beside the pending call's text, buttons of a button's height. */
#react-approval { align-items: center; }
#react-approval > :first-child { flex: 1 1 auto !important; --prose-text-size: 17px; --body-text-size: 17px;
  font-size: calc(17px * var(--rl-scale)); }
#react-approval > button { flex: 0 0 8em !important; min-height: 0; height: auto; }
/* A laptop or projector 1280–1500 px wide: the three ReAct views side by side (pseudo-code, history,
   template), narrower than their 1920 widths, so the template view starts on the first screen. */
@media (min-width: 1000px) and (max-width: 1500px) {
  #react-views > .column { min-width: 0 !important; }
}
/* Lecture mode on a short projector (1280×720): Next, an approval that waits (or the tour, once
   opened), then the pseudo-code, the history, the run controls (compact) and the template view on
   the first screen; the scrub slider and a closed tour below them. */
@media (max-height: 820px) {
  #react-controls:not(.rl-desk *) {
    --block-label-text-size: 16px; --block-title-text-size: 16px; --input-text-size: 17px;
    --block-padding: 4px 8px; --checkbox-label-text-size: 16px; --text-md: 17px;
    --checkbox-label-padding: 2px 4px; --layout-gap: 6px; }
  #react-buttons:not(.rl-desk *) { order: -4; }
  #react-approval:not(.rl-desk *) { order: -3; }
  #react-message:not(.rl-desk *) { order: -2; }
  #react-views:not(.rl-desk *) { order: -1; }
  /* an open tour comes up above the views it talks about: its stop and the views share the screen */
  #react-tour-box:not(.rl-desk *):has(.label-wrap.open) { order: -3; }
  #react-buttons:not(.rl-desk *) button { min-height: 0; padding: 0.2em 0.4em; white-space: nowrap; }
  /* a tour stop, compact above the view it talks about */
  #sampling-tour:not(.rl-desk *) *, #spec-tour:not(.rl-desk *) * { font-size: 15px !important;
    line-height: 1.35 !important; }
  #sampling-tour:not(.rl-desk *) p, #spec-tour:not(.rl-desk *) p { margin: 0.1em 0 !important; }
  #sampling-tour:not(.rl-desk *) blockquote, #spec-tour:not(.rl-desk *) blockquote { margin: 0.15em 0 !important;
    padding: 0.05em 0.6em !important; }
  .rl-tour-hint:not(.rl-desk *) * { font-size: 14px !important; line-height: 1.3 !important; }
  /* the Speculative prompt (a five-line list) in a compact font: the rounds stay on the first screen */
  #spec-prompt:not(.rl-desk *) textarea { font-size: 15px; line-height: 1.3; }
  .rp:not(.rl-desk *) { font-size: 15px; }
  .rt:not(.rl-desk *), .rt-text:not(.rl-desk *) { font-size: 14px; }
  .rt-scroll:not(.rl-desk *) { max-height: 44vh; }
  .rh-scroll:not(.rl-desk *) { max-height: 40vh; }
}
/* In-context learning vs post-training (viz/react/post_training.py) */
.pt-comparison { display: flex; flex-wrap: wrap; gap: 1.2em; align-items: flex-start; }
.pt-ours { flex: 3 1 640px; } .pt-theirs { flex: 1 1 300px; }
.pt-table, .pt-song { border-collapse: collapse; margin: 0.3em 0 0.8em; font-size: var(--text-md); }
.pt-table th, .pt-table td, .pt-song th, .pt-song td { border-bottom: 1px solid var(--border-color-primary);
  padding: 0.15em 0.6em; text-align: right; }
.pt-table th:first-child, .pt-table td:first-child, .pt-song td:first-child { text-align: left; }
.pt-meta, .pt-note, .pt-n { font-size: var(--text-sm); opacity: 0.85; }
.pt-effect { font-weight: 600; }
.pt-caveat { border-left: 4px solid var(--color-accent); padding: 0.3em 0.8em; margin: 0.6em 0;
  background: var(--background-fill-secondary); }
.pt-run-text { font-family: var(--font-mono); font-size: var(--text-sm); }
.pt-legend { font-size: var(--text-sm); margin: 0.2em 0; }
/* end ReAct tab */
/* Lecture mode on a short projector (1280×720): the sliders and the chart's first ten bars on the
   first screen — the prompt row in one line, compact buttons, the colour legend folded away. */
@media (max-height: 820px) {
  #sampling-prompt-row:not(.rl-desk *) .wrap { flex-wrap: nowrap; }
  #sampling-prompt-row:not(.rl-desk *) .wrap label { white-space: nowrap; padding: 0.1em 0.3em;
    font-size: var(--text-sm); }
  #sampling-message:not(.rl-desk *):not(:has(.msg)) { display: none; }
  #sampling-prompt-row:not(.rl-desk *) label { padding-top: 0.15em; padding-bottom: 0.15em; }
  #run-prompt:not(.rl-desk *), #sampling-buttons:not(.rl-desk *) button { min-height: 0; padding: 0.2em 0.4em; }
  #continuation:not(.rl-desk *) .legend { display: none; }
  #continuation:not(.rl-desk *) .continuation { padding: 0.2em 0.5em; line-height: 1.5; }
  #next-token-chart:not(.rl-desk *) .ntc-row { padding-top: 0; padding-bottom: 0; }
  #continuation:not(.rl-desk *) .continuation { display: flex; flex-direction: column-reverse;
    max-height: 4.8em; overflow-y: auto; }  /* a chat template's seven lines: the newest three */
  #sampling-message:not(.rl-desk *) .msg { padding: 0 0.4em; font-size: var(--text-sm); }
}
#spec-message:not(:has(.msg)) { display: none; }
/* Lecture mode on a short projector (1280×720), Speculative tab: the introduction, the controls
   (compact) and the first result on the first screen. */
@media (max-height: 820px) {
  #spec-intro:not(.rl-desk *) { font-size: 16px; }
  #spec-prompt-row:not(.rl-desk *), #spec-settings-row:not(.rl-desk *), #spec-buttons-row:not(.rl-desk *) {
    --block-label-text-size: 16px; --input-text-size: 17px; --block-padding: 4px 8px; --text-md: 17px;
    --layout-gap: 8px; }
  #spec-buttons-row:not(.rl-desk *) button { min-height: 0; padding: 0.2em 0.4em; }
  #spec-intro:not(.rl-desk *) { margin-bottom: 0; }
}
"""


# Runs once on page load (launch(js=...)): keyboard shortcuts, the help overlay, lecture/desk and
# light/dark switches. Buttons are found by their visible label inside their tab, the same
# interface a person and the browser tests use.
JS = """
() => {
  const SHORTCUTS = {
    'tab-sampling': {s: 'Sample', g: 'Greedy', b: 'Back'},
    'tab-react': {n: 'Next', b: 'Back', r: 'Run to end'},
  };
  const HELP = [['s', 'Sampling: sample a token'], ['g', 'Sampling: greedy token'], ['b', 'Back (either tab)'],
    ['←/→', 'move the focused slider'], ['n', 'ReAct loop: next phase'], ['r', 'ReAct loop: run to end'],
    ['?', 'show or hide this list'], ['Esc', 'close this list']];
  const help = document.createElement('div');
  help.id = 'rl-help'; help.hidden = true; help.setAttribute('role', 'dialog');
  help.setAttribute('aria-label', 'Keyboard shortcuts');
  help.innerHTML = '<b>Keyboard shortcuts</b>' + HELP.map(([k, t]) => `<div><kbd>${k}</kbd>${t}</div>`).join('');
  document.body.appendChild(help);
  const visibleTab = () => Object.keys(SHORTCUTS).find((id) => {
    const el = document.getElementById(id); return el && el.offsetParent !== null; });
  const press = (tabId, label) => {
    const tab = document.getElementById(tabId);
    const button = tab && [...tab.querySelectorAll('button')].find((b) => b.textContent.trim() === label);
    if (button && !button.disabled) { button.click(); return true; }
    return false;
  };
  document.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target, tag = (t.tagName || '').toLowerCase();
    const typing = tag === 'textarea' || t.isContentEditable || tag === 'select' ||
      (tag === 'input' && !['range', 'radio', 'checkbox', 'button'].includes(t.type));
    if (typing) return;
    if (e.key === '?') { help.hidden = !help.hidden; e.preventDefault(); return; }
    if (e.key === 'Escape') { help.hidden = true; return; }
    const tab = visibleTab();
    const label = tab && SHORTCUTS[tab][e.key];
    if (label && press(tab, label)) e.preventDefault();
  });
  document.addEventListener('click', (e) => {
    const id = e.target.closest && e.target.closest('button') && e.target.closest('button').id;
    if (id === 'rl-mode-toggle') {
      const desk = document.body.classList.toggle('rl-desk');
      e.target.textContent = desk ? 'Lecture mode' : 'Desk mode';
    } else if (id === 'rl-dark-toggle') {
      const dark = document.body.classList.toggle('dark');
      document.querySelector('gradio-app')?.classList.toggle('dark', dark);
      e.target.textContent = dark ? 'Light' : 'Dark';
    } else if (id === 'rl-help-toggle') {
      help.hidden = !help.hidden;
    }
  });
}
"""
