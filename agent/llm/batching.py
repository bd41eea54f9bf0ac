"""The scheduler that lets concurrent sessions share the model's forward passes (model layer).

Decode on a CPU is memory-bound: one step over 8 sequences costs about twice one sequence (36 ms
at batch 1, 68 ms at batch 8 on 2 cores). So every model call — a Sampling-tab step, a token of a
local ReAct reply, a token of Asking vs enforcing — becomes a ``Request`` that waits here briefly,
and one worker thread runs the waiting requests of all sessions together, one step at a time:

- **decode rows** (one new token each, the usual case) go into one batched forward pass;
- **prefill rows** (a new prompt, or the part of it after a cached prefix) advance by at most
  ``PREFILL_CHUNK`` tokens a step in a second pass, so a 2,000-token prompt never stalls the
  others for seconds (chunked prefill); the decode rows are answered before that pass starts, so a
  one-token press waits for no prompt's chunk;
- **one other pass a step**: after the decode pass, either the prefill pass or the early-exit
  draft pass (below), in turn when both are waiting, so the decode rows come back every one or
  two passes instead of every three;
- **cheap requests cut into a prompt's chunk**: a chunk of 128 new tokens is the longest pass
  (half a second on two slow cores, a second under a class's load), and a press that arrives
  during it used to wait for all of it. The engine now calls back between two of the chunk's
  layers; once the chunk has had the model for ``CUT_IN_S`` (0.1 s) since the last cut-in or
  decode pass, the decode rows that wait run their own pass there, then short prompts (at most
  ``CUT_IN_TOKENS`` new tokens) theirs, and the chunk goes on from the layer where it stopped.
  So a press waits at most about ``CUT_IN_S`` and one layer for the model, and the chunk keeps
  its size (a smaller chunk costs more per token: the weights are read for fewer tokens);
- **fairness**: the oldest request always runs, then the next oldest while the caps allow, at most
  one request per session per step — a long ReAct reply and a one-token Sample each get one
  token per step;
- **caps** (memory bounded, the machine never oversubscribed): at most ``MAX_BATCH`` sequences a
  step and ``MAX_STEP_TOKENS`` padded tokens of KV in one pass; past them a request waits for
  the next step (it never fails). A session may have ``SESSION_REQUESTS`` requests here at once;
  one more gets ``Busy`` with a message for the page;
- **stop**: a request whose ``cancel()`` turns true leaves before the next step with ``Cancelled``;
- **the pass log** (off unless ``$REACT_LAB_PASS_LOG`` names a file; for benchmarks): one JSON
  line per forward pass — when it started, how long it took, whether it cut into a chunk, and for
  each row its cached past, its new tokens and how long it waited here since ``submit`` — so a
  benchmark can tell the time a press spent waiting for the model from the time it spent in Gradio;
- **speculative decoding** (agent/llm/speculative.py) goes through the same steps: a verify request
  (``tail`` = γ + 1) is a prefill row that wants the logits of its last ``tail`` positions, and an
  early-exit draft request (``layers`` = L) runs only the first L layers: draft rows of one L share
  a third pass of the step. So two students' speculative runs share passes with each other and
  with everyone's decode, instead of each pass running alone.

This module is pure Python (no torch): the forward pass and the KV cache are
``LanguageModel._prepare`` / ``_forward_rows`` in agent/llm/model.py, the "engine" below. It does not
know sampling, grammars or Gradio. Session keys come from the caller (``session=``) or from a
resolver the app installs (``set_session_resolver``: Gradio's session hash of the running event).

>>> class Echo:  # an engine that "predicts" the sum of the ids
...     def _prepare(self, r): r.pos = 0; return None
...     def _forward_rows(self, rows, between=None):  # between(): called between layers of a chunk
...         for r, n in rows: r.pos += n; r.logits = sum(r.ids) if r.pos == len(r.ids) else None
>>> b = Batcher(Echo())
>>> b.submit("a", (1, 2, 3))
6
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CONCURRENCY_ID = "model"  # Gradio: the concurrency_id shared by every event that runs the model
MAX_BATCH = 16  # sequences in one forward pass (and Gradio's concurrency limit of model events)
MAX_STEP_TOKENS = 8192  # rows × padded (past + new) tokens in one pass: ≈ 380 MB of KV for SmolLM2
PREFILL_CHUNK = 128  # new tokens of prompts per step (padded rows × tokens), so decoders keep moving
CUT_IN_S = 0.1  # a prompt's chunk runs at least this long after a cut-in or decode pass before the next cut-in
CUT_IN_TOKENS = 32  # short prompts cut into a chunk too: at most this many padded new tokens in their pass
GATHER_S = 0.06  # wait at most this long for the sessions of the last two steps to come back (_expect)
SESSION_REQUESTS = 3  # requests one session may have here at once; one runs per step
PASS_LOG_ENV = "REACT_LAB_PASS_LOG"  # a file for one JSON line per forward pass (benchmarks); unset: none


class Busy(RuntimeError):
    """This session already has SESSION_REQUESTS model requests waiting; the message is for the page."""


class Cancelled(RuntimeError):
    """The request was stopped (its cancel() turned true) before its logits were computed."""


_resolver: Callable[[], object] | None = None


def set_session_resolver(resolver: Callable[[], object] | None) -> None:
    """Install how to find the running event's session when a caller passes none (app.py does,
    with Gradio's session hash). It runs in the caller's thread; None or an exception = unknown."""
    global _resolver
    _resolver = resolver


def current_session() -> object | None:
    """The session of the running event, from the installed resolver, or None."""
    try:
        return _resolver() if _resolver is not None else None
    except Exception:  # noqa: BLE001 — outside an event the resolver may fail: no session then
        return None


_order = itertools.count()


@dataclass(eq=False)
class Request:
    """One call for the logits after ``ids`` on behalf of ``session``; the engine fills the rest."""

    session: object
    ids: tuple[int, ...]
    cancel: Callable[[], bool] | None = None
    tail: int = 1  # logits wanted for the last `tail` positions (> 1: speculative decoding's verify)
    layers: int | None = None  # an early-exit draft: the first `layers` layers only, nothing stored
    order: int = field(default_factory=lambda: next(_order))  # arrival: the oldest runs first
    submitted: float = field(default_factory=time.monotonic)  # for the pass log's waits
    prepared: bool = False  # the engine has looked up the cached prefix
    pos: int = 0  # leading ids whose KV is cached (set by the engine, grows with each chunk)
    base: object = None  # the engine's cache entry for ids[:pos]
    logits: object = None  # set when done: (V,), or (tail, V) when tail > 1
    tail_logits: list = field(default_factory=list)  # the engine's rows of a tail request, as they come
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def remaining(self) -> int:
        return len(self.ids) - self.pos

    def stopped(self) -> bool:
        try:
            return self.cancel is not None and bool(self.cancel())
        except Exception:  # noqa: BLE001 — a broken cancel callback counts as "stop"
            return True


@dataclass
class Stats:
    """What the worker did, for benchmarks and tests (never read by the scheduling itself)."""

    steps: int = 0  # forward passes
    rows: int = 0  # sequences over all passes
    max_rows: int = 0
    tail_rows: int = 0  # verify rows (speculative decoding) over all passes
    draft_rows: int = 0  # early-exit draft rows over all passes
    max_draft_rows: int = 0
    cancelled: int = 0
    busy: int = 0
    cut_ins: int = 0  # times waiting decode rows / short prompts ran between two layers of a prompt's chunk


class Batcher:
    """Queue + one worker thread in front of an engine (a LanguageModel). ``submit`` blocks."""

    def __init__(self, engine, max_batch: int = MAX_BATCH, max_step_tokens: int = MAX_STEP_TOKENS,
                 prefill_chunk: int = PREFILL_CHUNK, gather_s: float = GATHER_S, unlimited=(),
                 pass_log: str | None = None, cut_in_s: float = CUT_IN_S):
        self.engine = engine
        self.pass_log = open(pass_log, "a", buffering=1) if pass_log else None  # noqa: SIM115 — the worker's, for its life
        self.unlimited = frozenset(unlimited)  # sessions without SESSION_REQUESTS (local use, tests)
        self.max_batch, self.max_step_tokens = int(max_batch), int(max_step_tokens)
        self.prefill_chunk, self.gather_s, self.cut_in_s = int(prefill_chunk), float(gather_s), float(cut_in_s)
        self.stats = Stats()
        self._cv = threading.Condition()
        self._queue: list[Request] = []
        self._per_session: dict[object, int] = {}
        self._expected = 1  # requests likely to come back for the next step (_expect)
        self._back_before = set()  # the sessions the step before expected back
        self._draft_turn = False  # both prompts and drafts waiting: whose pass runs this step
        self._decoded = 0.0  # when the last decode pass or cut-in ended (time.monotonic)
        self._cut_in_s = 0.0  # seconds of cut-in passes so far (the pass log's own times of a chunk)
        self._worker: threading.Thread | None = None

    def submit(self, session, ids: tuple[int, ...], cancel: Callable[[], bool] | None = None,
               tail: int = 1, layers: int | None = None):
        """The logits after ``ids`` for ``session``, computed in a batched step: (V,), or (tail, V)
        for the last ``tail`` positions; ``layers``: an early-exit draft's first L layers. Raises
        Busy, Cancelled, or what the engine raised for this request."""
        req = Request(session, tuple(ids), cancel, tail=int(tail), layers=layers)
        with self._cv:
            if self._per_session.get(session, 0) >= SESSION_REQUESTS and session not in self.unlimited:
                self.stats.busy += 1
                raise Busy(f"This session already has {SESSION_REQUESTS} model requests waiting: "
                           "wait for them to finish (or press Stop), then try again.")
            self._per_session[session] = self._per_session.get(session, 0) + 1
            self._queue.append(req)
            self._start_worker()
            self._cv.notify_all()
        try:
            while not req.done.wait(0.05):
                if req.stopped():  # leave now; the worker drops it before its next step
                    with self._cv:
                        self._cv.notify_all()
            if req.error is not None:
                raise req.error
            return req.logits
        finally:
            with self._cv:
                left = self._per_session[session] - 1
                if left:
                    self._per_session[session] = left
                else:
                    del self._per_session[session]

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def _start_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._run, daemon=True, name="model-batcher")
            self._worker.start()

    def _run(self) -> None:
        while True:
            try:
                decode, prefill, draft = self._one_other_pass(*self._next_step())
            except Exception:  # noqa: BLE001 — the worker must outlive any one step's failure
                continue
            # Each pass's rows are answered as soon as that pass is done: a one-token Sample/Greedy
            # press does not wait for the step's prefill and draft passes, and its event's own
            # Python work overlaps them (a pass releases the interpreter lock while torch computes).
            self._run_pass(decode)
            if decode:
                self._decoded = time.monotonic()
            self._run_pass(prefill, between=self._cut_in({r.session for r, _ in prefill}))
            self._run_pass(draft)
            self._expect(decode + prefill + draft)

    def _run_pass(self, rows: list, between: Callable[[], None] | None = None, cut: bool = False) -> None:
        """One forward pass over rows (``cut``: inside a prompt's chunk), logged, its rows answered."""
        if not rows:
            return
        pasts, started, cut_in = [r.pos for r, _ in rows], time.monotonic(), self._cut_in_s
        self._forward(rows, between)  # a failed pass fails its rows, never the worker
        if self.pass_log is not None:
            self._log_pass(rows, pasts, started, own=time.monotonic() - started - (self._cut_in_s - cut_in), cut=cut)
        self._finish(rows)

    def _cut_in(self, running: set) -> Callable[[], None]:
        """The callback for a prompt's chunk (its rows' sessions: ``running``), which the engine
        calls between two layers: once the chunk has had the model for cut_in_s since the last
        cut-in or decode pass, the requests waiting that cost little (one per session, oldest
        first, none of ``running``) run now and are answered — the decode rows in one pass, then
        short prompts (at most CUT_IN_TOKENS padded new tokens together: a student's typed prompt,
        a speculative verify) in another; the chunk then goes on where it stopped."""

        def between() -> None:
            if time.monotonic() - self._decoded < self.cut_in_s:
                return
            with self._cv:
                queue = sorted((r for r in self._queue if r.session not in running and r.layers is None),
                               key=lambda r: r.order)
            decode, prompts, seen = [], [], set()
            for r in queue:
                if r.session in seen or r.stopped() or not (r.prepared or self._prepare(r)):
                    continue  # a stopped request leaves at the next step; a cache hit is answered
                if r.remaining == 1 and self._fits(decode, r, 1, self.max_batch, self.max_step_tokens):
                    decode.append((r, 1))
                    seen.add(r.session)
                elif 1 < r.remaining <= CUT_IN_TOKENS and self._fits(
                        prompts, r, r.remaining, self.max_batch, self.max_step_tokens, new_budget=CUT_IN_TOKENS):
                    prompts.append((r, r.remaining))
                    seen.add(r.session)
            if decode or prompts:
                started = time.monotonic()
                self._run_pass(decode, cut=True)
                self._run_pass(prompts, cut=True)
                self.stats.cut_ins += 1
                self._decoded = time.monotonic()
                self._cut_in_s += self._decoded - started

        return between

    def _one_other_pass(self, decode: list, prefill: list, draft: list) -> tuple[list, list, list]:
        """The step's passes: its decode rows, then its prompts' chunk or its drafts — in turn when
        both wait (the others stay queued for the next step)."""
        if prefill and draft:
            self._draft_turn = not self._draft_turn
            return (decode, [], draft) if self._draft_turn else (decode, prefill, [])
        return decode, prefill, draft

    def _next_step(self) -> tuple[list, list, list]:
        """Wait for requests, gather briefly, drop stopped ones, answer cache hits, pick rows."""
        with self._cv:
            while not self._queue:
                self._cv.wait()
            deadline = time.monotonic() + self.gather_s
            while len(self._queue) < self._expected and (left := deadline - time.monotonic()) > 0:
                self._cv.wait(left)
            queue = sorted(self._queue, key=lambda r: r.order)
        live = []
        for r in queue:
            if r.stopped():
                self._end(r, error=Cancelled("stopped"))
                self.stats.cancelled += 1
            elif r.prepared or self._prepare(r):
                live.append(r)
        return self._pick(live)

    def _prepare(self, r: Request) -> bool:
        """Let the engine find the cached prefix; an exact hit is answered at once. False: done."""
        r.prepared = True
        try:
            hit = self.engine._prepare(r)
        except Exception as e:  # noqa: BLE001 — e.g. invalid ids: the caller sees it
            self._end(r, error=e)
            return False
        if hit is not None:
            self._end(r, logits=hit)
            return False
        return True

    def _pick(self, live: list[Request]) -> tuple[list, list, list]:
        """Oldest first, one request per session: decode rows within MAX_BATCH/MAX_STEP_TOKENS,
        prefill rows (chunked) sharing PREFILL_CHUNK padded new tokens: with k prompts waiting, each
        advances by at most PREFILL_CHUNK // k tokens, so a short prompt that arrives during a long
        one's prefill is done in a step or two instead of waiting for the whole long prompt. A
        verify (tail > 1) is a prefill row; early-exit drafts of the oldest draft's L form a third
        pass, each row whole (a draft stores no KV, so it cannot be chunked)."""
        decode, prompts, draft, seen = [], [], [], set()
        for r in live:
            if r.session in seen:
                continue
            if r.layers is not None:
                if (not draft or r.layers == draft[0][0].layers) and self._fits(
                        draft, r, r.remaining, self.max_batch, self.max_step_tokens):
                    draft.append((r, r.remaining))
                    seen.add(r.session)
            elif r.remaining == 1 and self._fits(decode, r, 1, self.max_batch, self.max_step_tokens):
                decode.append((r, 1))
                seen.add(r.session)
            elif r.remaining > 1 and len(prompts) < self.max_batch:
                prompts.append(r)
                seen.add(r.session)
        share = max(1, self.prefill_chunk // max(1, len(prompts)))
        prefill = []
        for r in prompts:
            n = min(r.remaining, share)
            if not prefill or self._fits(prefill, r, n, self.max_batch, self.max_step_tokens,
                                         new_budget=self.prefill_chunk):
                prefill.append((r, n))
        if not decode and not prefill and not draft and live:  # never idle: the oldest runs, alone if need be
            r = live[0]
            if r.layers is not None:
                draft.append((r, r.remaining))
            else:
                (decode if r.remaining == 1 else prefill).append((r, min(r.remaining, self.prefill_chunk)))
        return decode, prefill, draft

    @staticmethod
    def _fits(rows, r: Request, n: int, max_rows: int, max_tokens: int, new_budget: int | None = None) -> bool:
        if len(rows) + 1 > max_rows:
            return False
        past = max([q.pos for q, _ in rows] + [r.pos])
        new = max([m for _, m in rows] + [n])
        if new_budget is not None and (len(rows) + 1) * new > new_budget:
            return False
        return not rows or (len(rows) + 1) * (past + new) <= max_tokens

    def _forward(self, rows: list, between: Callable[[], None] | None = None) -> None:
        try:
            self.engine._forward_rows(rows, between=between)  # between: only a prompt's chunk has one
        except Exception as e:  # noqa: BLE001 — a failed pass fails its rows, never the worker
            for r, _ in rows:
                r.error = e
        self.stats.steps += 1
        self.stats.rows += len(rows)
        self.stats.max_rows = max(self.stats.max_rows, len(rows))
        self.stats.tail_rows += sum(r.tail > 1 for r, _ in rows)
        drafts = sum(r.layers is not None for r, _ in rows)
        self.stats.draft_rows += drafts
        self.stats.max_draft_rows = max(self.stats.max_draft_rows, drafts)

    def _log_pass(self, rows: list, pasts: list[int], started: float, own: float, cut: bool) -> None:
        """One line of the pass log: {"t": start (time.monotonic, comparable across processes on
        Linux), "s": its own seconds (a chunk's without the passes that cut into it: those have
        lines of their own), "draft": early-exit layers or null, "cut": run inside a prompt's chunk,
        "rows": [[past, new, waited s], …]}."""
        line = {"t": round(started, 4), "s": round(own, 4), "draft": rows[0][0].layers, "cut": cut,
                "rows": [[past, n, round(started - r.submitted, 4)] for (r, n), past in zip(rows, pasts, strict=True)]}
        try:
            self.pass_log.write(json.dumps(line) + "\n")
        except (OSError, ValueError):  # a full disk or a closed file: the log stops, never the model
            self.pass_log = None

    def _finish(self, rows: list) -> None:
        """Answer the rows that are done (their logits or their error), at once."""
        done = [r for r, _ in rows if r.error is not None or r.logits is not None]
        with self._cv:
            for r in done:
                if r in self._queue:
                    self._queue.remove(r)
        for r in done:
            r.done.set()

    def _expect(self, rows: list) -> None:
        """How many requests the next step should gather for: the sessions likely back (those of
        decode rows, and speculative rows: the next draft or verify follows) of this step AND the
        step before. Students who press back to back otherwise fall into two groups that
        alternate — each group's requests come back while the other's pass runs — and each step
        waited only for its own group: 8 students made passes of 4 rows, never 8."""
        back = {r.session for r, n in rows if n == 1 or r.layers is not None or r.tail > 1}
        with self._cv:
            self._expected = max(1, len(back | self._back_before))
            self._back_before = back

    def _end(self, r: Request, logits=None, error: BaseException | None = None) -> None:
        r.logits, r.error = logits, error
        with self._cv:
            if r in self._queue:
                self._queue.remove(r)
        r.done.set()
