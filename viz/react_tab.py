"""The ReAct loop tab (lecture Parts II–IV): Prompt-ToolLoop stepped one phase at a time.

Layout and listeners. A Session in gr.State holds the tuple of loop States recorded so far and an
index into it: Back and the scrub slider move the index; Next moves it forward or, at the newest
state, runs one phase with agent.loop.step (a real model's reply streams into the template view
token by token); Fork from here continues the shown state with other settings. Every view is a
pure function of (states, index), rendered by viz/react_views.py. Every control is checked here,
server side: a bad value becomes a message in #react-message and the run stays as it was.

What it does not know: how the loop, a backend, the template or the budget work inside.
"""

from __future__ import annotations

import json
import math
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlparse

import gradio as gr

from agent import loop
from agent.backends import BackendReply, LocalBackend, OpenAIBackend, ScriptedBackend, Settings
from agent.loop import DEFAULT_CONTEXT_WINDOW, Phase, State
from agent.messages import SystemMessage
from agent.recording import (
    RecordedRun,
    load_run,
    record_run,
    run_from_dict,
    shipped_runs,
    start_state,
    tools_of,
)
from agent.template import Fmt, Mode, system_prompt
from agent.tools import TOOLS, Tool
from viz import deeplink, tour
from viz import react_views as rv
from viz.charts import message

FREE_TEXT = "Free text…"
TASKS = {  # the Task dropdown → the shipped recorded run it replays (None: the user's own text)
    "What's the weather in Berlin? (the lecture's trace)": "berlin-weather",
    "A train travels 345 km in 2.5 hours … (arithmetic)": "arithmetic",
    "In which country was the author of Invisible Cities born? (two-hop search)": "two-hop-search",
    "What's the weather in Berlin and in Paris? (two calls, two ids)": "two-cities",
    "What's the weather in Paris? (a validation error, repaired)": "validation-recovery",
    FREE_TEXT: None,
}
DEFAULT_TASK = next(iter(TASKS))
LOADED = "Loaded run: "
SCRIPTED, LOCAL, REMOTE = "Scripted replay", "Local model", "OpenAI-compatible server"
BACKENDS = (SCRIPTED, LOCAL, REMOTE)
MODES = {"ReAct": Mode.REACT, "Act": Mode.ACT, "CoT only": Mode.COT}
FORMATS = {"native tool calls": Fmt.NATIVE, "ReAct text": Fmt.REACT_TEXT}
MODE_LABEL = {v: k for k, v in MODES.items()}
FMT_LABEL = {v: k for k, v in FORMATS.items()}
MAX_TASK_CHARS = 2_000
MIN_BUDGET = 256
REMOTE_WINDOW = 1_048_576  # a server's window is unknown: its budget may go up to this
CALL_LIMIT_S = 60.0  # wall-clock limit of one model call
MAX_PHASES = 400  # Run to end gives up after this many phases
STREAM_EVERY_S = 0.1  # a streamed reply is redrawn at most this often
MAX_RUN_BYTES = 2_000_000
MAX_RUN_REPLIES = 100
SETTINGS_HINT = ("Settings apply on Reset (a new run) or on Fork from here (this run, continued "
                 "from the shown state).")


@dataclass(frozen=True)
class BackendSpec:
    """How to reach the backend; the backend object is built per call (it may hold the model)."""

    kind: str
    replies: tuple[BackendReply, ...] = ()
    url: str = ""
    model: str = ""


@dataclass(frozen=True)
class Session:
    """One browser tab's run: every State so far, the one shown, and what the run needs."""

    states: tuple[State, ...]
    index: int
    tools: tuple[Tool, ...]
    backend: BackendSpec
    title: str
    loaded: RecordedRun | None = None  # a run loaded from a file, offered as a task
    shown: tuple[str, ...] = ()  # the views as last sent to the page: unchanged ones are skipped

    @property
    def state(self) -> State:
        return self.states[self.index]


