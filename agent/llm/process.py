"""The model in a process of its own: the page's Python and the model's never share one interpreter lock.

Why: at 60 students the server used 1.0–1.1 of its two cores, and Gradio's event loop, every
session's handler and the batcher's worker (the Python around each forward pass) shared one
interpreter lock. Here the child process holds the LanguageModel — its weights, adapters, KV cache
and batcher — and the app's process keeps only the tokenizer's side
(agent.llm.model.LanguageModelBase). Measured, it showed that the model's one thread, not the lock,
is the hall's main bound; with its passes on two spinning threads (CHILD_THREADS), which the page
no longer pays for, the hall and the replies got faster, so `app.py` starts it by default
(``--model-process off``: one process; docs/DESIGN-NOTES.md, "The model in a process of its own").

    lm = start_model_process(model=None, dtype="float16")   # the child loads what load_model loads
    lm.next_token_logits(ids, session=…, cancel=…, weights=…)  # the same calls as LanguageModel's

Each call is one message on a socket pair: ``(call id, method, args, kwargs)``; the child runs it in
a thread of its own (a call blocks in the batcher until its batched step is done, so many wait at
once) and answers ``(call id, value, error)``. A caller's ``cancel()`` is polled here and sent as
``("cancel", call id)``; the child's call sees it at its next step, as in one process. The session
is resolved here (the running Gradio event's) before the call leaves. Only the methods in
``CALLS`` can be called. If the child dies, every waiting call fails with ModelProcessError and the
next call starts a new child.

The child is ``python -m agent.llm.process --fd N …``: not a fork (the parent has threads and an
OpenMP pool), not multiprocessing's spawn (that would import app.py and Gradio again).
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from agent.llm.batching import Cancelled
from agent.llm.model import BASE, LanguageModelBase, ModelLoadError

# The calls the child answers (LanguageModel's methods that run the model or touch its cache).
CALLS = frozenset({"next_token_logits", "share_prefix", "forget", "tail_logits", "early_exit_logits",
                   "plain_decode_seconds", "full_forward_logits", "batcher_stats"})
CANCELLABLE = frozenset({"next_token_logits"})  # the calls that take cancel=
CALL_THREADS = 128  # calls the child runs at once (each waits in the batcher; more wait in its queue)
POLL_S = 0.05  # how often a waiting caller looks at its cancel()
START_TIMEOUT_S = 600.0  # the first start dequantizes the bundled GGUF (≈35 s on 2 cores)
# The child's passes on two threads that spin briefly between operators (≈0.1 ms) instead of
# sleeping: alone in its process the model may take the second core, which the page's process
# barely needs (0.17–0.19 of a core at 60 students). Measured against one thread (docs/BENCHMARKS.md,
# 2026-12-06): 60 students' p95 1,861 against 3,372 ms, 8 replies 30.5 against 15–19 tokens/s.
# An operator who sets OMP_NUM_THREADS chooses for the child too.
CHILD_THREADS = {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "10000"}
ROOT = Path(__file__).resolve().parents[2]  # the repository's root: `-m agent.llm.process` from any folder


def child_environment(env=os.environ) -> dict[str, str]:
    """The child's environment: the app's, with CHILD_THREADS unless the operator set OMP_NUM_THREADS,
    and the repository's root first on PYTHONPATH (the app may be started from any folder).

    >>> child_environment({})["OMP_WAIT_POLICY"], child_environment({"OMP_NUM_THREADS": "1"})["OMP_NUM_THREADS"]
    ('ACTIVE', '1')
    >>> child_environment({"PYTHONPATH": "/x"})["PYTHONPATH"] == f"{ROOT}{os.pathsep}/x"
    True
    """
    out = dict(env) if "OMP_NUM_THREADS" in env else {**env, **CHILD_THREADS}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return out


class ModelProcessError(RuntimeError):
    """The model's process ended while a call waited (or could not be started)."""


class _Waiting:
    __slots__ = ("done", "value", "error", "conn")

    def __init__(self):
        self.done, self.value, self.error, self.conn = threading.Event(), None, None, None


