"""The ReAct tab's run, without a page: the controls' values checked, a Session started, forked,
loaded from a file, stepped (a real model's reply streamed) and drawn as the six views' HTML.

    c = checked(lm, Choices(task=…, backend=LOCAL, …))   # ValueError: a sentence a person can act on
    s = start(c)            s = fork(s, c)            s = load_session(path, lm)
    for new_state, text in one_phase(s, lm): …         # text: the reply so far, while it streams
    html_views(s, lm, show_tokens)                       # HtmlViews: .pseudo .history .template .budget …

What it knows: the Task, Backend, Mode and Output format choices and their labels, the text
bounds (MAX_TASK_CHARS, …) and every run default (`default_choices`) — one place for each, read
by the layout (viz/react/tab.py), the handlers (viz/react/handlers.py) and the deep links. The
numeric controls' bounds, steps and defaults are the registry's (agent/controls.py `REACT`).
A Session holds the tuple of loop States recorded so far and the index shown; it keeps no rendered
HTML (only digests of the views last sent, to skip unchanged ones). The OpenAI-compatible server is
one the operator allowed, chosen by label (or, only where agent.llm.remote.free_url_allowed(), a
typed URL); agent.llm.remote guards every request to it.

What it does not know: Gradio, or how the loop, a backend, the template or the budget work inside.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlparse

from agent import loop
from agent.backends import BackendError, BackendReply, LocalBackend, ScriptedBackend, Settings, observed
from agent.budget import tools_unrendered
from agent.context.memory import Memory
from agent.controls import REACT, RUN
from agent.llm import remote
from agent.llm.server_info import serves_bundled, streams, tool_choice
from agent.llm.weights import DEFAULT_WEIGHTS
from agent.loop import Phase, State
from agent.mcp.client import BUILT_IN
from agent.messages import SystemMessage
from agent.recording import RecordedRun, load_run, run_from_dict, shipped_runs, start_state, tools_of
from agent.sandbox import code_tool_enabled
from agent.template import Fmt, Mode, system_prompt
from agent.tools import Tool
from viz.react import context_run as rc
from viz.react import tools as rt
from viz.react import views as rv

FREE_TEXT = "Free text…"
CODE_TASK = "What is the average temperature of Berlin, Madrid and Rome? (code tool)"
TASKS = {  # the Task dropdown → the shipped recorded run it replays (None: the user's own text)
    "What's the weather in Berlin? (the lecture's trace)": "berlin-weather",
    "A train travels 345 km in 2.5 hours … (arithmetic)": "arithmetic",
    "In which country was the author of Invisible Cities born? (two-hop search)": "two-hop-search",
    "What's the weather in Berlin and in Paris? (two calls, two ids)": "two-cities",
    "What's the weather in Paris? (a validation error, repaired)": "validation-recovery",
    "Seven cities on a small budget (compaction at 60 %)": "compaction-long-run",
    **rt.MCP_TASKS,  # scripted replays over MCP (assets/runs/mcp)
    "What is the average temperature of Berlin, Madrid and Rome? (specific tools)":
        "average-temperature-specific-tools",
    CODE_TASK: "average-temperature-code-tool",
    FREE_TEXT: None,
}
DEFAULT_TASK = next(iter(TASKS))
if not code_tool_enabled():  # the deployment switched the code tool off (REACT_LAB_CODE_TOOL=off)
    del TASKS[CODE_TASK]
TASK_LABELS = {run_id: label for label, run_id in TASKS.items() if run_id}  # a run's stable id → its label
LOADED = "Loaded run: "
SCRIPTED, LOCAL, REMOTE = "Scripted replay", "Local model", "OpenAI-compatible server"
BACKENDS = (SCRIPTED, LOCAL, REMOTE)
BACKEND_NAMES = ("scripted", "local", "remote")  # their stable names (deep links)
MODES = {"ReAct": Mode.REACT, "Act": Mode.ACT, "CoT only": Mode.COT}
FORMATS = {"native tool calls": Fmt.NATIVE, "ReAct text": Fmt.REACT_TEXT}
MODE_LABEL = {v: k for k, v in MODES.items()}
FMT_LABEL = {v: k for k, v in FORMATS.items()}
MAX_TASK_CHARS = 2_000
MIN_BUDGET = REACT["budget"].low
REMOTE_WINDOW = 1_048_576  # a server's window is unknown: its budget may go up to this
CALL_LIMIT_S = 60.0  # wall-clock limit of one model call
STREAM_EVERY_S = 0.1  # a streamed reply is redrawn at most this often …
FULL_RATE_STREAMS = 2  # … while at most this many stream at once; more share 2 / 0.1 s = 20 redraws a second
MAX_RUN_BYTES = 2_000_000
MAX_RUN_REPLIES = 100


@dataclass(frozen=True)
class Choices:
    """The run controls as the page sends them (unchecked), in the order of their inputs.

    A field here is a component of the same name in viz/react_tab.Parts; Reset, Fork, the Task
    dropdown and the tour receive all of them. Defaults: `default_choices`.
    """

    task: str = DEFAULT_TASK
    task_text: str = ""
    backend: str = SCRIPTED
    weights: str = DEFAULT_WEIGHTS  # "Local weights": the Local model's base or trajectory-tuned weights
    mode: str = "Act"
    fmt: str = "native tool calls"
    constrained: bool = True
    temperature: float = RUN.temperature
    top_p: float = RUN.top_p
    seed: int = RUN.seed
    max_steps: int = RUN.max_steps
    budget: int | None = None  # None: the model's context window
    reply_tokens: int = RUN.max_new_tokens
    url: str = ""  # a free server URL: only where remote.free_url_allowed()
    model_name: str = ""
    server: str = ""  # the label of a server the operator allowed (remote.servers())
    few_shot: int = RUN.few_shot  # the context (viz/react/context.py): worked exemplars 0–3,
    retrieve: bool = RUN.retrieve  # BM25 passages before the first call,
    memory: bool = RUN.memory  # the session's facts and the `remember` tool,
    compact: bool = False  # compaction on, …
    compact_at: int = REACT["compact_at"].default  # … past this % of the budget;
    facts: Memory = Memory()  # the browser session's facts (a gr.State: never sent by a visitor)
    tools_from: str = BUILT_IN  # "Tools from": agent.mcp.client.sources()
    tool_set: str = rt.DEFAULT_TOOL_SET  # a typed task's tools: agent.tools.tool_sets()
    defence: bool = False  # calls to an untrusted MCP server's tools wait for approval

    @classmethod
    def of(cls, values) -> Choices:
        """The page's input values (in the order of the fields, as `values()` gives them) by name;
        a list of another length is refused, never read shifted."""
        return cls(**dict(zip(CHOICE_NAMES, values, strict=True)))

    def values(self) -> tuple:
        """The fields' values in their order: the inputs of Reset, Fork, Task and the tour."""
        return tuple(getattr(self, name) for name in CHOICE_NAMES)


