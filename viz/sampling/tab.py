"""The Sampling tab (lecture Part I): a real model's next-token distribution under temperature,
top-k, top-p, min-p and a grammar's mask, and token-by-token generation.

Three named parts a newcomer finds by name:

- `layout(lm, first)` places the components and returns them as one `Controls` structure;
- the handlers (`on_run`, `on_step`, `on_pick`, …) are module-level functions that take the
  controls' values by name and return `{component: value}`; they call agent/ for every number;
- `wire(lm, ui)` connects events to handlers.

The sampling math of a slider move runs in the page: when a position's logits are ready the server
sends them once (viz/position.py), and viz/js/sampling.js recomputes the trace in the lecture's
order while viz/js/sampling_view.js draws the chart, the readout, the curve and the constraint
readout. Temperature, Top-k, Top-p, Min-p, Bars shown and Axis have no server listener: a slider
move sends no request. The server still runs agent.sampling for its own draws (Sample, a clicked
token's probability, Sample ×N, asking vs enforcing).

On an inference engine (app.py --engine) `lm` is an agent.llm.engine.EngineModel: the positions
hold the K tokens the server sent, `chart_value` adds its note, and Asking vs enforcing runs on
the local model (`lm.local`).
"""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path

import gradio as gr

from agent import enforcing, sampling, topn
from agent.constraints import PRESETS, ConstraintViolation, Grammar, GrammarError
from agent.controls import SAMPLING, page_controls
from agent.llm import continuation as cont
from viz import charts, deeplink, position, render, tour
from viz.controls import number_box, slider

EXAMPLES = {
    "A fact: The capital of France is": ("The capital of France is", False),
    "A story start": ("Once upon a time, in a village at the edge of the forest,", False),
    "The start of a JSON object": ('{"name": "Ada Lovelace", "born":', False),
    "Greedy repetition (T = 0 loops)": ("I like cats. I like dogs. I like cats. I like dogs. I like", False),
    "A chat question": ("What's the weather in Berlin?", True),
    "A tool-call request (try Constraint: JSON tool call)": ("Call get_weather with city Berlin.", True),
}
DEFAULT_EXAMPLE = "A fact: The capital of France is"
EXAMPLE_NAMES = dict(zip(("capital-of-france", "story-start", "json-object", "greedy-repetition", "chat-question",
                          "tool-call-request"), EXAMPLES, strict=True))  # stable name → label (the tour)
DEFAULT_ASKING = "JSON tool call"
PROMPT_MODES = ("Raw text", "Chat message")
NO_CONSTRAINT = "None"
CUSTOM = "Custom…"
CONSTRAINT_CHOICES = [NO_CONSTRAINT, *PRESETS, CUSTOM]
KIND_LABELS = {"choice": "Choice list", "regex": "Regular expression", "json_schema": "JSON Schema", "lark": "Lark CFG"}
MAX_GRAMMAR_CHARS = 20_000
MAX_OWN_CHARS = 20_000
SESSION_TTL_S = 2 * 60 * 60  # a session's state is dropped two hours after its last change
# A link's text fields by stable name (?mode=chat); links with the labels still open.
LINK_CHOICES = {"mode": deeplink.named(PROMPT_MODES, ("raw", "chat")),
                "constraint": deeplink.named((NO_CONSTRAINT, *PRESETS))}
LATEX = [{"left": "$$", "right": "$$", "display": True}, {"left": "$", "right": "$", "display": False}]
JS_DIR = Path(__file__).resolve().parents[1] / "js"
SETTINGS = ("temperature", "top_k", "top_p", "min_p")
AXES = ("Linear", "Log")
AXIS_ID = "sampling-axis"
# What the page's JavaScript reads (viz/js/sampling_view.js readControls): the sliders' ids and
# defaults from the registry, and the Axis radio; passed in as the chart's `controls` prop.
PAGE_CONTROLS = {**page_controls(), "axis": {"id": AXIS_ID, "default": AXES[0]}}
# What a position change returns, by name (the API leaves out the State): tests read by these names.
POSITION_OUTPUTS = ("state", "chart", "msg", "continuation", "prompt_string")

# Sampling by use case (lecture, "Sampling Parameters by Use Case"): (label, settings, reason).
USE_CASES = (
    ("A tool call or a test", {"temperature": 0, "top_k": 0, "top_p": 1.0, "min_p": 0.0},
     "one valid output: T = 0 is greedy and reproducible, so runs are comparable"),
    ("An answer", {"temperature": 0.7, "top_k": 0, "top_p": 0.9, "min_p": 0.0},
     "a few acceptable outputs: top-p stays at 0.9 and only T is adjusted, one parameter at a time"),
    ("Variety", {"temperature": 1.0, "top_k": 0, "top_p": 0.95, "min_p": 0.0},
     "the goal is variety: T ≈ 1 keeps the model's own P, top-p 0.95 removes only the tail"),
)

