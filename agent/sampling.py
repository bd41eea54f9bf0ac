"""Sampling math of the lecture's Part I: softmax, temperature, top-k, top-p, min-p, mask.

`trace(logits, config, mask, u)` turns a model's logits into one frozen `SamplingTrace` that
carries every stage over the *whole* vocabulary (never a top-N cut), so a chart only reads
numbers and never recomputes them. The stages run in the lecture's order, each renormalising
what it keeps, and at least one token always survives:

    mask -> temperature -> top_k -> top_p -> min_p -> draw

This module knows numpy and nothing else: no model, no tokenizer, no grammar (the mask arrives
as a bool array, True = allowed in A(s_t)), no Gradio. Randomness comes in from outside as one
uniform number `u` (`new_u`), so a slider move re-runs `trace` with the same `u` and never
re-rolls the draw.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from agent.parameters import number

STAGES = ("mask", "temperature", "top_k", "top_p", "min_p")  # the lecture's order
MAX_TEMPERATURE = 100.0
MAX_NUMBERS = 1000  # the "Your own numbers" box
# A cumulative equal to p up to float rounding reaches p: from float32 logits the lecture's
# 0.4 + 0.3 is 0.69999997, and p = 0.7 must still keep two tokens.
TOP_P_SLACK = 1e-6


@dataclass(frozen=True)
class SamplingConfig:
    """The sampling parameters; each stage's "off" value is its default.

    >>> SamplingConfig(top_k=2.0)  # a slider's 2.0 is the whole number 2
    SamplingConfig(temperature=1.0, top_k=2, top_p=1.0, min_p=0.0)
    """

    temperature: float = 1.0  # 0 = greedy (argmax, no draw); at most MAX_TEMPERATURE
    top_k: int = 0  # 0 = off; above the vocabulary = off
    top_p: float = 1.0  # 1 = off; 0 < p <= 1
    min_p: float = 0.0  # 0 = off; 0 <= min_p <= 1

    def __post_init__(self) -> None:
        # object.__setattr__: a frozen dataclass may still normalise itself while being built
        temperature = number(self.temperature, "temperature", 0, MAX_TEMPERATURE, strings=False)
        object.__setattr__(self, "temperature", temperature)
        top_k = number(self.top_k, "top_k", 0, math.inf, integer=True, strings=False)
        object.__setattr__(self, "top_k", top_k)
        object.__setattr__(self, "top_p", number(self.top_p, "top_p", 0, 1, strings=False))
        if self.top_p == 0:
            raise ValueError("top_p must be above 0 (the nucleus is never empty), got 0.0")
        object.__setattr__(self, "min_p", number(self.min_p, "min_p", 0, 1, strings=False))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


# eq=False: the fields are arrays, so a generated __eq__/__hash__ would raise.
@dataclass(frozen=True, eq=False)
class SamplingTrace:
    """One sampling step, every stage over the whole vocabulary V. The arrays are read-only.

    `order` lists token ids by descending masked logit, which is also the order of the scaled
    logits and of every stage's probabilities (ties: lower id first). `cumulative[r]` is the
    probability of the first r+1 tokens of `order` after top-k: the curve that top-p cuts.
    `removed_by[i]` is 0 if token i survives, else 1 + the STAGES index of the stage that
    removed it (a -inf logit counts as masked). `kept_mass[stage]` is the mass of the
    stage's input distribution it kept.
    """

    config: SamplingConfig
    logits: np.ndarray  # (V,) float32, as given
    scaled_logits: np.ndarray  # (V,) float32, masked (-inf) and divided by T (T = 0: not)
    probs_model: np.ndarray  # (V,) P = softmax(logits): the model's own, no mask
    probs_masked: np.ndarray  # (V,) P' = 1[i in A] P_i / sum_{j in A} P_j
    probs_temperature: np.ndarray  # (V,) P_T (T = 0: one-hot on the argmax)
    probs_top_k: np.ndarray  # (V,)
    probs_top_p: np.ndarray  # (V,)
    probs: np.ndarray  # (V,) after min-p: the distribution drawn from
    removed_by: np.ndarray  # (V,) int8
    order: np.ndarray  # (V,) int64
    cumulative: np.ndarray  # (V,) along `order`
    kept_count: dict[str, int]  # per stage: tokens alive after it
    kept_mass: dict[str, float]
    entropy_bits: float  # of `probs`
    effective_tokens: float  # 2 ** entropy_bits
    u: float | None  # the uniform draw used; None when greedy or not drawn
    token: int
    token_prob: float
    greedy: bool


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax along the last axis, in float64; -inf entries get probability 0.

    >>> softmax(np.array([0.0, np.log(3.0), -np.inf])).round(2).tolist()
    [0.25, 0.75, 0.0]
    """
    z = np.asarray(logits, dtype=np.float64)
    if np.isnan(z).any() or np.isposinf(z).any():
        raise ValueError("softmax needs logits without NaN or +inf")
    if z.size == 0 or np.isneginf(z.max(axis=-1)).any():
        raise ValueError("softmax of no finite logit is undefined")
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def trace(
    logits: np.ndarray,
    config: SamplingConfig,
    mask: np.ndarray | None = None,
    u: float | None = None,
) -> SamplingTrace:
    """Run mask -> temperature -> top-k -> top-p -> min-p -> draw, keeping every stage.

    Top-k keeps exactly k tokens: a tie at the boundary goes to the lower token id (unlike
    transformers' TopKLogitsWarper, which keeps every token tied with the k-th). Top-p keeps
    the smallest set whose cumulative probability is >= p, so the token that crosses p stays.
    Min-p drops tokens below min_p x the top probability. T = 0 is greedy: the argmax of the
    masked logits, no draw (`u` is ignored); its one-hot counts as the temperature stage
    removing every other token. With `u` None nothing is drawn: `token` is the argmax.

    >>> t = trace(np.log([0.4, 0.3, 0.25, 0.03, 0.02]), SamplingConfig(top_p=0.9))
    >>> t.kept_count["top_p"], round(float(t.cumulative[2]), 2)
    (3, 0.95)
    """
    z, allowed = _check_inputs(logits, mask)
    u = None if config.greedy or u is None else _check_u(u)
    t = _before_truncation(z, allowed, config)
    order = t.order
    n_allowed = int(np.count_nonzero(allowed))
    alive = 1 if config.greedy else n_allowed
    sorted_temperature = t.probs_temperature[order[:alive]]  # descending
    cut = _truncations(sorted_temperature, config)
    counts = [n_allowed, alive, cut.after_k.size, cut.after_p.size, cut.final.size]
    kept_mass = [
        1.0 if n_allowed == z.size else float((t.probs_model * allowed).sum()),
        float(t.probs_masked[order[0]]) if config.greedy else 1.0,
        _head_mass(sorted_temperature, cut.after_k.size),
        _head_mass(cut.after_k, cut.after_p.size),
        _head_mass(cut.after_p, cut.final.size),
    ]
    probs_top_k = _to_vocab(cut.after_k, sorted_temperature, t.probs_temperature, order)
    probs_top_p = _to_vocab(cut.after_p, cut.after_k, probs_top_k, order)
    probs = _to_vocab(cut.final, cut.after_p, probs_top_p, order)
    token = int(order[0])
    if u is not None:  # the same cumsum as draw(); top-k's own when nothing later cut
        token = int(order[_inverse_cdf(cut.final, cut.cumulative_k if cut.final is cut.after_k else None, u)])
    entropy_bits = _entropy_bits(cut.final)
    return _freeze(
        SamplingTrace(
            config=config,
            logits=z,
            scaled_logits=t.scaled,
            probs_model=t.probs_model,
            probs_masked=t.probs_masked,
            probs_temperature=t.probs_temperature,
            probs_top_k=probs_top_k,
            probs_top_p=probs_top_p,
            probs=probs,
            removed_by=_removed_by(order, counts),
            order=order,
            cumulative=_pad(cut.cumulative_k, z.size),
            kept_count=dict(zip(STAGES, counts, strict=True)),
            kept_mass=dict(zip(STAGES, kept_mass, strict=True)),
            entropy_bits=entropy_bits,
            effective_tokens=float(2.0**entropy_bits),
            u=u,
            token=token,
            token_prob=float(probs[token]),
            greedy=config.greedy,
        )
    )