CHOICE_NAMES = tuple(f.name for f in fields(Choices))


class HtmlViews(NamedTuple):
    """The six views of the shown state, by name (their order is viz/react/tab.Parts.views')."""

    pseudo: str
    history: str
    template: str
    budget: str
    growth: str
    stop: str


@dataclass(frozen=True)
class BackendSpec:
    """How to reach the backend; the backend object is built per call (it may hold the model)."""

    kind: str
    replies: tuple[BackendReply, ...] = ()
    url: str = ""
    model: str = ""
    weights: str = "base"  # the Local model's weights (agent.llm.weights)


@dataclass(frozen=True)
class Session:
    """One browser tab's run: every State so far, the one shown, and what the run needs."""

    states: tuple[State, ...]
    index: int
    tools: tuple[Tool, ...]
    backend: BackendSpec
    title: str
    loaded: RecordedRun | None = None  # a run loaded from a file, offered as a task
    shown: tuple[int, ...] = ()  # digests of the views last sent to the page: unchanged ones are skipped
    exports: str = ""  # this session's folder of exported files (removed when the session ends)
    tools_from: str = BUILT_IN  # where the tools come from (viz/react/tools.py)
    key: str = ""  # the session's MCP client key (its one server process), kept across runs
    defence: bool = False
    approved: frozenset[str] = frozenset()  # approval_key of the calls the visitor approved
    denied: frozenset[str] = frozenset()  # … and denied (the policy layer refuses them)
    wire_shown: int = 0  # digest of the tool panels last sent

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
    memory: Memory = Memory()  # the facts every call of the run re-sends (empty: memory off)
    tools_from: str = BUILT_IN
    tool_set: str = rt.DEFAULT_TOOL_SET
    defence: bool = False
    weights: str = "base"


