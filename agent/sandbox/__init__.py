"""The sandbox behind run_python: each call runs in its own short-lived process, under limits.

Lecture, "Specific Tools vs. a Code Tool": a code tool "executes arbitrary code, so it requires
sandboxing and is harder to restrict". Here every call of `run_code`:
  - is checked in the server process only for its length (MAX_CODE_CHARS), never run there;
  - runs in a new process forked by a small fork server (agent.sandbox.zygote: started once with
    an empty environment, it has imported smolagents' interpreter and the lab's tools — never
    torch or Gradio), so a call costs a fork, not a second of interpreter start-up; a supervisor
    process kills the child at the wall-clock limit and reports why it ended;
  - is confined there by agent.sandbox.child: an allow-list seccomp filter (deny by default: no
    open, socket, process or signal call — the boundary, which does not depend on the
    interpreter), user `nobody` where the server is root, rlimits, a network namespace where the
    kernel allows, and inside all that an AST interpreter with an import allow-list;
  - runs at most PER_SESSION at a time for one visitor's session (agent.llm.batching.current_session);
  - is killed (SIGKILL) at the wall-clock limit; at most MAX_CONCURRENT calls run at once, and a
    call that cannot get a slot within its wall-clock limit is refused ("busy"), never queued forever;
  - returns at most OUTPUT_CHARS characters of output (the pipe read is bounded too).
The server process never parses, compiles or evaluates the code: it only counts characters.

A deployment switches the code tool off with REACT_LAB_CODE_TOOL=off (code_tool_enabled()).

What it does not know: the loop, the model, JSON Schemas (agent.tools wraps this as a tool).

>>> run_code("temps = [int(get_weather(c).split('°')[0]) for c in ['Berlin', 'Rome']]\\nsum(temps) / 2").output
'16.5'
>>> run_code("import os").error.startswith("Code execution failed")
True
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from agent.llm.batching import current_session
from agent.tools import MAX_CODE_CHARS  # the longest code a call may carry (the tool's schema)

OUTPUT_CHARS = 4000  # what the model reads back, at most (printed output, then the last value)
MAX_CONCURRENT = max(1, min(4, (os.cpu_count() or 1)))
PER_SESSION = 1  # calls one visitor's session may run at once (the others' share of the slots)
MAX_REPLY = 2**20  # bytes read from a child at most (the JSON of output + error is far smaller)
SLACK_S = 5.0  # beyond the wall clock: the supervisor's kill and report
STARTUP_S = 60.0  # beyond that, once: the fork server's own start-up (≈ 1 s of CPU; more under load)
ENV_SWITCH = "REACT_LAB_CODE_TOOL"
PR_SET_DUMPABLE = 4
_OFF = {"off", "0", "false", "no", "disabled"}


@dataclass(frozen=True)
class Limits:
    """The limits of one call: wall clock and CPU seconds, memory above the interpreter's own, output."""

    wall_s: float = 5.0
    cpu_s: int = 3
    memory_mb: int = 256
    output_chars: int = OUTPUT_CHARS


LIMITS = Limits()


@dataclass(frozen=True)
class SandboxResult:
    """What one call produced: `output` (prints + last value) or an `error` the model can read."""

    output: str
    error: str | None = None
    elapsed_s: float = 0.0
    layers: tuple[str, ...] = ()  # the confinement layers that took effect in the child

    @property
    def ok(self) -> bool:
        return self.error is None


def code_tool_enabled(environ: dict | None = None) -> bool:
    """False when the deployment set REACT_LAB_CODE_TOOL=off (or 0/false/no/disabled).

    >>> code_tool_enabled({"REACT_LAB_CODE_TOOL": "off"}), code_tool_enabled({})
    (False, True)
    """
    value = (os.environ if environ is None else environ).get(ENV_SWITCH, "on")
    return value.strip().casefold() not in _OFF


