"""Concurrent sessions share the model's forward passes (agent/llm/batching.py + agent/llm/model.py), on
the real bundled model: batched results equal solo ones, stop frees a slot, sessions never see
each other's cache, and 16 sessions through the page's own API finish unmixed."""

from __future__ import annotations

import html
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from agent import sampling
from agent.constraints import PRESETS
from agent.llm import batching, generation
from agent.llm.model import PUBLIC
from tests.page_api import SETTINGS, call, message

pytestmark = pytest.mark.model
GREEDY = sampling.SamplingConfig(temperature=0)
TEXTS = ("The capital of France is", "Once upon a time, in a small village by the sea, there lived",
         "def fib(n):", "Two plus two", "I like cats. I like dogs. I like cats. I like")


def run_rows(lm, rows):
    """One batched forward pass over (session, ids, cached tokens, new tokens) rows, as the worker
    runs it: each row first gets its cached prefix of exactly `cached` tokens."""
    reqs = []
    for session, ids, cached, new in rows:
        if cached:
            lm.next_token_logits(ids[:cached], session=session)
        r = batching.Request(session, tuple(ids[:cached + new]))
        lm._prepare(r)
        assert r.pos == cached
        reqs.append((r, new))
    lm._forward_rows(reqs)
    return [r.logits for r, _ in reqs]


def test_a_batch_of_mixed_past_and_new_lengths_equals_full_forward(lm):
    """Pasts of 0, 3, 2 and 11 cached tokens (each row attends to its own) and right-padded new
    tokens (all, 2, 1, 5)."""
    # "⁂ " first: no prefix every session shares (the app's built-in examples) starts like these
    def enc(text):
        return lm.encode("⁂ " + text)

    long = enc(TEXTS[1] + " an old fisherman and his wife")
    rows = [("mix-0", enc(TEXTS[0]), 0, len(enc(TEXTS[0]))),
            ("mix-1", long, 3, 2),
            ("mix-2", enc(TEXTS[2]), 2, 1),
            ("mix-3", long, 11, 5)]
    got = run_rows(lm, rows)
    for (_, x, cached, new), z in zip(rows, got, strict=True):
        assert np.abs(z - lm.full_forward_logits(x[:cached + new])).max() < 1e-4


def test_the_running_batch_continues_in_place_and_stays_exact(lm):
    """Three sequences decode together for 6 steps: each step writes its keys and values into the
    room after each row's own (agent/llm/kv.py: nothing copied, the rows' buffers stay the same),
    and every step's logits equal a fresh forward pass."""
    seqs = {f"inplace-{i}": lm.encode(t) for i, t in enumerate(TEXTS[:3])}
    for s, x in seqs.items():
        lm.next_token_logits(x, session=s)
    buffers = None
    for _ in range(6):
        reqs = []
        for s, x in seqs.items():
            x.append(int(lm.next_token_logits(x, session=s).argmax()))
            r = batching.Request(s, tuple(x))
            lm._prepare(r)
            reqs.append((r, 1))
        lm._forward_rows(reqs)
        for r, _ in reqs:
            assert np.abs(r.logits - lm.full_forward_logits(r.ids)).max() < 1e-4
        now = [r.base.block.keys[-1].untyped_storage().data_ptr() for r, _ in reqs]
        assert buffers is None or now == buffers
        buffers = now