@lru_cache(maxsize=1)
def recorded_runs() -> dict[str, RecordedRun]:
    return {**{stem: load_run(path) for stem, path in shipped_runs().items()},
            **{stem: run for stem, (run, _) in rt.mcp_recorded().items()}}


def default_choices(lm) -> Choices:
    """The controls as the page starts: the default task's recorded run, its mode and format."""
    run = recorded_runs()[TASKS[DEFAULT_TASK]]
    weights = DEFAULT_WEIGHTS if DEFAULT_WEIGHTS in lm.weights_choices else "base"
    return Choices(mode=MODE_LABEL[run.mode], fmt=FMT_LABEL[run.fmt], budget=lm.context_window, weights=weights)


def checked_settings(window: int, max_steps, budget, reply_tokens, temperature=0.0, top_p=1.0,
                     seed=0, constrained=False) -> Settings:
    """A run's Settings with every value bounded; ValueError names the first bad one.

    >>> checked_settings(8192, 3, 512, 64).context_budget
    512
    """
    return Settings(
        max_steps=REACT["max_steps"].check(max_steps),
        context_budget=REACT["budget"].check(budget, high=window),
        max_new_tokens=REACT["reply_tokens"].check(reply_tokens),
        temperature=REACT["temperature"].check(temperature), top_p=REACT["top_p"].check(top_p),
        seed=REACT["seed"].check(seed), constrained=bool(constrained), timeout_s=CALL_LIMIT_S)


def checked(lm, c: Choices) -> Controls:
    """The controls as values; ValueError with a sentence a person can act on."""
    if c.task not in TASKS and not str(c.task).startswith(LOADED):
        raise ValueError(f"Unknown task {c.task!r}")
    for value, name, choices in ((c.backend, "backend", BACKENDS), (c.mode, "mode", MODES),
                                 (c.fmt, "output format", FORMATS)):
        if value not in choices:
            raise ValueError(f"Unknown {name} {value!r}")
    text = str(c.task_text or "").replace("\x00", "").strip()
    if c.task == FREE_TEXT and not text:
        raise ValueError("Type a task in “Your task” first.")
    if len(text) > MAX_TASK_CHARS:
        raise ValueError(f"The task is longer than {MAX_TASK_CHARS:,} characters.")
    server, model_name = checked_server(c) if c.backend == REMOTE else ("", "")
    window = REMOTE_WINDOW if c.backend == REMOTE else lm.context_window
    settings = checked_settings(window, c.max_steps, c.budget, c.reply_tokens, c.temperature,
                                c.top_p, c.seed, c.constrained)
    settings, memory = rc.checked_context(settings, c)
    weights = checked_weights(lm, c.weights)
    if c.backend == LOCAL and weights != "base":
        settings = replace(settings, few_shot=0)  # the format is in the weights: no exemplars sent
    tools_from, tool_set = rt.checked_source(c.tools_from, c.tool_set)
    return Controls(c.task, text, c.backend, MODES[c.mode], FORMATS[c.fmt], settings, server, model_name,
                    memory=memory, tools_from=tools_from, tool_set=tool_set, defence=bool(c.defence),
                    weights=weights if c.backend == LOCAL else "base")


def checked_weights(lm, weights) -> str:
    """The "Local weights" choice, or ValueError naming the choices this model offers."""
    if weights not in lm.weights_choices:
        raise ValueError(f"Unknown Local weights {str(weights)[:60]!r}: choose one of "
                         f"{', '.join(lm.weights_choices)}.")
    return weights