@dataclass(frozen=True)
class Controls:
    """The controls, checked and turned into values."""

    task: str
    user_input: str
    backend: str
    mode: Mode
    fmt: Fmt
    settings: Settings
    url: str
    model: str


@lru_cache(maxsize=1)
def recorded_runs() -> dict[str, RecordedRun]:
    return {stem: load_run(path) for stem, path in shipped_runs().items()}


def _number(value, name: str, low: float, high: float, integer: bool = False) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(x) or not low <= x <= high:
        raise ValueError(f"{name} must lie in {low:g} … {high:g}, got {value!r}")
    if integer and not x.is_integer():
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    return int(x) if integer else x


def checked_settings(window: int, max_steps, budget, reply_tokens, temperature=0.0, top_p=1.0,
                     seed=0, constrained=False) -> Settings:
    """A run's Settings with every value bounded; ValueError names the first bad one.

    >>> checked_settings(8192, 3, 512, 64).context_budget
    512
    """
    return Settings(
        max_steps=_number(max_steps, "MAX_STEPS", 1, 20, True),
        context_budget=_number(budget, "Context budget", MIN_BUDGET, window, True),
        max_new_tokens=_number(reply_tokens, "Reply tokens", 8, 1024, True),
        temperature=_number(temperature, "Temperature", 0, 2),
        top_p=_number(top_p, "Top-p", 0.05, 1), seed=_number(seed, "Seed", 0, 2**31 - 1, True),
        constrained=bool(constrained), timeout_s=CALL_LIMIT_S)


def checked(lm, task, task_text, backend, mode, fmt, constrained, temperature, top_p, seed,
            max_steps, budget, reply_tokens, url, model_name) -> Controls:
    """The controls as values; ValueError with a sentence a person can act on."""
    if task not in TASKS and not str(task).startswith(LOADED):
        raise ValueError(f"Unknown task {task!r}")
    for value, name, choices in ((backend, "backend", BACKENDS), (mode, "mode", MODES),
                                 (fmt, "output format", FORMATS)):
        if value not in choices:
            raise ValueError(f"Unknown {name} {value!r}")
    text = str(task_text or "").replace("\x00", "").strip()
    if task == FREE_TEXT and not text:
        raise ValueError("Type a task in “Your task” first.")
    if len(text) > MAX_TASK_CHARS:
        raise ValueError(f"The task is longer than {MAX_TASK_CHARS:,} characters.")
    url, model_name = str(url or "").strip(), str(model_name or "").strip()
    if backend == REMOTE:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname or len(url) > 500:
            raise ValueError(f"The server URL must be http:// or https:// with a host, got {url!r}")
        if not model_name or len(model_name) > 200:
            raise ValueError("Name the server's model (at most 200 characters), e.g. qwen2.5:7b")
    window = REMOTE_WINDOW if backend == REMOTE else lm.context_window
    settings = checked_settings(window, max_steps, budget, reply_tokens, temperature, top_p, seed,
                                constrained)
    return Controls(task, text, backend, MODES[mode], FORMATS[fmt], settings, url, model_name)


def run_for(task: str, loaded: RecordedRun | None) -> RecordedRun | None:
    """The recorded run behind a Task choice (None for free text)."""
    if str(task).startswith(LOADED):
        return loaded
    return recorded_runs()[TASKS[task]] if TASKS.get(task) else None


def start(c: Controls, loaded: RecordedRun | None = None) -> Session:
    """A new run from the controls: the state before line 1. A scripted replay keeps the
    recorded run's mode and format (its replies were written for them)."""
    run = run_for(c.task, loaded)
    if c.backend == SCRIPTED:
        if run is None:
            raise ValueError("Scripted replay replays a recorded run: choose a recorded task, or "
                             "the Local model for your own text.")
        state = start_state(run, c.settings)
        spec = BackendSpec(SCRIPTED, run.replies)
        return Session((state,), 0, tools_of(run), spec, run.title, loaded)
    user_input = run.user_input if run else c.user_input
    state = loop.new_state(user_input, c.mode, c.fmt, c.settings)
    spec = BackendSpec(c.backend, url=c.url, model=c.model)
    return Session((state,), 0, tools_of(run) if run else TOOLS, spec,
                   run.title if run else "Your task", loaded)


