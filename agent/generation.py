"""Autoregressive generation: the lecture's loop of "append w_t, give w_{1:t} to the model again,
draw the next token" until an end-of-sequence token, a stop sequence or a limit.

One function, ``generate``, used by everything that writes more than one token: the Sampling tab's
"Asking vs enforcing" comparison and the ReAct tab's local-model backend. Each step is
model.next_token_logits (prefix KV cache: one decode step) → the grammar's mask A(s_t), if any →
sampling.trace (mask → temperature → top-k → top-p → min-p) → the token drawn with a seeded u.

It does not know about chat messages, tools or the UI.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from agent import sampling

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
) -> Generation:
    """Generate up to ``max_new_tokens`` tokens after ``prompt_ids``.

    Stops at an end-of-sequence token, when the text ends with one of ``stop`` (the stop sequence
    is cut from the text), when a grammar allows nothing but end-of-sequence, after
    ``time_limit`` seconds, or when ``cancelled()`` turns true. ``on_token(id, text_so_far)`` streams.
    """
    start = time.monotonic()
    constraint = None
    if grammar is not None:
        from agent.constraints import Constraint

        constraint = Constraint(grammar, lm)
    ids: list[int] = []
    probs: list[float] = []
    reason = STOP_LENGTH
    text = ""
    for _ in range(max(0, int(max_new_tokens))):
        if cancelled is not None and cancelled():
            reason = STOP_CANCELLED
            break
        if time_limit is not None and time.monotonic() - start > time_limit:
            reason = STOP_DEADLINE
            break
        logits = lm.next_token_logits(list(prompt_ids) + ids)
        mask = constraint.allowed_mask() if constraint is not None else None
        u = None if config.temperature == 0 else sampling.new_u(rng)
        t = sampling.trace(logits, config, mask=mask, u=u)
        if t.token in lm.eos_token_ids:
            reason = STOP_EOS if constraint is None or not constraint.is_stopped() else STOP_GRAMMAR
            break
        if constraint is not None:
            constraint.consume(t.token)
        ids.append(t.token)
        probs.append(t.token_prob)
        text = lm.decode(ids)
        if on_token is not None:
            on_token(t.token, text)
        hit = next((s for s in stop if s and s in text), None)
        if hit is not None:
            text = text[: text.index(hit)]
            reason = STOP_SEQUENCE
            break
    return Generation(tuple(ids), text, tuple(probs), reason, time.monotonic() - start)