EXPLAIN = {
    "temperature": r"$P_T(i)=e^{z_i/T}\,/\,\sum_j e^{z_j/T}$ · $T\to0$: all mass on $\arg\max_i z_i$ "
    r"(**0 = greedy**: no softmax, no draw) · $T=1$: the model's own $P$ · $T\to\infty$: uniform.",
    "top_k": r"Keeps the $k$ most probable tokens, sets the rest to 0, renormalises. **0 = off.** "
    "Ties at place $k$: the lower token id stays, so exactly $k$ survive.",
    "top_p": r"Keeps the smallest set whose cumulative probability is $\ge p$ (the nucleus), "
    r"including the token that crosses $p$, and renormalises. **1 = off.**",
    "min_p": r"Removes every token with $P_i < \text{min-p}\cdot\max_j P_j$. **0 = off.** "
    "Order: mask → temperature → top-k → top-p → min-p → renormalise → draw.",
    "constraint": r"$P'(i)=\dfrac{\mathbb 1[i\in A(s_t)]\,P(i)}{\sum_{j\in A(s_t)}P(j)}$ — "
    "a prompt changes probabilities; a mask removes tokens.",
}


@dataclass
class Controls:
    """Every component of the Sampling tab, by name."""

    state: gr.State
    own_state: gr.State
    tour_at: gr.State
    prompt: gr.Textbox
    prompt_string: gr.Code
    mode: gr.Radio
    example: gr.Dropdown
    weights: gr.Dropdown
    run: gr.Button
    tour_md: gr.Markdown
    tour_prev: gr.Button
    tour_next: gr.Button
    temperature: gr.Slider
    top_k: gr.Slider
    top_p: gr.Slider
    min_p: gr.Slider
    constraint: gr.Dropdown
    custom_box: gr.Accordion
    kind: gr.Radio
    source: gr.Code
    apply: gr.Button
    n_bars: gr.Slider
    axis: gr.Radio
    seed: gr.Number
    link_btn: gr.Button
    link_box: gr.Textbox
    msg: gr.HTML
    continuation: gr.HTML
    sample_btn: gr.Button
    greedy_btn: gr.Button
    back_btn: gr.Button
    reroll_btn: gr.Button
    chart: gr.HTML
    n_draws: gr.Number
    many_btn: gr.Button
    hist: gr.HTML
    n_runs: gr.Number
    ask_btn: gr.Button
    stop_btn: gr.Button
    asking: gr.HTML
    own_text: gr.Textbox
    own_kind: gr.Radio
    own_btn: gr.Button
    own_chart: gr.HTML
    pick: gr.Textbox

    def __getitem__(self, names: str) -> list:
        """ui["state temperature top_k"]: the components named, in that order."""
        return [getattr(self, n) for n in names.split()]


# ---- values the server checks (every one can arrive through the API) ---------------------------

def _settings(temperature, top_k, top_p, min_p) -> sampling.SamplingConfig:
    """Controls → a SamplingConfig, each value through its registry check (agent/controls.py), so
    a value sent through the API meets the slider's bounds; ValueError names the control."""
    values = dict(zip(SETTINGS, (temperature, top_k, top_p, min_p), strict=True))
    return sampling.SamplingConfig(**{name: SAMPLING[name].check(v) for name, v in values.items()})


def _seed(value) -> int:
    return SAMPLING["seed"].check(value)


# ---- what the server sends ----------------------------------------------------------------------

def continuation_html(lm, c: cont.Continuation) -> str:
    pieces = [lm.piece(i) if i not in lm.special_ids else lm.token_strings[i] for i in c.ids]
    return charts.continuation_view(c.prompt_text, pieces, c.chosen_probs, finished=c.finished)


def chart_value(lm, c: cont.Continuation) -> dict:
    """The position for the page; on an engine (agent.llm.engine.EngineModel) with its note."""
    view = getattr(lm, "engine_view", None)
    return position.position(c, lm.vocab_size, view(c.all_ids, c.logits) if view is not None else None)


def shown(lm, ui: Controls, c: cont.Continuation, note: str = "", prompt: bool = True) -> dict:
    """Every view of a new position: the state, the position for the page, the continuation, and
    the exact prompt string unless ``prompt`` is False (a press on the same prompt: the page
    already shows it, and a pasted prompt may be 100,000 characters)."""
    out = {ui.state: c, ui.chart: chart_value(lm, c), ui.msg: render.message(note, "info"),
           ui.continuation: continuation_html(lm, c)}
    return {**out, ui.prompt_string: c.prompt_text} if prompt else out


