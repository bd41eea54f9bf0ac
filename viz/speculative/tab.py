"""The Speculative decoding tab: continue a prompt in rounds — the draft proposes γ tokens, the
target scores them all in one forward pass, and the rejection rule accepts or resamples.

Read top to bottom: choices → the session value → handlers (module-level, named inputs, each
returns {component: value}) → `build` (layout) → listeners. The math is agent.llm.speculative; the
model calls are agent.llm.model (`tail_logits`, `early_exit_logits`, `plain_decode_seconds`, all
rows of the batcher's shared passes); the views are viz.speculative.views.

Adding a control: its bounds and default in agent/controls.py `SPECULATIVE`, one field in
`Controls`, one argument in `Settings.read`, one line in `layout`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import gradio as gr

from agent.controls import SPECULATIVE
from agent.llm import continuation, speculative
from agent.sampling import SamplingConfig
from viz import tour
from viz.controls import number_box, slider
from viz.render import message
from viz.speculative import views

EARLY_EXIT = "Early exit (first L layers of the model)"
PROMPT_LOOKUP = "Prompt lookup (n-grams copied from the context)"
# A pattern the model goes on with at T = 0 (" Spain: Madrid\n- United Kingdom: London\n- …", its own
# facts, right or wrong): repeated structure is where a draft is right most often. The capitals prose
# shown before continued "\n\nThe answer is: 2" three times (issue 23).
DEFAULT_PROMPT = "Here is a list of countries and their capitals:\n- Germany: Berlin\n- France: Paris\n- Italy: Rome\n-"
DRAFTS = {"early-exit": EARLY_EXIT, "prompt-lookup": PROMPT_LOOKUP}  # stable name → label (the tour)
MAX_TOKENS = 256  # Draft and verify continues up to this many tokens
SESSION_TTL_S = 1800  # a speculative session is forgotten 30 minutes after its last use


def draft_choices(draft_lm) -> list[str]:
    choices = [EARLY_EXIT, PROMPT_LOOKUP]
    return choices + ([f"Draft model: {draft_lm.name}"] if draft_lm is not None else [])


@dataclass(frozen=True)
class Settings:
    """The tab's controls, checked on the server (a visitor can send anything through the API)."""

    draft: str
    layers: int
    gamma: int
    config: SamplingConfig
    seed: int

    @staticmethod
    def read(choices, draft, layers, gamma, temperature, top_k, top_p, seed, n_layers) -> Settings:
        if draft not in choices:
            raise ValueError(f"Draft must be one of: {', '.join(choices)}.")
        c = SPECULATIVE
        config = SamplingConfig(temperature=c["temperature"].check(temperature), top_k=c["top_k"].check(top_k),
                                top_p=c["top_p"].check(top_p))
        return Settings(draft, c["layers"].check(layers, high=n_layers - 1), c["gamma"].check(gamma), config,
                        c["seed"].check(seed))


ENGINE_NOTE = ("The target is the engine ({label}): at each position its top {k} tokens, renormalised, as "
               "on the Sampling tab, so the output follows that top-K distribution. One request verifies a "
               "round (the drafted tokens echoed with their logprobs). The drafts run on the local model. "
               "Plain decoding is the engine's own: the same tokens in one request, with no round trip per "
               "token, so the speedup also pays the rounds' HTTP requests.")


class Tab:
    """The loaded models and the drafts they make; one per app, shared by every session. `target`
    verifies (default: the local model; app.py --engine: the engine, agent.llm.engine); the drafts
    always run on the local model `lm`, whose tokenizer the engine shares."""

    def __init__(self, lm, draft_lm=None, target=None):
        self.lm, self.draft_lm = lm, draft_lm
        self.target = lm if target is None else target
        self.choices = draft_choices(draft_lm)
        engine = getattr(self.target, "engine", None)
        self.target_note = "" if engine is None else ENGINE_NOTE.format(label=engine.label, k=engine.top_k)

    def draft(self, s: Settings) -> speculative.Draft:
        if s.draft == EARLY_EXIT:
            return speculative.ModelDraft(f"early exit, L = {s.layers}",
                                          lambda ids: self.lm.early_exit_logits(ids, s.layers))
        if s.draft == PROMPT_LOOKUP:
            return speculative.PromptLookupDraft(self.lm.vocab_size)
        return speculative.ModelDraft(self.draft_lm.name, self.draft_lm.next_token_logits)

    def start(self, prompt: str, seed: int) -> speculative.Decoding:
        text = continuation.clean_prompt(prompt)
        ids = self.lm.encode(text)[-continuation.MAX_PROMPT_TOKENS:]
        if not ids:
            raise ValueError("Type a prompt first.")
        self.lm.next_token_logits(ids)  # prefill once (cached): rounds and the plain baseline start from here
        return speculative.Decoding(tuple(ids), seed=seed)

    def advance(self, d: speculative.Decoding, s: Settings, limit: int) -> speculative.Decoding:
        return speculative.advance(d, self.draft(s), self.target.tail_logits, s.gamma, s.config,
                                   self.lm.eos_token_ids, limit)


