"""Benchmark: the ReAct loop on the bundled model (SmolLM2-135M-Instruct), constrained and not.

    REACT_LAB_CACHE=/tmp/rlcache .venv/bin/python bench/bench_agent.py [--seeds 20] [--temperatures 0 0.7]

Prints two Markdown tables:
1. How many Berlin runs succeed over seeds 0…N-1 — success: the final answer contains "12°C",
   the run took ≤ 4 loop steps (model calls) and called get_weather — with constrained decoding
   (agent.turn_grammar) and without it, per temperature. At T = 0 the sampler takes the
   argmax and never draws, so the seed is unused: two seeds are run, checked identical, and stand
   for all N.
2. Seconds per loop step (one model call) over the shipped tasks — Berlin weather, the
   arithmetic question, the two-hop search question, with their recorded mode, format and tools —
   at T = 0, constrained and not: median and p95, and the new tokens per step.

Settings: the defaults of agent.backends.Settings except MAX_STEPS = 4, 64 new tokens a reply
(bounded, so a rambling reply costs 64 tokens, not 256; every successful reply is shorter) and a
600 s time limit per call (so that the machine's load never cuts a reply).
What it does not do: assert. Timings on a shared 2-core machine are noisy; the machine line
carries the load average.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, median, p95, print_table  # noqa: E402

from agent.backends import BackendReply, LocalBackend, OnToken, Settings  # noqa: E402
from agent.loop import State, StopReason, new_state, run  # noqa: E402
from agent.messages import AssistantMessage  # noqa: E402
from agent.recording import load_run, shipped_runs, tools_of  # noqa: E402
from agent.template import Prompt  # noqa: E402

TASKS = ("berlin-weather", "arithmetic", "two-hop-search")
MAX_STEPS = 4


@dataclass(frozen=True)
class Timed:
    """One run's final state and the seconds and new tokens of each of its model calls."""

    final: State
    seconds: tuple[float, ...]
    tokens: tuple[int, ...]


class TimedBackend:
    """A LocalBackend that records the wall-clock seconds of every model call."""

    def __init__(self, backend: LocalBackend):
        self.backend, self.seconds = backend, []
        self.name, self.tokenizer = backend.name, backend.tokenizer
        self.context_window = backend.context_window

    def complete(self, prompt: Prompt, settings: Settings, on_token: OnToken | None = None) -> BackendReply:
        start = time.perf_counter()
        reply = self.backend.complete(prompt, settings, on_token)
        self.seconds.append(time.perf_counter() - start)
        return reply


def run_task(lm, stem: str, settings: Settings) -> Timed:
    """The shipped task's input, mode, format and tools, run on the model to its end."""
    recorded = load_run(shipped_runs()[stem])
    backend = TimedBackend(LocalBackend(lm))
    state = new_state(recorded.user_input, recorded.mode, recorded.fmt, settings)
    final = run(state, backend, tools_of(recorded))[-1]
    tokens = tuple(u.completion_tokens for u in final.usage)
    return Timed(final, tuple(backend.seconds), tokens)


def berlin_succeeded(final: State) -> bool:
    """The issue's criterion: "12°C" in the final answer, ≤ 4 steps, a get_weather call."""
    called = any(c.name == "get_weather" for m in final.history if isinstance(m, AssistantMessage)
                 for c in m.tool_calls)
    return (final.stop_reason == StopReason.FINAL_ANSWER and "12°C" in (final.final_answer or "")
            and final.step <= MAX_STEPS and called)


def berlin_runs(lm, settings: Settings, seeds: int) -> tuple[list[State], str]:
    """The final states of the Berlin run for seeds 0…seeds-1 (at T = 0: one run for all)."""
    if settings.temperature > 0:
        finals = [run_task(lm, "berlin-weather", _with(settings, seed=s)).final for s in range(seeds)]
        return finals, f"{seeds} runs"
    first, last = (run_task(lm, "berlin-weather", _with(settings, seed=s)).final for s in (0, seeds - 1))
    same = first.history == last.history
    note = f"seeds 0 and {seeds - 1} {'identical' if same else 'DIFFER'}; T = 0 draws nothing"
    return [first] * seeds, note


def _with(settings: Settings, **changes) -> Settings:
    return Settings.from_dict({**settings.to_dict(), **changes})


def _typical_failure(finals: list[State]) -> str:
    failed = Counter(_short(f.final_answer) for f in finals if not berlin_succeeded(f))
    if not failed:
        return "—"
    answer, n = failed.most_common(1)[0]
    return f"{n}× “{answer}”"


def _short(text: str | None, n: int = 48) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def success_table(lm, base: Settings, temperatures: list[float], seeds: int) -> None:
    rows = []
    for temperature in temperatures:
        for constrained in (True, False):
            finals, note = berlin_runs(lm, _with(base, temperature=temperature, constrained=constrained), seeds)
            called = sum(any(c.name == "get_weather" for m in f.history if isinstance(m, AssistantMessage)
                             for c in m.tool_calls) for f in finals)
            answered = sum(f.stop_reason == StopReason.FINAL_ANSWER for f in finals)
            rows.append([f"{temperature:g}", "constrained" if constrained else "free",
                         f"**{sum(map(berlin_succeeded, finals))} / {seeds}**", f"{called} / {seeds}",
                         f"{answered} / {seeds}", _typical_failure(finals), note])
            print(f"  … T={temperature:g} constrained={constrained} done", file=sys.stderr, flush=True)
    print_table(f"Berlin weather over seeds 0…{seeds - 1}: success = “12°C” in the final answer, "
                f"≤ {MAX_STEPS} steps, a get_weather call",
                ["T", "decoding", "success", "get_weather called", "final answer (text-only turn)",
                 "most common failing answer", "runs"], rows)


def timing_table(lm, base: Settings) -> None:
    rows = []
    for constrained in (True, False):
        every_s, every_tokens = [], []
        for stem in TASKS:
            timed = run_task(lm, stem, _with(base, constrained=constrained))
            every_s += timed.seconds
            every_tokens += timed.tokens
            rows.append(_timing_row("constrained" if constrained else "free", stem, timed.seconds,
                                    timed.tokens, f"{timed.final.stop_reason}"))
        rows.append(_timing_row("constrained" if constrained else "free", "**all three**", every_s,
                                every_tokens, ""))
    print_table("Seconds per loop step (one model call), T = 0",
                ["decoding", "task", "steps", "median s / step", "p95 s / step", "median new tokens / step",
                 "ms / new token", "stop reason"], rows)


def _timing_row(decoding: str, task: str, seconds, tokens, stop: str) -> list[str]:
    per_token = sum(seconds) / max(sum(tokens), 1) * 1000
    return [decoding, task, str(len(seconds)), f"{median(seconds):.2f}", f"{p95(seconds):.2f}",
            f"{median(tokens):.0f}", f"{per_token:.0f}", stop]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.7])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args(argv)
    from agent.llm.model import load_model

    lm = load_model(log=lambda *a: None)
    # a long time limit: a reply cut by the machine's load would count as the model's failure
    base = Settings(max_steps=MAX_STEPS, max_new_tokens=args.max_new_tokens, timeout_s=600.0)
    header("ReAct loop on the bundled model: constrained decoding and seconds per step")
    print(f"Model: {lm.name} · defaults of agent.backends.Settings except MAX_STEPS = {MAX_STEPS}, "
          f"max_new_tokens = {args.max_new_tokens}, timeout_s = 600 · default temperature "
          f"{Settings().temperature:g}\n")
    success_table(lm, base, args.temperatures, args.seeds)
    timing_table(lm, base)


if __name__ == "__main__":
    main()