def failed(ui: Controls, exc) -> dict:
    """An error leaves every view and the session as they were, with a message."""
    return {ui.msg: render.message(str(exc), "error")}


# ---- handlers: module-level, named values in, {component: value} out ---------------------------

def on_run(lm, ui, prompt, mode, state, seed):
    try:
        new = cont.start(lm, prompt, mode == PROMPT_MODES[1], _seed(seed), state.grammar, weights=state.weights)
    except (cont.PromptError, GrammarError, ConstraintViolation, ValueError) as exc:
        return failed(ui, exc)
    note = (
        f"The prompt was longer than this tab's limit of {len(new.prompt_ids):,} tokens (the model's window is "
        f"{lm.context_window:,}): {new.truncated:,} tokens were cut from the left." if new.truncated else ""
    )
    return shown(lm, ui, new, note)


def on_example(lm, ui, example, state, seed):
    if example not in EXAMPLES:
        return failed(ui, ValueError(f"Unknown example {example!r}"))
    text, chat = EXAMPLES[example]
    out = on_run(lm, ui, text, PROMPT_MODES[int(chat)], state, seed)
    return out if ui.state not in out else {ui.prompt: text, ui.mode: PROMPT_MODES[int(chat)], **out}


def on_step(lm, ui, action, state, temperature, top_k, top_p, min_p):
    """Sample (draw with u under the settings), Greedy, Back, or a new draw u. The settings are
    checked for every action: the listener skips Gradio's own input processing (issue 25)."""
    try:
        settings = _settings(temperature, top_k, top_p, min_p)
        if action == "sample":
            t = sampling.trace(state.logits, settings, mask=state.mask, u=state.u)
            new = cont.append(lm, state, t.token, t.token_prob, consume_u=not t.greedy)
        elif action == "greedy":  # trace's T = 0 token and probability, without the whole trace
            token, prob = sampling.greedy(state.logits, state.mask)
            new = cont.append(lm, state, token, prob, consume_u=False)
        elif action == "back":
            new = cont.back(lm, state)
        else:
            new = cont.reroll(state)
    except (cont.PromptError, ValueError) as exc:
        return failed(ui, exc)
    return shown(lm, ui, new, prompt=False)


def on_pick(lm, ui, pick, state, temperature, top_k, top_p, min_p):
    """A clicked token row ("id:click") is appended with the final probability it has now."""
    if not pick:
        return {}
    try:
        token = int(str(pick).split(":")[0])
        if not 0 <= token < lm.vocab_size:
            raise ValueError(f"Token id {token} is outside the vocabulary.")
        t = sampling.trace(state.logits, _settings(temperature, top_k, top_p, min_p), mask=state.mask, u=state.u)
        new = cont.append(lm, state, token, float(t.probs[token]), consume_u=False)
    except (cont.PromptError, ValueError) as exc:
        return failed(ui, exc)
    return shown(lm, ui, new, prompt=False)


def on_seed(lm, ui, seed, state):
    try:
        new = cont.start(lm, state.prompt, state.chat, _seed(seed), state.grammar, weights=state.weights)
    except (cont.PromptError, ValueError) as exc:
        return failed(ui, exc)
    return shown(lm, ui, new, f"Seed {new.seed}: the continuation starts again with the same draws.")


def on_weights(lm, ui, weights, state):
    """The same prompt on other weights: how trajectory tuning moved the distribution (e.g. after
    <tool_call>). The continuation starts again; the sliders stay."""
    try:
        new = cont.start(lm, state.prompt, state.chat, state.seed, state.grammar, weights=weights)
    except (cont.PromptError, GrammarError, ConstraintViolation, ValueError) as exc:
        return failed(ui, exc)
    return shown(lm, ui, new, f"Weights: {new.weights}. The prompt starts again on them.")


def _with_grammar(lm, ui, grammar, state):
    try:
        new = cont.with_grammar(lm, state, grammar)
    except (GrammarError, ConstraintViolation, ValueError) as exc:
        return failed(ui, f"{exc} — the previous grammar stays.")
    return shown(lm, ui, new, "" if grammar is None else f"Constraint on: {grammar.name or grammar.kind}.")


def on_constraint(lm, ui, constraint, state):
    if constraint == CUSTOM:
        return {ui.custom_box: gr.Accordion(open=True),
                ui.msg: render.message("Write a grammar below and press Apply grammar.", "info")}
    if constraint == NO_CONSTRAINT:
        return _with_grammar(lm, ui, None, state)
    if constraint not in PRESETS:
        return failed(ui, ValueError(f"Unknown constraint {constraint!r}"))
    return _with_grammar(lm, ui, PRESETS[constraint], state)


