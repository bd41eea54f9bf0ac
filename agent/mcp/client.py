"""The runtime's MCP client: discover a server's tools and route tool calls to it, wire in view.

    client = McpClient(LAB_SERVER)            # nothing starts yet
    tools = client.tools()                    # starts the server, initialize, tools/list → Tool objects
    state = step(state, backend, tools, policy, client)   # loop.step, with tools/call labelled
    client.wire                               # every JSON-RPC frame, in order, as it crossed
    client.close()                            # the server process is gone

Lecture, Part III: "MCP is a matter of the runtime; the model has no knowledge of it." The tools a
server lists become ordinary agent.tools.Tool objects (same name, description, JSON Schema) whose
function sends `tools/call`; so the loop, the three checks and the chat template are unchanged and
the prompt string is byte-identical to the built-in tools' when the server lists the same tools.

What it knows: the official SDK's stdio client (and the streamable-HTTP client for an operator's
URL); a per-client event-loop thread (Gradio handlers are sync, the SDK is async); time limits on
start and on every request; the wire log, captured between the transport's streams and the
ClientSession (real frames, as serialized to the wire); which tool_call_id each tools/call carries
(set by `step`); at most one process per session key (`for_session`), idle ones reaped.
A server that crashes, hangs or answers garbage raises McpFailure (a ToolError: the loop shows
"ERROR: …"), and the process is stopped; the next use starts a fresh one.

What it does not know: the loop's phases beyond "the pending call is executed next"; Gradio.
A visitor chooses among SOURCES only; commands and URLs come from the operator (`configure`).

>>> spec_for(BUILT_IN) is None
True
>>> spec_for("MCP server (stdio)").args
('-m', 'agent.mcp.server')
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import re
import shlex
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

import jsonschema
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from agent import loop
from agent.tools import Tool, ToolError
from agent.validation import DEFAULT_POLICY, Policy

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 20.0  # process start + initialize (+ tools/list)
CALL_TIMEOUT_S = 10.0  # any one request after that
IDLE_S = 600.0  # a session's server idle this long is stopped by the reaper
MAX_RUNNING = 8  # server processes at once, all sessions together
MAX_SESSIONS = 64  # sessions whose client (and wire log) is kept, all together
MAX_TOOLS = 32
MAX_DESCRIPTION_CHARS = 1000
MAX_RESULT_CHARS = 4000
MAX_FRAMES = 400  # the wire log keeps the latest frames
MAX_FRAME_CHARS = 8000
MAX_ARGUMENT_CHARS = 500  # a prompt argument or a resource URI a visitor sends
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class McpFailure(ToolError):
    """The server could not be reached, crashed, hung or answered garbage; the message says which."""


@dataclass(frozen=True)
class ServerSpec:
    """Where a server is: a stdio command (command + args) or a streamable-HTTP URL."""

    label: str
    command: str | None = None
    args: tuple[str, ...] = ()
    url: str | None = None
    untrusted: bool = False


BUILT_IN = "Built-in functions"
LAB_SERVER = ServerSpec("MCP server (stdio)", sys.executable, ("-m", "agent.mcp.server"))
UNTRUSTED_SERVER = ServerSpec("Untrusted MCP server (demo)", sys.executable, ("-m", "agent.mcp.untrusted"),
                              untrusted=True)
OPERATOR_LABEL = "MCP server (--mcp)"
_operator: ServerSpec | None = None


def configure(option: str) -> ServerSpec:
    """The app's `--mcp` launch option: "https://host/mcp" or a stdio command line. The operator's
    server is external code: it is marked untrusted (the defence applies to it)."""
    option = option.strip()
    if not option:
        raise ValueError("--mcp needs a stdio command or an http(s) URL")
    global _operator
    if re.match(r"^https?://", option):
        _operator = ServerSpec(OPERATOR_LABEL, url=option, untrusted=True)
    else:
        command, *args = shlex.split(option)
        _operator = ServerSpec(OPERATOR_LABEL, command, tuple(args), untrusted=True)
    return _operator


def sources() -> tuple[str, ...]:
    """The "Tools from" choices a visitor may pick."""
    labels = (BUILT_IN, LAB_SERVER.label, UNTRUSTED_SERVER.label)
    return labels + ((OPERATOR_LABEL,) if _operator else ())


def spec_for(label: str) -> ServerSpec | None:
    """The server behind a "Tools from" choice (None: the built-in functions); ValueError otherwise."""
    specs = {s.label: s for s in (LAB_SERVER, UNTRUSTED_SERVER, _operator) if s is not None}
    if label == BUILT_IN:
        return None
    if not isinstance(label, str) or label not in specs:
        raise ValueError(f"unknown tool source {str(label)[:80]!r}; choose one of: {', '.join(sources())}")
    return specs[label]


@dataclass(eq=False)
class _Connection:
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    stop: asyncio.Event
    main: concurrent.futures.Future | None = None
    session: ClientSession | None = None
    stderr: object = None
    failure: str = ""


@dataclass(eq=False)
class McpClient:
    """One session's connection to one server, started lazily; every method is sync and bounded."""

    spec: ServerSpec
    start_timeout_s: float = START_TIMEOUT_S
    call_timeout_s: float = CALL_TIMEOUT_S
    wire: deque = field(default_factory=lambda: deque(maxlen=MAX_FRAMES))
    frames_seen: int = 0
    last_used: float = field(default_factory=time.monotonic)
    server_info: dict = field(default_factory=dict)
    _conn: _Connection | None = None
    _label: str | None = None
    _listed_uris: list[str] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _t0: float = field(default_factory=time.monotonic)

    # --- the sync API -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._conn is not None and self._conn.main is not None and not self._conn.main.done()

    def tools(self) -> tuple[Tool, ...]:
        """initialize (if needed) and tools/list → Tool objects whose function sends tools/call."""
        listed = self._request("tools/list", lambda s: s.list_tools())
        return tuple(self._tool(t) for t in listed.tools[:MAX_TOOLS] if _usable(t))

    def call(self, name: str, arguments: dict) -> str:
        """tools/call → the result text; an isError result raises ToolError with the server's text."""
        result = self._request("tools/call", lambda s: s.call_tool(name, arguments))
        text = "\n".join(getattr(c, "text", f"[{c.type} content]") for c in result.content)
        text = text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + " …[truncated]"
        if result.isError:
            raise ToolError(text or "the MCP server reported an error without a message")
        return text

    def resources(self) -> list[dict]:
        """resources/list and resources/templates/list: [{uri | uriTemplate, name, description}]."""
        listed = self._request("resources/list", lambda s: s.list_resources())
        templates = self._request("resources/templates/list", lambda s: s.list_resource_templates())
        return ([{"uriTemplate": t.uriTemplate, "name": t.name, "description": t.description or ""}
                 for t in templates.resourceTemplates]
                + [{"uri": str(r.uri), "name": r.name, "description": r.description or ""}
                   for r in listed.resources])

    def read_resource(self, uri: str) -> str:
        from pydantic import AnyUrl, ValidationError

        try:
            url = AnyUrl(str(uri)[:MAX_ARGUMENT_CHARS + 1])
        except ValidationError:
            raise McpFailure(f"not a resource URI: {str(uri)[:100]!r}") from None
        if len(str(uri)) > MAX_ARGUMENT_CHARS:
            raise McpFailure(f"the URI is longer than {MAX_ARGUMENT_CHARS} characters")
        if not self._listed(str(url)):
            raise McpFailure(f"not a resource this server lists: {str(uri)[:100]!r}")
        result = self._request("resources/read", lambda s: s.read_resource(url))
        return "\n".join(getattr(c, "text", "[binary]") for c in result.contents)[:MAX_RESULT_CHARS]

    def _listed(self, uri: str) -> bool:
        """`uri` is one the server listed, or starts with a template's fixed part
        (encyclopedia://{title} → "encyclopedia://"), without a path step ".." after it."""
        if self._listed_uris is None:
            self._listed_uris = [r.get("uri") or r["uriTemplate"].split("{", 1)[0] for r in self.resources()]
        return any(uri == p or (uri.startswith(p) and ".." not in uri[len(p):].split("/"))
                   for p in self._listed_uris if p)

    def prompts(self) -> list[dict]:
        listed = self._request("prompts/list", lambda s: s.list_prompts())
        return [{"name": p.name, "description": p.description or "",
                 "arguments": [a.name for a in p.arguments or ()]} for p in listed.prompts]

    def get_prompt(self, name: str, arguments: dict[str, str]) -> str:
        """prompts/get → the text of its user messages (what fills the task box)."""
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise McpFailure(f"not a prompt name: {str(name)[:64]!r}")
        if not isinstance(arguments, dict) or len(arguments) > 8 \
                or any(not isinstance(v, str) or len(v) > MAX_ARGUMENT_CHARS for v in arguments.values()):
            raise McpFailure(f"at most 8 prompt arguments, each a string of {MAX_ARGUMENT_CHARS} characters at most")
        arguments = {str(k)[:64]: str(v) for k, v in arguments.items()}
        result = self._request("prompts/get", lambda s: s.get_prompt(name, arguments))
        texts = [m.content.text for m in result.messages if m.role == "user" and hasattr(m.content, "text")]
        return "\n".join(texts)[:MAX_RESULT_CHARS]

    def frames(self) -> list[dict]:
        """A snapshot of the wire log (safe to read while the loop thread appends)."""
        return list(self.wire)

    @contextlib.contextmanager
    def labelled(self, tool_call_id: str | None):
        """Frames of tools/call sent inside carry `tool_call_id` in the wire log."""
        self._label = tool_call_id
        try:
            yield self
        finally:
            self._label = None

    def close(self) -> None:
        """Stop the server process (stdin closed, then SIGTERM/SIGKILL by the SDK) and the thread."""
        conn, self._conn = self._conn, None
        if conn is None:
            _running.discard(self)  # a place reserved by _make_room, never used
            return
        conn.loop.call_soon_threadsafe(conn.stop.set)
        try:
            conn.main.result(timeout=10)
        except concurrent.futures.TimeoutError:  # a transport that would not end: cancel it (kills)
            conn.main.cancel()
            with contextlib.suppress(BaseException):
                conn.main.result(timeout=5)
        except BaseException:  # noqa: BLE001 — its failure was recorded; the process is gone
            pass
        conn.loop.call_soon_threadsafe(conn.loop.stop)
        conn.thread.join(timeout=5)
        _running.discard(self)

    # --- requests -----------------------------------------------------------------------------

    def _request(self, method: str, send):
        if not self._lock.acquire(timeout=self.call_timeout_s):
            raise McpFailure(f"another request to the MCP server is still running ({method} not sent)")
        try:
            self.last_used = time.monotonic()
            conn = self._ensure_started()
            future = asyncio.run_coroutine_threadsafe(_until_stopped(conn, send(conn.session)), conn.loop)
            try:
                return future.result(timeout=self.call_timeout_s)
            except concurrent.futures.TimeoutError:
                future.cancel()
                self._fail(f"the MCP server did not answer {method} within {self.call_timeout_s:g} s; "
                           "it was stopped")
            except Exception as e:  # noqa: BLE001 — any failure of the connection is reported
                self._fail(conn.failure or f"{method} failed: {_describe(e)}")
            finally:
                self.last_used = time.monotonic()
        finally:
            self._lock.release()

    def _fail(self, message: str):
        self._record_note(message)
        self.close()
        raise McpFailure(message)

    def _ensure_started(self) -> _Connection:
        if self.running and self._conn.session is not None:
            return self._conn
        self.close()
        _make_room(self)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"mcp-{self.spec.label}", daemon=True)
        thread.start()
        stop = asyncio.Event()
        ready: concurrent.futures.Future = concurrent.futures.Future()
        self._conn = conn = _Connection(loop, thread, stop)
        conn.main = asyncio.run_coroutine_threadsafe(self._main(conn, ready), loop)
        try:
            self.server_info = ready.result(timeout=self.start_timeout_s)
        except concurrent.futures.TimeoutError:
            self._fail(f"the MCP server did not answer initialize within {self.start_timeout_s:g} s; "
                       "it was stopped")
        except Exception as e:  # noqa: BLE001
            self._fail(conn.failure if "exited" in conn.failure or "garbage" in conn.failure
                       else f"the MCP server could not be started: {_describe(e)}{_stderr_tail(conn)}")
        return self._conn

    async def _main(self, conn: _Connection, ready: concurrent.futures.Future) -> None:
        """The connection's lifetime: transport, pumps that log frames, session, initialize, wait."""
        import anyio

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(conn))
                up_send, up_recv = anyio.create_memory_object_stream(0)
                down_send, down_recv = anyio.create_memory_object_stream(0)
                tasks = await stack.enter_async_context(anyio.create_task_group())
                tasks.start_soon(self._pump, read, down_send, "in", conn)
                tasks.start_soon(self._pump, up_recv, write, "out", conn)
                session = await stack.enter_async_context(ClientSession(down_recv, up_send))
                init = await _until_stopped(conn, session.initialize())
                conn.session = session
                ready.set_result(init.serverInfo.model_dump(mode="json", exclude_none=True))
                await conn.stop.wait()
                tasks.cancel_scope.cancel()
        except BaseException as e:  # noqa: BLE001 — reported through `ready` or conn.failure
            conn.failure = conn.failure or f"the MCP server connection ended: {_describe(e)}"
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else RuntimeError(str(e)))
        finally:
            conn.session = None

    def _transport(self, conn: _Connection):
        if self.spec.url:
            from mcp.client.streamable_http import streamablehttp_client

            return _first_two(streamablehttp_client(self.spec.url, timeout=self.call_timeout_s))
        conn.stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        params = StdioServerParameters(command=self.spec.command, args=list(self.spec.args), cwd=str(ROOT))
        return stdio_client(params, errlog=conn.stderr)

    async def _pump(self, source, sink, direction: str, conn: _Connection) -> None:
        """Forward every frame, logging it; garbage or the end of the server's output ends the
        connection with a clear failure (pending requests then fail at once, never hang)."""
        async with sink:
            async for item in source:
                self._record(direction, item)
                if isinstance(item, Exception):
                    conn.failure = f"the MCP server answered garbage: {_describe(item)}"
                    break
                await sink.send(item)
            else:
                if direction == "in" and not conn.stop.is_set():
                    conn.failure = "the MCP server process exited" + _stderr_tail(conn)
        conn.stop.set()

    # --- the wire log ------------------------------------------------------------------------

    def _record(self, direction: str, item) -> None:
        if isinstance(item, Exception):
            frame = {"garbage": _describe(item)}
        else:
            frame = item.message.model_dump(mode="json", by_alias=True, exclude_none=True)
        text = json.dumps(frame, ensure_ascii=False)
        if len(text) > MAX_FRAME_CHARS:
            frame = {k: frame[k] for k in ("jsonrpc", "id", "method") if k in frame}
            frame["truncated"] = text[:MAX_FRAME_CHARS]
        label = self._label if direction == "out" and frame.get("method") == "tools/call" else None
        self._append({"direction": direction, "frame": frame, "tool_call_id": label})

    def _record_note(self, message: str) -> None:
        self._append({"direction": "note", "frame": {"note": message}, "tool_call_id": self._label})

    def _append(self, entry: dict) -> None:
        self.frames_seen += 1
        entry.update(n=self.frames_seen, t_ms=round((time.monotonic() - self._t0) * 1000),
                     untrusted=self.spec.untrusted)
        self.wire.append(entry)

    def _tool(self, listed) -> Tool:
        name = listed.name

        def call(**arguments) -> str:
            return self.call(name, arguments)

        return Tool(name, (listed.description or "")[:MAX_DESCRIPTION_CHARS], listed.inputSchema, call)


