"""The batcher's scheduling (agent/llm/batching.py) on an engine that only counts: no model, so it
runs in the fast tier. The real model's batched passes are tests/test_batching.py's."""

from __future__ import annotations

import threading
import time

from agent.llm.batching import CUT_IN_TOKENS, Batcher, Request


class CountingEngine:
    """Each pass advances its rows by their chunk and records (prompt length, chunk) per row; a row
    gets its "logits" when its whole prompt has been run."""

    def __init__(self) -> None:
        self.passes: list[list[tuple[int, int]]] = []

    def _prepare(self, r):
        r.pos = 0

    def _forward_rows(self, rows, between=None):
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
    # the passes up to the one that ran the student's prompt (counted at return, a loaded machine's
    # late wake-up would also count the long prompt's next pass, which does not hold the student)
    waited = next(i for i, p in enumerate(engine.passes) if any(length == 20 for length, _ in p)) + 1 - before
    long.join(timeout=30)
    assert waited <= 2, engine.passes
    shared = [p for p in engine.passes if len(p) == 2]
    assert shared and all(len(p) * max(n for _, n in p) <= 128 for p in shared)  # the padded budget holds
    assert sum(n for p in engine.passes for length, n in p if length == 2048) == 2048
    assert batcher.stats.max_rows == 2


def test_a_one_token_press_is_answered_before_the_same_steps_prefill_pass_runs():
    """Issue 25: a Sample/Greedy press (a decode row) gets its logits when its pass is done, not
    after the prompt chunk and the drafts of the same step: the prefill pass below waits until the
    press has returned, and would time out if the press were released only after it."""
    returned = threading.Event()
    seen: list[bool] = []

    class HeldPrefill(CountingEngine):
        def _forward_rows(self, rows, between=None):
            if any(n > 1 for _, n in rows) and any(len(p) == 2 for p in self.passes):
                seen.append(returned.wait(5))  # the press's pass came first in this step
            super()._forward_rows(rows)

    engine = HeldPrefill()
    batcher = Batcher(engine, prefill_chunk=128, gather_s=0.0)
    batcher._start_worker = lambda: None  # queue both first, so one step holds both rows
    long = threading.Thread(target=batcher.submit, args=("teacher", tuple(range(600))))
    press = threading.Thread(target=lambda: (batcher.submit("student", (7,)), returned.set()))
    long.start()
    while batcher.waiting < 1:
        time.sleep(0.001)
    press.start()
    while batcher.waiting < 2:
        time.sleep(0.001)
    engine.passes.append([(0, 0), (0, 0)])  # arm the hold for this step's prefill pass
    del batcher._start_worker
    batcher._start_worker()
    press.join(timeout=10)
    long.join(timeout=30)
    assert returned.is_set() and seen and all(seen), seen
    assert engine.passes[1] == [(1, 1)] and engine.passes[2] == [(600, 128)]


class LayeredEngine(CountingEngine):
    """A prompt's chunk takes LAYERS layers of layer_s seconds and calls between() after each but
    the last, as the model does; a decode pass is one short layer. Records each pass's (kind, start, end)."""

    LAYERS = 10

    def __init__(self, layer_s: float) -> None:
        super().__init__()
        self.layer_s = layer_s
        self.times: list[tuple[str, float, float]] = []
        self.chunk_started = threading.Event()

    def _forward_rows(self, rows, between=None):
        start, chunk = time.monotonic(), any(n > 1 for _, n in rows)
        if chunk and between is not None:
            self.chunk_started.set()
        for layer in range(self.LAYERS if chunk else 1):
            time.sleep(self.layer_s)
            if between is not None and layer + 1 < self.LAYERS:
                between()
        self.times.append(("chunk" if chunk else "decode", start, time.monotonic()))
        super()._forward_rows(rows)