def on_apply(lm, ui, kind, source, state):
    kinds = {v: k for k, v in KIND_LABELS.items()}
    if kind not in kinds:
        return failed(ui, ValueError(f"Unknown grammar kind {kind!r}"))
    if not isinstance(source, str) or len(source) > MAX_GRAMMAR_CHARS:
        return failed(ui, ValueError(f"A grammar is text of at most {MAX_GRAMMAR_CHARS:,} characters."))
    return _with_grammar(lm, ui, Grammar(kinds[kind], source, "Custom"), state)


def on_many(lm, ui, n_draws, state, temperature, top_k, top_p, min_p, n_bars):
    try:
        n = SAMPLING["n_draws"].check(n_draws)
        rows = SAMPLING["n_bars"].check(n_bars)
        t = sampling.trace(state.logits, _settings(temperature, top_k, top_p, min_p), mask=state.mask, u=state.u)
        h = topn.histogram(t, cont.sample_many(state, t.probs, n), rows=rows)
    except ValueError as exc:
        return failed(ui, exc)
    return {ui.hist: charts.histogram_view(h, lm.token_strings), ui.msg: ""}


def on_own(lm, ui, own_text, own_kind, state):
    """Typed numbers become a position of their own, drawn by the same page code as the model's."""
    try:
        if not isinstance(own_text, str) or len(own_text) > MAX_OWN_CHARS:
            raise ValueError(f"type at most {MAX_OWN_CHARS:,} characters of numbers")
        logits = sampling.parse_numbers(own_text, "probs" if own_kind == "Probabilities" else "logits")
    except ValueError as exc:
        return failed(ui, f"Your own numbers: {exc}")
    return {ui.own_state: logits, ui.own_chart: position.own_numbers(logits, state.u), ui.msg: ""}


def on_asking(lm, ui, n_runs, state, temperature, top_k, top_p, min_p):
    try:
        n = SAMPLING["n_runs"].check(n_runs)
        config = _settings(temperature, top_k, top_p, min_p)
        grammar = state.grammar or PRESETS[DEFAULT_ASKING]
        json_kind = grammar.kind == "json_schema"
        comp = None
        local = getattr(lm, "local", lm)  # N whole generations: the local model, never an engine
        for comp in enforcing.compare(local, state.prompt, grammar, config, state.seed, n=n):
            yield {ui.asking: charts.comparison_view(comp, json_kind=json_kind, running=True), ui.msg: ""}
        yield {ui.asking: charts.comparison_view(comp, json_kind=json_kind, running=False),
               ui.msg: render.message(comp.note) if comp.note else ""}
    except (TypeError, ValueError, OverflowError, GrammarError) as exc:
        yield failed(ui, exc)


def on_tour(lm, ui, delta, tour_at, state, prompt, mode, temperature, top_k, top_p, min_p):
    """Go to the next or previous stop: its settings (accumulated from the first stop) and text."""
    i = max(0, min(len(tour.SAMPLING_TOUR) - 1, int(tour_at) + delta))
    settings = {}
    for stop in tour.SAMPLING_TOUR[: i + 1]:
        settings.update(stop.settings)
    if "example" in settings:
        prompt, chat = EXAMPLES[EXAMPLE_NAMES[settings["example"]]]  # the tour names an example by its name
        mode = PROMPT_MODES[int(chat)]
    name = settings.get("constraint", NO_CONSTRAINT)
    try:
        new = cont.start(lm, prompt, mode == PROMPT_MODES[1], state.seed, PRESETS.get(name), weights=state.weights)
    except (cont.PromptError, GrammarError, ConstraintViolation, ValueError) as exc:
        return failed(ui, exc)
    now = dict(zip(SETTINGS, (temperature, top_k, top_p, min_p), strict=True))
    return {ui.tour_md: gr.update(value=tour.stop_markdown(tour.SAMPLING_TOUR, i), visible=True), ui.tour_at: i,
            ui.prompt: prompt, ui.mode: mode,
            **{getattr(ui, k): settings.get(k, v) for k, v in now.items()},
            ui.n_bars: SAMPLING["n_bars"].default, ui.axis: AXES[0], ui.constraint: name, **shown(lm, ui, new)}


def on_link(prompt, mode, temperature, top_k, top_p, min_p, constraint, seed):
    values = {"tab": "sampling", "prompt": prompt if len(str(prompt)) <= deeplink.MAX_PROMPT_CHARS else None,
              "mode": mode, "temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
              "constraint": constraint if constraint != CUSTOM else None, "seed": seed}
    link = deeplink.parse({k: str(v) for k, v in values.items() if v is not None}, LINK_CHOICES)
    return deeplink.query(link.values, LINK_CHOICES)


