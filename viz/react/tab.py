"""The ReAct loop tab (lecture Parts II–IV): Prompt-ToolLoop stepped one phase at a time.

Layout and listeners only. Read it in this order:
  Parts     every component of the tab, by name (the controls, the buttons, the six views);
  layout    builds them: the run controls, the buttons, the tour, the views, the settings;
  wire      connects each event to one function of viz/react/handlers.py (behaviour), which
            returns {component: value}; the run itself (checks, start, fork, stepping, the views'
            HTML) is viz/react/run.py, the views are viz/react/views.py.
A Session in gr.State (with a time to live) holds the loop States recorded so far and the index
shown: Back and the scrub slider move the index; Next moves it forward or, at the newest state,
runs one phase (a real model's reply streams into the template view token by token); Fork from
here continues the shown state with other settings. Every control is checked on the server.

Adding a run control (one that Reset and Fork read — e.g. few-shot exemplars, a memory switch):
  1. a number: its Control in agent/controls.py REACT (bounds, step, default, label);
  2. a field in react_run.Choices (name, default) and its check in react_run.checked;
  3. the component, under the same name, in Parts and in one of the layout functions below
     (viz/controls.slider(REACT[name]) for a number).
Reset, Fork, the Task dropdown and the tour then receive it (inputs follow Choices' fields).
Adding a control with its own event (a panel, a button): a field in Parts, the component in a
layout function, one handler in react_handlers taking (p, lm, …values) and returning
{component: value}, and one line in `wire`.

What it does not know: how the loop, a backend, the template or the budget work inside.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import partial

import gradio as gr

from agent.controls import REACT
from agent.llm import remote
from viz.controls import number_box, slider
from viz.react import context as ctx
from viz.react import handlers as h
from viz.react import post_training, run
from viz.react import tools_tab as tt
from viz.react.handlers import LINK_CHOICES  # noqa: F401 (app.py reads it here)
from viz.react.run import BACKENDS, FORMATS, MODES, TASKS, Choices

SESSION_TTL_S = 2 * 3600  # a tab's run is forgotten this long after its last update


@dataclass
class Parts:
    """Every component of the ReAct tab. The run controls carry the names of react_run.Choices."""

    sess: gr.State
    pending: gr.State  # True once a run-defining control changed since the run started (handlers.on_choice)
    task: gr.Dropdown
    task_text: gr.Textbox
    backend: gr.Dropdown
    weights: gr.Dropdown
    mode: gr.Dropdown
    fmt: gr.Dropdown
    constrained: gr.Checkbox
    server_row: gr.Row
    server: gr.Dropdown
    model_name: gr.Dropdown
    url: gr.Textbox
    next_btn: gr.Button
    run_btn: gr.Button
    back_btn: gr.Button
    reset_btn: gr.Button
    fork_btn: gr.Button
    stop_btn: gr.Button
    scrub: gr.Slider
    show_tokens: gr.Checkbox
    link_btn: gr.Button
    link_box: gr.Textbox
    tour_md: gr.Markdown
    tour_prev: gr.Button
    tour_next: gr.Button
    tour_at: gr.State
    msg: gr.HTML
    pseudo: gr.HTML
    history: gr.HTML
    template: gr.HTML
    budget_html: gr.HTML
    growth_html: gr.HTML
    stop: gr.HTML
    max_steps: gr.Slider
    budget: gr.Number
    reply_tokens: gr.Slider
    temperature: gr.Slider
    top_p: gr.Slider
    seed: gr.Number
    png_btn: gr.Button
    json_btn: gr.Button
    upload: gr.UploadButton
    download: gr.File
    few_shot: gr.Radio  # the Context panel: viz/react/context.py
    retrieve: gr.Checkbox
    memory: gr.Checkbox
    compact: gr.Checkbox
    compact_at: gr.Slider
    facts: gr.State
    facts_from: gr.State
    fact_text: gr.Textbox
    pin_btn: gr.Button
    facts_html: gr.HTML
    forget_choice: gr.Dropdown
    forget_btn: gr.Button
    tools_from: gr.Dropdown  # the tool panels: viz/react/tools_tab.py
    tool_set: gr.Dropdown
    defence: gr.Checkbox
    mcp_tools: gr.HTML
    mcp_wire: gr.HTML
    resources_btn: gr.Button
    mcp_city: gr.Textbox
    prompt_btn: gr.Button
    mcp_lists: gr.HTML
    compare_btn: gr.Button
    compare_html: gr.HTML
    approval_row: gr.Row
    approval_html: gr.HTML
    approve_btn: gr.Button
    deny_btn: gr.Button

    @property
    def views(self) -> list:
        """The six views and the message, in the order of react_run.HtmlViews' fields (+ message)."""
        return [self.pseudo, self.history, self.template, self.budget_html, self.growth_html,
                self.stop, self.msg]

    @property
    def stepped(self) -> list:
        """What every stepping event updates: the session, the views, the scrub slider."""
        return [self.sess, self.pending, *self.views, self.scrub, *self.tool_views]

    @property
    def tool_views(self) -> list:
        """The tool panels every stepping event may update (viz/react/tool_panels.tool_views)."""
        return [self.mcp_tools, self.mcp_wire, self.approval_row, self.approval_html]

    @property
    def choices(self) -> list:
        """The run controls, in the order of react_run.Choices' fields."""
        return [getattr(self, f.name) for f in fields(Choices)]