def greedy(logits: np.ndarray, mask: np.ndarray | None = None) -> tuple[int, float]:
    """(token, final probability) of T = 0: what ``trace(logits, SamplingConfig(temperature=0),
    mask)`` gives as ``token`` and ``token_prob`` — the argmax of the masked logits (ties: the lower
    id), with probability 1 — without building the trace (no sort, no softmax): the Greedy button's
    press. The same checks, the same errors.

    >>> greedy(np.log([0.2, 0.5, 0.3])), greedy(np.log([0.2, 0.5, 0.3]), np.array([True, False, True]))
    ((1, 1.0), (2, 1.0))
    """
    z, allowed = _check_inputs(logits, mask)
    if not allowed.all():
        z[~allowed] = -np.inf
    return int(np.argmax(z)), 1.0


def _check_inputs(logits: object, mask: object) -> tuple[np.ndarray, np.ndarray]:
    """(V,) float32 copy of the logits, and the allowed set: in the mask, logit above -inf."""
    z = np.array(logits, dtype=np.float32)  # a copy: the trace owns it and freezes it
    if z.ndim != 1 or z.size == 0:
        raise ValueError(f"logits must be a non-empty 1-D array, got shape {z.shape}")
    bad = np.flatnonzero(np.isnan(z) | np.isposinf(z))
    if bad.size:
        raise ValueError(f"logits must not be NaN or +inf, got logits[{bad[0]}] = {z[bad[0]]}")
    allowed = z > -np.inf  # a -inf logit is ruled out by the model itself
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype != np.bool_ or m.shape != z.shape:
            raise ValueError(f"mask must be a bool array of shape {z.shape}, got {m.dtype}{m.shape}")
        if not m.any():
            raise ValueError("mask is unsatisfiable: the grammar allows no token, A(s_t) is empty")
        allowed &= m
        if not allowed.any():
            raise ValueError("mask is unsatisfiable: every allowed token has logit -inf")
    elif not allowed.any():
        raise ValueError("logits are all -inf: no token can be sampled")
    return z, allowed


