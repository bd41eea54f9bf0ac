"""Benchmark: does the model copy a place name from the question into its call, letter for letter? (issue 24)

    .venv/bin/python bench/bench_copy.py [--weights base trajectory-tuned …] [--parallel 8]

Why: a place whose name is ONE token after a space (" Zurich") is several tokens inside the call's
JSON string ("Z", "ur", "ich"), so the model has to spell what it read as one piece. The tenth data
set's adapter wrote "Zurica" for Zurich in all five held-out sets.

What it asks: "What's the weather in {place}?" for each place of two groups, through the app's own
loop (ReAct mode, native tool calls, T = 0, no constraint; LocalBackend with the weights, as the
ReAct tab's Local model runs it):
  copy probe   — task_bank.COPY_PROBE_PLACES: one token after a space, several in a JSON string,
                 never in a training run (tests/test_tuning.py checks both);
  held-out     — task_bank.HELD_OUT_UNKNOWN, the held-out sets' unknown places.
A place counts as copied when the run's first get_weather call names it exactly. A run that made no
model call is reported (and counts as not copied): the benchmark checks that the work was done.

What it does not do: assert, or time anything.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, print_table  # noqa: E402
from bench_tuning import run_question  # noqa: E402

from agent.messages import AssistantMessage  # noqa: E402
from agent.tuning import task_bank as tb  # noqa: E402

QUESTION = "What's the weather in {place}?"
GROUPS = {"copy probe (never trained)": tb.COPY_PROBE_PLACES, "held-out unknown places": tb.HELD_OUT_UNKNOWN}


def first_city(lm, weights: str, place: str, session: str) -> tuple[str | None, int]:
    """The city of the run's first get_weather call (None: no such call), and the model calls made."""
    final = run_question(lm, weights, weights, 0, QUESTION.format(place=place), session)
    calls = [c for m in final.history if isinstance(m, AssistantMessage) for c in m.tool_calls
             if c.name == "get_weather"]
    if not calls:
        return None, len(final.replies)
    try:
        return json.loads(calls[0].arguments).get("city"), len(final.replies)
    except (json.JSONDecodeError, AttributeError):  # not JSON, or not an object: what was written
        return calls[0].arguments, len(final.replies)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weights", nargs="+", default=["trajectory-tuned"])
    p.add_argument("--parallel", type=int, default=8, help="runs at a time, sharing the batcher's passes")
    args = p.parse_args(argv)
    from agent.llm.model import load_model

    header("place names copied into the call")
    lm = load_model(log=lambda *_: None)  # with the shipped adapters (assets/adapters), as the app loads it
    jobs = [(w, g, place) for w in args.weights for g, places in GROUPS.items() for place in places]

    def job(item):
        w, g, place = item
        city, calls = first_city(lm, w, place, f"bench-copy-{w}-{place}")
        lm.forget(f"bench-copy-{w}-{place}")
        print(f"  {w:36} {'✓' if city == place else '✗'} {place!r:16} → {city!r}"
              + ("  (no model call)" if calls == 0 else ""), flush=True)
        return w, g, place, city, calls

    with ThreadPoolExecutor(max(1, args.parallel)) as pool:
        results = list(pool.map(job, jobs))
    rows = []
    for w in args.weights:
        for g in GROUPS:
            mine = [r for r in results if r[0] == w and r[1] == g]
            wrong = [f"{place} → {city!r}" for _, _, place, city, _ in mine if city != place]
            rows.append([w, g, f"{len(mine) - len(wrong)} / {len(mine)}", sum(r[4] == 0 for r in mine),
                         "; ".join(wrong) or "—"])
    print_table("places copied exactly into the first get_weather call (T = 0, native, no constraint)",
                ["weights", "places", "copied", "no model call", "not copied"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
