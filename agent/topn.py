"""The top-N view of one sampling step: the rows a chart draws, and one "all other tokens" row.

The trace (agent/sampling.py) holds every stage over the whole vocabulary; a chart shows only N
rows. This module picks them and does the little arithmetic a chart needs (the remainder mass, the
empirical frequencies of Sample ×N), so that the UI draws numbers and never computes them.

Rows are the N tokens that matter most at this step: the highest of the model's own probability
P and the final probability, so a token the model wanted but a stage removed stays visible (greyed
and struck through), and a token the grammar allows stays visible even when P put it far down.

    probs_model (0.4, 0.3, 0.25, 0.03, 0.02), top-k 2, N = 2
    → rows ids (0, 1) with final (0.571, 0.429); other: model 0.30, final 0.0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agent.sampling import STAGES, SamplingTrace


@dataclass(frozen=True)
class Row:
    token: int
    rank: int  # 1-based position by the model's P among all tokens
    p_model: float  # the model's P (T = 1, no mask)
    p_masked: float  # P' after the grammar's mask (== p_model without one)
    p_final: float  # after every stage: what is drawn from
    cumulative: float  # cumulative probability top-p compares with p (0 when cut before top-p)
    removed_by: str  # "" if kept, else the stage's name from STAGES
    chosen: bool  # the token u would draw (or the argmax when greedy)


@dataclass(frozen=True)
class TopN:
    rows: tuple[Row, ...]
    other_count: int  # tokens not shown
    other_model: float  # their model probability mass
    other_final: float  # their final probability mass
    max_p: float  # the largest probability among the rows (for a linear axis)


def top_n(trace: SamplingTrace, n: int) -> TopN:
    """The n rows a chart shows for ``trace``, ordered by the higher of P and the final P."""
    vocab = trace.probs_model.shape[0]
    n = max(1, min(int(n), vocab))
    key = np.maximum(trace.probs_model, trace.probs_masked)
    key = np.maximum(key, trace.probs)
    ids = np.argpartition(-key, n - 1)[:n] if n < vocab else np.arange(vocab)
    ids = ids[np.lexsort((ids, -key[ids]))]  # descending key, ties by lower id
    model_rank = _ranks(trace.probs_model, ids)
    position = np.empty(vocab, dtype=np.int64)
    position[trace.order] = np.arange(vocab)
    rows = tuple(
        Row(
            token=int(i),
            rank=int(model_rank[j]),
            p_model=float(trace.probs_model[i]),
            p_masked=float(trace.probs_masked[i]),
            p_final=float(trace.probs[i]),
            cumulative=float(trace.cumulative[position[i]]),
            removed_by=STAGES[trace.removed_by[i] - 1] if trace.removed_by[i] else "",
            chosen=int(i) == trace.token,
        )
        for j, i in enumerate(ids)
    )
    shown_model = float(trace.probs_model[ids].sum())
    shown_final = float(trace.probs[ids].sum())
    max_p = max(max(r.p_model, r.p_masked, r.p_final) for r in rows)
    return TopN(
        rows=rows,
        other_count=vocab - len(ids),
        other_model=max(0.0, 1.0 - shown_model),
        other_final=max(0.0, 1.0 - shown_final),
        max_p=max_p,
    )


def _ranks(probs: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """1-based rank of each id by descending probability (ties by lower id)."""
    return np.array([int((probs > probs[i]).sum() + (probs[:i] == probs[i]).sum()) + 1 for i in ids])


@dataclass(frozen=True)
class Histogram:
    """Sample ×N: how often each token was drawn, beside the probability it was drawn with."""

    n: int
    rows: tuple[tuple[int, int, float, float], ...]  # (token, count, frequency, predicted p)
    other_count: int  # draws of tokens not in rows
    other_frequency: float
    other_predicted: float


def histogram(trace: SamplingTrace, counts: np.ndarray, rows: int) -> Histogram:
    """The ``rows`` tokens with the highest final probability or count, with their frequencies."""
    n = int(counts.sum())
    key = np.maximum(trace.probs, counts / max(n, 1))
    rows = max(1, min(int(rows), key.shape[0]))
    ids = np.argpartition(-key, rows - 1)[:rows]
    ids = ids[np.lexsort((ids, -key[ids]))]
    ids = ids[(trace.probs[ids] > 0) | (counts[ids] > 0)]
    shown = tuple((int(i), int(counts[i]), float(counts[i] / max(n, 1)), float(trace.probs[i])) for i in ids)
    other = n - sum(r[1] for r in shown)
    return Histogram(
        n=n,
        rows=shown,
        other_count=other,
        other_frequency=other / max(n, 1),
        other_predicted=max(0.0, 1.0 - float(trace.probs[ids].sum())),
    )


@dataclass(frozen=True)
class MaskSummary:
    """The lecture's A(s_t) in numbers: |A(s_t)| of |V|, and the model mass the mask removed."""

    allowed: int
    vocab: int
    forbidden_mass: float  # Σ_{i∉A} P(i): what the model put on tokens the grammar forbids


def mask_summary(trace: SamplingTrace) -> MaskSummary:
    return MaskSummary(
        allowed=int(trace.kept_count["mask"]),
        vocab=int(trace.probs_model.shape[0]),
        forbidden_mass=max(0.0, 1.0 - float(trace.kept_mass["mask"])),
    )