class _Tempered(NamedTuple):
    """The mask and temperature stages over the vocabulary."""

    order: np.ndarray  # (V,) ids by descending masked logit
    probs_model: np.ndarray  # (V,) P
    probs_masked: np.ndarray  # (V,) P'
    scaled: np.ndarray  # (V,) masked logits / T
    probs_temperature: np.ndarray  # (V,) P_T


class _Cuts(NamedTuple):
    """The truncation stages, on probabilities sorted descending (each a renormalised prefix)."""

    after_k: np.ndarray
    cumulative_k: np.ndarray  # the curve top-p cuts
    after_p: np.ndarray
    final: np.ndarray  # after min-p


def _before_truncation(z: np.ndarray, allowed: np.ndarray, config: SamplingConfig) -> _Tempered:
    """The mask and temperature stages."""
    only = None if allowed.all() else allowed
    masked = z
    if only is not None:
        with np.errstate(divide="ignore"):  # z + log 1[i in A]: 5x faster than np.where here
            masked = np.log(allowed.astype(np.float32))
        masked += z
    order = _descending_order(masked)  # the only sort: T and truncation keep this order
    probs_model = _softmax(z, 1.0, float(z.max()))
    top = float(masked.max())
    probs_masked = probs_model if only is None else _softmax(z, 1.0, top, only)
    if config.greedy:  # no tempered softmax: all mass on the argmax
        return _Tempered(order, probs_model, probs_masked, masked, _scatter(np.ones(1), order))
    if config.temperature == 1.0:
        return _Tempered(order, probs_model, probs_masked, masked, probs_masked)
    scaled = masked / np.float32(config.temperature)
    return _Tempered(order, probs_model, probs_masked, scaled, _softmax(z, config.temperature, top, only))


def _softmax(z: np.ndarray, temperature: float, top: float, allowed: np.ndarray | None = None) -> np.ndarray:
    """softmax(z / T) in float64 over the allowed entries (the others get 0); top = their max.

    The max is subtracted *before* dividing by T: (z - top) / T <= 0 cannot overflow.
    Speed on a 49,152 vocabulary: one new array, then in place (a fresh temporary costs page
    faults: exp(z - m) took 0.3 ms, in place 0.07 ms), and the mask applied by a product
    after exp rather than as -inf before it (exp of -inf entries: 0.4 ms).
    """
    e = np.subtract(z, top, dtype=np.float64)
    if allowed is not None:
        np.minimum(e, 0.0, out=e)  # a forbidden token far above the allowed max: no overflow
    if temperature != 1.0:
        e /= temperature
    np.exp(e, out=e)
    if allowed is not None:
        e *= allowed
    e /= e.sum()
    return e


