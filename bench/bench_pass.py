"""Benchmark: one batched forward pass of the model layer, for the row mixes a class makes (issue 25).

    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=ACTIVE GOMP_SPINCOUNT=10000 .venv/bin/python bench/bench_pass.py

(the model's process runs its passes on those threads: agent.llm.process.CHILD_THREADS). About
a minute. Each case calls LanguageModel._forward_rows on requests prepared as the batcher
prepares them (agent.llm.batching.Request, lm._prepare) and times that call only:
  - 1 long row: one sequence of 600 tokens, one token on each pass;
  - 8 long, the same rows: 8 sequences of 600 tokens decoding together, pass after pass;
  - 8 long + 3 students: the 8, plus 3 of 20 short "Student k: …" sequences, a different 3 on
    each pass (students press at their own pace);
  - 6 of the 8 + 3 students: a different 6 and 3 on each pass;
  - 5 rows, by weights: 3 long rows and 2 students all on base, all on `trajectory-tuned`, and
    mixed (the long rows tuned, the students on base: a class's ReAct and Sampling students);
  - one prompt chunk of 16, 64 and 128 new tokens on a 300-token past.
With --threads 1 2 each case runs once per count, a decode pass included (the app runs a pass
of fewer than agent.llm.model.PARALLEL_TOKENS positions on one thread; here the count is forced).
Every pass must give each row its logits, and each row's greedy token is appended before the
next pass, so no pass repeats a cached one. Figures only (median of 15 passes, wall and the
process's CPU: the host's speed varies, and with OMP_NUM_THREADS=1 the CPU is the pass's own
work), never asserts on a timing. To compare with an older checkout, copy this file into it and run it there.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _common import header, median, ms, print_table  # noqa: E402

from agent.llm import model as model_module  # noqa: E402
from agent.llm.batching import Request  # noqa: E402
from agent.llm.model import BASE, load_model, owner_of, weights_of  # noqa: E402

TUNED = "trajectory-tuned"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--passes", type=int, default=15)
    p.add_argument("--context", type=int, default=600, help="tokens of each long row")
    p.add_argument("--threads", type=int, nargs="+", default=[None],
                   help="intra-op threads of every pass (default: the app's rule)")
    p.add_argument("--dtype", default="float16", help="the model's --dtype (agent.llm.model.DTYPES; the app's default)")
    args = p.parse_args()
    header("One batched pass, for a class's row mixes (bench/bench_pass.py)")
    lm = load_model(dtype=args.dtype, log=lambda _: None)
    text = lm.encode("The history of the lighthouse keepers on the northern coast. " * 200)[:args.context]

    def start(session, ids: list[int]) -> list[int]:
        ids.append(int(np.argmax(lm.next_token_logits(ids, session=session, weights=weights_of(session)))))
        return ids

    def sessions(name: str, n: int, weights: str = BASE, long: bool = False) -> dict:
        def first(k: int) -> list[int]:
            return [text[0] + k, *text[1:]] if long else lm.encode(f"Student {k}: The capital of country {k} is")

        return {(s := owner_of(f"{name}-{k}", weights)): start(s, first(k)) for k in range(n)}

    long, students = sessions("long", 8, long=True), sessions("student", 20)
    tuned_long, tuned_students = sessions("tuned-long", 3, TUNED, True), sessions("tuned-student", 2, TUNED)
    lm.share_prefix(text[:300])  # every session finds it: a chunk case runs only its new tokens
    fresh = itertools.count()
    rng = random.Random(0)

    def one_pass(rows: list[tuple[object, list[int]]]) -> tuple[float, float, int]:
        reqs = []
        for session, ids in rows:
            r = Request(session, tuple(ids))
            lm._prepare(r)
            reqs.append((r, len(ids) - r.pos))  # the new tokens: more than the case's if a cached past was evicted
        t, cpu = time.perf_counter(), time.process_time()
        lm._forward_rows(reqs)
        seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
        for (_, ids), (r, _) in zip(rows, reqs, strict=True):
            if r.logits is None or r.pos != len(ids):
                raise RuntimeError("a row of the pass got no logits")
            ids.append(int(np.argmax(r.logits)))  # the next pass adds a token: nothing is cached
        return seconds, cpu, sum(n for _, n in reqs)

    def some(d: dict, n: int) -> list:
        return [(k, d[k]) for k in rng.sample(list(d), n)]

    cases = {
        f"1 row of {args.context} tokens": lambda: [("long-0", long["long-0"])],
        f"8 rows of {args.context}, the same rows": lambda: list(long.items()),
        "the 8 + 3 students (a different 3 each pass)": lambda: list(long.items()) + some(students, 3),
        "6 of the 8 + 3 students (different each pass)": lambda: some(long, 6) + some(students, 3),
        "5 rows on base (3 long + 2 students)": lambda: some(long, 3) + some(students, 2),
        f"5 rows on {TUNED}": lambda: list(tuned_long.items()) + list(tuned_students.items()),
        f"5 rows mixed (3 long on {TUNED} + 2 students on base)": lambda: list(tuned_long.items()) + some(students, 2),
        **{f"a prompt chunk of {n} tokens on a 300-token past": (lambda n=n: [(f"chunk-{next(fresh)}", text[:300 + n])])
           for n in (16, 64, 128)},
    }
    rows = []
    for threads in args.threads:
        if threads is not None:  # every pass on this many threads, whatever its size
            lm.threads, model_module.PARALLEL_TOKENS = threads, 0
        for name, make in cases.items():
            one_pass(make())  # untimed: a past the store evicted since (least recently used) is cached again
            passes = [make() for _ in range(args.passes)]
            times, cpus, new = zip(*(one_pass(r) for r in passes), strict=True)
            rows.append([name, threads or "the app's", len(passes[0]), f"{min(new)}–{max(new)}", ms(median(times)),
                         ms(min(times)), ms(max(times)), ms(median(cpus))])
    print_table("Batched forward pass (LanguageModel._forward_rows); a pass with more new tokens than its "
                "case re-ran an evicted past (its time is the max, not the median)",
                ["pass", "threads", "rows", "new tokens", "median", "min", "max", "CPU (median)"], rows)


if __name__ == "__main__":
    main()