def fork(s: Session, c: Controls) -> Session:
    """The shown state continued with the controls' settings and backend (and, for a model, mode
    and format: the system prompt is swapped); the states after it are dropped."""
    state = s.state
    if state.done:
        raise ValueError("This state is final: step Back to an earlier state, then Fork from here.")
    if c.backend == SCRIPTED:
        run = run_for(c.task, s.loaded)
        replies = s.backend.replies if s.backend.kind == SCRIPTED else run.replies if run else None
        if replies is None:
            raise ValueError("Scripted replay needs a recorded run to replay.")
        spec, mode, fmt = BackendSpec(SCRIPTED, replies), state.mode, state.fmt
    else:
        spec, mode, fmt = BackendSpec(c.backend, url=c.url, model=c.model), c.mode, c.fmt
    history = state.history
    if (mode, fmt) != (state.mode, state.fmt) and history and isinstance(history[0], SystemMessage):
        history = (SystemMessage(system_prompt(mode, fmt)),) + history[1:]
    forked = replace(state, settings=c.settings, mode=mode, fmt=fmt, history=history,
                     note=f"forked here: {c.backend}, {mode} mode, {fmt} format")
    return replace(s, states=s.states[:s.index] + (forked,), backend=spec,
                   title=s.title.removesuffix(" (forked)") + " (forked)")


def load_session(path: str, lm) -> Session:
    """A run file of the recorded-run format → a scripted session replaying it; ValueError for
    anything unusable (its settings get the same bounds as the controls)."""
    p = Path(str(path))
    if p.stat().st_size > MAX_RUN_BYTES:
        raise ValueError(f"A run file has at most {MAX_RUN_BYTES:,} bytes.")
    try:
        run = run_from_dict(json.loads(p.read_text(encoding="utf-8")))
        if len(run.replies) > MAX_RUN_REPLIES or len(run.user_input) > MAX_TASK_CHARS:
            raise ValueError(f"at most {MAX_RUN_REPLIES} replies and a task of "
                             f"{MAX_TASK_CHARS:,} characters can be replayed here")
        s = run.settings
        settings = checked_settings(lm.context_window, s.max_steps, s.context_budget or
                                    lm.context_window, s.max_new_tokens)
        tools = tools_of(run)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise ValueError(f"Not a run this tab can replay: {e.__class__.__name__}: {e}") from None
    run = replace(run, settings=settings, title=str(run.title or p.stem)[:120])
    state = start_state(run, settings)
    return Session((state,), 0, tools, BackendSpec(SCRIPTED, run.replies), run.title, run)


def make_backend(spec: BackendSpec, lm):
    if spec.kind == SCRIPTED:
        return ScriptedBackend(spec.replies, lm.tokenizer, lm.context_window)
    if spec.kind == LOCAL:
        return LocalBackend(lm)
    return OpenAIBackend(spec.url, spec.model)


def streamed(call: Callable[[Callable[[str], None]], State]) -> Iterator[tuple[State | None, str]]:
    """Run call(on_token) in a worker thread; yield (None, text so far) while tokens arrive, then
    (new state, text). A call past its wall-clock limit plus a grace period is given up."""
    pieces: queue.SimpleQueue = queue.SimpleQueue()
    box: dict = {}
    done = object()

    def work():
        try:
            box["state"] = call(pieces.put)
        except Exception as e:  # noqa: BLE001 — re-raised below, in the listener's thread
            box["error"] = e
        finally:
            pieces.put(done)

    threading.Thread(target=work, daemon=True, name="react-model-call").start()
    text, shown, deadline = "", 0.0, time.monotonic() + CALL_LIMIT_S + 30
    while (item := _get(pieces)) is not done:
        text += item or ""
        if time.monotonic() > deadline:
            raise TimeoutError(f"the model call did not end within {CALL_LIMIT_S + 30:g} s")
        if text and time.monotonic() - shown >= STREAM_EVERY_S:
            shown = time.monotonic()
            yield None, text
    if "error" in box:
        raise box["error"]
    yield box["state"], text