def _descending_order(x: np.ndarray) -> np.ndarray:
    """Indices of float32 `x` by descending value, ties by lower index.

    The same as np.argsort(-x, kind="stable"), which takes ~5 ms on 49,152 entries; one
    np.sort of a packed int64 key (value rank << 32 | index) takes ~1 ms.
    >>> _descending_order(np.array([1.0, 3.0, 1.0, -np.inf], dtype=np.float32)).tolist()
    [1, 0, 2, 3]
    """
    bits = (x + np.float32(0.0)).view(np.int32)  # + 0.0 folds -0.0 into 0.0
    # IEEE 754: flipping the 31 low bits of a negative float makes int order = float order
    # (branch-free, and in place: np.where on a random sign pattern is ~10x slower here).
    flip = bits >> 31
    flip &= 0x7FFFFFFF
    flip ^= bits
    key = flip.astype(np.int64)
    np.negative(key, out=key)  # descending
    key <<= 32
    key |= _arange(x.size)  # ties: lower index first
    key.sort()
    key &= 0xFFFFFFFF
    return key


@functools.lru_cache(maxsize=4)
def _arange(size: int) -> np.ndarray:
    """Read-only 0 .. size-1, kept between calls: the vocabulary size rarely changes."""
    ids = np.arange(size, dtype=np.int64)
    ids.flags.writeable = False
    return ids


def _truncations(sorted_probs: np.ndarray, config: SamplingConfig) -> _Cuts:
    """After top-k, its cumulative, after top-p, after min-p, on probabilities sorted descending:
    each stage keeps a prefix and renormalises it. A stage that removes nothing returns its input
    array itself, so the caller can skip the work for it.

    >>> cuts = _truncations(np.array([0.4, 0.3, 0.25, 0.03, 0.02]), SamplingConfig(top_k=2))
    >>> cuts.after_k.round(2).tolist(), cuts.cumulative_k.round(2).tolist()
    ([0.57, 0.43], [0.57, 1.0])
    """
    k = config.top_k or sorted_probs.size  # exactly k: `order` already broke the ties
    after_k = _keep(sorted_probs, k)
    cumulative_k = np.cumsum(after_k)
    n_p = cumulative_k.size  # the smallest prefix whose cumulative reaches p
    if config.top_p < 1.0:
        n_p = int(np.searchsorted(cumulative_k, config.top_p - TOP_P_SLACK)) + 1
    after_p = _keep(after_k, n_p)
    # Sorted descending, so `>=` keeps a prefix; the top token always passes (min_p <= 1).
    after_min_p = _keep(after_p, int(np.count_nonzero(after_p >= config.min_p * after_p[0])))
    return _Cuts(after_k, cumulative_k, after_p, after_min_p)


def _keep(p: np.ndarray, n: int) -> np.ndarray:
    """The first n of p, renormalised; p itself when n covers it."""
    return p if n >= p.size else p[:n] / p[:n].sum()


def _head_mass(sorted_probs: np.ndarray, kept: int) -> float:
    """Mass of the first `kept` of a sorted distribution; exactly 1.0 when all are kept."""
    return 1.0 if kept == sorted_probs.size else float(sorted_probs[:kept].sum())