def restore(lm, ui, first: cont.Continuation, values: dict) -> dict:
    """What a deep link names, and nothing else: its controls, and a new position only when it
    names the prompt, the mode, the seed or the constraint (a slider alone is drawn by the page)."""
    out = {getattr(ui, k): values[k] for k in (*SETTINGS, "seed") if k in values}
    if "mode" in values:
        out[ui.mode] = values["mode"]
    if "prompt" in values:
        out[ui.prompt] = values["prompt"]
    chat = values.get("mode", PROMPT_MODES[int(first.chat)]) == PROMPT_MODES[1]
    if {"prompt", "mode"} & values.keys():  # the Example dropdown names the linked prompt, or none
        linked = (values.get("prompt", first.prompt), chat)
        out[ui.example] = next((name for name, example in EXAMPLES.items() if example == linked), None)
    if "constraint" in values:
        out[ui.constraint] = values["constraint"]
    if not {"prompt", "mode", "seed", "constraint"} & values.keys():
        return out
    try:
        c = cont.start(lm, values.get("prompt", first.prompt), chat, values.get("seed", 0),
                       PRESETS.get(values.get("constraint", NO_CONSTRAINT)))
    except (cont.PromptError, GrammarError, ConstraintViolation, ValueError) as exc:
        return {**out, **failed(ui, exc)}
    views = shown(lm, ui, c)
    del views[ui.msg]  # a blank message must not race with one the visitor has just caused
    return {**out, **views}


# ---- layout ---------------------------------------------------------------------------------------

def _page_js() -> str:
    """The page's sampling code, read from its files (no bundler): the math, then the views."""
    return "\n".join((JS_DIR / name).read_text(encoding="utf-8") for name in ("sampling.js", "sampling_view.js"))


CHART_TEMPLATE = (
    '<div class="rl-chart-host"></div><div class="rl-readouts">'
    '<div id="${readout_id}" class="rl-readout-host"></div><div id="${constraint_id}" class="rl-creadout-host"></div>'
    "</div>"
)
PRESETS_CSS = """
.rl-usecases { display: grid; gap: 0.2em; font-size: 0.8em; }
.rl-usecases-title { font-weight: 600; opacity: 0.8; }
.rl-usecase { display: flex; gap: 0.6em; align-items: baseline; text-align: left; padding: 0.15em 0.5em;
  border-radius: 6px; border: 1px solid rgba(127,127,127,0.35); background: transparent; cursor: pointer;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; color: inherit; }
.rl-usecase b { flex: none; }
.rl-usecase span { opacity: 0.75; overflow: hidden; text-overflow: ellipsis; font-size: 0.85em; }
.rl-usecase:hover, .rl-usecase:focus-visible { border-color: var(--color-accent); }
"""
PRESETS_JS = """
element.addEventListener('click', (e) => {
  const b = e.target.closest('[data-preset]');
  if (!b) return;
  for (const [id, v] of Object.entries(JSON.parse(b.dataset.preset))) {
    const el = document.querySelector(`#${id} input[type="range"]`);
    if (!el) continue;
    el.value = v;
    el.dispatchEvent(new Event('input', {bubbles: true}));
    el.dispatchEvent(new Event('change', {bubbles: true}));
  }
});
"""


def _chart(value, elem_id: str, readout_id: str, constraint_id: str, tokens_url: str, pickable: bool) -> gr.HTML:
    return gr.HTML(value, elem_id=elem_id, html_template=CHART_TEMPLATE,
                   js_on_load=_page_js() + "\nmountSampling(element, props, watch);",
                   readout_id=readout_id, constraint_id=constraint_id, tokens_url=tokens_url,
                   chart_id=elem_id, pickable=pickable, controls=PAGE_CONTROLS)


def _use_cases_html() -> str:
    import json

    from viz.render import esc

    buttons = "".join(
        f'<button type="button" class="rl-usecase" '
        f'data-preset="{esc(json.dumps({SAMPLING[k].elem_id: v for k, v in s.items()}))}"'
        f' title="{esc(why)}" aria-label="Preset: {esc(label)}"><b>{esc(label)}</b><span>{esc(why)}</span></button>'
        for label, s, why in USE_CASES
    )
    return f'<div class="rl-usecases"><span class="rl-usecases-title">Sampling by use case</span>{buttons}</div>'