_slots = threading.BoundedSemaphore(MAX_CONCURRENT)
ROOT = Path(__file__).resolve().parents[2]  # the child imports agent.sandbox.child from here


def run_code(code: str, limits: Limits = LIMITS) -> SandboxResult:
    """Run `code` in a confined child process and return what it printed and its last value."""
    if not isinstance(code, str):
        return SandboxResult("", f"the code must be a string, not {type(code).__name__}")
    if len(code) > MAX_CODE_CHARS:
        return SandboxResult("", f"the code has {len(code)} characters; the limit is {MAX_CODE_CHARS}")
    start = time.monotonic()
    with _session_share() as admitted:
        if not admitted:
            return SandboxResult("", f"this session already runs {PER_SESSION} code call(s); the next "
                                     "waits until it ends")
        if not _slots.acquire(timeout=limits.wall_s):
            return SandboxResult("", f"the sandbox is busy ({MAX_CONCURRENT} calls running); try again")
        try:
            result = _run_in_child(code, limits)
        finally:
            _slots.release()
    return SandboxResult(result.output, result.error, round(time.monotonic() - start, 3), result.layers)


_running: dict[object, int] = {}  # session → its calls running now
_running_lock = threading.Lock()


@contextlib.contextmanager
def _session_share():
    """Admit a call when its session runs fewer than PER_SESSION (calls outside a session — a
    notebook, a test — are not counted): one visitor cannot hold every slot."""
    session = current_session()
    with _running_lock:
        admitted = session is None or _running.get(session, 0) < PER_SESSION
        if admitted and session is not None:
            _running[session] = _running.get(session, 0) + 1
    try:
        yield admitted
    finally:
        if admitted and session is not None:
            with _running_lock:
                _running[session] -= 1
                if not _running[session]:
                    del _running[session]


def protect_server_process() -> None:
    """Mark the server not dumpable: no other process of its user (a code-tool child that got out,
    a visitor's program) may read its /proc/<pid>/environ or /mem, or attach to it. Linux only."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


class _Zygote:
    """The fork server (agent.sandbox.zygote), started on first use and again if it died."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sock: socket.socket | None = None
        self.process: subprocess.Popen | None = None

    def send(self, request: bytes, result_fd: int) -> bool:
        """Hand a request and the write end of its result pipe over; True if the zygote had to
        be started for it (its start-up then delays this call)."""
        with self.lock:
            for _ in range(2):
                fresh = self.process is None or self.process.poll() is not None
                if fresh:
                    self._start()
                try:
                    socket.send_fds(self.sock, [request], [result_fd])
                    return fresh
                except OSError:
                    self._stop()
        raise OSError("the sandbox's fork server could not be reached")

    def restart(self) -> None:
        """A call got no reply at all (the fork server is stopped or stuck): the next call starts a
        fresh one. Calls in flight keep their supervisors, which are processes of their own."""
        with self.lock:
            self._stop()

    def _stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=5)  # reaped: no zombie left in the server
            self.process = None

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agent.sandbox.zygote", str(theirs.fileno())], pass_fds=(theirs.fileno(),),
            cwd=tempfile.gettempdir(), env={"PYTHONPATH": _import_path(), "PYTHONDONTWRITEBYTECODE": "1"},
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        theirs.close()
        ours.settimeout(STARTUP_S)  # a fork server that stopped reading cannot block a send forever
        if self.sock is not None:
            self.sock.close()
        self.sock = ours


def _import_path() -> str:
    """The server's own import path (a Space may install packages in a user site), ours first."""
    return os.pathsep.join(dict.fromkeys([str(ROOT), *(p for p in sys.path if p and os.path.isdir(p))]))


_zygote = _Zygote()


