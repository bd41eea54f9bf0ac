"""What the ReAct tab does when a control is used: one module-level function per listener.

Each handler takes the tab's parts `p` (viz/react_tab.Parts: every component by name) and the
model `lm` — bound by the layout with functools.partial — then the values of its inputs, and
returns (or yields) {component: value} for the components it changes; a component left out is
not sent. A bad value never raises into Gradio: it becomes a message in #react-message and the
run stays as it was. The run itself (checks, start, fork, stepping, the HTML of the views) is
viz/react/run.py; here it is only turned into updates.

What it does not know: the layout, or how the loop and the views work inside.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import gradio as gr

from agent.controls import MAX_LINKED_STATE
from agent.mcp.client import BUILT_IN, UNTRUSTED_SERVER
from agent.parameters import number
from agent.recording import record_run
from viz import deeplink, tour
from viz.react import context as ctx
from viz.react import run, tool_panels
from viz.react import tools as rt
from viz.react import views as rv
from viz.react.run import FMT_LABEL, FREE_TEXT, LOADED, MODE_LABEL, SCRIPTED, TASKS, Choices, Session
from viz.render import message

MAX_PHASES = 400  # Run to end gives up after this many phases …
MAX_RUN_S = 300.0  # … or this many seconds of work (MAX_UPLOADED_RUN_S replaying a visitor's file) …
MAX_UPLOADED_RUN_S = 20.0
MAX_SENT_BYTES = 20_000_000  # … or after sending this much HTML, per press
REDRAW_EVERY_S = 0.1  # Run to end redraws a finished phase at most this often (the last always)
SETTINGS_HINT = ("Settings apply on Reset (a new run) or on Fork from here (this run, continued "
                 "from the shown state).")
CHOICE_HINT = "Next or Run to end starts a new run with these choices (or press Reset now)."
NEW_RUN = "A new run with the controls' choices."
# A link's choices by stable name (?task=berlin-weather&backend=scripted&react_mode=react); a link
# written with the labels before still opens.
LINK_CHOICES = {"task": run.TASK_LABELS, "backend": deeplink.named(run.BACKENDS, run.BACKEND_NAMES),
                "react_mode": deeplink.named(run.MODES, (m.value for m in run.MODES.values()))}


# --- the views of a session ----------------------------------------------------------------------

def views(p, lm, s: Session, show_tokens, note: str = "", kind: str = "info") -> dict:
    """The session and its views; a view equal to the one on the page is not sent again (the
    browser's update cost grows with what it receives). Only digests of the views are kept."""
    fresh = (*run.html_views(s, lm, show_tokens), message(note, kind))
    digests = tuple(hash(v) for v in fresh)
    out = {c: v for c, v, old, new in zip(p.views, fresh, s.shown or (None,) * len(fresh), digests,
                                          strict=True) if old != new}
    last = len(s.states) - 1
    out[p.scrub] = gr.Slider(maximum=max(last, 1), value=s.index,
                             label=f"Recorded state {s.index} of {last}")
    s = replace(s, shown=digests)
    return {p.sess: s, **out, **tool_panels.tool_views(p, s)}  # the tool panels: sent when they changed


def failed(p, lm, s: Session, show_tokens, text: str) -> dict:
    return views(p, lm, replace(s, shown=()), show_tokens, text, "error")  # every view redrawn


def stopped(p, lm, s: Session, show_tokens) -> dict:
    """After Stop: every view redrawn from the session as it was last stored; a local model's
    reply still running for this browser session stops at its next token."""
    getattr(lm, "stop", lambda: 0)()
    return views(p, lm, replace(s, shown=()), show_tokens, "Stopped.")


def settings_hint(p) -> dict:
    return {p.msg: message(SETTINGS_HINT)}


def on_backend(p, backend, server, url) -> dict:
    """The server row shows for the OpenAI-compatible backend, with the chosen server's models."""
    out = {p.server_row: gr.Row(visible=backend == run.REMOTE), p.msg: message(CHOICE_HINT)}
    if backend == run.REMOTE and (server or url):
        out.update(on_server(p, server, url))
    return out


def on_server(p, server, url) -> dict:
    """The models a server lists, offered under “Server model” (any other name may be typed)."""
    where = str(url or "").strip() or str(server or "").strip()
    try:
        models = run.models_of(where)
    except ValueError as e:
        return {p.msg: message(str(e), "error")}
    note = f"{where} lists {len(models)} model{'s' * (len(models) != 1)}; Reset starts a run with it."
    return {p.model_name: gr.Dropdown(choices=list(models), value=models[0] if models else ""),
            p.msg: message(note)}


# --- stepping ------------------------------------------------------------------------------------

def advance(p, lm, s: Session, show_tokens, phases: int, redraw_every: float = 0.0):
    """Up to `phases` phases from the newest state. After a phase the views are redrawn (at most
    every `redraw_every` seconds; the last phase always); while a model writes, the pseudo-code
    and the template view follow its reply. s.shown always describes what the page shows."""
    drawn, pending = time.monotonic(), False
    for _ in range(phases):
        if s.states[-1].done or rt.awaiting_call(s) is not None:  # a call waits for Approve / Deny
            break
        f = None  # computed once per phase: a streamed token redraws two views only
        for new, text in run.one_phase(s, lm):
            if new is None:
                f = f or run.frame_of(s, lm)
                yield {p.pseudo: rv.pseudocode_view(f.state, running=True),
                       p.template: rv.template_view(f, run.specials_of(s, lm), streaming=text,
                                                    show_tokens=bool(show_tokens))}
                continue  # after a stream the page no longer shows s.shown: redraw everything
            s = replace(s, states=s.states + (new,), index=len(s.states), shown=s.shown if f is None else ())
            pending = time.monotonic() - drawn < redraw_every
            if not pending:
                drawn = time.monotonic()
                yield views(p, lm, s, show_tokens)
    if pending:
        yield views(p, lm, s, show_tokens)


def on_choice(p) -> dict:
    """A run-defining control changed (Your task, Backend, Local weights, Mode, Output format,
    Constrained): the next Next or Run to end starts a new run with what the controls show then."""
    return {p.pending: True, p.msg: message(CHOICE_HINT)}


def fresh(p, lm, s: Session, show_tokens, pending, values) -> tuple[Session | None, list[dict]]:
    """(the session to step, what to show first): when a run-defining control changed since the run
    started (`pending`, set by on_choice), a new run from the controls' `values` as they are at
    this press; else `s` as it is. None when the new run could not start (the message says why)."""
    if not pending or not values:
        return s, []
    try:
        new = keep_exports(run.start(run.checked(lm, Choices.of(values)), s.loaded, s.key), s)
    except ValueError as e:
        return None, [failed(p, lm, s, show_tokens, str(e))]
    return new, [{**views(p, lm, new, show_tokens, NEW_RUN + weights_note(new)), p.pending: None}]


def on_next(p, lm, s: Session, show_tokens, pending=None, *values):
    s, first = fresh(p, lm, s, show_tokens, pending, values)
    yield from first
    if s is None:
        return
    if s.index < len(s.states) - 1:
        yield views(p, lm, replace(s, index=s.index + 1), show_tokens)
    elif s.state.done:
        yield views(p, lm, s, show_tokens, f"The run has stopped ({s.state.stop_reason}). Back, "
                                           "Reset, or Fork from an earlier state.")
    elif rt.awaiting_call(s) is not None:
        yield views(p, lm, s, show_tokens, rt.APPROVAL_NOTE)
    else:
        try:
            yield from advance(p, lm, s, show_tokens, 1)
        except Exception as e:  # noqa: BLE001 — never a crash: the run stays as it was
            yield failed(p, lm, s, show_tokens, f"Next failed: {e.__class__.__name__}: {e}")


def on_run(p, lm, s: Session, show_tokens, pending=None, *values):
    """Run to end, bounded per press in phases, seconds and bytes sent; a new run first when the
    run-defining controls changed since this one started (on_choice)."""
    s, first = fresh(p, lm, s, show_tokens, pending, values)
    yield from first
    if s is None:
        return
    s = last = replace(s, index=len(s.states) - 1)
    start, sent, why = time.monotonic(), 0, ""
    budget_s = MAX_UPLOADED_RUN_S if run.replays_upload(s) else MAX_RUN_S
    try:
        for out in advance(p, lm, s, show_tokens, MAX_PHASES, REDRAW_EVERY_S):
            last = out.get(p.sess, last)
            sent += sum(len(v) for v in out.values() if isinstance(v, str))
            yield out
            if time.monotonic() - start > budget_s or sent > MAX_SENT_BYTES:
                why = f"{budget_s:g} s of work" if sent <= MAX_SENT_BYTES else f"{sent:,} bytes sent"
                break
    except Exception as e:  # noqa: BLE001 — never a crash: the run keeps what it reached
        yield failed(p, lm, last, show_tokens, f"Run to end failed: {e.__class__.__name__}: {e}")
        return
    if rt.awaiting_call(last) is not None:
        yield views(p, lm, last, show_tokens, rt.APPROVAL_NOTE)
    elif not last.states[-1].done:
        why = why or f"{MAX_PHASES} phases"
        yield failed(p, lm, last, show_tokens, f"Stopped after {why}: Next or Run to end continues.")
    elif last is s:
        yield views(p, lm, s, show_tokens, f"The run has stopped ({s.state.stop_reason}).")


def on_back(p, lm, s: Session, show_tokens) -> dict:
    if s.index == 0:
        return views(p, lm, s, show_tokens, "This is the first state.")
    return views(p, lm, replace(s, index=s.index - 1), show_tokens)


def on_scrub(p, lm, s: Session, value, show_tokens) -> dict:
    """The slider (or its number box) moved to state `value`. The listener skips Gradio's own check
    of the slider's bounds, whose error badge a typed 2 of "states 0–1" raised: a state not
    recorded yet shows the newest one, and says so."""
    last = len(s.states) - 1
    try:
        i = number(value, "Recorded state", 0, max(last, MAX_LINKED_STATE), integer=True)
    except ValueError as e:
        return failed(p, lm, s, show_tokens, str(e))
    if i > last:
        return views(p, lm, replace(s, index=last), show_tokens,
                     f"State {i} is not recorded yet: {f'states 0 … {last} are' if last else 'only state 0 is'}. "
                     f"Showing state {last}; Next records the next one.")
    return views(p, lm, replace(s, index=i), show_tokens)


# --- a new run, a fork, a task, the tour ---------------------------------------------------------

def on_reset(p, lm, s: Session, show_tokens, *values) -> dict:
    """A new run from the controls (`values`: the fields of react_run.Choices, in order)."""
    try:
        new = run.start(run.checked(lm, Choices.of(values)), s.loaded, s.key)
    except ValueError as e:
        return failed(p, lm, s, show_tokens, str(e))
    mode, fmt = MODE_LABEL[new.state.mode], FMT_LABEL[new.state.fmt]
    note = f"New run: {new.title} — {new.backend.kind}, {mode} mode, {fmt}." + weights_note(new)
    return {**views(p, lm, keep_exports(new, s), show_tokens, note), p.mode: mode, p.fmt: fmt, p.pending: None}


def weights_note(s: Session) -> str:
    """What the Local weights change, said where the run starts."""
    if s.backend.kind != run.LOCAL or s.backend.weights == "base":
        return ""
    return (f" Weights: {s.backend.weights} — the ReAct turn format was trained into them, so the prompt "
            "carries no exemplars (see the template and the budget); the loop, its step cap and its "
            "three checks are the same as for the base weights.")


def on_fork(p, lm, s: Session, show_tokens, *values) -> dict:
    try:
        new = run.fork(s, run.checked(lm, Choices.of(values)))
    except ValueError as e:
        return failed(p, lm, s, show_tokens, str(e))
    return {**views(p, lm, new, show_tokens, f"Forked at state {s.index}: Next continues from here."),
            p.pending: None}


def on_task(p, lm, s: Session, show_tokens, *values) -> dict:
    """A recorded task brings its run's mode and format and starts a new run at once."""
    c = Choices.of(values)
    known = c.task in TASKS or str(c.task).startswith(LOADED)
    recorded = run.run_for(c.task, s.loaded) if known else None
    if recorded is not None:
        c = replace(c, mode=MODE_LABEL[recorded.mode], fmt=FMT_LABEL[recorded.fmt])
        c, kept = ctx.recorded_choices(p, c, recorded, lm.context_window)  # its budget and context
        if rt.extra_of(recorded) is None and c.tools_from == UNTRUSTED_SERVER.label:
            # the security demo's server serves only its own replays: another recorded task returns to
            # the built-in functions (it would else fail: "the run needs tools that are not available")
            c = replace(c, tools_from=BUILT_IN, defence=False)
            kept = {**kept, p.tools_from: BUILT_IN, p.defence: False}
    free = {p.task_text: gr.Textbox(visible=c.task == FREE_TEXT), **(kept if recorded is not None else {})}
    if c.task == FREE_TEXT:
        backend = run.backend_for_typed_task(c.backend)
        moved = {p.backend: backend} if backend != c.backend else {}
        hint = ("Type your task, then press Next or Run to end"
                + (" (Backend is now the Local model: a scripted replay only replays recorded runs)."
                   if moved else "."))
        return {**free, **moved, **views(p, lm, s, show_tokens, hint), p.pending: True}
    return {**free, **task_controls(p, c.task), **on_reset(p, lm, s, show_tokens, *c.values())}


def on_tour(p, lm, delta: int, at, s: Session, show_tokens, *values) -> dict:
    """Go to a stop of the ReAct tour: its task starts a new run (scripted), and its text is shown."""
    i = max(0, min(len(tour.REACT_TOUR) - 1, int(at) + delta))
    task = run.TASK_LABELS[tour.REACT_TOUR[i].settings["task"]]  # the tour names a run by its id
    c = replace(Choices.of(values), task=task, backend=SCRIPTED)
    return {p.tour_md: tour.stop_markdown(tour.REACT_TOUR, i), p.tour_at: i, p.task: c.task,
            p.backend: SCRIPTED, **on_task(p, lm, s, show_tokens, *c.values())}


# --- files: export, load -------------------------------------------------------------------------

def keep_exports(new: Session, old: Session) -> Session:
    """A new run of the same tab keeps the tab's export folder."""
    return replace(new, exports=old.exports, wire_shown=old.wire_shown)


def export_path(s: Session, name: str) -> tuple[Session, Path]:
    """`name` in the session's own export folder (made on first use, removed when the session
    ends — see `remove_exports`); a new export of the same kind replaces the old file."""
    folder = s.exports or tempfile.mkdtemp(prefix="react-lab-exports-")
    return replace(s, exports=folder), Path(folder) / name


def remove_exports(s: Session | None) -> None:
    """gr.State's delete callback: the session ended or expired, its exported files go."""
    if isinstance(s, Session) and s.exports:
        shutil.rmtree(s.exports, ignore_errors=True)


def on_png(p, s: Session) -> dict:
    if not s.state.usage:
        return {p.msg: message("No model call yet: nothing to chart.", "error")}
    s, path = export_path(s, "react-growth.png")
    rv.growth_figure(s.state.usage, f"Input tokens per model call — {s.title}").savefig(path)
    return {p.sess: s, p.download: gr.File(str(path), visible=True),
            p.msg: message("The growth chart (PNG) is ready to download.")}


def on_export(p, s: Session) -> dict:
    recorded = record_run(s.states[-1], s.tools, s.title, "exported from ReAct Lab")
    s, path = export_path(s, "react-run.json")
    path.write_text(json.dumps(recorded, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return {p.sess: s, p.download: gr.File(str(path), visible=True),
            p.msg: message("The run (JSON) is ready to download; Load a run replays it.")}


def on_load(p, lm, path, s: Session, show_tokens) -> dict:
    try:
        new = run.load_session(path, lm)
    except (OSError, ValueError) as e:
        return failed(p, lm, s, show_tokens, str(e))
    label = LOADED + new.title
    return {**views(p, lm, keep_exports(new, s), show_tokens,
                    f"Loaded “{new.title}”: a scripted replay of it."),
            p.task: gr.Dropdown(choices=[*TASKS, label], value=label), p.backend: SCRIPTED,
            p.mode: MODE_LABEL[new.state.mode], p.fmt: FMT_LABEL[new.state.fmt]}


def task_controls(p, task) -> dict:
    """A shipped MCP replay shows its source and defence in the controls."""
    run_ = run.recorded_runs().get(str(rt.MCP_TASKS.get(task)))
    extra = rt.extra_of(run_)
    return {p.tools_from: extra["tools_from"], p.defence: extra["defence"]} if extra else {}


# --- deep links ----------------------------------------------------------------------------------

def react_link(task, backend, mode, temperature, top_p, seed, max_steps, step=0) -> str:
    """The query of a link to this view (?tab=react&task=…&step=…); checked like any incoming link.
    The step (the recorded state shown) is written for a scripted replay, the one backend that
    replays the same states when the link is opened."""
    values = {"tab": "react", "task": task, "backend": backend, "react_mode": mode,
              "react_temperature": temperature, "react_top_p": top_p, "react_seed": seed,
              "max_steps": max_steps, "step": step if backend == run.SCRIPTED and step else None}
    link = deeplink.parse({k: str(v) for k, v in values.items() if v is not None}, LINK_CHOICES)
    return deeplink.query(link.values, LINK_CHOICES)


def link_note(backend, step) -> str:
    """What a link written away from the first state leaves out, said where the link is made: only
    a scripted replay replays the same states; a model or a server would answer afresh."""
    if backend == run.SCRIPTED or not isinstance(step, (int, float)) or step <= 0:
        return ""
    return message(f"This link opens the task at its first state, not at state {int(step)}: with {backend} "
                   "the run would call the model again and may take another path. Only a scripted replay's "
                   "link carries the step.")


def restore(p, lm, first: Session, values: dict) -> dict:
    """Controls and views for a parsed deep link: the task's run with the linked backend and mode."""
    c = run.default_choices(lm)
    if "task" in values:
        recorded = run.run_for(values["task"], None)
        c = replace(c, task=values["task"])
        if recorded is not None:
            c = replace(c, mode=MODE_LABEL[recorded.mode], fmt=FMT_LABEL[recorded.fmt])
    c = replace(c, backend=values.get("backend", c.backend), mode=values.get("react_mode", c.mode),
                temperature=values.get("react_temperature", c.temperature),
                top_p=values.get("react_top_p", c.top_p), seed=values.get("react_seed", c.seed),
                max_steps=values.get("max_steps", c.max_steps))
    shown = {p.task: c.task, p.backend: c.backend, p.temperature: c.temperature, p.top_p: c.top_p,
             p.seed: c.seed, p.max_steps: c.max_steps, p.mode: c.mode, p.fmt: c.fmt}
    out = {**shown, **on_reset(p, lm, first, False, *c.values())}
    s = out.get(p.sess)
    if values.get("step") and c.backend == run.SCRIPTED and isinstance(s, Session):
        for later in advance(p, lm, s, False, values["step"]):  # the replay's states up to the linked one
            out.update(later)
    return out
