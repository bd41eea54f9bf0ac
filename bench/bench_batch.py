"""Concurrent sessions sharing the model's forward passes (issue #13): figures, never asserts.

1. N students pressing Greedy at once through the page's API (the app started as `python app.py`
   on loopback, one gradio_client per student, each its own session: run_prompt, then Greedy
   GREEDY_STEPS times), N ∈ {1, 2, 4, 8, 16}: total steps/s and each student's p50/p95 step
   latency; the server's peak resident memory (VmHWM) after N = 16.
2. N concurrent local ReAct replies (LocalBackend.complete on the shipped weather task's first
   model call, unconstrained, REPLY_TOKENS tokens, each its own session), N ∈ {1, 4, 8}: total
   tokens/s and time to first token.
3. transformers' own continuous batching (`generate_batch`, paged|eager) against this batcher on
   the same 8 prompts × 32 greedy tokens, prefill included.

Bounded: every request has a timeout, the app is stopped at the end; a few minutes in all.

    .venv/bin/python bench/bench_batch.py [--quick]
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import (  # noqa: E402
    free_port,
    header,
    median,
    ms,
    p95,
    print_table,
    start_app,
    stop_app,
    tree_kib,
)

SLIDERS = (1.0, 0, 1.0, 0.0, 20, "Linear")
GREEDY_STEPS = 8
REPLY_TOKENS = 48
REQUEST_TIMEOUT_S = 120


def students(url: str, n: int) -> tuple[float, list[list[float]], int]:
    """(total greedy steps/s, each student's step latencies, errors) for n students at once."""
    from gradio_client import Client

    clients = [Client(url, verbose=False, httpx_kwargs={"timeout": REQUEST_TIMEOUT_S}) for _ in range(n)]
    for i, c in enumerate(clients):
        c.predict(f"Student {i} writes: the best thing about school is", "Raw text", 0, *SLIDERS,
                  api_name="/run_prompt")
    barrier = threading.Barrier(n)
    errors = []

    def press(c) -> list[float]:
        barrier.wait()
        times = []
        for _ in range(GREEDY_STEPS):
            t = time.perf_counter()
            out = c.predict(*SLIDERS, api_name="/greedy")
            times.append(time.perf_counter() - t)
            if out[3]:
                errors.append(out[3])
        return times

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n) as pool:
        lat = list(pool.map(press, clients))
    wall = time.perf_counter() - start
    for c in clients:
        c.close()
    return n * GREEDY_STEPS / wall, lat, len(errors)


def greedy_part(ns: list[int]) -> None:
    port = free_port()
    log = Path(tempfile.mkdtemp()) / "app.log"
    proc = start_app(port, log)
    rows, base = [], None
    try:
        url = f"http://127.0.0.1:{port}/"
        students(url, 1)  # warm-up
        for n in ns:
            rate, lat, errors = students(url, n)
            base = base or rate
            p50s = sorted(median(x) for x in lat)
            p95s = sorted(p95(x) for x in lat)
            rows.append([n, f"{rate:.1f}", f"{rate / base:.2f}×", ms(median(p50s)), ms(p50s[-1]),
                         ms(p95s[-1]), errors])
        hwm = tree_kib(proc.pid, "VmHWM")
    finally:
        stop_app(proc)
    print_table(f"Students pressing Greedy at once through the API ({GREEDY_STEPS} steps each)",
                ["N", "total steps/s", "× one", "median of p50", "worst p50", "worst p95", "errors"], rows)
    print(f"Server peak resident memory (VmHWM) after N = {ns[-1]}: {hwm / 1024:.0f} MiB\n")


