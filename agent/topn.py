"""Sample ×N as a chart's rows: how often each token was drawn beside the probability it was drawn
with, and one "all other tokens" row — the little arithmetic a chart needs, so that the UI draws
numbers and never computes them. (The live chart's top-N rows are chosen in the page,
viz/js/sampling_view.js, from the trace's stages.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agent.sampling import SamplingTrace


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