# --- layout --------------------------------------------------------------------------------------

def _run_controls(d: dict, c: Choices, weights_choices: tuple[str, ...]) -> None:
    """Task, Backend, Mode, … stacked above the template view (a projector's first screen keeps them
    beside the views they change)."""
    with gr.Column(elem_id="react-controls"):
        d["task"] = gr.Dropdown(list(TASKS), value=c.task, label="Task")
        d["task_text"] = gr.Textbox(label="Your task", max_length=run.MAX_TASK_CHARS, visible=False)
        with gr.Row(equal_height=True):
            d["backend"] = gr.Dropdown(list(BACKENDS), value=c.backend, label="Backend", min_width=150)
            d["weights"] = gr.Dropdown(list(weights_choices), value=c.weights, label="Local weights",
                                       elem_id="react-weights", min_width=150)
        with gr.Row(equal_height=True):
            d["mode"] = gr.Dropdown(list(MODES), value=c.mode, label="Mode", min_width=110, scale=2)
            d["fmt"] = gr.Dropdown(list(FORMATS), value=c.fmt, label="Output format", min_width=150, scale=3)
        d["constrained"] = gr.Checkbox(c.constrained, label="Constrained tool calls")
    with gr.Row(visible=False, elem_id="react-server-row") as d["server_row"]:
        labels = run.server_labels()
        d["server"] = gr.Dropdown(labels, value=labels[0] if labels else None, label="Server",
                                  info=None if labels else "none allowed: see docs/DEPLOY.md (--remote)")
        d["model_name"] = gr.Dropdown([], value="", label="Server model", allow_custom_value=True)
        d["url"] = gr.Textbox(label="Server URL", placeholder="http://127.0.0.1:11434/v1",
                              max_length=500, visible=remote.free_url_allowed())


def _buttons(d: dict) -> None:
    with gr.Row(equal_height=True, elem_id="react-buttons"):
        d["next_btn"] = gr.Button("Next", variant="primary", elem_id="react-next", min_width=100)
        d["run_btn"] = gr.Button("Run to end", elem_id="react-run", min_width=150)
        d["back_btn"] = gr.Button("Back", elem_id="react-back", min_width=100)
        d["reset_btn"] = gr.Button("Reset", elem_id="react-reset", min_width=100)
        d["fork_btn"] = gr.Button("Fork from here", elem_id="react-fork", min_width=190)
        d["stop_btn"] = gr.Button("Stop", variant="stop", elem_id="react-stop-run", min_width=90)
    with gr.Row(equal_height=True, elem_id="react-scrub-row"):
        d["scrub"] = gr.Slider(0, 1, value=0, step=1, label="Recorded state 0 of 0", scale=4,
                               min_width=300, elem_id="react-scrub", buttons=[])
        with gr.Column(scale=0, min_width=260):  # its own column: not squeezed into the slider's form box
            d["show_tokens"] = gr.Checkbox(False, label="Token boundaries", elem_id="react-show-tokens")
        d["link_btn"] = gr.Button("Link to this view", size="sm", min_width=150, elem_id="react-link-btn")
        d["link_box"] = gr.Textbox(label="Link", interactive=False, buttons=["copy"],
                                   elem_id="react-link", min_width=200, scale=3)


def _tour(d: dict) -> None:
    with gr.Accordion("Guided tour: CoT vs ReAct → a tool call → a validation error → the budget",
                      open=False, elem_id="react-tour-box"):
        with gr.Row(equal_height=False):
            d["tour_md"] = gr.Markdown("Press **Next stop** to begin.", elem_id="react-tour")
            with gr.Column(scale=0, min_width=220):
                d["tour_prev"] = gr.Button("◀ Previous stop", size="sm")
                d["tour_next"] = gr.Button("Next stop ▶", size="sm", variant="primary")
    d["tour_at"] = gr.State(-1)


