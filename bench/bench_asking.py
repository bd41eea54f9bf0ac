"""Benchmark of "Asking vs enforcing a format" (agent.enforcing.compare) on the bundled model:
wall time of N runs per column, and how many outputs validate when the format is only asked for
in words versus enforced by the grammar's mask.

    .venv/bin/python bench/bench_asking.py                  # N = 10 at T = 0.7 and T = 1.0, minutes
    .venv/bin/python bench/bench_asking.py --n 5 --temperatures 0.7

The prompt is the chat question "What's the weather in Berlin?" with the "JSON tool call" preset,
seed 0, as the Sampling tab's button runs it (its other sliders at their defaults). Each output
is up to enforcing.MAX_NEW_TOKENS tokens, so most of the time is the model's decode on the CPU.
Figures only: nothing here asserts; a shared 2-core machine makes every timing noisy.

What it does not know: why the model writes what it writes; the outputs' texts are in the app.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, median, print_table, secs  # noqa: E402

from agent import enforcing, sampling  # noqa: E402
from agent.constraints import PRESETS  # noqa: E402

PROMPT = "What's the weather in Berlin?"
PRESET = "JSON tool call"
SEED = 0


def run(lm, temperature: float, n: int) -> tuple[enforcing.Comparison, float, list[float], list[float]]:
    """(the final comparison, wall seconds, seconds per asked output, seconds per enforced output)."""
    config = sampling.SamplingConfig(temperature=temperature)
    asked_s: list[float] = []
    enforced_s: list[float] = []
    comp, previous = None, 0.0
    start = time.perf_counter()
    # compare() yields after every output: asked run i, then enforced run i.
    for i, comp in enumerate(enforcing.compare(lm, PROMPT, PRESETS[PRESET], config, SEED, n=n)):
        (asked_s if i % 2 == 0 else enforced_s).append(comp.seconds - previous)
        previous = comp.seconds
        print(f"T = {temperature:g}: output {i + 1}/{2 * n} after {comp.seconds:.0f} s", file=sys.stderr)
    return comp, time.perf_counter() - start, asked_s, enforced_s


def why_invalid(outcomes) -> str:
    """Reasons the invalid outputs fail, counted: "not JSON ×6, schema ×1"; "–" when all pass."""
    reasons = Counter(o.error.split(":")[0] for o in outcomes if not o.valid)
    return ", ".join(f"{why} ×{count}" for why, count in reasons.most_common()) or "–"


def stops(outcomes) -> str:
    return ", ".join(f"{why} ×{count}" for why, count in Counter(o.stop_reason for o in outcomes).most_common())


def first_failure(outcomes, width: int = 60) -> str:
    bad = next((o.text for o in outcomes if not o.valid), None)
    if bad is None:
        return "–"
    text = repr(bad)
    return text if len(text) <= width else text[: width - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10, help="runs per column (default 10)")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.7, 1.0])
    parser.add_argument(
        "--no-time-limit", action="store_true",
        help=f"lift compare()'s {enforcing.TIME_LIMIT_S:g} s limit per output (a busy CPU cuts outputs short)",
    )
    args = parser.parse_args(argv)
    if args.no_time_limit:
        enforcing.TIME_LIMIT_S = None  # read by compare() at each call: this process only
    from agent.llm.model import load_model

    lm = load_model(log=lambda m: print(m, file=sys.stderr))
    results = [(t, *run(lm, t, args.n)) for t in args.temperatures]
    header("Asking vs enforcing a format: agent.enforcing.compare")
    limit = "no time limit" if enforcing.TIME_LIMIT_S is None else f"{enforcing.TIME_LIMIT_S:g} s"
    print(
        f"Prompt {PROMPT!r} as a chat message, grammar {PRESET!r}, seed {SEED}, top-k/top-p/min-p off, "
        f"at most {enforcing.MAX_NEW_TOKENS} new tokens and {limit} per output. The machine is shared "
        "(2 cores, other processes running): times are noisy, and a busy CPU hits the time limit.\n"
    )
    print_table(
        "Wall time and valid outputs",
        ["T", "N", "wall time", "asking: valid (parses)", "enforcing: valid (parses)",
         "s per output, median (asking / enforcing)"],
        [
            [f"{t:g}", comp.n, secs(wall), f"{comp.asked_valid}/{comp.n} ({sum(o.parses for o in comp.asked)})",
             f"{comp.enforced_valid}/{comp.n} ({sum(o.parses for o in comp.enforced)})",
             f"{secs(median(a))} / {secs(median(e))}"]
            for t, comp, wall, a, e in results
        ],
    )
    print_table(
        "Why outputs fail, and why generation stopped",
        ["T", "asking: why invalid", "enforcing: why invalid", "asking: stop", "enforcing: stop",
         "first failing asked output"],
        [
            [f"{t:g}", why_invalid(comp.asked), why_invalid(comp.enforced), stops(comp.asked),
             stops(comp.enforced), first_failure(comp.asked)]
            for t, comp, *_ in results
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