def test_presses_cut_into_a_long_prompts_chunk_between_two_layers_after_the_chunks_share():
    """Issue 25: a press that arrives during a prompt's chunk (the longest pass) runs between two of
    the chunk's layers instead of after the whole chunk; but only once the chunk has had the model
    for cut_in_s since the last decode pass, so a stream of presses cannot starve the prompt."""
    engine = LayeredEngine(layer_s=0.03)  # a chunk: 10 layers, 0.3 s
    batcher = Batcher(engine, prefill_chunk=128, gather_s=0.0, cut_in_s=0.1)
    long = threading.Thread(target=batcher.submit, args=("teacher", tuple(range(3 * 128))))
    long.start()
    while not engine.passes and not engine.times:
        time.sleep(0.001)
    for k in range(6):  # a student who presses again as soon as she is answered
        assert batcher.submit("student", (k,)) == "logits of 1"
    long.join(timeout=30)
    chunks = [(start, end) for kind, start, end in engine.times if kind == "chunk"]
    inside = [(start, end) for kind, start, end in engine.times
              if kind == "decode" and any(a < start < b for a, b in chunks)]
    assert len(chunks) == 3 and batcher.stats.cut_ins == len(inside) >= 2, engine.times
    decodes = sorted(t for t in engine.times if t[0] == "decode")
    for (_, _, ended), (_, start, _) in zip(decodes, decodes[1:], strict=False):
        if any(a < start < b for a, b in chunks):  # a cut-in: the chunk had its share first
            assert start - ended >= 0.1 - 1e-3, engine.times
    assert sum(n for p in engine.passes for length, n in p if length == 3 * 128) == 3 * 128


def test_a_short_prompt_cuts_into_a_long_prompts_chunk_and_a_longer_one_waits(tmp_path):
    """Issue 25's cheap request during another's long prefill: a typed prompt of a few tokens runs
    between two layers of the long prompt's chunk (its own pass, after the decode rows), instead
    of waiting for the chunk; a prompt longer than CUT_IN_TOKENS waits for the next step."""
    engine = LayeredEngine(layer_s=0.03)  # a chunk: 10 layers, 0.3 s
    log = tmp_path / "passes.jsonl"
    batcher = Batcher(engine, prefill_chunk=128, gather_s=0.0, cut_in_s=0.05, pass_log=str(log))
    long = threading.Thread(target=batcher.submit, args=("teacher", tuple(range(128))))
    long.start()
    assert engine.chunk_started.wait(10)
    short = threading.Thread(target=batcher.submit, args=("student", tuple(range(CUT_IN_TOKENS))))
    longer = threading.Thread(target=batcher.submit, args=("other", tuple(range(CUT_IN_TOKENS + 1))))
    short.start()
    longer.start()
    for t in (short, longer, long):
        t.join(timeout=30)
    order = [p[0][0] for p in engine.passes]
    assert order.index(CUT_IN_TOKENS) < order.index(128) < order.index(CUT_IN_TOKENS + 1), engine.passes
    assert batcher.stats.cut_ins == 1
    import json

    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(line["rows"][0][1], line["cut"]) for line in lines] == [
        (CUT_IN_TOKENS, True), (128, False), (CUT_IN_TOKENS + 1, False)]  # the chunk's own time: 0.3 s
    assert 0.3 <= lines[1]["s"] < 0.6  # its 10 layers, not the 0.3 s of the prompt that cut in


def test_a_prompts_own_session_does_not_cut_into_its_chunk():
    """One request per session per step: a request of the session whose chunk is running waits."""
    engine = LayeredEngine(layer_s=0.02)
    batcher = Batcher(engine, prefill_chunk=128, gather_s=0.0, cut_in_s=0.0)
    long = threading.Thread(target=batcher.submit, args=("teacher", tuple(range(128))))
    long.start()
    while not engine.times and batcher.waiting == 0:
        time.sleep(0.001)
    time.sleep(0.01)
    assert batcher.submit("teacher", (5,)) == "logits of 1"
    long.join(timeout=10)
    assert batcher.stats.cut_ins == 0 and [kind for kind, _, _ in engine.times] == ["chunk", "decode"]


def test_the_next_step_gathers_for_the_sessions_of_the_last_two_steps():
    """Issue 25: 8 students pressing Greedy back to back through the page fell into two groups of
    4 that alternate — each group comes back while the other's pass runs — because a step waited
    only for the rows of the pass before it (measured: 36 passes of 4 rows, none of 8). A step now
    gathers for the sessions of the last two steps, so the groups merge into passes of 8; a step
    still runs at once when that many wait, and after gather_s when they do not come."""
    batcher = Batcher(CountingEngine(), gather_s=0.05)
    group = {"a": [], "b": []}
    for g in group:
        for i in range(4):
            r = Request(f"{g}{i}", (i,))
            group[g].append((r, 1))
    batcher._expect(group["a"])
    assert batcher._expected == 4
    batcher._expect(group["b"])
    assert batcher._expected == 8  # both groups: the next step waits for the other group too
    batcher._expect(group["b"])
    assert batcher._expected == 4  # a group that stopped pressing is forgotten after two steps
    batcher._expect([])
    assert batcher._expected == 4
    batcher._expect([])
    assert batcher._expected == 1