def _run_in_child(code: str, limits: Limits) -> SandboxResult:
    """One request to the fork server; its one reply read from a pipe of our own, bounded."""
    workdir = tempfile.mkdtemp(prefix="react-lab-sandbox-")
    request = json.dumps({"code": code, "limits": {**asdict(limits), "workdir": workdir}}).encode()
    read_end, write_end = os.pipe()
    try:
        try:
            fresh = _zygote.send(request, write_end)
        finally:
            os.close(write_end)
        wait_s = limits.wall_s + SLACK_S + (STARTUP_S if fresh else 0)
        data, _ = read_bounded(read_end, time.monotonic() + wait_s, MAX_REPLY)
    except OSError as e:
        return SandboxResult("", f"the sandbox is unavailable: {e}")
    finally:
        os.close(read_end)
        shutil.rmtree(workdir, ignore_errors=True)
    message = _decode(data)
    if message is None:
        _zygote.restart()
        return SandboxResult("", f"the sandbox sent no result within {wait_s:g} s")
    return _result(message, limits)


def read_bounded(fd: int, deadline: float, limit: int) -> tuple[bytes, bool]:
    """Bytes from `fd` until EOF; (bytes, True) when the deadline or the size limit came first."""
    chunks, size = [], 0
    while size <= limit:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b"".join(chunks), True
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
    return b"", True


def _decode(data: bytes) -> dict | None:
    try:
        message = json.loads(data)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _result(message: dict, limits: Limits) -> SandboxResult:
    if "status" in message:  # the supervisor's report: the child sent nothing
        return SandboxResult("", _ended(bool(message.get("killed")), int(message["status"]), limits))
    output, error = str(message.get("output", ""))[:2 * limits.output_chars], message.get("error")
    return SandboxResult(inert(output), None if error is None else inert(str(error)[:limits.output_chars]),
                         layers=tuple(message.get("layers", ())))


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(32), *range(127, 160)) if chr(c) not in "\n\t"}
_CONTROL.update({c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def inert(text: str) -> str:
    """The code's output with control characters (terminal escapes, NUL, bidi overrides) written
    as visible escapes: what the model and the page read is plain text, nothing that acts.

    >>> inert("\\x1b[31mred\\x00 line\\n\\u202eevil")
    '\\\\x1b[31mred\\\\x00 line\\n\\\\u202eevil'
    """
    return text.translate(_CONTROL)


def _ended(killed: bool, status: int, limits: Limits) -> str:
    """Why a child ended without a message, from its wait status."""
    signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    if killed or signum == signal.SIGALRM:
        return f"wall-clock limit exceeded ({limits.wall_s:g} s): the process was killed"
    if signum in (signal.SIGXCPU, signal.SIGKILL):
        return f"CPU time limit exceeded ({limits.cpu_s} s of CPU): the process was stopped"
    if signum is not None:
        return f"the process was stopped by signal {signal.Signals(signum).name}"
    return f"the process ended (exit code {os.WEXITSTATUS(status)}) without a result"


def guarantees() -> tuple[str, ...]:
    """What the sandbox promises, in words (for a view beside the code tool)."""
    limits = LIMITS
    return (  # parsing vs policy is agent.tools.PARSING_VS_POLICY, said once beside these
        f"Each call runs in a separate process, killed after {limits.wall_s:g} s of wall clock; "
        f"{limits.cpu_s} s of CPU; {limits.memory_mb} MiB of memory beyond the interpreter's own.",
        f"Code up to {MAX_CODE_CHARS} characters; output cut at {limits.output_chars} characters.",
        "The boundary: a system-call allow-list (seccomp, deny by default) — the code can compute and "
        "write its result, nothing else: no file, no /proc, no network, no process, no signal to "
        "another process. Without the filter no code runs. As root, the child is also user nobody.",
        "Inside it, an AST interpreter (smolagents): no open, eval, exec, __import__, dunder, frame or "
        "code attributes; imports only from an allow-list (math, statistics, itertools, …).",
        f"An empty environment and no inherited files; at most {PER_SESSION} call per visitor at once.",
    )
