"""Autoregressive generation: the lecture's loop of "append w_t, give w_{1:t} to the model again,
draw the next token" until an end-of-sequence token, a stop sequence or a limit.

One function, ``generate``, used by everything that writes more than one token: the Sampling tab's
"Asking vs enforcing" comparison and the ReAct tab's local-model backend. Each step is
model.next_token_logits (prefix KV cache: one decode step) → the grammar's mask A(s_t), if any →
sampling.trace (mask → temperature → top-k → top-p → min-p) → the token drawn with a seeded u
(at T = 0 sampling.greedy: the same token and probability, without the stages nobody sees here).

Concurrent generations share forward passes: each step's next_token_logits is a request to the
batcher (agent/llm/batching.py), so several sessions' generations advance together, each with its own
KV cache, sampling settings, grammar and stop conditions — and the same tokens as alone.

Stop: pass ``cancel`` (a threading.Event the UI sets) or ``cancelled`` (a callable); either stops
the generation before its next step, also while that step waits in the batcher. Every running
generation is also registered under its session, so ``lm.stop(session)`` stops them all.

It does not know about chat messages, tools or the UI.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from agent import sampling, stops

STOP_EOS = "end of sequence"
STOP_SEQUENCE = "stop sequence"
STOP_GRAMMAR = "grammar complete"
STOP_LENGTH = "max new tokens"
STOP_DEADLINE = "time limit"
STOP_CANCELLED = "cancelled"


@dataclass(frozen=True)
class Generation:
    ids: tuple[int, ...]  # generated tokens, the end-of-sequence token left out
    text: str
    probs: tuple[float, ...]  # final probability of each generated token when drawn
    stop_reason: str
    seconds: float


def generate(
    lm,
    prompt_ids: Sequence[int],
    config: sampling.SamplingConfig,
    rng: np.random.Generator,
    *,
    grammar=None,
    max_new_tokens: int = 128,
    stop: Sequence[str] = (),
    time_limit: float | None = None,
    on_token: Callable[[int, str], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    cancel: threading.Event | None = None,
    session=None,
    weights: str = "base",
) -> Generation:
    """Generate up to ``max_new_tokens`` tokens after ``prompt_ids``.

    Stops at an end-of-sequence token, when the text ends with one of ``stop`` (the stop sequence
    is cut from the text), when a grammar allows nothing but end-of-sequence, after
    ``time_limit`` seconds, or when ``cancel`` is set / ``cancelled()`` turns true (checked before
    each step and while a step waits for the batcher). ``on_token(id, text_so_far)`` streams.
    ``session``: whose KV cache to use (None: the running event's session, else a private one
    dropped at the end, so a visitor's prompt is never found by another visitor). ``weights``: the
    model's weights choice ("base" or a trajectory-tuned adapter, agent.llm.weights).
    """
    start = time.monotonic()
    from agent.llm.batching import Cancelled, current_session

    key = session if session is not None else current_session()
    private = key is None and hasattr(lm, "forget")
    key = object() if private else key
    event = cancel if cancel is not None else threading.Event()

    def stopped() -> bool:
        late = time_limit is not None and time.monotonic() - start > time_limit
        return event.is_set() or late or (cancelled is not None and bool(cancelled()))

    track = lm.track(key, event) if hasattr(lm, "track") else nullcontext()
    try:
        with track:
            return _generate(lm, prompt_ids, config, rng, grammar, max_new_tokens, stop, time_limit,
                             on_token, stopped, key, start, Cancelled, weights)
    finally:
        if private:
            lm.forget(key)


def _generate(lm, prompt_ids, config, rng, grammar, max_new_tokens, stop, time_limit, on_token,
              stopped, key, start, cancelled_error, weights="base") -> Generation:
    constraint = None
    if grammar is not None:
        from agent.constraints import Constraint

        constraint = Constraint(grammar, lm)
    ids: list[int] = []
    probs: list[float] = []
    reason = STOP_LENGTH
    text = ""
    for _ in range(max(0, int(max_new_tokens))):
        if stopped():
            reason = _why_stopped(start, time_limit)
            break
        try:
            logits = lm.next_token_logits(list(prompt_ids) + ids, session=key, cancel=stopped, weights=weights)
        except cancelled_error:
            reason = _why_stopped(start, time_limit)
            break
        mask = constraint.allowed_mask() if constraint is not None else None
        if config.greedy:  # trace's T = 0 token and probability, without building the trace (~3 ms)
            token, token_prob = sampling.greedy(logits, mask)
        else:
            t = sampling.trace(logits, config, mask=mask, u=sampling.new_u(rng))
            token, token_prob = t.token, t.token_prob
        if token in lm.eos_token_ids:
            reason = STOP_EOS if constraint is None or not constraint.is_stopped() else STOP_GRAMMAR
            break
        if constraint is not None:
            constraint.consume(token)
        ids.append(token)
        probs.append(token_prob)
        text = lm.decode(ids)
        if on_token is not None:
            on_token(token, text)
        text, hit = stops.cut(text, stop)
        if hit:
            reason = STOP_SEQUENCE
            break
    return Generation(tuple(ids), text, tuple(probs), reason, time.monotonic() - start)


def _why_stopped(start: float, time_limit: float | None) -> str:
    late = time_limit is not None and time.monotonic() - start > time_limit
    return STOP_DEADLINE if late else STOP_CANCELLED
