"""The batcher's scheduling (agent/llm/batching.py) on an engine that only counts: no model, so it
runs in the fast tier. The real model's batched passes are tests/test_batching.py's."""

from __future__ import annotations

import threading
import time

from agent.llm.batching import Batcher


class CountingEngine:
    """Each pass advances its rows by their chunk and records (prompt length, chunk) per row; a row
    gets its "logits" when its whole prompt has been run."""

    def __init__(self) -> None:
        self.passes: list[list[tuple[int, int]]] = []

    def _prepare(self, r):
        r.pos = 0

    def _forward_rows(self, rows):
        time.sleep(0.002)
        self.passes.append([(len(r.ids), n) for r, n in rows])
        for r, n in rows:
            r.pos += n
            r.logits = f"logits of {len(r.ids)}" if r.pos == len(r.ids) else None


def test_a_short_prompt_is_not_held_behind_another_sessions_long_prefill():
    """Issue 25: a cheap request during another visitor's 2,048-token prefill. The prompts waiting
    share the prefill budget, so the short one finishes in a step or two, and the long one still
    advances in the same passes (nobody waits for anybody's whole prompt)."""
    engine = CountingEngine()
    batcher = Batcher(engine, prefill_chunk=128, gather_s=0.0)
    long = threading.Thread(target=batcher.submit, args=("teacher", tuple(range(2048))))
    long.start()
    while len(engine.passes) < 2:
        time.sleep(0.001)
    before = len(engine.passes)
    assert batcher.submit("student", tuple(range(20))) == "logits of 20"
    waited = len(engine.passes) - before
    long.join(timeout=30)
    assert waited <= 2, engine.passes
    shared = [p for p in engine.passes if len(p) == 2]
    assert shared and all(len(p) * max(n for _, n in p) <= 128 for p in shared)  # the padded budget holds
    assert sum(n for p in engine.passes for length, n in p if length == 2048) == 2048
    assert batcher.stats.max_rows == 2


def test_a_lone_prompt_still_gets_the_whole_prefill_chunk():
    engine = CountingEngine()
    batcher = Batcher(engine, prefill_chunk=128, gather_s=0.0)
    assert batcher.submit("alone", tuple(range(300))) == "logits of 300"
    assert [p[0][1] for p in engine.passes] == [128, 128, 44]