def _prompt_row(first) -> dict:
    """One row: Prompt, Run prompt, the mode, the examples (a projector's first screen is short)."""
    with gr.Row(equal_height=False, elem_id="sampling-prompt-row"):
        with gr.Column(scale=5, min_width=240):  # a column each: Gradio would stack adjacent inputs in one form
            prompt = gr.Textbox(label="Prompt", value=first.prompt, lines=1, max_lines=6,
                                max_length=cont.MAX_PROMPT_CHARS)
        with gr.Column(scale=1, min_width=140):
            run = gr.Button("Run prompt", variant="primary", elem_id="run-prompt")
        with gr.Column(scale=2, min_width=330):
            mode = gr.Radio(list(PROMPT_MODES), value=PROMPT_MODES[0], label="Send the prompt as")
        with gr.Column(scale=3, min_width=240):
            example = gr.Dropdown(list(EXAMPLES), value=DEFAULT_EXAMPLE, label="Example prompts")
    return dict(prompt=prompt, mode=mode, example=example, run=run)


def _explanations(vocab_size: int) -> None:
    """The lecture's formulas for each setting, in one fold under the sliders (a projector's first
    screen keeps the sliders and the chart)."""
    with gr.Accordion("What each setting does (the lecture's formulas)", open=False, elem_id="sampling-explain"):
        gr.Markdown(
            "**Sampling: from logits to a token.** The model outputs one logit $z_i$ per token of its "
            f"{vocab_size:,}-token vocabulary; softmax turns them into $P(W_t\\mid W_{{1:t-1}})$; "
            "a sampling rule picks the next token.",
            latex_delimiters=LATEX, elem_id="sampling-intro",
        )
        for name, label in (("temperature", "Temperature"), ("top_k", "Top-k"), ("top_p", "Top-p"),
                            ("min_p", "Min-p"), ("constraint", "Constraint")):
            gr.Markdown(f"**{label}.** {EXPLAIN[name]}", latex_delimiters=LATEX, elem_classes="explain")


def _settings_column(vocab_size: int, weights_choices: tuple[str, ...], weights: str) -> dict:
    """The tour (folded), the sliders (on a projector's first screen beside the chart), the presets that
    set them, the formulas and the rest. The tour's buttons open above the sliders they move, and a
    stop's text shows above the chart, so the three share a 1280×720 screen."""
    with gr.Accordion("Guided tour (lecture order)", open=False, elem_id="sampling-tour-box"):
        gr.Markdown("Softmax → temperature → top-k → top-p → constrained decoding; each stop's text "
                    "shows above the chart.", elem_classes="rl-tour-hint")
        with gr.Row():
            tour_prev = gr.Button("◀ Previous stop", size="sm", min_width=120)
            tour_next = gr.Button("Next stop ▶", size="sm", variant="primary", min_width=120)
    temperature, top_k, top_p, min_p = (slider(SAMPLING[name]) for name in SETTINGS)
    constraint = gr.Dropdown(CONSTRAINT_CHOICES, value=NO_CONSTRAINT, label="Constraint")
    local_weights = gr.Dropdown(list(weights_choices), value=weights, label="Local weights", elem_id="sampling-weights",
                                info="trajectory-tuned: see how tuning moved P, e.g. after <tool_call>")
    gr.HTML(_use_cases_html(), elem_id="sampling-presets", js_on_load=PRESETS_JS, css_template=PRESETS_CSS)
    _explanations(vocab_size)
    with gr.Accordion("Custom grammar", open=False) as custom_box:
        kind = gr.Radio(list(KIND_LABELS.values()), value=KIND_LABELS["regex"], label="Grammar kind")
        source = gr.Code(value=r"[0-9]{4}-[0-9]{2}-[0-9]{2}", language=None, label="Grammar", interactive=True)
        apply = gr.Button("Apply grammar")
    n_bars = slider(SAMPLING["n_bars"])  # its own line: beside Axis its maximum (100) was cut to "10"
    axis = gr.Radio(list(AXES), value=AXES[0], label="Axis", elem_id=AXIS_ID,
                    interactive=True)  # no server listener: the page reads it
    seed = number_box(SAMPLING["seed"])
    with gr.Row():
        link_btn = gr.Button("Link to this view", size="sm", elem_id="sampling-link-btn")
    link_box = gr.Textbox(label="Link", interactive=False, buttons=["copy"], elem_id="sampling-link")
    return dict(tour_prev=tour_prev, tour_next=tour_next, temperature=temperature, top_k=top_k,
                top_p=top_p, min_p=min_p, constraint=constraint, weights=local_weights, custom_box=custom_box,
                kind=kind, source=source,
                apply=apply, n_bars=n_bars, axis=axis, seed=seed, link_btn=link_btn, link_box=link_box)


