"""Benchmark: in-context learning on the bundled model — success with 0, 1, 2, 3 few-shot exemplars.

    .venv/bin/python bench/bench_fewshot.py [--shots 0 1 2 3] [--temperatures 0] [--seeds 1]
        [--tasks berlin-weather tokyo …] [--free-only | --constrained-only]

Prints one Markdown table: for each task, the successes per number of exemplars, with
constrained decoding (agent.backends.turn_grammar / the ReAct-format grammar) and without.
Tasks: the three shipped tasks (their recorded question, mode, format and tools) and six new ones
that differ from every exemplar (other cities, numbers and books than agent/context/exemplars.py uses).
Success: the run ends with an answer (a text-only turn or finish[answer]) that contains the
expected string, after at least one tool call, within MAX_STEPS model calls.
At T = 0 the sampler takes the argmax: one seed stands for all. At T > 0 each seed is a run.

Settings: agent.settings.Settings defaults except MAX_STEPS = 4, 64 new tokens a reply and a
600 s time limit per call (so that the machine's load never cuts a reply).
What it does not do: assert. One run costs a few model calls of seconds each on a shared CPU:
keep --seeds and --tasks small.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, print_table  # noqa: E402

from agent.backends import LocalBackend, Settings  # noqa: E402
from agent.loop import State, StopReason, new_state, run  # noqa: E402
from agent.messages import AssistantMessage  # noqa: E402
from agent.recording import load_run, shipped_runs, tools_of  # noqa: E402
from agent.template import Fmt, Mode  # noqa: E402
from agent.tools import CALCULATOR_TOOL, FINISH_TOOL, LOOKUP_TOOL, SEARCH_TOOL, WEATHER_TOOL, Tool, normalize  # noqa: E402

MAX_STEPS = 4
WEATHER_TOOLS = (WEATHER_TOOL,)
CALC_TOOLS = (CALCULATOR_TOOL,)
BOOK_TOOLS = (SEARCH_TOOL, LOOKUP_TOOL, FINISH_TOOL)


@dataclass(frozen=True)
class Task:
    name: str
    question: str
    mode: Mode
    fmt: Fmt
    tools: tuple[Tool, ...]
    expected: str  # the answer must contain this (case- and accent-blind)
    new: bool = True


def shipped(stem: str, expected: str) -> Task:
    r = load_run(shipped_runs()[stem])
    return Task(stem, r.user_input, r.mode, r.fmt, tools_of(r), expected, new=False)


def tasks() -> tuple[Task, ...]:
    return (
        shipped("berlin-weather", "12°C"), shipped("arithmetic", "138"), shipped("two-hop-search", "Cuba"),
        Task("tokyo", "What's the weather in Tokyo?", Mode.REACT, Fmt.NATIVE, WEATHER_TOOLS, "18°C"),
        Task("nairobi", "How is the weather in Nairobi right now?", Mode.REACT, Fmt.NATIVE, WEATHER_TOOLS, "25°C"),
        Task("runner", "A runner covers 21 km in 1.75 hours. What is her average speed in km/h?",
             Mode.REACT, Fmt.NATIVE, CALC_TOOLS, "12"),
        Task("product", "What is 17 times 23?", Mode.REACT, Fmt.NATIVE, CALC_TOOLS, "391"),
        Task("norwegian-wood", "In which country was the author of Norwegian Wood born?", Mode.REACT,
             Fmt.REACT_TEXT, BOOK_TOOLS, "Japan"),
        Task("little-prince", "Who wrote The Little Prince?", Mode.REACT, Fmt.REACT_TEXT, BOOK_TOOLS, "Exupery"),
    )


def succeeded(final: State, task: Task) -> bool:
    called = any(c.name != "finish" for m in final.history if isinstance(m, AssistantMessage) for c in m.tool_calls)
    answered = final.stop_reason in (StopReason.FINAL_ANSWER, StopReason.FINISH)
    return answered and called and normalize(task.expected) in normalize(final.final_answer or "")


def run_once(lm, task: Task, settings: Settings) -> State:
    state = new_state(task.question, task.mode, task.fmt, settings)
    return run(state, LocalBackend(lm), task.tools)[-1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--decoding", choices=["both", "constrained", "free"], default="both")
    args = parser.parse_args(argv)
    from agent.llm.model import load_model

    lm = load_model(log=lambda *a: None)
    chosen = [t for t in tasks() if not args.tasks or t.name in args.tasks]
    decodings = {"both": (True, False), "constrained": (True,), "free": (False,)}[args.decoding]
    base = Settings(max_steps=MAX_STEPS, max_new_tokens=64, timeout_s=600.0)
    header("In-context learning: the bundled model with 0–3 few-shot exemplars")
    rows, totals = [], {}
    for temperature in args.temperatures:
        seeds = 1 if temperature == 0 else args.seeds
        for constrained in decodings:
            for task in chosen:
                row = [f"{temperature:g}", "constrained" if constrained else "free",
                       task.name + (" (new)" if task.new else "")]
                for shots in args.shots:
                    settings = replace(base, few_shot=shots, temperature=temperature, constrained=constrained)
                    wins = sum(succeeded(run_once(lm, task, replace(settings, seed=s)), task) for s in range(seeds))
                    key = (temperature, constrained, shots)
                    totals[key] = totals.get(key, 0) + wins
                    row.append(f"{wins} / {seeds}")
                    print(f"  … T={temperature:g} constrained={constrained} {task.name} shots={shots}: "
                          f"{wins}/{seeds}", file=sys.stderr, flush=True)
                rows.append(row)
            rows.append([f"{temperature:g}", "constrained" if constrained else "free", "**all tasks**"]
                        + [f"**{totals[(temperature, constrained, s)]} / {seeds * len(chosen)}**"
                           for s in args.shots])
    print_table("Successes by number of few-shot exemplars (T = 0: one run stands for every seed)",
                ["T", "decoding", "task"] + [f"{s} exemplars" for s in args.shots], rows)


if __name__ == "__main__":
    main()