def _scatter(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    """(V,) array holding values[r] at token order[r], zero elsewhere."""
    out = np.zeros(order.size, dtype=np.float64)
    out[order[: values.size]] = values
    return out


def _to_vocab(stage: np.ndarray, before: np.ndarray, vocab_before: np.ndarray, order: np.ndarray) -> np.ndarray:
    """A stage's sorted survivors on token ids; the previous stage's array if it cut nothing."""
    return vocab_before if stage is before else _scatter(stage, order)


def _pad(cumulative: np.ndarray, size: int) -> np.ndarray:
    """(size,) cumulative: after the last kept token the curve stays flat."""
    if cumulative.size == size:
        return cumulative
    out = np.empty(size)
    out[: cumulative.size] = cumulative
    out[cumulative.size :] = cumulative[-1]
    return out


def _entropy_bits(p: np.ndarray) -> float:
    """-sum p log2 p of a sorted distribution; + 0.0 turns a one-hot's -0.0 into 0.0."""
    nonzero = p[: np.count_nonzero(p)]  # sorted descending: the zeros are a suffix
    terms = np.log2(nonzero)
    terms *= nonzero  # (a * b).sum(), not a @ b: BLAS cost milliseconds on a busy machine
    return float(-terms.sum()) + 0.0


def _removed_by(order: np.ndarray, counts: list[int]) -> np.ndarray:
    """(V,) int8: stage i removed the tokens ranked between its count and the one before."""
    removed_by = np.zeros(order.size, dtype=np.int8)
    previous = order.size
    for stage, count in enumerate(counts):
        removed_by[order[count:previous]] = stage + 1
        previous = count
    return removed_by


def _freeze(t: SamplingTrace) -> SamplingTrace:
    for value in vars(t).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return t


def draw(probs: np.ndarray, order: np.ndarray, u: float) -> int:
    """Inverse CDF along `order`: the first token whose cumulative probability exceeds u.

    >>> draw(np.array([0.1, 0.6, 0.3]), np.array([1, 2, 0]), 0.65)  # cumulative 0.6, 0.9, 1
    2
    """
    u = _check_u(u)
    sorted_probs = np.asarray(probs, dtype=np.float64)[np.asarray(order)]
    if not sorted_probs.sum() > 0:
        raise ValueError("draw needs probs with positive mass")
    return int(order[_inverse_cdf(sorted_probs, None, u)])


def _inverse_cdf(sorted_probs: np.ndarray, cumulative: np.ndarray | None, u: float) -> int:
    """Rank of the first token whose cumulative probability exceeds u; never a zero-prob one."""
    cumulative = np.cumsum(sorted_probs) if cumulative is None else cumulative
    rank = int(np.searchsorted(cumulative, u, side="right"))
    if rank >= cumulative.size:  # u above a cumulative that rounding left just under 1
        rank = int(np.flatnonzero(sorted_probs > 0)[-1])
    return rank


def _check_u(u: object) -> float:
    x = number(u, "u", 0, 1, strings=False)
    if x == 1.0:
        raise ValueError(f"u must be below 1 (a draw in [0, 1)), got {u!r}")
    return x


def new_u(rng: np.random.Generator) -> float:
    """One uniform draw in [0, 1), made once and re-used while the sliders move."""
    return float(rng.random())


def sample_many(probs: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """(V,) counts of n independent draws from `probs`.

    >>> sample_many(np.array([0.0, 1.0, 0.0]), 5, np.random.default_rng(0)).tolist()
    [0, 5, 0]
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a whole number >= 0, got {n!r}")
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 1 or not np.isfinite(p).all() or (p < 0).any() or not p.sum() > 0:
        raise ValueError("probs must be a 1-D array of finite, non-negative numbers, not all 0")
    return rng.multinomial(int(n), p / p.sum())


def parse_numbers(text: str, kind: str) -> np.ndarray:
    """The "Your own numbers" box as (V,) float32 logits; commas, semicolons or spaces apart.

    kind "probs": the log of the probabilities, normalised (0 -> -inf); "logits": as typed.
    >>> parse_numbers("0.5, 0.5, 0", "probs").tolist()
    [-0.6931471824645996, -0.6931471824645996, -inf]
    """
    if not isinstance(text, str):
        raise ValueError(f"enter numbers as text, got {type(text).__name__}")  # noqa: TRY004
    if kind not in ("probs", "logits"):
        raise ValueError(f"kind must be 'probs' or 'logits', got {kind!r}")
    items = [item for item in re.split(r"[\s,;]+", text.strip()) if item]
    if not items:
        raise ValueError(f"enter at least one number ({kind}), separated by commas")
    if len(items) > MAX_NUMBERS:
        raise ValueError(f"at most {MAX_NUMBERS} numbers, got {len(items)}")
    values = np.array([_parse_item(item, kind) for item in items], dtype=np.float64)
    if kind == "logits":
        return values.astype(np.float32)
    if not values.any():
        raise ValueError("probabilities are all zero: at least one must be positive")
    values /= values.max()  # first by the max: a sum of huge numbers must not overflow
    with np.errstate(divide="ignore"):  # log 0 = -inf is the intended logit
        return np.log(values / values.sum()).astype(np.float32)


def _parse_item(item: str, kind: str) -> float:
    try:
        value = float(item)
    except ValueError:
        raise ValueError(f"{item!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{item!r} is not a finite number")
    if kind == "probs" and value < 0:
        raise ValueError(f"probabilities cannot be negative, got {item!r}")
    if kind == "logits" and abs(value) > float(np.finfo(np.float32).max):
        raise ValueError(f"{item!r} is too large for a logit")
    return value
