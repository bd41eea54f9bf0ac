"""Specific tools vs. a code tool on the same question, side by side (lecture, "Specific Tools vs.
a Code Tool"; CodeAct, Wang et al. 2024).

What it knows: the question "What is the average temperature of Berlin, Madrid and Rome?", the
hand-written replies of two scripted runs — with the specific tools (get_weather three times, then
the calculator: five model calls) and with the code tool (one run_python action: two model calls)
— how to record them through the real loop and tools (`python -m agent.codeact` writes
assets/runs/average-temperature-*.json), and `compare`: model calls, tool calls, tokens and the
context budget of two runs, counted with the model's tokenizer when one is given.

What it does not know: how the comparison is drawn (the UI), or a model's own choices.

>>> QUESTION
'What is the average temperature of Berlin, Madrid and Rome?'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from agent import loop
from agent.backends import BackendReply, ScriptedBackend
from agent.loop import context_budget, new_state
from agent.recording import RUNS_DIR, RecordedRun, record_run, save_run, start_state, tools_of
from agent.tools import CODE_TOOLS, TOOLS

QUESTION = "What is the average temperature of Berlin, Madrid and Rome?"
ANSWER = "The average temperature of Berlin, Madrid and Rome is 19°C."
CODE = ('temps = [int(get_weather(c).split("°")[0]) for c in ["Berlin", "Madrid", "Rome"]]\n'
        "print(temps)\nsum(temps) / len(temps)")
SPECIFIC_STEM, CODE_STEM = "average-temperature-specific-tools", "average-temperature-code-tool"


def _call(thought: str, name: str, arguments: dict) -> BackendReply:
    call = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return BackendReply(f"Thought: {thought}\n<tool_call>{call}</tool_call>", finish_reason="stop")


def _answer(thought: str) -> BackendReply:
    return BackendReply(f"Thought: {thought}\nAnswer: {ANSWER}", finish_reason="stop")


SPECIFIC_REPLIES = (
    _call("I need the temperature of each city; first Berlin.", "get_weather", {"city": "Berlin"}),
    _call("Berlin is 12°C. Next Madrid.", "get_weather", {"city": "Madrid"}),
    _call("Madrid is 24°C. Next Rome.", "get_weather", {"city": "Rome"}),
    _call("Rome is 21°C. The average is the sum divided by 3.", "calculator",
          {"expression": "(12 + 24 + 21) / 3"}),
    _answer("The calculator returned 19."),
)
CODE_REPLIES = (
    _call("One piece of code can fetch all three temperatures and average them.", "run_python",
          {"code": CODE}),
    _answer("The code printed [12, 24, 21] and their mean, 19.0."),
)
TASKS = {  # stem → (title, description, tools, replies)
    SPECIFIC_STEM: ("Average temperature with specific tools (get_weather ×3, calculator)",
                    "One capability per call: three get_weather calls and the calculator, one model "
                    "call each, then the answer — five model calls.", TOOLS, SPECIFIC_REPLIES),
    CODE_STEM: ("Average temperature with the code tool (one run_python action)",
                "CodeAct: one run_python action loops over the cities, calls get_weather as a plain "
                "function and averages, in the sandbox — two model calls.", CODE_TOOLS, CODE_REPLIES),
}


def record(stem: str, tokenizer=None) -> dict:
    """Run the task's scripted replies through the real loop, tools and sandbox; the run as JSON."""
    title, description, tools, replies = TASKS[stem]
    final = loop.run(new_state(QUESTION), ScriptedBackend(replies, tokenizer=tokenizer), tools)[-1]
    if final.final_answer != ANSWER:
        raise RuntimeError(f"{stem}: the run ended with {final.final_answer!r}, not the answer")
    return record_run(final, tools, title, description)


@dataclass(frozen=True)
class RunFigures:
    """One run's cost: what the comparison shows in a column."""

    title: str
    tool_set: tuple[str, ...]
    model_calls: int
    tool_calls: int
    prompt_tokens: int  # summed over the model calls: every call re-sends the whole context
    completion_tokens: int
    peak_prompt_tokens: int  # the largest single prompt: what the context budget must hold
    budget: int
    final_answer: str | None
    exact: bool  # counted with the model's tokenizer (else ⌈characters / 4⌉)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def figures(run: RecordedRun, tokenizer=None, context_window: int | None = None) -> RunFigures:
    """Replay a recorded run (real tools, real sandbox) and count what its model calls cost."""
    tools = tools_of(run)
    backend = ScriptedBackend(run.replies, tokenizer=tokenizer, context_window=context_window)
    final = loop.run(start_state(run), backend, tools)[-1]
    prompts = [u.prompt_tokens for u in final.usage]
    return RunFigures(run.title, tuple(t.name for t in tools), len(final.usage),
                      sum(len(getattr(m, "tool_calls", ()) or ()) for m in final.history),
                      sum(prompts), sum(u.completion_tokens for u in final.usage), max(prompts, default=0),
                      context_budget(final, backend), final.final_answer, tokenizer is not None)


def compare(a: RecordedRun, b: RecordedRun, tokenizer=None, context_window: int | None = None
            ) -> tuple[RunFigures, RunFigures]:
    """The two runs' figures, side by side (the view draws them; see RunFigures)."""
    return figures(a, tokenizer, context_window), figures(b, tokenizer, context_window)


def comparison_table(a: RunFigures, b: RunFigures) -> list[tuple[str, str, str]]:
    """Rows (what, run a, run b) for a side-by-side view; numbers as text, nothing to compute.

    >>> f = RunFigures("t", ("run_python",), 2, 1, 813, 102, 451, 8192, "19", True)
    >>> comparison_table(f, f)[0], comparison_table(f, f)[-1]
    (('model calls', '2', '2'), ('largest prompt / context budget', '451 / 8,192 (6%)', '451 / 8,192 (6%)'))
    """
    def rows(f: RunFigures) -> list[tuple[str, str]]:
        unit = "" if f.exact else " (≈, no tokenizer)"
        return [("model calls", f"{f.model_calls}"), ("tool calls", f"{f.tool_calls}"),
                ("tools offered", ", ".join(f.tool_set)),
                (f"input tokens, all calls{unit}", f"{f.prompt_tokens:,}"),
                (f"output tokens{unit}", f"{f.completion_tokens:,}"), (f"total tokens{unit}", f"{f.total_tokens:,}"),
                ("largest prompt / context budget",
                 f"{f.peak_prompt_tokens:,} / {f.budget:,} ({f.peak_prompt_tokens / max(f.budget, 1):.0%})")]
    return [(what, x, y) for (what, x), (_, y) in zip(rows(a), rows(b), strict=True)]


def write_runs(folder: Path = RUNS_DIR, tokenizer=None) -> list[Path]:
    return [save_run(record(stem, tokenizer), folder / f"{stem}.json") for stem in TASKS]


if __name__ == "__main__":
    from agent.llm.model import load_model

    for path in write_runs(tokenizer=load_model().tokenizer):
        print("wrote", path)
