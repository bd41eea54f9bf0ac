"""The Sampling tab (lecture Part I): a real model's next-token distribution under temperature,
top-k, top-p, min-p and a grammar's mask, and token-by-token generation.

Layout and listeners only. Each listener takes the session's Continuation (agent/continuation.py)
and the controls, calls agent/ for every number, and renders with viz/charts.py. A slider move
re-enters at sampling.trace on the cached logits: it never runs the model.
"""

from __future__ import annotations

import gradio as gr

from agent import continuation as cont
from agent import enforcing, sampling, topn
from agent.constraints import PRESETS, ConstraintViolation, Grammar, GrammarError
from viz import charts, deeplink, tour

EXAMPLES = {
    "A fact: The capital of France is": ("The capital of France is", False),
    "A story start": ("Once upon a time, in a village at the edge of the forest,", False),
    "The start of a JSON object": ('{"name": "Ada Lovelace", "born":', False),
    "Greedy repetition (T = 0 loops)": ("I like cats. I like dogs. I like cats. I like dogs. I like", False),
    "A chat question": ("What's the weather in Berlin?", True),
    "A tool-call request (try Constraint: JSON tool call)": ("Call get_weather with city Berlin.", True),
}
DEFAULT_EXAMPLE = "A fact: The capital of France is"
DEFAULT_ASKING = "JSON tool call"
PROMPT_MODES = ("Raw text", "Chat message")
NO_CONSTRAINT = "None"
CUSTOM = "Custom…"
CONSTRAINT_CHOICES = [NO_CONSTRAINT, *PRESETS, CUSTOM]
KIND_LABELS = {"choice": "Choice list", "regex": "Regular expression", "json_schema": "JSON Schema", "lark": "Lark CFG"}
MAX_N_DRAWS = 10_000
MAX_BARS = 100
MAX_GRAMMAR_CHARS = 20_000
LINK_CHOICES = {"mode": PROMPT_MODES, "constraint": (NO_CONSTRAINT, *PRESETS)}
LATEX = [{"left": "$$", "right": "$$", "display": True}, {"left": "$", "right": "$", "display": False}]

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


def _settings(temperature, top_k, top_p, min_p) -> sampling.SamplingConfig:
    """Controls → a checked SamplingConfig; values sent through the API get the same checks."""
    try:
        k = float(top_k)
        if not k.is_integer():
            raise ValueError(f"top_k must be a whole number, got {top_k!r}")
        return sampling.SamplingConfig(
            temperature=float(temperature), top_k=int(k), top_p=float(top_p), min_p=float(min_p)
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"Sampling settings: {exc}") from None


def _view_options(n_bars, axis) -> tuple[int, bool]:
    try:
        n = int(float(n_bars))
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"Bars shown must be a number, got {n_bars!r}") from None
    if not 1 <= n <= MAX_BARS:
        raise ValueError(f"Bars shown must lie in 1 … {MAX_BARS}, got {n}")
    return n, axis == "Log"


def views(lm, c: cont.Continuation, config: sampling.SamplingConfig, n_bars: int, log_axis: bool):
    """(chart, readout+curve, constraint readout) for one continuation and one setting."""
    trace = sampling.trace(c.logits, config, mask=c.mask, u=c.u)
    top = topn.top_n(trace, n_bars)
    chart = charts.distribution_chart(
        top, lm.token_strings, masked=c.mask is not None, top_p=config.top_p,
        log_axis=log_axis, greedy=trace.greedy, special_ids=lm.special_ids,
    )
    read = charts.readout(trace, lm.token_strings, truncated=c.truncated) + charts.cumulative_curve(
        top, None if trace.greedy else trace.u
    )
    return chart, read, charts.constraint_readout(c, trace, lm)


def continuation_html(lm, c: cont.Continuation) -> str:
    pieces = [lm.decode([i]) if i not in lm.special_ids else lm.token_strings[i] for i in c.ids]
    return charts.continuation_view(c.prompt_text, pieces, c.chosen_probs, finished=c.finished)