def test_decode_rows_that_cut_into_a_chunk_between_two_layers_get_what_they_get_alone(lm):
    """Issue 25: the batcher runs waiting decode rows and short prompts between two layers of a
    prompt's chunk (passes inside a pass: the reentrant lock, the adapters' row mask, the thread
    count). Every pass gives what each row gives alone, here with the chunk and the short prompt
    on tuned weights and the decode rows on base."""
    from agent.llm.model import owner_of

    tuned = lm.weights_choices[-1]
    chunk_ids = lm.encode("⁂ " + TEXTS[1] + " an old fisherman and his wife, who") * 3
    decode = {f"cut-in-{i}": lm.encode("⁂ " + t) for i, t in enumerate(TEXTS[2:4])}
    for s, x in decode.items():
        x.append(int(lm.next_token_logits(x, session=s).argmax()))  # cached up to the last token
    chunk = batching.Request(owner_of("cut-in-chunk", tuned), tuple(chunk_ids))
    lm._prepare(chunk)
    rows = []
    for s, x in decode.items():
        r = batching.Request(s, tuple(x))
        lm._prepare(r)
        rows.append((r, 1))
    prompt_ids = lm.encode("⁂ " + TEXTS[4])  # a short prompt cuts in too, in a pass of its own
    prompt = batching.Request(owner_of("cut-in-prompt", tuned), tuple(prompt_ids))
    lm._prepare(prompt)
    calls = []

    def between():
        calls.append(len(calls))
        if len(calls) == 12:  # after the 12th layer
            lm._forward_rows(rows)
            lm._forward_rows([(prompt, prompt.remaining)])

    lm._forward_rows([(chunk, len(chunk_ids))], between=between)
    assert len(calls) == lm.num_layers - 1
    assert np.abs(chunk.logits - lm.full_forward_logits(chunk_ids, weights=tuned)).max() < 1e-4
    assert np.abs(prompt.logits - lm.full_forward_logits(prompt_ids, weights=tuned)).max() < 1e-4
    for r, _ in rows:
        assert np.abs(r.logits - lm.full_forward_logits(r.ids)).max() < 1e-4


def solo_and_together(lm, jobs):
    """Each job alone (one after another), then all at once from threads: (solo, together)."""
    solo = [job() for job in jobs]
    before = lm.batcher.stats.max_rows
    lm.batcher.stats.max_rows = 0
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        together = list(pool.map(lambda job: job(), jobs))
    assert lm.batcher.stats.max_rows > 1, "the generations never shared a forward pass"
    lm.batcher.stats.max_rows = max(before, lm.batcher.stats.max_rows)
    return solo, together


def test_concurrent_generations_equal_solo_for_mixed_prompts_settings_and_grammars(lm):
    chat = lm.encode(lm.apply_chat_template([{"role": "user", "content": "Is the sky blue?"}]))
    tool = lm.encode(lm.apply_chat_template([{"role": "user", "content": "Weather in Berlin? JSON."}]))
    cases = [
        (lm.encode(TEXTS[0]), GREEDY, None, 12),
        (lm.encode(TEXTS[1]), sampling.SamplingConfig(temperature=0.8, top_k=40), None, 16),
        (lm.encode(TEXTS[2]), sampling.SamplingConfig(temperature=1.2, top_p=0.9), None, 10),
        (chat, sampling.SamplingConfig(temperature=0.7), PRESETS["yes / no / maybe"], 8),
        (tool, sampling.SamplingConfig(temperature=0.7, min_p=0.05), PRESETS["JSON tool call"], 24),
        (lm.encode(TEXTS[4]), GREEDY, None, 20),
    ]

    def job(i, ids, config, grammar, n):
        return lambda: generation.generate(lm, ids, config, np.random.default_rng([7, i]), grammar=grammar,
                                           max_new_tokens=n).ids

    solo, together = solo_and_together(lm, [job(i, *c) for i, c in enumerate(cases)])
    assert together == solo


def test_generations_cut_into_a_long_prompts_chunks_and_equal_solo(lm):
    """Issue 25: while a 1,200-token prompt is prefilled in chunks, four greedy generations cut in
    between two of a chunk's layers (the real worker: its lock, its threads, the cache); every
    result equals the same generation run alone, and the batcher did cut in."""
    long_ids = (lm.encode("⁂ " + " ".join(TEXTS)) * 40)[:1200]
    cases = [(long_ids, 2)] + [(lm.encode("⁂ " + t), 16) for t in TEXTS[:4]]

    def job(ids, n):
        return lambda: generation.generate(lm, ids, GREEDY, np.random.default_rng(0), max_new_tokens=n).ids

    before = lm.batcher.stats.cut_ins
    solo, together = solo_and_together(lm, [job(*c) for c in cases])
    assert together == solo
    assert lm.batcher.stats.cut_ins > before