def checked_server(c: Choices) -> tuple[str, str]:
    """(server, model) of the OpenAI-compatible backend: a typed URL (its shape checked here, where
    it may go checked by agent.llm.remote when the run calls it) or the label of an allowed server."""
    url, label = str(c.url or "").strip(), str(c.server or "").strip()
    model_name = str(c.model_name or "").strip()
    if url:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname or len(url) > 500:
            raise ValueError(f"The server URL must be http:// or https:// with a host, got {url!r}")
    elif label not in server_labels():
        raise ValueError(f"Choose a server under “Server” (one the operator allowed), got {label!r}"
                         if server_labels() else "No OpenAI-compatible server is allowed here: the "
                         "operator lists them when starting the app (--remote).")
    if not model_name or len(model_name) > 200:
        raise ValueError("Name the server's model (at most 200 characters), e.g. qwen2.5:7b")
    return url or label, model_name


def server_labels() -> list[str]:
    """The servers a visitor may choose (the operator's --remote list)."""
    return [s.label for s in remote.servers()]


def models_of(server: str) -> tuple[str, ...]:
    """The model ids a server lists (GET /v1/models through agent.llm.remote's guard); ValueError
    with the guard's or the server's reason."""
    try:
        return remote.list_models(server)
    except BackendError as e:
        raise ValueError(f"No model list from {server}: {e}") from None


def replays_upload(s: Session) -> bool:
    """True while the session replays a visitor's uploaded file (its budget per press is shorter)."""
    return s.loaded is not None and s.backend.kind == SCRIPTED and s.backend.replies is s.loaded.replies


def run_for(task: str, loaded: RecordedRun | None) -> RecordedRun | None:
    """The recorded run behind a Task choice (None for free text)."""
    if str(task).startswith(LOADED):
        return loaded
    return recorded_runs()[TASKS[task]] if TASKS.get(task) else None


def backend_for_typed_task(backend: str) -> str:
    """The backend a typed task (Free text) runs on: a scripted replay replays recorded runs only,
    so the Local model; any other backend as chosen."""
    return LOCAL if backend == SCRIPTED else backend


def start(c: Controls, loaded: RecordedRun | None = None, key: str = "") -> Session:
    """A new run from the controls: the state before line 1. A scripted replay keeps the
    recorded run's mode and format (its replies were written for them). `key`: the tab's MCP
    client key, kept so that a tab never has more than one server process."""
    run = run_for(c.task, loaded)
    if c.backend == SCRIPTED:
        if run is None:
            raise ValueError("Scripted replay replays a recorded run: choose a recorded task, or "
                             "the Local model for your own text.")
        state = start_state(run, c.settings, c.memory)
        spec = BackendSpec(SCRIPTED, run.replies)
        return with_tools(Session((state,), 0, (), spec, run.title, loaded), c, run, key)
    user_input = run.user_input if run else c.user_input
    state = loop.new_state(user_input, c.mode, c.fmt, c.settings, memory=c.memory)
    spec = BackendSpec(c.backend, url=c.url, model=c.model, weights=c.weights)
    return with_tools(Session((state,), 0, (), spec, run.title if run else "Your task", loaded),
                      c, run, key)