def _get(pieces: queue.SimpleQueue):
    try:
        return pieces.get(timeout=STREAM_EVERY_S)
    except queue.Empty:
        return None


def one_phase(s: Session, lm) -> Iterator[tuple[State | None, str]]:
    """One phase from the newest state; a real model's reply streams."""
    state, backend = s.states[-1], make_backend(s.backend, lm)
    if state.phase != Phase.CALL_MODEL or s.backend.kind == SCRIPTED:
        yield loop.step(state, backend, s.tools), ""
        return
    yield from streamed(lambda on_token: loop.step(state, backend, s.tools, on_token=on_token))


def frame_of(s: Session, lm) -> rv.Frame:
    """The data of the shown state's views. A server's model has no tokenizer here: its string
    is the ChatML rendering and its counts are estimates."""
    remote = s.backend.kind == REMOTE
    return rv.frame(s.states, s.index, s.tools, None if remote else lm.tokenizer,
                    DEFAULT_CONTEXT_WINDOW if remote else lm.context_window)


def specials_of(s: Session, lm) -> tuple[str, ...]:
    if s.backend.kind == REMOTE:
        return ("<|im_start|>", "<|im_end|>")
    return tuple(getattr(lm.tokenizer, "all_special_tokens", ()) or ())


def html_views(s: Session, lm, show_tokens) -> tuple[str, ...]:
    """(pseudo-code, history, template, budget, growth, stop) of the shown state."""
    f = frame_of(s, lm)
    label = ("no tokenizer for the server's model: ⌈characters / 4⌉"
             if s.backend.kind == REMOTE else f"{lm.name} tokenizer")
    return (rv.pseudocode_view(f.state), rv.history_view(f.state, f.new_history),
            rv.template_view(f, specials_of(s, lm), show_tokens=bool(show_tokens)),
            rv.budget_view(f.breakdown, label, f.usage), rv.growth_view(f.state.usage),
            rv.stop_view(f.state))


def save_text(text: str, prefix: str, suffix: str) -> str:
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", prefix=prefix, suffix=suffix,
                                     delete=False) as f:
        f.write(text)
        return f.name


LINK_CHOICES = {"task": tuple(t for t in TASKS if t != FREE_TEXT), "backend": BACKENDS, "react_mode": tuple(MODES)}


