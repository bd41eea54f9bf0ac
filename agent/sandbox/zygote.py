"""The sandbox's fork server: started once by agent.sandbox, it forks a process per call.

Why: a fresh Python interpreter that imports smolagents costs about a second of CPU; a fork of an
interpreter that already did costs milliseconds. The server process never forks itself (it has
threads, a model, Gradio): it starts this small process (`python -m agent.sandbox.zygote FD`)
with an empty environment, which imports agent.sandbox.child once and then, per request:

    server ──(request JSON + the write end of a result pipe, over a SOCK_SEQPACKET socket)──▶ zygote
    zygote ──fork──▶ supervisor ──fork──▶ child: confine, interpret, write JSON to the supervisor
    supervisor: reads at most MAX_REPLY bytes until the wall clock, kills the child (SIGKILL) when
    it runs over, reaps it, and writes ONE JSON message to the result pipe: the child's own, or
    the reason it ended (wall clock, CPU limit, signal) read from its exit status.

The supervisor runs no visitor code; only the child is confined (agent.sandbox.child.confine).
The zygote exits when the server closes its socket (the server ended).

What it does not know: the tools, the interpreter (agent.sandbox.child), the loop.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import sys
import time

from agent.sandbox import MAX_REPLY, read_bounded
from agent.sandbox import child as sandbox_child

MAX_REQUEST = 2**20


def preload() -> None:
    """Import now what a confined child may use later: its filter refuses `open`, so every module
    the code may import, and the encyclopedia the tools read, must already be in memory."""
    for name in sandbox_child.ALLOWED_IMPORTS:
        importlib.import_module(name)
    sandbox_child.tools.load_encyclopedia()
    sandbox_child.interpret("import math\nmath.sqrt(4)", 100)  # smolagents' own lazy imports


def serve(sock: socket.socket) -> None:
    """The zygote's loop: one request → one supervisor; ends when the server closes the socket."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the supervisors
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 1)
        except OSError:
            return
        if not data:
            return
        if not fds:
            continue
        if os.fork() == 0:
            try:
                sock.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the supervisor waits for its child
                supervise(json.loads(data), fds[0])
            finally:
                os._exit(0)
        os.close(fds[0])


def supervise(request: dict, out_fd: int) -> None:
    """Fork the confined child, bound it in time and reply size, report one JSON message."""
    limits = request["limits"]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.close(out_fd)
        try:
            with os.fdopen(write_end, "wb") as out:
                sandbox_child.main(request["code"], limits, out)
        finally:
            os._exit(0)
    os.close(write_end)
    data, killed = read_bounded(read_end, time.monotonic() + limits["wall_s"], MAX_REPLY)
    if killed:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    message = data if _is_message(data) else json.dumps(
        {"output": "", "error": None, "killed": killed, "status": status}).encode()
    with os.fdopen(out_fd, "wb") as out:
        out.write(message)


def _is_message(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False


if __name__ == "__main__":
    preload()
    serve(socket.socket(fileno=int(sys.argv[1])))