@dataclass
class Controls:
    prompt: gr.Textbox
    draft: gr.Dropdown
    layers: gr.Slider
    gamma: gr.Slider
    temperature: gr.Slider
    top_k: gr.Slider
    top_p: gr.Slider
    seed: gr.Number
    tokens: gr.Slider
    round_btn: gr.Button
    run_btn: gr.Button
    reset_btn: gr.Button

    def settings(self) -> list:
        return [self.draft, self.layers, self.gamma, self.temperature, self.top_k, self.top_p, self.seed]


@dataclass
class Views:
    state: gr.State
    text: gr.HTML
    rounds: gr.HTML
    stats: gr.HTML
    message: gr.HTML


def render(tab: Tab, v: Views, d: speculative.Decoding | None, s: Settings | None, note: str = "") -> dict:
    """Every view of the tab for one Decoding (None: nothing started yet)."""
    strings = tab.lm.token_strings
    if d is None:
        return {v.state: None, v.text: "", v.rounds: views.rounds((), strings), v.stats: "",
                v.message: _message(note)}
    gamma = s.gamma if s is not None else 0
    expected = speculative.expected_tokens_per_pass(d.stats.alpha, gamma) if gamma else 0.0
    name = tab.draft(s).name if s is not None else ""
    prompt_text = tab.lm.decode(d.prompt_ids)
    return {v.state: d, v.text: views.continuation(prompt_text, strings, d.out, d.how, d.ended),
            v.rounds: views.rounds(d.rounds, strings),
            v.stats: views.stats(d.stats, gamma, expected, name, d.ended, tab.target_note), v.message: _message(note)}


def _message(text: str) -> str:
    return message(text, "error", role="alert")


def on_round(tab: Tab, v: Views, d, prompt, *settings) -> dict:
    """Draft and verify: one round on top of the session (a new one if the prompt changed)."""
    try:
        s = Settings.read(tab.choices, *settings, tab.lm.num_layers)
        fresh = tab.start(prompt, s.seed)
        if d is None or d.prompt_ids != fresh.prompt_ids or d.seed != s.seed:
            d = fresh
        if d.ended:
            return render(tab, v, d, s, "The continuation ended (end-of-sequence): press Reset.")
        return render(tab, v, tab.advance(d, s, MAX_TOKENS), s)
    except ValueError as e:
        return {v.message: _message(str(e))}


def on_run(tab: Tab, v: Views, prompt, tokens, *settings) -> dict:
    """Run: a fresh continuation of `tokens` tokens in rounds, then the same continuation decoded by
    the target alone, one token per pass, for the measured speedup."""
    try:
        s = Settings.read(tab.choices, *settings, tab.lm.num_layers)
        n = SPECULATIVE["tokens"].check(tokens)
        d = tab.start(prompt, s.seed)
        while len(d.out) < n and not d.ended:
            d = tab.advance(d, s, n)
        plain = tab.target.plain_decode_seconds(d.prompt_ids, d.out)
        d = replace(d, stats=replace(d.stats, plain_seconds=plain))
        return render(tab, v, d, s)
    except ValueError as e:
        return {v.message: _message(str(e))}


def on_tour(c: Controls, t: TourBox, delta: int, tour_at) -> dict:
    """Previous / Next stop: the stop's lecture lines in the introduction's place, and the controls
    every stop up to it set."""
    i = max(0, min(len(tour.SPECULATIVE_TOUR) - 1, int(tour_at) + delta))
    settings: dict = {}
    for stop in tour.SPECULATIVE_TOUR[: i + 1]:
        settings.update(stop.settings)
    fields = {"draft": c.draft, "layers": c.layers, "gamma": c.gamma, "temperature": c.temperature,
              "top_k": c.top_k, "top_p": c.top_p}
    values = {fields[k]: DRAFTS[v] if k == "draft" else v for k, v in settings.items()}
    return {t.md: gr.update(value=tour.stop_markdown(tour.SPECULATIVE_TOUR, i), visible=True),
            t.intro: gr.update(visible=False), t.at: i, **values}


@dataclass
class TourBox:
    intro: gr.HTML  # the tab's introduction: a stop's text takes its place
    md: gr.Markdown
    prev: gr.Button
    next: gr.Button
    at: gr.State