def test_a_lone_prompt_still_gets_the_whole_prefill_chunk():
    engine = CountingEngine()
    batcher = Batcher(engine, prefill_chunk=128, gather_s=0.0)
    assert batcher.submit("alone", tuple(range(300))) == "logits of 300"
    assert [p[0][1] for p in engine.passes] == [128, 128, 44]


class SpeculativeEngine(CountingEngine):
    """Records each pass's kind too: ("draft", L) for early-exit rows, "full" otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds: list = []

    def _forward_rows(self, rows, between=None):
        layers = {r.layers for r, _ in rows}
        assert len(layers) == 1, "one pass mixes draft depths or draft and full rows"
        (L,) = layers
        self.kinds.append("full" if L is None else ("draft", L))
        super()._forward_rows(rows)


def test_speculative_rows_share_the_step_in_passes_of_their_own_kind():
    """Issue 25: the Speculative tab's drafts of one L share one early-exit pass, a verify (tail > 1)
    runs as a prefill row, and a draft of another L waits for the next step (never mixed)."""
    engine = SpeculativeEngine()
    batcher = Batcher(engine, gather_s=0.0)
    batcher._start_worker = lambda: None  # queue everything first, then run one step by hand
    requests = [("s1", 5, 1, 24), ("s2", 7, 1, 24), ("s3", 9, 1, 16), ("s4", 6, 5, None), ("s5", 3, 1, None)]
    threads = [threading.Thread(target=batcher.submit, args=(s, tuple(range(n))),
                                kwargs={"tail": tail, "layers": layers}) for s, n, tail, layers in requests]
    for t in threads:
        t.start()
    while batcher.waiting < len(requests):
        time.sleep(0.001)
    decode, prefill, draft = batcher._next_step()
    assert [r.session for r, _ in draft] == ["s1", "s2"]  # L = 24 together; s3's L = 16 waits
    assert [(r.session, n) for r, n in draft] == [("s1", 5), ("s2", 7)]  # a draft row runs whole
    assert {r.session for r, _ in prefill} == {"s4", "s5"} and not decode
    assert next(r for r, _ in prefill if r.session == "s4").tail == 5
    for rows in (decode, prefill, draft):
        if rows:
            batcher._forward(rows)
    batcher._finish(decode + prefill + draft)
    assert batcher.stats.max_draft_rows == 2 and batcher.stats.tail_rows == 1
    del batcher._start_worker  # the rest (s3) through the worker
    batcher._start_worker()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert ("draft", 16) in engine.kinds and batcher.waiting == 0


def test_the_pass_log_has_one_line_per_pass_with_each_rows_past_new_tokens_and_wait(tmp_path):
    """Issue 25's benchmark tells a press's wait for the model from its time in Gradio with this log:
    one JSON line per pass, each row's [cached past, new tokens, seconds waited since submit]."""
    import json

    class Cached(CountingEngine):
        def _prepare(self, r):
            r.pos = len(r.ids) - 1 if len(r.ids) > 100 else 0  # a long row: all but its last token cached

    log = tmp_path / "passes.jsonl"
    batcher = Batcher(Cached(), prefill_chunk=128, gather_s=0.0, pass_log=str(log))
    threads = [threading.Thread(target=batcher.submit, args=(s, ids))
               for s, ids in (("reader", tuple(range(600))), ("student", tuple(range(20))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(lines) == batcher.stats.steps >= 1
    rows = sorted(row for line in lines for row in line["rows"])
    assert [row[:2] for row in rows] == [[0, 20], [599, 1]]  # the prompt whole, the long row's one token
    assert all(0 <= row[2] < 30 for row in rows)
    assert all(line["s"] >= 0.002 and line["draft"] is None and line["cut"] is False for line in lines)  # 2 ms each


def test_a_step_runs_its_decode_pass_and_then_the_prompts_or_the_drafts_in_turn():
    """Issue 25: the decode rows (presses, replies) come back after every one or two passes; when
    prompts and drafts both wait, a step runs one of them and the next step the other."""
    batcher = Batcher(CountingEngine())
    decode, prefill, draft = ["press"], ["prompt"], ["draft"]
    first, second = batcher._one_other_pass(decode, prefill, draft), batcher._one_other_pass(decode, prefill, draft)
    one, other = (decode, [], draft), (decode, prefill, [])
    assert [first, second] in ([one, other], [other, one])
    assert batcher._one_other_pass(decode, prefill, []) == (decode, prefill, [])
    assert batcher._one_other_pass([], [], draft) == ([], [], draft)