def build(lm):
    """Lay out the Sampling tab for a loaded model and wire its listeners.

    Returns (outputs, restore): the components a deep link sets, and the function that computes
    their values from a parsed link (app.py calls it on page load).
    """
    first = cont.start(lm, *EXAMPLES[DEFAULT_EXAMPLE], seed=0)
    default = sampling.SamplingConfig()
    chart0, read0, cread0 = views(lm, first, default, 20, False)

    state = gr.State(first)
    gr.Markdown(
        "**Sampling: from logits to a token.** The model outputs one logit $z_i$ per token of its "
        f"{lm.vocab_size:,}-token vocabulary; softmax turns them into $P(W_t\\mid W_{{1:t-1}})$; "
        "a sampling rule picks the next token.",
        latex_delimiters=LATEX,
    )
    with gr.Row(equal_height=False):
        with gr.Column(scale=6):
            prompt = gr.Textbox(
                label="Prompt", value=first.prompt, lines=1, max_lines=6, max_length=cont.MAX_PROMPT_CHARS
            )
            with gr.Accordion("The exact string sent to the model", open=False):
                prompt_string = gr.Code(value=first.prompt_text, language=None, label="Prompt string",
                                        interactive=False)
        with gr.Column(scale=2, min_width=260):
            mode = gr.Radio(list(PROMPT_MODES), value=PROMPT_MODES[0], label="Send the prompt as")
        with gr.Column(scale=3, min_width=300):
            example = gr.Dropdown(list(EXAMPLES), value=DEFAULT_EXAMPLE, label="Example prompts")
            run = gr.Button("Run prompt", variant="primary", elem_id="run-prompt")
    tour_at = gr.State(-1)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=360):
            with gr.Accordion("Guided tour (lecture order)", open=False):
                tour_md = gr.Markdown("Press **Next stop** to begin: softmax → temperature → top-k → top-p → "
                                      "constrained decoding.", elem_id="sampling-tour")
                with gr.Row():
                    tour_prev = gr.Button("◀ Previous stop", size="sm")
                    tour_next = gr.Button("Next stop ▶", size="sm", variant="primary")
            temperature = gr.Slider(0, 3, value=1.0, step=0.05, label="Temperature")
            gr.Markdown(EXPLAIN["temperature"], latex_delimiters=LATEX, elem_classes="explain")
            top_k = gr.Slider(0, 200, value=0, step=1, label="Top-k")
            gr.Markdown(EXPLAIN["top_k"], latex_delimiters=LATEX, elem_classes="explain")
            top_p = gr.Slider(0.05, 1, value=1.0, step=0.01, label="Top-p")
            gr.Markdown(EXPLAIN["top_p"], latex_delimiters=LATEX, elem_classes="explain")
            min_p = gr.Slider(0, 1, value=0.0, step=0.01, label="Min-p")
            gr.Markdown(EXPLAIN["min_p"], latex_delimiters=LATEX, elem_classes="explain")
            constraint = gr.Dropdown(CONSTRAINT_CHOICES, value=NO_CONSTRAINT, label="Constraint")
            gr.Markdown(EXPLAIN["constraint"], latex_delimiters=LATEX, elem_classes="explain")
            with gr.Accordion("Custom grammar", open=False) as custom_box:
                kind = gr.Radio(list(KIND_LABELS.values()), value=KIND_LABELS["regex"], label="Grammar kind")
                source = gr.Code(value=r"[0-9]{4}-[0-9]{2}-[0-9]{2}", language=None, label="Grammar", interactive=True)
                apply = gr.Button("Apply grammar")
            with gr.Row():
                n_bars = gr.Slider(5, MAX_BARS, value=20, step=1, label="Bars shown")
                axis = gr.Radio(["Linear", "Log"], value="Linear", label="Axis")
            seed = gr.Number(value=0, precision=0, label="Seed", minimum=0, maximum=2**31 - 1)
            with gr.Row():
                link_btn = gr.Button("Link to this view", size="sm", elem_id="sampling-link-btn")
            link_box = gr.Textbox(label="Link", interactive=False, buttons=["copy"], elem_id="sampling-link")
        with gr.Column(scale=7):
            msg = gr.HTML("", elem_id="sampling-message")
            continuation = gr.HTML(continuation_html(lm, first), elem_id="continuation")
            with gr.Row():
                sample_btn = gr.Button("Sample", variant="primary", elem_id="btn-sample")
                greedy_btn = gr.Button("Greedy", elem_id="btn-greedy")
                back_btn = gr.Button("Back", elem_id="btn-back")
                reroll_btn = gr.Button("New draw u", elem_id="btn-reroll")
            chart = gr.HTML(chart0, elem_id="next-token-chart", js_on_load=PICK_JS)
            with gr.Row(equal_height=False):
                readout = gr.HTML(read0, elem_id="sampling-readout")
                creadout = gr.HTML(cread0, elem_id="constraint-readout")
            with gr.Row():
                n_draws = gr.Number(value=100, precision=0, minimum=1, maximum=MAX_N_DRAWS, label="N draws")
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
                    n_runs = gr.Number(value=10, precision=0, minimum=1, maximum=enforcing.MAX_RUNS, label="N runs")
                    ask_btn = gr.Button("Run asking vs enforcing", elem_id="btn-asking")
                    stop_btn = gr.Button("Stop", variant="stop", elem_id="btn-asking-stop")
                asking = gr.HTML("", elem_id="asking-vs-enforcing")
    with gr.Accordion("Your own numbers", open=False):
        gr.Markdown(
            "Type logits or probabilities, e.g. the lecture's `0.4, 0.3, 0.25, 0.03, 0.02`, and see every "
            "stage exactly as for the model, under the same sliders. Probabilities that do not sum to 1 "
            "are normalised. Tokens are named #1, #2, … in the order typed."
        )
        with gr.Row():
            own_text = gr.Textbox(value="0.4, 0.3, 0.25, 0.03, 0.02", label="Your own numbers", scale=4)
            own_kind = gr.Radio(["Probabilities", "Logits"], value="Probabilities", label="They are", scale=2)
            own_btn = gr.Button("Show my numbers", scale=1, elem_id="btn-own")
        with gr.Row(equal_height=False):
            own_chart = gr.HTML("", elem_id="own-numbers-chart")
            own_readout = gr.HTML("", elem_id="own-numbers-readout")
    own_state = gr.State(None)
    pick = gr.Textbox(elem_id="token-pick", elem_classes="rl-offscreen", label="picked token", container=False)

    sliders = [temperature, top_k, top_p, min_p, n_bars, axis]
    shown = [chart, readout, creadout]

    def own_views(logits, u, t, k, p, m, n, ax):
        """(chart, readout) for the typed numbers under the current sliders and the session's u."""
        if logits is None:
            return "", ""
        n, log_axis = _view_options(n, ax)
        config = _settings(t, k, p, m)
        trace = sampling.trace(logits, config, u=u)
        names = [f"#{i + 1}" for i in range(len(logits))]
        top = topn.top_n(trace, min(n, len(logits)))
        return (
            charts.distribution_chart(top, names, masked=False, top_p=config.top_p, log_axis=log_axis,
                                      greedy=trace.greedy, chart_id="own-numbers-chart"),
            charts.readout(trace, names) + charts.cumulative_curve(top, None if trace.greedy else trace.u),
        )

    def on_own(text, kind_, c, *ctl):
        try:
            if not isinstance(text, str) or len(text) > 20_000:
                raise ValueError("type at most 20,000 characters of numbers")
            logits = sampling.parse_numbers(text, "probs" if kind_ == "Probabilities" else "logits")
            chart_, read_ = own_views(logits, c.u, *ctl)
        except ValueError as exc:
            return gr.skip(), gr.skip(), gr.skip(), charts.message(f"Your own numbers: {exc}", "error")
        return logits, chart_, read_, charts.message("")

    def redraw_all(c, own, *ctl):
        """A slider moved: the model's chart and, if typed, the own-numbers chart. Never runs the model."""
        out = redraw(c, *ctl)
        try:
            return (*out, *own_views(own, c.u, *ctl))
        except ValueError:
            return (*out, gr.skip(), gr.skip())

    def redraw(c, t, k, p, m, n, ax):
        try:
            n, log_axis = _view_options(n, ax)
            return (*views(lm, c, _settings(t, k, p, m), n, log_axis), charts.message(""))
        except ValueError as exc:
            return gr.skip(), gr.skip(), gr.skip(), charts.message(str(exc), "error")

    def refresh(c, t, k, p, m, n, ax, note=""):
        """All views after the continuation changed."""
        out = redraw(c, t, k, p, m, n, ax)
        if note and out[3] == charts.message(""):
            out = (*out[:3], charts.message(note, "info"))
        return (c, *out, continuation_html(lm, c), c.prompt_text)

    outs = [state, *shown, msg, continuation, prompt_string]

    def failed(exc):
        return (gr.skip(), gr.skip(), gr.skip(), gr.skip(), charts.message(str(exc), "error"), gr.skip(), gr.skip())

    def on_run(text, mode_, c, s, *ctl):
        try:
            new = cont.start(lm, text, mode_ == PROMPT_MODES[1], _seed(s), c.grammar)
        except (cont.PromptError, GrammarError, ConstraintViolation, ValueError) as exc:
            return failed(exc)
        limit = len(new.prompt_ids)
        note = (
            f"The prompt was longer than this tab's limit of {limit:,} tokens (the model's window is "
            f"{lm.context_window:,}): {new.truncated:,} tokens were cut from the left." if new.truncated else ""
        )
        return refresh(new, *ctl, note=note)

    def on_example(name, c, s, *ctl):
        if name not in EXAMPLES:
            return (gr.skip(), gr.skip(), *failed(ValueError(f"Unknown example {name!r}")))
        text, chat = EXAMPLES[name]
        return (text, PROMPT_MODES[int(chat)], *on_run(text, PROMPT_MODES[int(chat)], c, s, *ctl))

    def step(action):
        def handler(c, *ctl):
            try:
                config = _settings(*ctl[:4])
                if action == "sample":
                    t = sampling.trace(c.logits, config, mask=c.mask, u=c.u)
                    new = cont.append(lm, c, t.token, t.token_prob, consume_u=not t.greedy)
                elif action == "greedy":
                    t = sampling.trace(c.logits, sampling.SamplingConfig(temperature=0), mask=c.mask)
                    new = cont.append(lm, c, t.token, t.token_prob, consume_u=False)
                elif action == "back":
                    new = cont.back(lm, c)
                else:
                    new = cont.reroll(c)
            except (cont.PromptError, ValueError) as exc:
                return failed(exc)
            return refresh(new, *ctl)
        return handler

    def on_pick(value, c, *ctl):
        if not value:
            return (gr.skip(),) * len(outs)
        try:
            token = int(str(value).split(":")[0])
            config = _settings(*ctl[:4])
            t = sampling.trace(c.logits, config, mask=c.mask, u=c.u)
            if not 0 <= token < lm.vocab_size:
                raise ValueError(f"Token id {token} is outside the vocabulary.")
            new = cont.append(lm, c, token, float(t.probs[token]), consume_u=False)
        except (cont.PromptError, ValueError) as exc:
            return failed(exc)
        return refresh(new, *ctl)

    def on_seed(s, c, *ctl):
        try:
            new = cont.start(lm, c.prompt, c.chat, _seed(s), c.grammar)
        except (cont.PromptError, ValueError) as exc:
            return failed(exc)
        return refresh(new, *ctl, note=f"Seed {new.seed}: the continuation starts again with the same draws.")

    def set_grammar(grammar, c, *ctl):
        try:
            new = cont.with_grammar(lm, c, grammar)
        except (GrammarError, ConstraintViolation, ValueError) as exc:
            return failed(f"{exc} — the previous grammar stays.")
        note = "" if grammar is None else f"Constraint on: {grammar.name or grammar.kind}."
        return refresh(new, *ctl, note=note)

    def on_constraint(name, c, *ctl):
        if name == CUSTOM:
            return (gr.Accordion(open=True), *refresh(c, *ctl, note="Write a grammar below and press Apply grammar."))
        if name == NO_CONSTRAINT:
            return (gr.skip(), *set_grammar(None, c, *ctl))
        if name not in PRESETS:
            return (gr.skip(), *failed(ValueError(f"Unknown constraint {name!r}")))
        return (gr.skip(), *set_grammar(PRESETS[name], c, *ctl))

    def on_apply(kind_label, text, c, *ctl):
        kinds = {v: k for k, v in KIND_LABELS.items()}
        if kind_label not in kinds:
            return failed(ValueError(f"Unknown grammar kind {kind_label!r}"))
        if not isinstance(text, str) or len(text) > MAX_GRAMMAR_CHARS:
            return failed(ValueError(f"A grammar is text of at most {MAX_GRAMMAR_CHARS:,} characters."))
        return set_grammar(Grammar(kinds[kind_label], text, "Custom"), c, *ctl)

    def on_many(n, c, *ctl):
        try:
            n = int(float(n))
            if not 1 <= n <= MAX_N_DRAWS:
                raise ValueError(f"N draws must lie in 1 … {MAX_N_DRAWS:,}, got {n}")
            t = sampling.trace(c.logits, _settings(*ctl[:4]), mask=c.mask, u=c.u)
            counts = cont.sample_many(c, t.probs, n)
            h = topn.histogram(t, counts, rows=int(float(ctl[4])))
        except (TypeError, ValueError, OverflowError) as exc:
            return gr.skip(), charts.message(str(exc), "error")
        return charts.histogram_view(h, lm.token_strings), charts.message("")

    hidden = dict(show_progress="hidden")
    for s in sliders:
        # queue=False: a redraw is a few ms of numpy on cached logits and must never wait in the
        # queue behind another session's generation.
        s.change(redraw_all, [state, own_state, *sliders], [*shown, msg, own_chart, own_readout],
                 trigger_mode="always_last", api_name="redraw" if s is temperature else False,
                 queue=False, concurrency_limit=None, **hidden)
    own_btn.click(on_own, [own_text, own_kind, state, *sliders], [own_state, own_chart, own_readout, msg],
                  api_name="own_numbers")
    own_text.submit(on_own, [own_text, own_kind, state, *sliders], [own_state, own_chart, own_readout, msg],
                    api_name=False)
    run.click(on_run, [prompt, mode, state, seed, *sliders], outs, api_name="run_prompt")
    prompt.submit(on_run, [prompt, mode, state, seed, *sliders], outs, api_name=False)
    mode.change(on_run, [prompt, mode, state, seed, *sliders], outs, api_name=False)
    example.input(on_example, [example, state, seed, *sliders], [prompt, mode, *outs], api_name="example")
    sample_btn.click(step("sample"), [state, *sliders], outs, api_name="sample", **hidden)
    greedy_btn.click(step("greedy"), [state, *sliders], outs, api_name="greedy", **hidden)
    back_btn.click(step("back"), [state, *sliders], outs, api_name="back", **hidden)
    reroll_btn.click(step("reroll"), [state, *sliders], outs, api_name="reroll", **hidden)
    pick.change(on_pick, [pick, state, *sliders], outs, api_name="pick", **hidden)
    seed.submit(on_seed, [seed, state, *sliders], outs, api_name="seed")
    constraint.input(on_constraint, [constraint, state, *sliders], [custom_box, *outs], api_name="constraint")
    apply.click(on_apply, [kind, source, state, *sliders], outs, api_name="apply_grammar")
    many_btn.click(on_many, [n_draws, state, *sliders], [hist, msg], api_name="sample_n")

    def on_asking(n, c, *ctl):
        try:
            n = int(float(n))
            config = _settings(*ctl[:4])
            grammar = c.grammar or PRESETS[DEFAULT_ASKING]
            runs = enforcing.compare(lm, c.prompt, grammar, config, c.seed, n=n)
            comp = None
            for comp in runs:
                yield charts.comparison_view(comp, json_kind=grammar.kind == "json_schema", running=True), ""
            yield (charts.comparison_view(comp, json_kind=grammar.kind == "json_schema", running=False),
                   charts.message(comp.note) if comp.note else "")
        except (TypeError, ValueError, OverflowError, GrammarError) as exc:
            yield gr.skip(), charts.message(str(exc), "error")

    asking_run = ask_btn.click(on_asking, [n_runs, state, *sliders], [asking, msg], concurrency_limit=1,
                               api_name="asking")
    stop_btn.click(None, None, None, cancels=[asking_run])

    def on_tour(delta, at, c, text, mode_, *ctl):
        """Go to the next or previous stop: its settings (accumulated from the first stop) and text."""
        i = max(0, min(len(tour.SAMPLING_TOUR) - 1, int(at) + delta))
        settings = {}
        for stop in tour.SAMPLING_TOUR[: i + 1]:
            settings.update(stop.settings)
        if "example" in settings:
            text, chat = EXAMPLES[settings["example"]]
            mode_ = PROMPT_MODES[int(chat)]
        ctl = [settings.get(k, v) for k, v in zip(("temperature", "top_k", "top_p", "min_p"), ctl[:4], strict=True)]
        ctl += [20, "Linear"]
        name = settings.get("constraint", NO_CONSTRAINT)
        try:
            new = cont.start(lm, text, mode_ == PROMPT_MODES[1], c.seed, PRESETS.get(name))
        except (cont.PromptError, GrammarError, ConstraintViolation, ValueError) as exc:
            return (gr.skip(),) * 9 + failed(exc)
        return (tour.stop_markdown(tour.SAMPLING_TOUR, i), i, text, mode_, *ctl[:4], name, *refresh(new, *ctl))

    tour_outs = [tour_md, tour_at, prompt, mode, temperature, top_k, top_p, min_p, constraint, *outs]
    tour_next.click(lambda *a: on_tour(1, *a), [tour_at, state, prompt, mode, *sliders], tour_outs, api_name=False)
    tour_prev.click(lambda *a: on_tour(-1, *a), [tour_at, state, prompt, mode, *sliders], tour_outs, api_name=False)

    def on_link(text, mode_, t, k, p, m, constraint_name, s):
        values = {"tab": "sampling", "prompt": text if len(str(text)) <= deeplink.MAX_PROMPT_CHARS else None,
                  "mode": mode_, "temperature": t, "top_k": k, "top_p": p, "min_p": m,
                  "constraint": constraint_name if constraint_name != CUSTOM else None, "seed": s}
        link = deeplink.parse({k: str(v) for k, v in values.items() if v is not None}, LINK_CHOICES)
        return deeplink.query(link.values)

    link_btn.click(on_link, [prompt, mode, temperature, top_k, top_p, min_p, constraint, seed], link_box,
                   api_name="sampling_link").then(
        None, link_box, link_box, js="(q) => q.startsWith('?') ? location.origin + location.pathname + q : q"
    )

    def restore(values: dict):
        """Control values and views for a deep link (unknown keys already dropped by deeplink.parse)."""
        text = values.get("prompt", first.prompt)
        chat = values.get("mode", PROMPT_MODES[int(first.chat)]) == PROMPT_MODES[1]
        ctl = [values.get(k, d) for k, d in
               (("temperature", 1.0), ("top_k", 0), ("top_p", 1.0), ("min_p", 0.0))] + [20, "Linear"]
        name = values.get("constraint", NO_CONSTRAINT)
        grammar = PRESETS.get(name)
        try:
            c = cont.start(lm, text, chat, values.get("seed", 0), grammar)
        except (cont.PromptError, GrammarError, ConstraintViolation, ValueError) as exc:
            return (gr.skip(),) * 8 + failed(exc)
        return (text, PROMPT_MODES[int(chat)], *ctl[:4], name, c.seed, *refresh(c, *ctl))

    restore_outputs = [prompt, mode, temperature, top_k, top_p, min_p, constraint, seed, *outs]
    return restore_outputs, restore


def _seed(value) -> int:
    try:
        s = int(float(value))
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"The seed must be a whole number, got {value!r}") from None
    if not 0 <= s < 2**31:
        raise ValueError(f"The seed must lie in 0 … {2**31 - 1}, got {s}")
    return s


# Clicking (or Enter on) a token row appends that token: the row's id goes into a hidden textbox
# whose input event reaches the server. A counter makes a repeated click on one row a new value.
PICK_JS = """
let clicks = 0;
function pick(row) {
  const box = document.querySelector('#token-pick textarea, #token-pick input');
  if (!box || !row) return;
  clicks += 1;
  box.value = row.dataset.tokenId + ':' + clicks;
  box.dispatchEvent(new Event('input', {bubbles: true}));
}
element.addEventListener('click', (e) => pick(e.target.closest('[data-token-id]')));
element.addEventListener('keydown', (e) => {
  if (e.key !== 'Enter' && e.key !== ' ') return;
  const row = e.target.closest('[data-token-id]');
  if (row) { e.preventDefault(); pick(row); }
});
"""