def _views(d: dict, html: run.HtmlViews, c: Choices, weights_choices: tuple[str, ...]) -> None:
    d["msg"] = gr.HTML("", elem_id="react-message", js_on_load=None)
    with gr.Row(equal_height=False, elem_id="react-views"):
        with gr.Column(scale=11, min_width=560):
            d["pseudo"] = gr.HTML(html.pseudo, elem_id="react-pseudocode", js_on_load=KEYS_JS)
            d["budget_html"] = gr.HTML(html.budget, elem_id="react-budget", js_on_load=None)
        with gr.Column(scale=8, min_width=420):
            d["history"] = gr.HTML(html.history, elem_id="react-history", js_on_load=None)
            d["stop"] = gr.HTML(html.stop, elem_id="react-stop", js_on_load=None)
        with gr.Column(scale=9, min_width=480):
            _run_controls(d, c, weights_choices)
            d["template"] = gr.HTML(html.template, elem_id="react-template", js_on_load=None)


def _settings(d: dict, c: Choices, growth: str) -> None:
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            d["growth_html"] = gr.HTML(growth, elem_id="react-growth", js_on_load=None)
        with gr.Column(scale=2):
            with gr.Accordion("Settings: MAX_STEPS, context budget, reply tokens, sampling",
                              open=False):
                with gr.Row():
                    d["max_steps"] = slider(REACT["max_steps"], c.max_steps)
                    d["budget"] = number_box(REACT["budget"], c.budget, high=run.REMOTE_WINDOW)
                    d["reply_tokens"] = slider(REACT["reply_tokens"], c.reply_tokens)
                with gr.Row():
                    d["temperature"] = slider(REACT["temperature"], c.temperature)
                    d["top_p"] = slider(REACT["top_p"], c.top_p)
                    d["seed"] = number_box(REACT["seed"], c.seed)
            ctx.layout(d, c)
            _files(d)


def _files(d: dict) -> None:
    with gr.Row():
        d["png_btn"] = gr.Button("Growth chart as PNG", elem_id="react-png")
        d["json_btn"] = gr.Button("Export run (JSON)", elem_id="react-export")
        d["upload"] = gr.UploadButton("Load a run (JSON)", file_types=[".json"], elem_id="react-load")
    d["download"] = gr.File(label="Download", interactive=False, elem_id="react-download", visible=False)


def layout(lm, first: run.Session) -> Parts:
    """Every component of the tab, laid out, showing the session `first`."""
    c = run.default_choices(lm)
    html = run.html_views(first, lm, False)
    d: dict = {"sess": gr.State(first, time_to_live=SESSION_TTL_S, delete_callback=tt.ended),
               "pending": gr.State(None, time_to_live=SESSION_TTL_S)}
    _buttons(d)
    tt.approval(d)
    _tour(d)
    _views(d, html, c, lm.weights_choices)
    _settings(d, c, html.growth)
    tt.controls(d, c)
    post_training.build(lm)  # read once at start: no listener
    return Parts(**d)


# --- listeners -----------------------------------------------------------------------------------

def _wire_stepping(p: Parts, lm) -> None:
    quiet = dict(show_progress="hidden")
    shown = [p.sess, p.show_tokens]
    stepping = [*shown, p.pending, *p.choices]  # pending is a gr.State: an API call never sets it
    next_ev = p.next_btn.click(partial(h.on_next, p, lm), stepping, p.stepped, api_name="on_next", **quiet)
    run_ev = p.run_btn.click(partial(h.on_run, p, lm), stepping, p.stepped, api_name="on_run", **quiet)
    p.stop_btn.click(None, None, None, cancels=[next_ev, run_ev]).then(
        partial(h.stopped, p, lm), shown, p.stepped, api_name="stopped", **quiet)
    ctx.wire(p, next_ev, run_ev)
    p.back_btn.click(partial(h.on_back, p, lm), shown, p.stepped, api_name="on_back", **quiet)
    # preprocess=False: on_scrub checks the value itself (Gradio's bound check would answer a typed
    # state past the newest with an error badge instead of showing the newest state).
    p.scrub.input(partial(h.on_scrub, p, lm), [p.sess, p.scrub, p.show_tokens], p.stepped,
                  trigger_mode="always_last", api_name="on_scrub", preprocess=False, **quiet)
    p.show_tokens.change(partial(h.views, p, lm), shown, p.stepped, api_name="views", **quiet)