def build(lm):
    """Lay out the ReAct loop tab for a loaded model and wire its listeners.

    Returns (outputs, restore): the components a deep link sets (?tab=react&task=…&backend=…&react_mode=…)
    and the function computing their values from a parsed link (app.py calls it on page load).
    """
    run0 = recorded_runs()[TASKS[DEFAULT_TASK]]
    first = start(checked(lm, DEFAULT_TASK, "", SCRIPTED, MODE_LABEL[run0.mode],
                          FMT_LABEL[run0.fmt], True, 0.0, 1.0, 0, 8, lm.context_window, 256, "",
                          ""))
    pseudo0, history0, template0, budget0, growth0, stop0 = html_views(first, lm, False)
    sess = gr.State(first)
    with gr.Row(equal_height=True):
        task = gr.Dropdown(list(TASKS), value=DEFAULT_TASK, label="Task", scale=4)
        task_text = gr.Textbox(label="Your task", max_length=MAX_TASK_CHARS, scale=3, visible=False)
        backend = gr.Dropdown(list(BACKENDS), value=SCRIPTED, label="Backend", scale=2)
        mode = gr.Dropdown(list(MODES), value=MODE_LABEL[run0.mode], label="Mode", scale=1,
                           min_width=130)
        fmt = gr.Dropdown(list(FORMATS), value=FMT_LABEL[run0.fmt], label="Output format", scale=2)
        constrained = gr.Checkbox(True, label="Constrained tool calls", scale=1, min_width=160)
    with gr.Row(visible=False) as server_row:
        url = gr.Textbox(label="Server URL", placeholder="http://127.0.0.1:11434/v1",
                         max_length=500)
        model_name = gr.Textbox(label="Server model", placeholder="qwen2.5:7b", max_length=200)
    with gr.Row(equal_height=True):
        next_btn = gr.Button("Next", variant="primary", elem_id="react-next", min_width=100)
        run_btn = gr.Button("Run to end", elem_id="react-run", min_width=150)
        back_btn = gr.Button("Back", elem_id="react-back", min_width=100)
        reset_btn = gr.Button("Reset", elem_id="react-reset", min_width=100)
        fork_btn = gr.Button("Fork from here", elem_id="react-fork", min_width=190)
        stop_btn = gr.Button("Stop", variant="stop", elem_id="react-stop-run", min_width=90)
        scrub = gr.Slider(0, 1, value=0, step=1, label="Recorded state 0 of 0", scale=4,
                          min_width=300, elem_id="react-scrub", buttons=[])
        show_tokens = gr.Checkbox(False, label="Token boundaries", min_width=150)
        link_btn = gr.Button("Link to this view", size="sm", min_width=150, elem_id="react-link-btn")
        link_box = gr.Textbox(label="Link", interactive=False, buttons=["copy"], elem_id="react-link",
                              min_width=200)
    with gr.Accordion("Guided tour: CoT vs ReAct → a tool call → a validation error → the budget", open=False):
        with gr.Row(equal_height=False):
            tour_md = gr.Markdown("Press **Next stop** to begin.", elem_id="react-tour")
            with gr.Column(scale=0, min_width=220):
                tour_prev = gr.Button("◀ Previous stop", size="sm")
                tour_next = gr.Button("Next stop ▶", size="sm", variant="primary")
    tour_at = gr.State(-1)
    msg = gr.HTML("", elem_id="react-message", js_on_load=None)
    with gr.Row(equal_height=False):
        with gr.Column(scale=11, min_width=560):
            pseudo = gr.HTML(pseudo0, elem_id="react-pseudocode", js_on_load=KEYS_JS)
            budget_html = gr.HTML(budget0, elem_id="react-budget", js_on_load=None)
        with gr.Column(scale=8, min_width=420):
            history = gr.HTML(history0, elem_id="react-history", js_on_load=None)
            stop = gr.HTML(stop0, elem_id="react-stop", js_on_load=None)
        with gr.Column(scale=9, min_width=480):
            template = gr.HTML(template0, elem_id="react-template", js_on_load=None)
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            growth_html = gr.HTML(growth0, elem_id="react-growth", js_on_load=None)
        with gr.Column(scale=2):
            with gr.Accordion("Settings: MAX_STEPS, context budget, reply tokens, sampling",
                              open=False):
                with gr.Row():
                    max_steps = gr.Slider(1, 20, value=8, step=1, label="MAX_STEPS")
                    budget = gr.Number(lm.context_window, precision=0, minimum=MIN_BUDGET,
                                       maximum=REMOTE_WINDOW, label="Context budget (tokens)")
                    reply_tokens = gr.Slider(8, 1024, value=256, step=8,
                                             label="Reply tokens (reserved)")
                with gr.Row():
                    temperature = gr.Slider(0, 2, value=0.0, step=0.05, label="Temperature")
                    top_p = gr.Slider(0.05, 1, value=1.0, step=0.01, label="Top-p")
                    seed = gr.Number(0, precision=0, minimum=0, maximum=2**31 - 1, label="Seed")
            with gr.Row():
                png_btn = gr.Button("Growth chart as PNG", elem_id="react-png")
                json_btn = gr.Button("Export run (JSON)", elem_id="react-export")
                upload = gr.UploadButton("Load a run (JSON)", file_types=[".json"],
                                         elem_id="react-load")
            download = gr.File(label="Download", interactive=False, elem_id="react-download",
                               visible=False)

    outs = [sess, pseudo, history, template, budget_html, growth_html, stop, msg, scrub]
    controls = [task, task_text, backend, mode, fmt, constrained, temperature, top_p, seed,
                max_steps, budget, reply_tokens, url, model_name]

    def views(s: Session, show_tokens, note: str = "", kind: str = "info") -> tuple:
        """The outputs for session s; a view equal to the one on the page is not sent again
        (the browser's update cost grows with what it receives)."""
        fresh = (*html_views(s, lm, show_tokens), message(note, kind))
        sent = [gr.skip() if s.shown and old == new else new
                for old, new in zip(s.shown or fresh, fresh, strict=True)]
        last = len(s.states) - 1
        return (replace(s, shown=fresh), *sent, gr.Slider(
            maximum=max(last, 1), value=s.index, label=f"Recorded state {s.index} of {last}"))

    def failed(s: Session, show_tokens, text: str) -> tuple:
        return views(replace(s, shown=()), show_tokens, text, "error")  # every view redrawn

    def advance(s: Session, show_tokens, phases: int):
        """Up to `phases` phases from the newest state; the views are redrawn after each, and
        while a model writes, the pseudo-code and the template view follow its reply."""
        for _ in range(phases):
            if s.states[-1].done:
                return
            f = None  # computed once per phase: a streamed token redraws two views only
            for new, text in one_phase(s, lm):
                if new is None:
                    f = f or frame_of(s, lm)
                    yield (gr.skip(), rv.pseudocode_view(f.state, running=True), gr.skip(),
                           rv.template_view(f, specials_of(s, lm), show_tokens=bool(show_tokens),
                                            streaming=text), *(gr.skip(),) * 5)
                else:  # after a stream the page no longer shows s.shown: redraw everything
                    s = replace(s, states=s.states + (new,), index=len(s.states),
                                shown=s.shown if f is None else ())
                    yield views(s, show_tokens)

    def on_next(s: Session, show_tokens):
        if s.index < len(s.states) - 1:
            yield views(replace(s, index=s.index + 1), show_tokens)
        elif s.state.done:
            yield views(s, show_tokens, f"The run has stopped ({s.state.stop_reason}). Back, "
                                        "Reset, or Fork from an earlier state.")
        else:
            try:
                yield from advance(s, show_tokens, 1)
            except Exception as e:  # noqa: BLE001 — never a crash: the run stays as it was
                yield failed(s, show_tokens, f"Next failed: {e.__class__.__name__}: {e}")

    def on_run(s: Session, show_tokens):
        s = last = replace(s, index=len(s.states) - 1)
        try:
            for out in advance(s, show_tokens, MAX_PHASES):
                last = out[0] if isinstance(out[0], Session) else last
                yield out
        except Exception as e:  # noqa: BLE001 — never a crash: the run keeps what it reached
            yield failed(last, show_tokens, f"Run to end failed: {e.__class__.__name__}: {e}")
            return
        if not last.states[-1].done:
            yield failed(last, show_tokens, f"Stopped after {MAX_PHASES} phases.")
        elif last is s:
            yield views(s, show_tokens, f"The run has stopped ({s.state.stop_reason}).")

    def on_back(s: Session, show_tokens):
        if s.index == 0:
            return views(s, show_tokens, "This is the first state.")
        return views(replace(s, index=s.index - 1), show_tokens)

    def on_scrub(s: Session, value, show_tokens):
        try:
            i = _number(value, "Recorded state", 0, len(s.states) - 1 or 1, True)
        except ValueError as e:
            return failed(s, show_tokens, str(e))
        return views(replace(s, index=min(i, len(s.states) - 1)), show_tokens)

    def on_reset(s: Session, show_tokens, *ctl):
        try:
            new = start(checked(lm, *ctl), s.loaded)
        except ValueError as e:
            return (*failed(s, show_tokens, str(e)), gr.skip(), gr.skip())
        note = (f"New run: {new.title} — {new.backend.kind}, {MODE_LABEL[new.state.mode]} mode, "
                f"{FMT_LABEL[new.state.fmt]}.")
        return (*views(new, show_tokens, note), MODE_LABEL[new.state.mode],
                FMT_LABEL[new.state.fmt])

    def on_fork(s: Session, show_tokens, *ctl):
        try:
            new = fork(s, checked(lm, *ctl))
        except ValueError as e:
            return failed(s, show_tokens, str(e))
        return views(new, show_tokens, f"Forked at state {s.index}: Next continues from here.")

    def on_task(s: Session, show_tokens, *ctl):
        """A recorded task brings its run's mode and format and starts a new run at once."""
        name, ctl = ctl[0], list(ctl)
        run = run_for(name, s.loaded) if name in TASKS or str(name).startswith(LOADED) else None
        if run is not None:
            ctl[3], ctl[4] = MODE_LABEL[run.mode], FMT_LABEL[run.fmt]
        free = gr.Textbox(visible=name == FREE_TEXT)
        if name == FREE_TEXT:
            hint = "Type your task" + (", choose the Local model or a server," if ctl[2] == SCRIPTED
                                       else "") + " then press Reset."
            return (free, gr.skip(), gr.skip(), *views(s, show_tokens, hint))
        out = on_reset(s, show_tokens, *ctl)
        return (free, *out[-2:], *out[:-2])

    def on_png(s: Session):
        if not s.state.usage:
            return gr.skip(), message("No model call yet: nothing to chart.", "error")
        path = save_text("", "react-growth-", ".png")
        rv.growth_figure(s.state.usage, f"Input tokens per model call — {s.title}").savefig(path)
        return gr.File(path, visible=True), message("The growth chart (PNG) is ready to download.")

    def on_export(s: Session):
        run = record_run(s.states[-1], s.tools, s.title, "exported from ReAct Lab")
        path = save_text(json.dumps(run, ensure_ascii=False, indent=1) + "\n", "react-run-",
                         ".json")
        return gr.File(path, visible=True), message("The run (JSON) is ready to download; Load a "
                                                    "run replays it.")

    def on_load(path, s: Session, show_tokens):
        try:
            new = load_session(path, lm)
        except (OSError, ValueError) as e:
            return (*failed(s, show_tokens, str(e)), *(gr.skip(),) * 4)
        label = LOADED + new.title
        return (*views(new, show_tokens, f"Loaded “{new.title}”: a scripted replay of it."),
                gr.Dropdown(choices=[*TASKS, label], value=label), SCRIPTED,
                MODE_LABEL[new.state.mode], FMT_LABEL[new.state.fmt])

    quiet = dict(show_progress="hidden")
    next_ev = next_btn.click(on_next, [sess, show_tokens], outs, **quiet)
    run_ev = run_btn.click(on_run, [sess, show_tokens], outs, **quiet)
    stop_btn.click(None, None, None, cancels=[next_ev, run_ev]).then(
        lambda s, t: views(replace(s, shown=()), t, "Stopped."), [sess, show_tokens], outs, **quiet)
    back_btn.click(on_back, [sess, show_tokens], outs, **quiet)
    scrub.input(on_scrub, [sess, scrub, show_tokens], outs, trigger_mode="always_last", **quiet)
    reset_btn.click(on_reset, [sess, show_tokens, *controls], [*outs, mode, fmt], **quiet)
    fork_btn.click(on_fork, [sess, show_tokens, *controls], outs, **quiet)
    task.input(on_task, [sess, show_tokens, *controls], [task_text, mode, fmt, *outs], **quiet)
    backend.input(lambda b: (gr.Row(visible=b == REMOTE), message(SETTINGS_HINT)), backend,
                  [server_row, msg], **quiet)
    for c in (mode, fmt, constrained, temperature, top_p, seed, max_steps, budget, reply_tokens):
        c.input(lambda: message(SETTINGS_HINT), None, msg, **quiet)
    show_tokens.change(views, [sess, show_tokens], outs, **quiet)
    png_btn.click(on_png, sess, [download, msg])
    json_btn.click(on_export, sess, [download, msg])
    upload.upload(on_load, [upload, sess, show_tokens], [*outs, task, backend, mode, fmt])

    def on_tour(delta, at, s: Session, show_tokens, *ctl):
        """Go to a stop of the ReAct tour: its task starts a new run, and its text is shown."""
        i = max(0, min(len(tour.REACT_TOUR) - 1, int(at) + delta))
        ctl = list(ctl)
        ctl[0] = tour.REACT_TOUR[i].settings["task"]
        ctl[2] = SCRIPTED
        out = on_task(s, show_tokens, *ctl)
        return (tour.stop_markdown(tour.REACT_TOUR, i), i, ctl[0], SCRIPTED, *out)

    tour_outs = [tour_md, tour_at, task, backend, task_text, mode, fmt, *outs]
    tour_next.click(lambda *a: on_tour(1, *a), [tour_at, sess, show_tokens, *controls], tour_outs, api_name=False)
    tour_prev.click(lambda *a: on_tour(-1, *a), [tour_at, sess, show_tokens, *controls], tour_outs, api_name=False)

    defaults = [DEFAULT_TASK, "", SCRIPTED, MODE_LABEL[run0.mode], FMT_LABEL[run0.fmt], True, 0.0, 1.0, 0,
                8, lm.context_window, 256, "", ""]

    def on_link(task_, backend_, mode_, temperature_, top_p_, seed_, max_steps_):
        values = {"tab": "react", "task": task_, "backend": backend_, "react_mode": mode_,
                  "react_temperature": temperature_, "react_top_p": top_p_, "react_seed": seed_,
                  "max_steps": max_steps_}
        link = deeplink.parse({k: str(v) for k, v in values.items() if v is not None}, LINK_CHOICES)
        return deeplink.query(link.values)

    link_btn.click(on_link, [task, backend, mode, temperature, top_p, seed, max_steps], link_box,
                   api_name="react_link").then(
        None, link_box, link_box, js="(q) => q.startsWith('?') ? location.origin + location.pathname + q : q")

    def restore(values: dict):
        """Controls and views for a deep link: the task's run with the linked backend and mode."""
        ctl = list(defaults)
        if "task" in values:
            run = run_for(values["task"], None)
            ctl[0] = values["task"]
            if run is not None:
                ctl[3], ctl[4] = MODE_LABEL[run.mode], FMT_LABEL[run.fmt]
        ctl[2] = values.get("backend", ctl[2])
        ctl[3] = values.get("react_mode", ctl[3])
        ctl[6] = values.get("react_temperature", ctl[6])
        ctl[7] = values.get("react_top_p", ctl[7])
        ctl[8] = values.get("react_seed", ctl[8])
        ctl[9] = values.get("max_steps", ctl[9])
        out = on_reset(first, False, *ctl)
        return (ctl[0], ctl[2], ctl[6], ctl[7], ctl[8], ctl[9], *out[:-2], out[-2], out[-1])

    return [task, backend, temperature, top_p, seed, max_steps, *outs, mode, fmt], restore


# A presenter's clicker sends PageDown / PageUp: Next / Back while the ReAct tab is shown and no
# form field has the focus (the page-wide shortcuts n, b and r are viz/theme.py's).
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