class ModelProcess(LanguageModelBase):
    """LanguageModel's interface, its forward passes computed by a child process (module docstring)."""

    def __init__(self, model: str | None = None, dtype: str = "float16", log=print, adapters: bool = True):
        self._args = [sys.executable, "-m", "agent.llm.process", "--dtype", dtype]
        self._args += ["--model", model] if model else []
        self._args += [] if adapters else ["--no-adapters"]
        self._log = log
        self._ids = itertools.count()
        self._lock = threading.Lock()  # the connection, the waiting calls, the child
        self._send_lock = threading.Lock()
        self._waiting: dict[int, _Waiting] = {}
        self._conn: Connection | None = None
        self._child: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        hello = self._start()
        super().__init__(hello.pop("tokenizer"), **hello)

    # --- the calls ----------------------------------------------------------------------------

    def next_token_logits(self, token_ids: Sequence[int], session=None, cancel=None,
                          weights: str = BASE) -> np.ndarray:
        """As LanguageModel.next_token_logits; the ids are checked here, before they travel."""
        return self._call("next_token_logits", self._checked(token_ids), session=self._session(session),
                          weights=self.checked_weights(weights), cancel=cancel)

    def share_prefix(self, token_ids: Sequence[int], weights: str = BASE) -> None:
        self._call("share_prefix", self._checked(token_ids), weights=self.checked_weights(weights))

    def forget(self, session) -> None:
        self._call("forget", session)

    def tail_logits(self, token_ids: Sequence[int], n: int, session=None) -> np.ndarray:
        return self._call("tail_logits", self._checked(token_ids), n, session=self._session(session))

    def early_exit_logits(self, token_ids: Sequence[int], layers: int, session=None) -> np.ndarray:
        return self._call("early_exit_logits", self._checked(token_ids), layers, session=self._session(session))

    def plain_decode_seconds(self, prompt_ids: Sequence[int], continuation: Sequence[int], session=None) -> float:
        return self._call("plain_decode_seconds", self._checked(prompt_ids), self._checked(continuation),
                          session=self._session(session))

    def full_forward_logits(self, token_ids: Sequence[int], weights: str = BASE) -> np.ndarray:
        return self._call("full_forward_logits", self._checked(token_ids), weights=self.checked_weights(weights))

    def batcher_stats(self):
        """The child's agent.llm.batching.Stats (a copy)."""
        return self._call("batcher_stats")

    def close(self) -> None:
        """End the child (it also ends by itself when this process's end of the socket closes)."""
        with self._lock:
            conn, child, sock = self._conn, self._child, self._sock
            self._conn = None
        if conn is not None:  # shutdown, not only close: the reader thread is blocked in recv on it
            sock.shutdown(socket.SHUT_RDWR)
            sock.close()
            conn.close()
        if child is not None:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()

    def _call(self, method: str, *args, cancel=None, **kwargs):
        if cancel is not None and _stopped(cancel):
            raise Cancelled("stopped")  # as the batcher: a stopped call never reaches a pass
        rid, waiting = next(self._ids), _Waiting()
        with self._lock:
            if self._conn is None:
                self._start()
            conn = waiting.conn = self._conn
            self._waiting[rid] = waiting
        try:
            self._send(conn, (rid, method, args, kwargs))
            cancelled = False
            while not waiting.done.wait(POLL_S):
                if not cancelled and cancel is not None and _stopped(cancel):
                    self._send(conn, ("cancel", rid))
                    cancelled = True
        finally:
            with self._lock:
                self._waiting.pop(rid, None)
        if waiting.error is not None:
            raise waiting.error
        return waiting.value

    def _send(self, conn: Connection, message) -> None:
        try:
            with self._send_lock:
                conn.send(message)
        except (OSError, ValueError) as exc:  # the child is gone: the reader fails every waiting call
            raise ModelProcessError("The model's process ended; try again (it is restarted).") from exc

    # --- the child ----------------------------------------------------------------------------

    def _start(self) -> dict:
        """Start the child, wait for its hello (what LanguageModelBase needs), start the reader."""
        ours, theirs = socket.socketpair()
        try:
            child = subprocess.Popen([*self._args, "--fd", str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                                     env=child_environment())
        finally:
            theirs.close()
        conn = Connection(os.dup(ours.fileno()))  # `ours` stays, for close()'s shutdown
        try:
            if not conn.poll(START_TIMEOUT_S):
                child.kill()
                raise ModelLoadError(f"The model's process did not start within {START_TIMEOUT_S:.0f} s.")
            try:
                ok, hello = conn.recv()
            except EOFError:
                raise ModelLoadError(f"The model's process ended while loading (exit code {child.wait()}).") from None
            if not ok:
                child.wait()
                raise ModelLoadError(hello)
        except BaseException:
            conn.close()
            ours.close()
            raise
        self._conn, self._child, self._sock = conn, child, ours
        threading.Thread(target=self._read, args=(conn, ours, child), daemon=True, name="model-process-reader").start()
        return hello

    def _read(self, conn: Connection, sock: socket.socket, child: subprocess.Popen) -> None:
        """Hand each answer to its waiting call; when the child ends, fail them all."""
        try:
            while True:
                rid, value, error = conn.recv()
                with self._lock:
                    waiting = self._waiting.get(rid)
                if waiting is not None:
                    waiting.value, waiting.error = value, error
                    waiting.done.set()
        except (EOFError, OSError):
            pass
        conn.close()
        sock.close()
        with self._lock:
            if self._conn is conn:
                self._conn = None
                self._log("The model's process ended; the next call restarts it.")
            for waiting in [w for w in self._waiting.values() if w.conn is conn]:
                waiting.error = ModelProcessError("The model's process ended; try again (it is restarted).")
                waiting.done.set()
        child.wait()  # reaped, not left a zombie


def _stopped(cancel) -> bool:
    try:
        return bool(cancel())
    except Exception:  # noqa: BLE001 — a broken cancel callback counts as "stop", as in the batcher
        return True


def start_model_process(model: str | None = None, dtype: str = "float16", log=print,
                        adapters: bool = True) -> ModelProcess:
    """The model in a child process (see the module docstring); raises ModelLoadError like load_model."""
    return ModelProcess(model, dtype, log, adapters)


# --- in the child ---------------------------------------------------------------------------------

def serve(conn: Connection, lm) -> None:
    """Answer the parent's calls on ``lm`` until the parent's end of the socket closes."""
    send_lock, cancels, pool = threading.Lock(), {}, ThreadPoolExecutor(CALL_THREADS, "model-call")

    def answer(rid, value, error) -> None:
        with send_lock:
            try:
                conn.send((rid, value, error))
            except (TypeError, AttributeError, ValueError) as exc:  # an error that does not pickle
                conn.send((rid, None, RuntimeError(f"{type(error or exc).__name__}: {error or exc}")))

    def run(rid, method, args, kwargs) -> None:
        try:
            if method == "batcher_stats":
                value = lm.batcher.stats
            else:
                if method in CANCELLABLE:
                    kwargs["cancel"] = cancels[rid].is_set
                value = getattr(lm, method)(*args, **kwargs)
            answer(rid, value, None)
        except Exception as exc:  # noqa: BLE001 — the caller sees it (Busy, Cancelled, ValueError, …)
            answer(rid, None, exc)
        finally:
            cancels.pop(rid, None)

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] == "cancel":
            event = cancels.get(message[1])
            if event is not None:
                event.set()
            continue
        rid, method, args, kwargs = message
        if method not in CALLS:
            answer(rid, None, ValueError(f"{method!r} is not a call the model's process answers."))
            continue
        cancels[rid] = threading.Event()
        pool.submit(run, rid, method, args, kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The model's process (started by ModelProcess).")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--model", default=None)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--no-adapters", action="store_true")
    args = parser.parse_args(argv)
    conn = Connection(args.fd)
    from agent.sandbox import protect_server_process

    protect_server_process()  # as the app's process: no other process of this user may read it
    from agent.llm.model import load_model

    try:
        lm = load_model(args.model, dtype=args.dtype, log=lambda m: print(m, file=sys.stderr),
                        adapters=not args.no_adapters)
    except ModelLoadError as exc:
        conn.send((False, str(exc)))
        return 2
    except Exception as exc:  # the parent prints one line, as load_model's own errors
        conn.send((False, f"Could not load the model: {type(exc).__name__}: {exc}"))
        return 2
    conn.send((True, {"tokenizer": lm.tokenizer, "source": lm.source, "dtype": lm.dtype,
                      "from_cache": lm.from_cache, "name": lm.name, "vocab_size": lm.vocab_size,
                      "context_window": lm.context_window, "n_params": lm.n_params,
                      "num_layers": lm.num_layers, "eos_token_ids": sorted(lm.eos_token_ids),
                      "tuned": lm.tuned}))
    serve(conn, lm)
    os._exit(0)  # the batcher's worker is a daemon thread blocked on its condition


if __name__ == "__main__":
    sys.exit(main())