def _wire_controls(p: Parts, lm) -> None:
    quiet = dict(show_progress="hidden")
    inputs = [p.sess, p.show_tokens, *p.choices]
    p.reset_btn.click(partial(h.on_reset, p, lm), inputs, [*p.stepped, p.mode, p.fmt],
                      api_name="on_reset", **quiet)
    p.fork_btn.click(partial(h.on_fork, p, lm), inputs, p.stepped, api_name="on_fork", **quiet)
    p.task.input(partial(h.on_task, p, lm), inputs, [p.task_text, p.mode, p.fmt, *p.stepped,
                                                     *ctx.recorded_outputs(p), p.tools_from, p.defence, p.backend],
                 api_name="on_task", **quiet)
    p.backend.input(partial(h.on_backend, p), [p.backend, p.server, p.url], [p.server_row, p.model_name, p.msg],
                    api_name=False, **quiet)
    for event, api_name in ((p.server.input, "on_server"), (p.url.submit, False)):
        event(partial(h.on_server, p), [p.server, p.url], [p.model_name, p.msg], api_name=api_name, **quiet)
    for c in (p.task_text, p.backend, p.weights, p.mode, p.fmt, p.constrained):  # what a run is
        c.input(partial(h.on_choice, p), None, [p.pending, p.msg], api_name=False,
                trigger_mode="always_last", **quiet)
    for c in (p.temperature, p.top_p, p.seed, p.max_steps, p.budget, p.reply_tokens, p.few_shot, p.retrieve,
              p.memory, p.compact, p.compact_at):
        c.input(partial(h.settings_hint, p), None, p.msg, api_name=False, **quiet)
    tour_outs = [p.tour_md, p.tour_at, p.task, p.backend, p.task_text, p.mode, p.fmt, *p.stepped,
                 *ctx.recorded_outputs(p), p.tools_from, p.defence]  # the outputs of on_task
    for button, delta in ((p.tour_next, 1), (p.tour_prev, -1)):
        button.click(partial(h.on_tour, p, lm, delta), [p.tour_at, *inputs], tour_outs, api_name=False)


def _wire_files(p: Parts, lm) -> None:
    p.png_btn.click(partial(h.on_png, p), p.sess, [p.sess, p.download, p.msg], api_name="on_png")
    p.json_btn.click(partial(h.on_export, p), p.sess, [p.sess, p.download, p.msg], api_name="on_export")
    p.upload.upload(partial(h.on_load, p, lm), [p.upload, p.sess, p.show_tokens],
                    [*p.stepped, p.task, p.backend, p.mode, p.fmt], api_name="on_load")
    p.link_btn.click(h.react_link, [p.task, p.backend, p.mode, p.temperature, p.top_p, p.seed,
                                    p.max_steps, p.scrub], p.link_box, api_name="react_link").then(
        None, p.link_box, p.link_box,
        js="(q) => q.startsWith('?') ? location.origin + location.pathname + q : q").then(
        h.link_note, [p.backend, p.scrub], p.msg, api_name=False)


def build(lm):
    """Lay out the ReAct loop tab for a loaded model and wire its listeners.

    Returns (outputs, restore): the components a deep link sets (?tab=react&task=…&backend=…&react_mode=…)
    and the function computing their values from a parsed link (app.py calls it on page load).
    """
    first = run.start(run.checked(lm, run.default_choices(lm)))
    p = layout(lm, first)
    _wire_stepping(p, lm)
    _wire_controls(p, lm)
    _wire_files(p, lm)
    tt.wire(p, lm)
    outputs = [p.task, p.backend, p.temperature, p.top_p, p.seed, p.max_steps, *p.stepped, p.mode, p.fmt]

    def restore(values: dict) -> list:
        update = h.restore(p, lm, first, values)
        return [update.get(c, gr.skip()) for c in outputs]

    return outputs, restore


KEYS_JS = """
if (!window.__reactKeys) {
  window.__reactKeys = true;
  document.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && t.closest && t.closest('input, textarea, select, [contenteditable="true"]')) return;
    const view = document.getElementById('react-pseudocode');
    if (!view || view.offsetParent === null) return;
    const id = e.key === 'PageDown' ? 'react-next' : e.key === 'PageUp' ? 'react-back' : null;
    const button = id && document.getElementById(id);
    if (button) { e.preventDefault(); button.click(); }
  });
}
"""