def _views_column(lm, first, tokens_url: str) -> dict:
    """The tour's stop (shown once a tour starts), the continuation, the step buttons, the chart, your
    own numbers, N draws, asking vs enforcing."""
    tour_md = gr.Markdown("", elem_id="sampling-tour", visible=False)  # above the chart it talks about
    msg = gr.HTML("", elem_id="sampling-message")
    continuation = gr.HTML(continuation_html(lm, first), elem_id="continuation")
    with gr.Row(elem_id="sampling-buttons"):
        sample_btn = gr.Button("Sample", variant="primary", elem_id="btn-sample")
        greedy_btn = gr.Button("Greedy", elem_id="btn-greedy")
        back_btn = gr.Button("Back", elem_id="btn-back")
        reroll_btn = gr.Button("New draw u", elem_id="btn-reroll")
    chart = _chart(chart_value(lm, first), "next-token-chart", "sampling-readout",
                   "constraint-readout", tokens_url, True)
    own = _own_numbers(tokens_url)  # under the chart, beside the sliders that apply to it too
    with gr.Row():
        n_draws = number_box(SAMPLING["n_draws"])
        many_btn = gr.Button("Sample ×N", elem_id="btn-sample-n")
    hist = gr.HTML(charts.histogram_view(None, lm.token_strings), elem_id="sample-histogram")
    with gr.Accordion("Asking vs enforcing a format", open=False):
        gr.Markdown(
            "The same prompt, with the instruction *answer only in this format* and the grammar "
            "written out, N times at the current sampling settings: once **without** the mask "
            "(asking) and once **with** it (enforcing). Uses the grammar under *Constraint* "
            "(JSON tool call if none is chosen)."
        )
        with gr.Row():
            n_runs = number_box(SAMPLING["n_runs"])
            ask_btn = gr.Button("Run asking vs enforcing", elem_id="btn-asking")
            stop_btn = gr.Button("Stop", variant="stop", elem_id="btn-asking-stop")
        asking = gr.HTML("", elem_id="asking-vs-enforcing")
    with gr.Accordion("The exact string sent to the model", open=False):
        prompt_string = gr.Code(value=first.prompt_text, language=None, label="Prompt string", interactive=False)
    return own | dict(tour_md=tour_md, prompt_string=prompt_string, msg=msg, continuation=continuation,
                      sample_btn=sample_btn, greedy_btn=greedy_btn, back_btn=back_btn, reroll_btn=reroll_btn,
                      chart=chart, n_draws=n_draws, many_btn=many_btn, hist=hist, n_runs=n_runs, ask_btn=ask_btn,
                      stop_btn=stop_btn, asking=asking)


def _own_numbers(tokens_url: str) -> dict:
    with gr.Accordion("Your own numbers", open=False, elem_id="own-numbers-box"):
        gr.Markdown(
            "Type logits or probabilities, e.g. the lecture's `0.4, 0.3, 0.25, 0.03, 0.02`, and see every "
            "stage exactly as for the model, under the same sliders (left). Probabilities that do not sum to 1 "
            "are normalised. Tokens are named #1, #2, … in the order typed."
        )
        with gr.Row():
            own_text = gr.Textbox(value="0.4, 0.3, 0.25, 0.03, 0.02", label="Your own numbers", scale=4)
            own_kind = gr.Radio(["Probabilities", "Logits"], value="Probabilities", label="They are", scale=2)
            own_btn = gr.Button("Show my numbers", scale=1, elem_id="btn-own")
        own_chart = _chart(None, "own-numbers-chart", "own-numbers-readout", "own-numbers-constraint",
                           tokens_url, False)
    return dict(own_text=own_text, own_kind=own_kind, own_btn=own_btn, own_chart=own_chart)


def layout(lm, first: cont.Continuation, tokens_url: str) -> Controls:
    """Place the tab's components; no listener here."""
    ttl = SESSION_TTL_S
    parts = dict(state=gr.State(first, time_to_live=ttl), own_state=gr.State(None, time_to_live=ttl),
                 tour_at=gr.State(-1, time_to_live=ttl))
    parts |= _prompt_row(first)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=360):
            parts |= _settings_column(lm.vocab_size, lm.weights_choices, first.weights)
        with gr.Column(scale=7):
            parts |= _views_column(lm, first, tokens_url)
    parts["pick"] = gr.Textbox(elem_id="token-pick", elem_classes="rl-offscreen", label="picked token",
                               container=False)
    return Controls(**parts)


# ---- wiring ---------------------------------------------------------------------------------------

