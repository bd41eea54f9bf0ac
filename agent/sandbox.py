"""The sandbox behind run_python: each call runs in its own short-lived process, under limits.

Lecture, "Specific Tools vs. a Code Tool": a code tool "executes arbitrary code, so it requires
sandboxing and is harder to restrict". Here every call of `run_code`:
  - is checked in the server process only for its length (MAX_CODE_CHARS), never run there;
  - runs in a new Python process (`python -m agent.sandbox_child`: smolagents' interpreter and the
    lab's tools, no torch, no Gradio), started with an empty environment in a new session; the
    start-up costs about a second of CPU per call (a fork server would save it; not worth the
    complexity at a class's scale);
  - is confined there by agent.sandbox_child (rlimits, seccomp, a network namespace where the
    kernel allows, an AST interpreter with an import allow-list, a throw-away working directory);
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

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

MAX_CODE_CHARS = 4000  # the longest code a call may carry (the tool's schema says the same)
OUTPUT_CHARS = 4000  # what the model reads back, at most (printed output, then the last value)
MAX_CONCURRENT = max(1, min(4, (os.cpu_count() or 1)))
MAX_REPLY = 64 * OUTPUT_CHARS  # bytes read from a child at most (the JSON of output + error)
STARTUP_S = 3.0  # added to the wall clock for the child's interpreter start-up (≈ 1 s unloaded)
ENV_SWITCH = "REACT_LAB_CODE_TOOL"
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
ROOT = Path(__file__).resolve().parent.parent  # the child imports agent.sandbox_child from here


def run_code(code: str, limits: Limits = LIMITS) -> SandboxResult:
    """Run `code` in a confined child process and return what it printed and its last value."""
    if not isinstance(code, str):
        return SandboxResult("", f"the code must be a string, not {type(code).__name__}")
    if len(code) > MAX_CODE_CHARS:
        return SandboxResult("", f"the code has {len(code)} characters; the limit is {MAX_CODE_CHARS}")
    start = time.monotonic()
    if not _slots.acquire(timeout=limits.wall_s):
        return SandboxResult("", f"the sandbox is busy ({MAX_CONCURRENT} calls running); try again")
    try:
        result = _run_in_child(code, limits)
    finally:
        _slots.release()
    return SandboxResult(result.output, result.error, round(time.monotonic() - start, 3), result.layers)


def _run_in_child(code: str, limits: Limits) -> SandboxResult:
    """A fresh interpreter (`python -m agent.sandbox_child`) in a fresh throw-away directory, an
    empty environment but for its import path; killed at the wall clock (start-up included)."""
    workdir = tempfile.mkdtemp(prefix="react-lab-sandbox-")
    request = json.dumps({"code": code, "limits": {**asdict(limits), "workdir": workdir}}).encode()
    try:
        child = subprocess.Popen([sys.executable, "-m", "agent.sandbox_child"], cwd=workdir,
                                 env={"PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"},
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            data, killed = _exchange(child, request, limits)
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
        return _result(_decode(data), None if killed else child.returncode, limits)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _exchange(child: subprocess.Popen, request: bytes, limits: Limits) -> tuple[bytes, bool]:
    """Send the request, read at most MAX_REPLY bytes of the reply until EOF or the wall clock;
    (reply, whether the wall clock ran out)."""
    deadline = time.monotonic() + limits.wall_s + STARTUP_S
    try:
        child.stdin.write(request)
        child.stdin.close()
    except OSError:
        pass  # the child died before reading: its exit code tells why
    chunks, size, fd = [], 0, child.stdout.fileno()
    while size <= MAX_REPLY:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b"".join(chunks), True
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
    return b"", False  # more than any honest reply: the exit code or the kill decides


def _decode(data: bytes) -> dict | None:
    try:
        message = json.loads(data)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _result(message: dict | None, exitcode: int | None, limits: Limits) -> SandboxResult:
    if message is not None:
        output, error = str(message.get("output", ""))[:2 * limits.output_chars], message.get("error")
        return SandboxResult(output, None if error is None else str(error)[:limits.output_chars],
                             layers=tuple(message.get("layers", ())))
    return SandboxResult("", _killed_reason(exitcode, limits))


def _killed_reason(exitcode: int | None, limits: Limits) -> str:
    """exitcode None: we killed it at the wall clock; SIGXCPU/SIGKILL from the kernel: CPU limit."""
    if exitcode is None or exitcode == -signal.SIGALRM:
        return f"wall-clock limit exceeded ({limits.wall_s:g} s): the process was killed"
    if exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
        return f"CPU time limit exceeded ({limits.cpu_s} s of CPU): the process was stopped"
    if exitcode < 0:
        return f"the process was stopped by signal {signal.Signals(-exitcode).name}"
    return f"the process ended (exit code {exitcode}) without a result"


def guarantees() -> tuple[str, ...]:
    """What the sandbox promises, in words (for a view beside the code tool)."""
    limits = LIMITS
    return (
        "Parsing vs policy: a specific tool's arguments are checked by its JSON Schema; the code "
        "tool's argument is one string, which only the sandbox can restrain.",
        f"Each call runs in a separate process, killed after {limits.wall_s:g} s of wall clock; "
        f"{limits.cpu_s} s of CPU; {limits.memory_mb} MiB of memory beyond the interpreter's own.",
        f"Code up to {MAX_CODE_CHARS} characters; output cut at {limits.output_chars} characters.",
        "An AST interpreter (smolagents): no open, eval, exec, __import__ or dunder attributes; "
        "imports only from an allow-list (math, statistics, itertools, …).",
        "Where the OS allows: no network (own network namespace; seccomp refuses sockets), no new "
        "processes, no file-system writes (seccomp), an empty environment.",
    )