def test_a_stopped_generation_leaves_the_batch_at_its_next_step(lm):
    cancel = threading.Event()
    tokens: list[int] = []
    out = {}

    def long_reply():
        out["g"] = generation.generate(lm, lm.encode(TEXTS[1]), GREEDY, np.random.default_rng(0),
                                       max_new_tokens=400, cancel=cancel, session="stopper",
                                       on_token=lambda t, _: tokens.append(t))

    worker = threading.Thread(target=long_reply)
    worker.start()
    while len(tokens) < 3:
        time.sleep(0.01)
    stopped_at = time.monotonic()
    cancel.set()
    worker.join(timeout=30)
    assert not worker.is_alive() and time.monotonic() - stopped_at < 10
    assert out["g"].stop_reason == generation.STOP_CANCELLED and len(out["g"].ids) < 400
    assert lm.batcher.waiting == 0 and "stopper" not in lm._stops


def test_stop_by_session_stops_every_generation_of_that_session_only(lm):
    results = {}

    def reply(session):
        results[session] = generation.generate(lm, lm.encode(TEXTS[1]), GREEDY, np.random.default_rng(0),
                                               max_new_tokens=300, session=session)

    threads = [threading.Thread(target=reply, args=(s,)) for s in ("victim", "bystander")]
    for t in threads:
        t.start()
    while "victim" not in lm._stops or "bystander" not in lm._stops:
        time.sleep(0.01)
    assert lm.stop("victim") == 1
    threads[0].join(timeout=30)
    assert results["victim"].stop_reason == generation.STOP_CANCELLED
    assert "bystander" not in results  # still writing
    lm.stop("bystander")
    threads[1].join(timeout=30)


def test_a_waiting_request_that_is_cancelled_never_runs(lm):
    with pytest.raises(batching.Cancelled):
        lm.next_token_logits(lm.encode("A request nobody waits for any more"), session="gone",
                             cancel=lambda: True)


def test_one_session_may_not_flood_the_batcher(lm):
    barrier = threading.Barrier(8)
    prompts = [lm.encode(f"Flood number {i} writes a fairly long prompt to keep the model busy") for i in range(8)]

    def call(ids):
        barrier.wait()
        try:
            lm.next_token_logits(ids, session="flooder")
            return "ok"
        except batching.Busy as e:
            assert "wait for them to finish" in str(e)
            return "busy"

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(call, prompts))
    assert outcomes.count("ok") >= 1 and outcomes.count("busy") >= 1


def test_sessions_never_find_each_others_prefixes_but_all_find_shared_ones(lm):
    secret = lm.encode("My bank password is hunter2 and my PIN is 4711")
    lm.next_token_logits(secret, session="alice")
    steps = lm.batcher.stats.steps
    z = lm.next_token_logits(secret, session="mallory")  # a right guess still runs the model
    assert lm.batcher.stats.steps > steps
    probe = tuple(secret)
    assert lm._store.longest("mallory", probe + (13,))[0] is not None  # now mallory's own entry
    assert lm._store.get("eve", probe) is None and lm._store.longest("eve", probe)[0] is None
    shared = lm.encode("The capital of France is")
    lm.share_prefix(shared)
    steps = lm.batcher.stats.steps
    assert np.abs(lm.next_token_logits(shared, session="eve") - z).max() > 0  # a different prompt …
    assert lm.batcher.stats.steps == steps  # … served from the shared cache without a forward pass


def test_kv_cache_bytes_stay_under_the_cap(lm):
    total, per_session, _ = lm._store.caps
    for i in range(6):
        lm.next_token_logits(lm.encode(f"Session {i} has its own prompt about topic number {i}"), session=f"cap-{i}")
    assert sum(lm._store.tokens.values()) <= total
    assert all(n <= per_session for s, n in lm._store.tokens.items() if s != PUBLIC)
    assert total * lm.kv_bytes_per_token <= max(512 * 2**20, lm.context_window * lm.kv_bytes_per_token)


# --- through the page's own API -------------------------------------------------------------------

GREEDY_STEPS = 4