async def _until_stopped(conn: _Connection, request):
    """The request's answer, or McpFailure as soon as the connection ends (crash, garbage, close)."""
    task = asyncio.ensure_future(request)
    stopped = asyncio.ensure_future(conn.stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if not task.done():
        task.cancel()
        raise McpFailure(conn.failure or "the MCP server connection ended")
    return task.result()


def _stderr_tail(conn: _Connection) -> str:
    """The last lines the server wrote to stderr (a traceback, usually), for the failure message."""
    with contextlib.suppress(Exception):
        conn.stderr.seek(0)
        tail = conn.stderr.read()[-300:].strip()
        return f" (stderr: {tail})" if tail else ""
    return ""


def _usable(listed) -> bool:
    """A listed tool the runtime can advertise: a sane name and a valid object schema."""
    schema = listed.inputSchema
    if not TOOL_NAME.match(listed.name or "") or not isinstance(schema, dict) or schema.get("type") != "object":
        return False
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return len(json.dumps(schema)) <= MAX_FRAME_CHARS


@contextlib.asynccontextmanager
async def _first_two(context):
    async with context as streams:
        yield streams[0], streams[1]


def _describe(e: BaseException) -> str:
    text = str(e) or e.__class__.__name__
    if isinstance(e, BaseExceptionGroup) and e.exceptions:
        text = _describe(e.exceptions[0])
    return text[:300]


# --- processes across sessions: at most one per session, MAX_RUNNING in all, idle ones reaped ----

_running: set[McpClient] = set()
_sessions: dict[str, McpClient] = {}
_registry = threading.Lock()
_reaper: threading.Thread | None = None


_room = threading.Lock()  # the check "fewer than MAX_RUNNING" and the reservation are one step


def _make_room(client: McpClient) -> None:
    """Reserve a place in _running for `client`: stop servers idle past IDLE_S, then if all places
    are taken the least recently used idle one (never one in a request); else McpFailure."""
    reap_idle(IDLE_S)
    for attempt in range(2):
        with _room:
            if len(_running - {client}) < MAX_RUNNING:
                _running.add(client)
                break
        if attempt == 0:
            idle = sorted((c for c in list(_running) if c is not client and not c._lock.locked()),
                          key=lambda c: c.last_used)
            if idle:
                idle[0].close()
    else:
        raise McpFailure(f"{MAX_RUNNING} MCP servers are running for other visitors; try again shortly")
    _start_reaper()


def reap_idle(max_idle_s: float = IDLE_S, keep: McpClient | None = None) -> int:
    """Stop servers idle for max_idle_s or more (not one in a request); how many were stopped."""
    now = time.monotonic()
    idle = [c for c in list(_running)
            if c is not keep and now - c.last_used >= max_idle_s and not c._lock.locked()]
    for client in idle:
        client.close()
    return len(idle)


def _start_reaper() -> None:
    global _reaper
    with _registry:
        if _reaper is None or not _reaper.is_alive():
            _reaper = threading.Thread(target=_reap_forever, name="mcp-reaper", daemon=True)
            _reaper.start()


def _reap_forever() -> None:
    while True:
        time.sleep(min(60.0, IDLE_S / 4))
        reap_idle(IDLE_S)


def for_session(key: str, spec: ServerSpec) -> McpClient:
    """The session's one client: a different source closes the old server first. At most
    MAX_SESSIONS clients (and their wire logs) are kept: beyond, the least recently used is dropped
    (its server stopped), so sessions that never end cannot grow the server's memory."""
    with _registry:
        client = _sessions.get(key)
        if client is not None and client.spec == spec:
            client.last_used = time.monotonic()
            return client
        dropped = [] if client is None else [client]
        _sessions[key] = client = McpClient(spec)
        while len(_sessions) > MAX_SESSIONS:
            oldest = min((k for k in _sessions if k != key), key=lambda k: _sessions[k].last_used)
            dropped.append(_sessions.pop(oldest))
    for old in dropped:
        old.close()
    return client


def close_session(key: str) -> None:
    """For the app's unload / session-end hook."""
    with _registry:
        client = _sessions.pop(key, None)
    if client is not None:
        client.close()


@atexit.register
def close_all() -> None:
    for client in list(_running):
        client.close()


# --- the loop and the policy, with MCP ------------------------------------------------------------

def step(state: loop.State, backend, tools: tuple[Tool, ...], policy: Policy = DEFAULT_POLICY,
         client: McpClient | None = None, on_token=None) -> loop.State:
    """loop.step, with the tools/call it may send labelled by the pending call's tool_call_id."""
    label = state.pending[0].id if state.phase == loop.Phase.EXECUTE and state.pending else None
    with client.labelled(label) if client is not None else contextlib.nullcontext():
        return loop.step(state, backend, tools, policy, on_token)


def mcp_policy(base: Policy, client: McpClient | None, tools: tuple[Tool, ...], defence: bool,
               approved: frozenset[str] = frozenset()) -> Policy:
    """`base` plus the defence: the untrusted server's tools need approval when `defence` is on."""
    untrusted = frozenset(t.name for t in tools) if client is not None and client.spec.untrusted else frozenset()
    return replace(base, untrusted_tools=untrusted, approval_required=defence, approved=frozenset(approved))


def awaiting_approval(state: loop.State, policy: Policy):
    """The pending call the page must ask about before stepping (None: step freely)."""
    from agent.validation import approval_key

    if state.phase != loop.Phase.EXECUTE or not state.pending or not policy.approval_required:
        return None
    call = state.pending[0]
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return None
    if call.name in policy.untrusted_tools and isinstance(arguments, dict) \
            and approval_key(call.name, arguments) not in policy.approved:
        return call
    return None


def untrusted_results(history, untrusted_tools: frozenset[str]) -> frozenset[str]:
    """The tool_call_ids whose results came from an untrusted server's tool (the view marks them)."""
    from agent.messages import AssistantMessage

    return frozenset(c.id for m in history if isinstance(m, AssistantMessage)
                     for c in m.tool_calls if c.name in untrusted_tools)