def react_part(lm, ns: list[int]) -> None:
    from agent.backends import LocalBackend, Settings
    from agent.loop import new_state
    from agent.messages import UserMessage
    from agent.recording import load_run, shipped_runs, tools_of
    from agent.template import Prompt

    run = load_run(shipped_runs()[sorted(shipped_runs())[0]])
    state = new_state(run.user_input, run.mode, run.fmt, Settings())
    prompt = Prompt((*state.history, UserMessage(run.user_input)), tools_of(run), run.fmt)
    settings = Settings(max_new_tokens=REPLY_TOKENS, timeout_s=120.0)
    rows, base = [], None
    for n in ns:
        first: list[float] = []
        tokens: list[int] = []

        def reply(i, n=n, first=first, tokens=tokens):
            start, seen = time.perf_counter(), []

            def on_token(_text):
                if not seen:
                    seen.append(time.perf_counter() - start)

            out = LocalBackend(lm, session=("bench", n, i)).complete(prompt, settings, on_token)
            first.append(seen[0] if seen else float("nan"))
            tokens.append(out.usage.completion_tokens if out.usage else 0)

        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=n) as pool:
            list(pool.map(reply, range(n)))
        wall = time.perf_counter() - start
        rate = sum(tokens) / wall
        base = base or rate
        rows.append([n, sum(tokens), f"{rate:.0f}", f"{rate / base:.2f}×", ms(median(first)), ms(max(first))])
    print_table(f"Concurrent local ReAct replies (first model call of {run.title!r}, "
                f"≤ {REPLY_TOKENS} new tokens each, each its own session)",
                ["N", "tokens", "total tok/s", "× one", "median first token", "worst first token"], rows)


def engines_part(lm) -> None:
    """The same 8 prompts × 32 greedy tokens through generate_batch and through this batcher."""
    import numpy as np

    from agent import sampling
    from agent.llm import generation

    texts = [f"Story {i}: once upon a time there was a {w}" for i, w in
             enumerate(("king", "cat", "robot", "tree", "ship", "girl", "dragon", "river"))]
    prompts = [lm.encode(t) for t in texts]
    greedy = sampling.SamplingConfig(temperature=0)

    def ours():
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(lambda i: generation.generate(
                lm, prompts[i], greedy, np.random.default_rng(0), max_new_tokens=32,
                session=("engines", i, time.perf_counter())).ids, range(8)))

    t = time.perf_counter()
    got = ours()
    ours_s = time.perf_counter() - t
    theirs_s, same = lm_generate_batch(lm, prompts, got)
    print_table("8 prompts × 32 greedy tokens, prefill included", ["engine", "total tok/s", "same tokens"], [
        ["agent.llm.batching (batched forward + per-session cache)", f"{sum(map(len, got)) / ours_s:.0f}", "—"],
        ["transformers generate_batch (paged|eager)", f"{8 * 32 / theirs_s:.0f}" if theirs_s else "failed",
         same],
    ])


def lm_generate_batch(lm, prompts, reference) -> tuple[float | None, str]:
    """Seconds of transformers' continuous batching on the loaded model (a bench-only use of
    torch/transformers: the app never calls it), and whether its tokens match ours."""
    from transformers import GenerationConfig

    model = lm.model
    before = model.config._attn_implementation
    try:
        model.config._attn_implementation = "paged|eager"
        cfg = GenerationConfig(max_new_tokens=32, do_sample=False, eos_token_id=None, pad_token_id=0)
        t = time.perf_counter()
        out = model.generate_batch(inputs=prompts, generation_config=cfg)
        seconds = time.perf_counter() - t
        theirs = [list(r.generated_tokens) for r in out.values()]
        same = sum(any(x[:len(ref)] == list(ref) for x in theirs) for ref in reference)
        return seconds, f"{same}/8"
    except Exception as e:  # noqa: BLE001 — report, do not crash the bench
        return None, f"{type(e).__name__}: {e}"[:80]
    finally:
        model.config._attn_implementation = before


def main() -> None:
    quick = "--quick" in sys.argv
    header("bench_batch: concurrent sessions share the model's forward passes")
    greedy_part([1, 2, 4, 8] if quick else [1, 2, 4, 8, 16])
    from agent.llm.model import load_model

    lm = load_model(log=lambda m: None)
    react_part(lm, [1, 4, 8])
    engines_part(lm)


if __name__ == "__main__":
    main()