def wire(lm, ui: Controls) -> None:
    """Connect events to handlers. No slider has a server listener: the page redraws them."""
    pos = ui[" ".join(POSITION_OUTPUTS)]
    settings = "temperature top_k top_p min_p"
    hidden = dict(show_progress="hidden")
    # The presses a class repeats most skip Gradio's per-input and per-output processing (a thread
    # hop each: 10 ms median per Greedy with 8 students, against 0.03 ms without; the handlers
    # check every value themselves, and every output is already a plain value).
    lean = dict(preprocess=False, postprocess=False)

    def bind(fn, *args):
        return functools.partial(fn, lm, ui, *args)

    ui.run.click(bind(on_run), ui["prompt mode state seed"], pos, api_name="run_prompt")
    ui.prompt.submit(bind(on_run), ui["prompt mode state seed"], pos, api_name=False)
    ui.mode.input(bind(on_run), ui["prompt mode state seed"], pos, api_name=False)
    ui.example.input(bind(on_example), ui["example state seed"], [ui.prompt, ui.mode, *pos], api_name="example")
    for action, button in (("sample", ui.sample_btn), ("greedy", ui.greedy_btn), ("back", ui.back_btn),
                           ("reroll", ui.reroll_btn)):
        button.click(bind(on_step, action), ui[f"state {settings}"], pos, api_name=action, **lean, **hidden)
    ui.pick.change(bind(on_pick), ui[f"pick state {settings}"], pos, api_name="pick", **hidden)
    ui.seed.submit(bind(on_seed), ui["seed state"], pos, api_name="seed")
    ui.weights.input(bind(on_weights), ui["weights state"], pos, api_name="weights")
    ui.constraint.input(bind(on_constraint), ui["constraint state"], [ui.custom_box, *pos], api_name="constraint")
    ui.apply.click(bind(on_apply), ui["kind source state"], pos, api_name="apply_grammar")
    ui.many_btn.click(bind(on_many), ui[f"n_draws state {settings} n_bars"], [ui.hist, ui.msg], api_name="sample_n")
    own = [ui.own_state, ui.own_chart, ui.msg]
    ui.own_btn.click(bind(on_own), ui["own_text own_kind state"], own, api_name="own_numbers")
    ui.own_text.submit(bind(on_own), ui["own_text own_kind state"], own, api_name=False)
    # Asking vs enforcing: its own group, ASKING_SESSIONS wide, so a second session starts at once and
    # shares the batcher's passes with the first instead of waiting out a whole N = 50 comparison.
    asking = ui.ask_btn.click(bind(on_asking), ui[f"n_runs state {settings}"], [ui.asking, ui.msg],
                              concurrency_id="asking", concurrency_limit=enforcing.ASKING_SESSIONS,
                              api_name="asking")
    ui.stop_btn.click(None, None, None, cancels=[asking])
    tour_in = ui[f"tour_at state prompt mode {settings}"]
    tour_out = [*ui[f"tour_md tour_at prompt mode {settings} n_bars axis constraint"], *pos]
    ui.tour_next.click(bind(on_tour, 1), tour_in, tour_out, api_name=False)
    ui.tour_prev.click(bind(on_tour, -1), tour_in, tour_out, api_name=False)
    ui.link_btn.click(on_link, ui[f"prompt mode {settings} constraint seed"], ui.link_box,
                      api_name="sampling_link").then(
        None, ui.link_box, ui.link_box, js="(q) => q.startsWith('?') ? location.origin + location.pathname + q : q"
    )


def tokens_url(lm) -> str:
    """The token display strings as a static file the page fetches once (viz/position.py)."""
    folder = Path(tempfile.gettempdir()) / "react-lab-page"
    path = position.token_asset(lm.token_strings, lm.special_ids, folder)
    gr.set_static_paths([str(folder)])
    return f"gradio_api/file={path}"


def build(lm):
    """Lay out the Sampling tab for a loaded model and wire its listeners.

    Returns (outputs, restore): the components a deep link may set, and the function that
    computes {component: value} for a parsed link (app.py calls it on page load).
    """
    for text, chat in EXAMPLES.values():  # every visitor sees these: their KV is shared (agent.llm.model)
        ids = lm.encode(cont.prompt_string(lm, text, chat))
        lm.share_prefix(cont.cap_prompt(lm, ids, cont.RESERVED_FOR_CONTINUATION)[0])
    first = cont.start(lm, *EXAMPLES[DEFAULT_EXAMPLE], seed=0)
    ui = layout(lm, first, tokens_url(lm))
    wire(lm, ui)
    outputs = [*ui["prompt mode example temperature top_k top_p min_p constraint seed"],
               *ui[" ".join(POSITION_OUTPUTS)]]
    return outputs, functools.partial(restore, lm, ui, first)


assert {f.name for f in fields(Controls)} >= set(POSITION_OUTPUTS)