def with_tools(s: Session, c: Controls, run: RecordedRun | None, key: str) -> Session:
    """The session with its tools from the chosen source (a shipped MCP replay brings its own
    source and defence); with the built-in functions the tab's server, if any, is stopped."""
    extra = rt.extra_of(run)
    tools_from, defence = (extra["tools_from"], extra["defence"]) if extra else (c.tools_from, c.defence)
    if tools_from == BUILT_IN:
        rt.close(key)
    else:
        key = rt.new_key(key)
    tools = rt.tools_for(tools_from, c.tool_set, run, key)
    return replace(s, tools=tools, tools_from=tools_from, key=key, defence=defence)


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
        spec, mode, fmt = BackendSpec(c.backend, url=c.url, model=c.model, weights=c.weights), c.mode, c.fmt
    history = state.history
    if (mode, fmt) != (state.mode, state.fmt) and history and isinstance(history[0], SystemMessage):
        history = (SystemMessage(system_prompt(mode, fmt)),) + history[1:]
    blocks = loop.new_state(state.user_input, mode, fmt, c.settings, memory=c.memory).blocks  # the new context
    forked = replace(state, settings=c.settings, mode=mode, fmt=fmt, history=history, blocks=blocks,
                     note=f"forked here: {c.backend}, {mode} mode, {fmt} format")
    return replace(s, states=s.states[:s.index] + (forked,), backend=spec, defence=c.defence,
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
        settings = rc.recorded_context(settings, s)  # its exemplars, documents, memory, Compact at
        tools = tools_of(run)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise ValueError(f"Not a run this tab can replay: {e.__class__.__name__}: {e}") from None
    run = replace(run, settings=settings, title=str(run.title or p.stem)[:120])
    state = start_state(run, settings)
    return Session((state,), 0, tools, BackendSpec(SCRIPTED, run.replies), run.title, run)


def make_backend(spec: BackendSpec, lm, cancel: threading.Event | None = None):
    if spec.kind == SCRIPTED:
        return ScriptedBackend(spec.replies, lm.tokenizer, lm.context_window)
    if spec.kind == LOCAL:
        return LocalBackend(lm, cancel=cancel, weights=spec.weights)  # Stop (or a closed page) sets `cancel`
    return remote.backend_for(spec.url, spec.model, served_tokenizer(spec, lm), probe=True)


def served_tokenizer(spec: BackendSpec, lm):
    """The lab's tokenizer when the server serves the bundled model (exact counts), else None."""
    return lm.tokenizer if serves_bundled(spec.model, lm.name) else None


def _counter(s: Session, lm) -> tuple:
    """(tokenizer, window) the views count with. A server's model: the lab's tokenizer only when it
    serves the bundled model; its window as the server said (or the operator set), else unknown."""
    if s.backend.kind != REMOTE:
        return lm.tokenizer, lm.context_window
    return served_tokenizer(s.backend, lm), remote.known_info(s.backend.url, s.backend.model).context_window


def streamed(call: Callable[[Callable[[str], None]], State],
             cancel: threading.Event | None = None) -> Iterator[tuple[State | None, str]]:
    """Run call(on_token) in a worker thread; yield (None, text so far) while tokens arrive, then
    (new state, text). A call past its wall-clock limit plus a grace period is given up. When the
    generator is closed early (Stop cancels the listener) or fails, `cancel` is set: the model's
    reply stops at its next token instead of running on in the worker thread."""
    try:
        yield from _streamed(call)
    finally:
        if cancel is not None:
            cancel.set()


def _streamed(call: Callable[[Callable[[str], None]], State]) -> Iterator[tuple[State | None, str]]:
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

    text, shown, deadline = "", 0.0, time.monotonic() + CALL_LIMIT_S + 30
    with _streaming:
        threading.Thread(target=work, daemon=True, name="react-model-call").start()
        while (item := _get(pieces)) is not done:
            text += item or ""
            if time.monotonic() > deadline:
                raise TimeoutError(f"the model call did not end within {CALL_LIMIT_S + 30:g} s")
            if text and time.monotonic() - shown >= redraw_every_s():
                shown = time.monotonic()
                yield None, text
    if "error" in box:
        raise box["error"]
    yield box["state"], text


class _Streams:
    """How many replies stream in this process now (a context manager counts one)."""

    def __init__(self) -> None:
        self.n, self._lock = 0, threading.Lock()

    def __enter__(self):
        with self._lock:
            self.n += 1

    def __exit__(self, *exc):
        with self._lock:
            self.n -= 1


_streaming = _Streams()


def redraw_every_s() -> float:
    """How often a streamed reply is redrawn: every STREAM_EVERY_S for one or two students; with
    more, the page's redraws (each a whole template view through Gradio, on the model's two cores)
    are shared, so a class of 8 sees each reply grow 2.5 times a second instead of 10.

    >>> redraw_every_s()
    0.1
    """
    return STREAM_EVERY_S * max(1.0, _streaming.n / FULL_RATE_STREAMS)


def _get(pieces: queue.SimpleQueue):
    try:
        return pieces.get(timeout=STREAM_EVERY_S)
    except queue.Empty:
        return None


def one_phase(s: Session, lm) -> Iterator[tuple[State | None, str]]:
    """One phase from the newest state; a real model's reply streams."""
    cancel = threading.Event()
    state, backend = s.states[-1], make_backend(s.backend, lm, cancel)
    if state.phase != Phase.CALL_MODEL or s.backend.kind == SCRIPTED:
        yield rt.step(s, state, backend), ""
        return
    yield from streamed(lambda on_token: rt.step(s, state, backend, on_token), cancel)


def frame_of(s: Session, lm) -> rv.Frame:
    """The data of the shown state's views. A server's model (unless it is the bundled one) has no
    tokenizer here: its string is the ChatML rendering and its counts are estimates."""
    f = rv.frame(s.states, s.index, s.tools, *_counter(s, lm))
    if s.backend.kind == SCRIPTED:
        return replace(f, notes=(rv.SCRIPTED_NOTE,))
    return replace(f, notes=server_notes(s, f.state)) if s.backend.kind == REMOTE else f


def server_notes(s: Session, state: State) -> tuple[str, ...]:
    """What the template view must add for a server: tools its chat template left out (its own
    prompt count says so), and what "Constrained tool calls" does there."""
    notes = []
    if state.usage and state.composition and tools_unrendered(state.usage[-1], state.composition[-1]):
        u, tools = state.usage[-1], state.composition[-1].get("tools", 0)
        notes.append(f"this server's chat template did not render the tools: it counted {u.prompt_tokens:,} "
                     f"prompt tokens, the tool schemas below alone are {tools:,} — the model never saw them")
    prompt = loop.build_prompt(state, s.tools)
    if not prompt.tools:
        return tuple(notes)
    if prompt.fmt == Fmt.REACT_TEXT:
        if state.settings.constrained:
            notes.append("Constrained tool calls: no effect on this backend in the ReAct text format "
                         "(a server constrains only native tool calls)")
        return tuple(notes)
    kind = remote.known_info(s.backend.url, s.backend.model).kind
    choice, said = tool_choice(kind, tuple(t.name for t in prompt.tools), state.settings.constrained,
                               not observed(prompt))  # what OpenAIBackend sends for this call
    if not streams(kind, choice):
        notes.append("this reply does not stream: llama-cpp-python's function-calling format streams no "
                     "reply in which the model may choose a tool, so it comes whole")
    if state.settings.constrained:
        notes.append("Constrained tool calls: " + said)
    return tuple(notes)


def specials_of(s: Session, lm) -> tuple[str, ...]:
    if s.backend.kind == REMOTE:
        return ("<|im_start|>", "<|im_end|>")
    return tuple(getattr(lm.tokenizer, "all_special_tokens", ()) or ())


def html_views(s: Session, lm, show_tokens) -> HtmlViews:
    """The six views of the shown state."""
    f = frame_of(s, lm)
    label = f"{lm.name} tokenizer"
    if s.backend.kind == REMOTE and f.breakdown.exact:
        label = f"{lm.name} tokenizer (the server serves the bundled model)"
    elif s.backend.kind == REMOTE:
        label = "no tokenizer for the server's model: ⌈characters / 4⌉"
    return HtmlViews(
        pseudo=rc.pseudocode(f.state), history=rv.history_view(f.state, f.new_history),
        template=rv.template_view(f, specials_of(s, lm), show_tokens=bool(show_tokens)),
        budget=rv.budget_view(f.breakdown, label, f.usage)
        + rc.compaction_line(s.states, s.index, s.tools, *_counter(s, lm)),
        growth=rv.growth_view(f.state.usage, composition=f.state.composition), stop=rv.stop_view(f.state))