def continuation_text(view: str) -> str:
    return html.unescape(re.search(r'data-text="([^"]*)"', view).group(1))


def expected_greedy(lm, prompt: str, steps: int) -> str:
    ids = lm.encode(prompt)
    out = []
    for _ in range(steps):
        out.append(int(lm.full_forward_logits(ids + out).argmax()))
    return "".join(lm.decode([i]) for i in out)


@pytest.mark.browser
def test_sixteen_sessions_through_the_api_finish_unmixed(app_url, lm):
    from gradio_client import Client

    prompts = [f"Student {i} writes: my favourite number is {i * 7} and my favourite animal is" for i in range(16)]
    expected = [expected_greedy(lm, p, GREEDY_STEPS) for p in prompts]
    clients = [Client(app_url, verbose=False, httpx_kwargs={"timeout": 300}) for _ in prompts]  # a shared CPU
    steps = lm.batcher.stats.steps
    lm.batcher.stats.max_rows = 0

    def student(i):
        c = clients[i]
        out = call(c, "/run_prompt", prompts[i], "Raw text", 0)
        assert message(out) == "", message(out)
        for _ in range(GREEDY_STEPS):
            out = call(c, "/greedy", *SETTINGS)
            assert message(out) == "", message(out)
        return continuation_text(out["continuation"])

    with ThreadPoolExecutor(max_workers=16) as pool:
        got = list(pool.map(student, range(16)))
    assert got == expected
    assert lm.batcher.stats.max_rows > 1 and lm.batcher.stats.steps > steps


@pytest.mark.browser
def test_eight_students_pressing_greedy_at_once_share_passes_of_more_than_four_rows(app_url, lm, monkeypatch):
    """Issue 25: the model events reach the batcher together — eight API sessions start their
    Greedy presses at one moment, each gets its own tokens, and some forward pass carries more
    than four of them (Gradio's default group of 4 once capped every pass at 4 rows).

    The worker is made patient (it gathers for up to 10 s until all eight are back), so the result
    does not hang on how a loaded CPU interleaves eight client threads with the server: a CI run
    once saw the presses drift apart into passes of at most 4. Under a group of 4 no more than 4
    events could ever be inside the model, and the wait would end with 4 rows."""
    from gradio_client import Client

    n, presses = 8, 6
    prompts = [f"Pupil {i} counts sheep: {i}, {i + 1}, {i + 2}," for i in range(n)]
    expected = [expected_greedy(lm, p, presses) for p in prompts]
    clients = [Client(app_url, verbose=False, httpx_kwargs={"timeout": 300}) for _ in prompts]
    for c, p in zip(clients, prompts, strict=True):
        assert message(call(c, "/run_prompt", p, "Raw text", 0)) == ""
    together = threading.Barrier(n)
    monkeypatch.setattr(lm.batcher, "gather_s", 10.0)
    with lm.batcher._cv:
        lm.batcher._expected = n
    lm.batcher.stats.max_rows = 0

    def student(i):
        together.wait(timeout=60)
        for _ in range(presses):
            out = call(clients[i], "/greedy", *SETTINGS)
            assert message(out) == "", message(out)
        return continuation_text(out["continuation"])

    with ThreadPoolExecutor(max_workers=n) as pool:
        got = list(pool.map(student, range(n)))
    assert got == expected
    assert lm.batcher.stats.max_rows > 4, f"the widest pass had {lm.batcher.stats.max_rows} rows"


@pytest.mark.browser
def test_a_right_guess_of_another_sessions_prompt_is_not_served_from_its_cache(app_url, lm):
    """The timing probe of issue #18: the guesser's request must run the model like any new prompt."""
    from gradio_client import Client

    secret = "Dear diary, today I told nobody that my locker code is 3141"
    victim, guesser = (Client(app_url, verbose=False, httpx_kwargs={"timeout": 300}) for _ in range(2))
    call(victim, "/run_prompt", secret, "Raw text", 0)
    steps = lm.batcher.stats.steps
    out = call(guesser, "/run_prompt", secret, "Raw text", 0)
    assert message(out) == "" and lm.batcher.stats.steps > steps
