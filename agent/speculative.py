"""Speculative decoding (lecture, Part I, "Speculative Decoding"): a draft proposes γ tokens, the
target model scores them all in ONE forward pass, and a modified rejection rule keeps the emitted
tokens distributed exactly as the target's own samples (Leviathan et al., 2023; Chen et al., 2023).
It changes the speed, never the distribution.

One round, for drafted tokens x_1 … x_γ with draft distributions q_1 … q_γ and the target's
p_1 … p_{γ+1} (p_i is the target's distribution for position i, from the one pass):

    for i = 1 … γ:
        u_i ~ U[0, 1)
        if u_i < min(1, p_i(x_i) / q_i(x_i)):  accept x_i
        else:  emit a token drawn from the residual norm(max(0, p_i − q_i)); the round ends
    if all γ were accepted:  emit a bonus token drawn from p_{γ+1}

At T = 0 there is no draw: drafted tokens are kept up to the first one that differs from the
target's argmax, and the target's argmax is emitted there (or as the bonus).

p and q are the distributions *after* the tab's sampling rule (temperature, top-k, top-p, min-p):
both go through `agent.sampling.trace` with the same config — as transformers' assisted
generation runs its logits processors over both the draft's and the target's logits — so the
guarantee is "distributed as the target sampled with these settings".

What it knows: numpy and agent.sampling. Where logits come from is passed in (`Draft.propose`,
`target_logits`); the model layer (agent.model) provides them, this module never touches torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from agent import sampling

MAX_GAMMA = 8


@dataclass(frozen=True, eq=False)
class Position:
    """One drafted position of a round, with everything the view shows."""

    drafted: int  # x_i, the draft's token
    p: np.ndarray  # (V,) the target's distribution at this position
    q: np.ndarray  # (V,) the draft's distribution (one-hot for prompt lookup)
    u: float | None  # the uniform draw (None at T = 0)
    ratio: float  # p(x_i) / q(x_i)
    accepted: bool
    residual: np.ndarray | None = None  # (V,) norm(max(0, p − q)) at the first rejection
    resampled: int | None = None  # the token drawn from the residual (or the argmax at T = 0)

    @property
    def emitted(self) -> int | None:
        """The token this position adds to the text: x_i if accepted, else the resampled one."""
        return self.drafted if self.accepted else self.resampled


@dataclass(frozen=True, eq=False)
class Round:
    """One draft-and-verify round: the positions up to the first rejection, and the bonus."""

    positions: tuple[Position, ...]
    bonus: int | None = None  # drawn from p_{γ+1} when all γ drafted tokens were accepted
    bonus_p: np.ndarray | None = None
    drafted_count: int = 0  # γ of this round (positions after a rejection are not verified)

    @property
    def accepted(self) -> int:
        return sum(p.accepted for p in self.positions)

    @property
    def emitted(self) -> tuple[int, ...]:
        tokens = [p.emitted for p in self.positions]
        return tuple(t for t in tokens if t is not None) + (() if self.bonus is None else (self.bonus,))


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """norm(max(0, p − q)): what the target wants more of than the draft offered.

    >>> residual(np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.6, 0.2])).round(2).tolist()
    [1.0, 0.0, 0.0]
    """
    r = np.maximum(0.0, np.asarray(p, np.float64) - np.asarray(q, np.float64))
    total = r.sum()
    if not total > 0:  # p == q: a rejection cannot happen then; fall back to p itself
        return np.asarray(p, np.float64) / np.asarray(p, np.float64).sum()
    return r / total


def draw_from(probs: np.ndarray, u: float) -> int:
    """Inverse CDF in token-id order (agent.sampling.draw along ids 0 … V−1)."""
    return sampling.draw(probs, np.arange(len(probs)), u)


def verify(p_rows: np.ndarray, q_rows: np.ndarray, drafted: Sequence[int], greedy: bool,
           rng: np.random.Generator) -> Round:
    """The rejection rule over one round. p_rows: (γ+1, V) target distributions; q_rows: (γ, V)
    draft distributions; drafted: the γ drafted tokens. Each position uses two uniforms from
    `rng` (u for the test, one for the residual draw), the bonus one more.

    >>> p = np.array([[0.9, 0.1], [0.5, 0.5]]); q = np.array([[0.9, 0.1]])
    >>> verify(p, q, [0], greedy=True, rng=np.random.default_rng(0)).emitted
    (0, 0)
    """
    gamma = len(drafted)
    if p_rows.shape[0] != gamma + 1 or q_rows.shape[0] != gamma:
        raise ValueError(f"need γ+1 = {gamma + 1} target rows and γ = {gamma} draft rows, "
                         f"got {p_rows.shape[0]} and {q_rows.shape[0]}")
    positions = []
    for i, x in enumerate(int(t) for t in drafted):
        p, q = p_rows[i], q_rows[i]
        pos = _greedy_position(x, p, q) if greedy else _sampled_position(x, p, q, rng)
        positions.append(pos)
        if not pos.accepted:
            return Round(tuple(positions), drafted_count=gamma)
    last = p_rows[gamma]
    bonus = int(np.argmax(last)) if greedy else draw_from(last, sampling.new_u(rng))
    return Round(tuple(positions), bonus, last, gamma)


def _ratio(p: np.ndarray, q: np.ndarray, x: int) -> float:
    return float(p[x] / q[x]) if q[x] > 0 else float("inf")


def _greedy_position(x: int, p: np.ndarray, q: np.ndarray) -> Position:
    best = int(np.argmax(p))
    accepted = x == best
    return Position(x, p, q, None, _ratio(p, q, x), accepted, None, None if accepted else best)


def _sampled_position(x: int, p: np.ndarray, q: np.ndarray, rng: np.random.Generator) -> Position:
    u, u_residual = sampling.new_u(rng), sampling.new_u(rng)
    ratio = _ratio(p, q, x)
    if u < min(1.0, ratio):
        return Position(x, p, q, u, ratio, True)
    r = residual(p, q)
    return Position(x, p, q, u, ratio, False, r, draw_from(r, u_residual))


def expected_tokens_per_pass(alpha: float, gamma: int) -> float:
    """(1 − α^{γ+1}) / (1 − α): tokens emitted per target pass when each drafted token is
    accepted with probability α (Leviathan et al., 2023, eq. 1).

    >>> round(expected_tokens_per_pass(0.8, 4), 2), expected_tokens_per_pass(1.0, 4)
    (3.36, 5.0)
    """
    if alpha >= 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


# --- drafts ---------------------------------------------------------------------------------------

class Draft(Protocol):
    """Proposes γ tokens after `ids` with their distributions q (the tab's sampling rule applied)."""

    name: str

    def propose(self, ids: Sequence[int], gamma: int, config: sampling.SamplingConfig,
                rng: np.random.Generator) -> tuple[list[int], np.ndarray, int]:
        """(drafted tokens, q rows (γ, V), draft forward steps spent)."""
        ...


def distribution(logits: np.ndarray, config: sampling.SamplingConfig) -> np.ndarray:
    """The sampling rule's final distribution for these logits (T = 0: one-hot on the argmax)."""
    return np.asarray(sampling.trace(logits, config).probs, dtype=np.float64)


@dataclass
class ModelDraft:
    """A draft that runs a model step by step: `next_logits(ids)` → (V,) logits. The bundled
    model's early exit (first L layers + final norm + tied head) and a smaller model sharing the
    tokenizer both fit this shape."""

    name: str
    next_logits: Callable[[Sequence[int]], np.ndarray]

    def propose(self, ids, gamma, config, rng):
        drafted: list[int] = []
        rows = []
        for _ in range(gamma):
            q = distribution(self.next_logits(list(ids) + drafted), config)
            x = int(np.argmax(q)) if config.greedy else draw_from(q, sampling.new_u(rng))
            drafted.append(x)
            rows.append(q)
        return drafted, np.array(rows), gamma


@dataclass
class PromptLookupDraft:
    """n-gram drafts copied from the context (Saxena, 2023, "prompt lookup decoding"): find the
    latest earlier occurrence of the last n tokens (n = max_ngram … 1) and propose the tokens that
    followed it. q is one-hot on the copied token, so acceptance is p(x) itself. Costs no model
    call; strong where the output copies the input (a tool call repeating the question's words).

    >>> PromptLookupDraft(vocab_size=10).lookup([1, 2, 3, 4, 1, 2], 2)
    [3, 4]
    """

    vocab_size: int
    max_ngram: int = 3
    name: str = "prompt lookup"

    def lookup(self, ids: Sequence[int], gamma: int) -> list[int]:
        ids = list(ids)
        for n in range(min(self.max_ngram, len(ids) - 1), 0, -1):
            tail = ids[-n:]
            for start in range(len(ids) - n - 1, -1, -1):
                if ids[start:start + n] == tail:
                    return ids[start + n:start + n + gamma]
        return []

    def propose(self, ids, gamma, config, rng):
        drafted = self.lookup(ids, gamma)
        rows = np.zeros((len(drafted), self.vocab_size))
        rows[np.arange(len(drafted)), drafted] = 1.0
        return drafted, rows, 0


# --- rounds and runs ------------------------------------------------------------------------------

@dataclass
class Stats:
    """What `spec-stats` shows; `plain_seconds` is the same continuation decoded without drafts."""

    rounds: int = 0  # = target passes
    drafted: int = 0
    accepted: int = 0
    resampled: int = 0
    bonus: int = 0
    draft_steps: int = 0
    seconds: float = 0.0
    plain_seconds: float | None = None
    gammas: list[int] = field(default_factory=list)

    @property
    def emitted(self) -> int:
        return self.accepted + self.resampled + self.bonus

    @property
    def alpha(self) -> float:
        """Acceptance rate α: accepted / drafted-and-verified."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return self.emitted / self.rounds if self.rounds else 0.0

    @property
    def speedup(self) -> float | None:
        if not self.plain_seconds or not self.seconds:
            return None
        return self.plain_seconds / self.seconds

    def add(self, r: Round, draft_steps: int, seconds: float) -> None:
        self.rounds += 1
        self.drafted += len(r.positions)  # verified: up to and including the first rejection
        self.accepted += r.accepted
        self.resampled += sum(not p.accepted for p in r.positions)
        self.bonus += r.bonus is not None
        self.draft_steps += draft_steps
        self.seconds += seconds
        self.gammas.append(r.drafted_count)


def one_round(ids: Sequence[int], draft: Draft, target_logits: Callable[[Sequence[int], int], np.ndarray],
              gamma: int, config: sampling.SamplingConfig, rng: np.random.Generator
              ) -> tuple[Round, int]:
    """Draft γ tokens, score them with ONE target pass, apply the rule. `target_logits(ids, n)`
    returns the logits (n, V) of the last n positions of `ids` (one forward pass). Returns the
    round and the draft steps spent. A draft that proposes nothing (prompt lookup without a
    match) makes a plain step: the target's next token alone, as the bonus."""
    if not 1 <= int(gamma) <= MAX_GAMMA:
        raise ValueError(f"γ must be between 1 and {MAX_GAMMA}, got {gamma!r}")
    drafted, q_rows, steps = draft.propose(ids, int(gamma), config, rng)
    logits = target_logits(list(ids) + list(drafted), len(drafted) + 1)
    p_rows = np.array([distribution(z, config) for z in logits])
    q_rows = np.asarray(q_rows, dtype=np.float64).reshape(len(drafted), p_rows.shape[1])
    return verify(p_rows, q_rows, drafted, config.greedy, rng), steps


def run(ids: Sequence[int], draft: Draft, target_logits, gamma: int, config: sampling.SamplingConfig,
        rng: np.random.Generator, max_new_tokens: int, eos: frozenset[int] = frozenset(),
        stats: Stats | None = None) -> tuple[list[int], list[Round], Stats]:
    """Rounds until max_new_tokens are emitted or an end-of-sequence token is; the tokens emitted
    after the first EOS are dropped (the text ends there)."""
    stats = stats or Stats()
    out: list[int] = []
    rounds: list[Round] = []
    while len(out) < max_new_tokens:
        start = time.perf_counter()
        r, steps = one_round(list(ids) + out, draft, target_logits, gamma, config, rng)
        stats.add(r, steps, time.perf_counter() - start)
        rounds.append(r)
        for t in r.emitted:
            if t in eos or len(out) >= max_new_tokens:
                return out, rounds, stats
            out.append(t)
    return out, rounds, stats
