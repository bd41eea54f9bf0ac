"""Benchmark: what one run_python call costs behind the boundary (issue 21).

    .venv/bin/python bench/bench_sandbox.py [--calls N]

A warm fork server (agent.sandbox.zygote) forks a supervisor and a confined child per call; the
child closes its descriptors, drops to nobody (as root), loads the allow-list seccomp filter and
interprets the code. Each timed call must return the expected value (else it is counted as failed,
not timed as a no-op). Prints the cold first call, the warm median and p95, and the layers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, ms, p95, print_table  # noqa: E402

from agent.sandbox import run_code  # noqa: E402

CODE = "temps = [int(get_weather(c).split('°')[0]) for c in ['Berlin', 'Rome']]\nsum(temps) / 2"
EXPECTED = "16.5"


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--calls", type=int, default=40)
    n = args.parse_args(argv).calls
    header("run_python behind the allow-list seccomp boundary")
    start = time.perf_counter()
    first = run_code(CODE)
    cold = time.perf_counter() - start
    times, failed = [], 0
    for _ in range(n):
        start = time.perf_counter()
        result = run_code(CODE)
        elapsed = time.perf_counter() - start
        if result.output != EXPECTED:
            failed += 1
            continue
        times.append(elapsed)
    print_table("one call, wall clock", ["call", "median", "p95", "calls", "failed"],
                [["cold (fork server starts)", ms(cold), "", 1, int(first.output != EXPECTED)],
                 ["warm", ms(statistics.median(times)), ms(p95(times)), len(times), failed]])
    print("layers:", "; ".join(first.layers))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