def _tour_buttons() -> tuple[gr.Button, gr.Button]:
    """The guided tour's buttons, folded under the Draft controls; a stop's text replaces the
    introduction above the prompt, so it, the settings it sets and the rounds share one 1280×720
    screen."""
    with gr.Accordion("Guided tour: draft → verify", open=False, elem_id="spec-tour-box"):
        gr.Markdown("Four stops; each stop's text shows above the prompt.", elem_classes="rl-tour-hint")
        with gr.Row():
            prev = gr.Button("◀ Previous stop", size="sm", min_width=120)
            nxt = gr.Button("Next stop ▶", size="sm", variant="primary", min_width=120)
    return prev, nxt


def _wire_tour(c: Controls, t: TourBox) -> None:
    outs = [t.md, t.intro, t.at, c.draft, c.layers, c.gamma, c.temperature, c.top_k, c.top_p]
    t.next.click(partial(on_tour, c, t, 1), t.at, outs, api_name=False)
    t.prev.click(partial(on_tour, c, t, -1), t.at, outs, api_name=False)


def layout(tab: Tab) -> tuple[Controls, Views, TourBox]:
    n_layers, default_layers = tab.lm.num_layers, min(SPECULATIVE["layers"].default, tab.lm.num_layers - 1)
    intro = gr.HTML(views.intro(n_layers, default_layers), js_on_load=None, css_template=views.CSS)
    tour_md = gr.Markdown("", elem_id="spec-tour", visible=False)
    with gr.Row(equal_height=False, elem_id="spec-prompt-row"):  # the buttons keep their height
        with gr.Column(scale=4):  # the buttons under the prompt: the results start on a projector's first screen
            prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=2, max_length=continuation.MAX_PROMPT_CHARS,
                                elem_id="spec-prompt")
            with gr.Row(equal_height=True, elem_id="spec-buttons-row"):
                round_btn = gr.Button("Draft and verify", variant="primary", elem_id="spec-round-btn")
                run_btn = gr.Button("Run", elem_id="spec-run-btn")
                reset_btn = gr.Button("Reset", elem_id="spec-reset-btn")
        with gr.Column(scale=2, min_width=320):
            draft = gr.Dropdown(tab.choices, value=EARLY_EXIT, label="Draft")
            c = SPECULATIVE["layers"]
            layers = slider(c, default_layers, high=n_layers - 1, label=f"{c.label} (of {n_layers})")
            tour_prev, tour_next = _tour_buttons()
    with gr.Row(equal_height=True, elem_id="spec-settings-row"):
        gamma, temperature, top_k, top_p = (slider(SPECULATIVE[n]) for n in ("gamma", "temperature", "top_k", "top_p"))
        tokens = slider(SPECULATIVE["tokens"])
        seed = number_box(SPECULATIVE["seed"], min_width=100)
    html = dict(js_on_load=None, css_template=views.CSS)
    message = gr.HTML("", elem_id="spec-message", js_on_load=None)
    text = gr.HTML("", elem_id="spec-text", **html)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            rounds = gr.HTML(views.rounds((), tab.lm.token_strings), elem_id="spec-rounds", **html)
        with gr.Column(scale=2):
            stats = gr.HTML("", elem_id="spec-stats", **html)
    state = gr.State(None, time_to_live=SESSION_TTL_S)
    controls = Controls(prompt, draft, layers, gamma, temperature, top_k, top_p, seed, tokens,
                        round_btn, run_btn, reset_btn)
    return controls, Views(state, text, rounds, stats, message), TourBox(intro, tour_md, tour_prev, tour_next,
                                                                          gr.State(-1))


def build(lm, draft_lm=None, target=None) -> None:
    """The tab's layout and listeners, inside an open gr.Tab (`target`: Tab's)."""
    tab = Tab(lm, draft_lm, target)
    c, v, tour_box = layout(tab)
    outs = [v.state, v.text, v.rounds, v.stats, v.message]
    # Its drafts and verify passes are rows of the batcher's steps (shared with every session's
    # decode); a run is long (rounds, then the plain baseline), so two sessions run at a time.
    model_event = dict(concurrency_id="speculative", concurrency_limit=2, show_progress="minimal")
    c.round_btn.click(partial(on_round, tab, v), [v.state, c.prompt, *c.settings()], outs,
                      api_name="spec_round", **model_event)
    c.run_btn.click(partial(on_run, tab, v), [c.prompt, c.tokens, *c.settings()], outs,
                    api_name="spec_run", **model_event)
    c.reset_btn.click(partial(render, tab, v, None, None), None, outs, api_name="spec_reset")
    _wire_tour(c, tour_box)
