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
`target_logits`); the model layer (agent.llm.model) provides them, this module never touches torch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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
    """The sampling rule's final distribution for these logits. At T = 0 the rule only compares
    argmaxes, so this is the model's own softmax (T = 1), whose argmax is the same token (ties to
    the lower id in both) and whose numbers are worth showing, unlike a one-hot."""
    if config.greedy:
        return sampling.softmax(logits)
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


# --- rounds, runs and what the view shows --------------------------------------------------------

@dataclass(frozen=True)
class Stats:
    """What `spec-stats` shows. One round is one target pass; `plain_seconds` is the time the
    target alone took to decode the same continuation (None until measured)."""

    rounds: int = 0
    drafted: int = 0  # verified drafted tokens: up to and including each round's first rejection
    accepted: int = 0
    resampled: int = 0
    bonus: int = 0
    draft_steps: int = 0
    seconds: float = 0.0
    plain_seconds: float | None = None

    @property
    def emitted(self) -> int:
        return self.accepted + self.resampled + self.bonus

    @property
    def alpha(self) -> float:
        """Acceptance rate α: accepted / verified drafted tokens."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return self.emitted / self.rounds if self.rounds else 0.0

    @property
    def speedup(self) -> float | None:
        return self.plain_seconds / self.seconds if self.plain_seconds and self.seconds else None

    def plus(self, r: Round, draft_steps: int, seconds: float) -> Stats:
        return replace(self, rounds=self.rounds + 1, drafted=self.drafted + len(r.positions),
                       accepted=self.accepted + r.accepted,
                       resampled=self.resampled + sum(not p.accepted for p in r.positions),
                       bonus=self.bonus + (r.bonus is not None), draft_steps=self.draft_steps + draft_steps,
                       seconds=self.seconds + seconds)


def one_round(ids: Sequence[int], draft: Draft, target_logits: Callable[[Sequence[int], int], np.ndarray],
              gamma: int, config: sampling.SamplingConfig, rng: np.random.Generator
              ) -> tuple[Round, int]:
    """Draft γ tokens, score them with ONE target pass, apply the rule. `target_logits(ids, n)`
    returns the logits (n, V) of the last n positions of `ids` (one forward pass). Returns the
    round and the draft steps spent. A draft that proposes nothing (prompt lookup without a
    match) makes a plain step: the target's next token alone, as the bonus."""
    if isinstance(gamma, bool) or not isinstance(gamma, (int, np.integer)) or not 1 <= gamma <= MAX_GAMMA:
        raise ValueError(f"γ must be a whole number between 1 and {MAX_GAMMA}, got {gamma!r}")
    drafted, q_rows, steps = draft.propose(ids, int(gamma), config, rng)
    logits = target_logits(list(ids) + list(drafted), len(drafted) + 1)
    p_rows = np.array([distribution(z, config) for z in logits])
    q_rows = np.asarray(q_rows, dtype=np.float64).reshape(len(drafted), p_rows.shape[1])
    return verify(p_rows, q_rows, drafted, config.greedy, rng), steps


def run(ids: Sequence[int], draft: Draft, target_logits, gamma: int, config: sampling.SamplingConfig,
        rng: np.random.Generator, max_new_tokens: int, eos: frozenset[int] = frozenset()
        ) -> tuple[list[int], list[Round], Stats]:
    """Rounds until max_new_tokens are emitted or an end-of-sequence token is; the tokens emitted
    after the first EOS are dropped (the text ends there)."""
    stats, out, rounds = Stats(), [], []
    while len(out) < max_new_tokens:
        start = time.perf_counter()
        r, steps = one_round(list(ids) + out, draft, target_logits, gamma, config, rng)
        stats = stats.plus(r, steps, time.perf_counter() - start)
        rounds.append(r)
        for t in r.emitted:
            if t in eos or len(out) >= max_new_tokens:
                return out, rounds, stats
            out.append(t)
    return out, rounds, stats


def top_tokens(probs: np.ndarray | None, n: int) -> tuple[tuple[int, float], ...]:
    """The n most probable (id, probability) pairs, ties to the lower id; () for None.

    >>> top_tokens(np.array([0.1, 0.6, 0.3]), 2)
    ((1, 0.6), (2, 0.3))
    """
    if probs is None:
        return ()
    order = np.lexsort((np.arange(len(probs)), -np.asarray(probs)))[:n]
    return tuple((int(i), float(probs[i])) for i in order if probs[i] > 0)


@dataclass(frozen=True)
class PositionView:
    """A drafted position reduced to what the page shows (no (V,) arrays kept in a session)."""

    drafted: int
    p_x: float  # p(x_i)
    q_x: float  # q(x_i)
    u: float | None
    ratio: float
    accepted: bool
    resampled: int | None
    top_p: tuple[tuple[int, float], ...]
    top_q: tuple[tuple[int, float], ...]
    top_residual: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class RoundView:
    positions: tuple[PositionView, ...]
    bonus: int | None
    top_bonus: tuple[tuple[int, float], ...]
    gamma: int
    draft_steps: int
    seconds: float


def view_of(r: Round, steps: int, seconds: float, n: int = 5) -> RoundView:
    """The round with every distribution cut to its top n (the arithmetic stays here, not in viz/)."""
    positions = tuple(PositionView(
        p.drafted, float(p.p[p.drafted]), float(p.q[p.drafted]), p.u, p.ratio, p.accepted, p.resampled,
        top_tokens(p.p, n), top_tokens(p.q, n), top_tokens(p.residual, n)) for p in r.positions)
    return RoundView(positions, r.bonus, top_tokens(r.bonus_p, n), r.drafted_count, steps, seconds)


MAX_SHOWN_ROUNDS = 6


@dataclass(frozen=True)
class Decoding:
    """A speculative continuation as a value (the tab's session state): the prompt, the emitted
    tokens with how each was made, the last rounds to show, and the running Stats."""

    prompt_ids: tuple[int, ...]
    seed: int = 0
    out: tuple[int, ...] = ()
    how: tuple[str, ...] = ()  # per emitted token: "accepted" | "resampled" | "bonus"
    rounds: tuple[RoundView, ...] = ()
    stats: Stats = Stats()
    ended: bool = False  # an end-of-sequence token was emitted


def advance(d: Decoding, draft: Draft, target_logits, gamma: int, config: sampling.SamplingConfig,
            eos: frozenset[int] = frozenset(), limit: int | None = None) -> Decoding:
    """One round on top of d; the draws come from (seed, tokens so far), so the same settings give
    the same round again. Emitted tokens after an EOS, or past `limit` tokens, are dropped."""
    rng = np.random.default_rng([d.seed, len(d.out), d.stats.rounds])
    start = time.perf_counter()
    r, steps = one_round(d.prompt_ids + d.out, draft, target_logits, gamma, config, rng)
    seconds = time.perf_counter() - start
    kinds = ["accepted" if p.accepted else "resampled" for p in r.positions]
    kinds += ["bonus"] if r.bonus is not None else []
    out, how, ended = list(d.out), list(d.how), d.ended
    for token, kind in zip(r.emitted, kinds, strict=True):
        if token in eos:
            ended = True
            break
        if limit is not None and len(out) >= limit:
            break
        out.append(token)
        how.append(kind)
    shown = (d.rounds + (view_of(r, steps, seconds),))[-MAX_SHOWN_ROUNDS:]
    return replace(d, out=tuple(out), how=tuple(how), rounds=shown, stats=d.stats.plus(r, steps, seconds),
                   ended=ended)
