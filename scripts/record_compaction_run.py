"""Records assets/runs/compaction-long-run.json: the real loop, hand-written scripted replies.

    .venv/bin/python scripts/record_compaction_run.py

Nine model calls (seven weather lookups, one calculation, the answer) on an 800-token budget with
Compact at 60 %: without compaction the run stops with "context window full"; with it the
older turns become summary messages and the run reaches its answer. The replies are written by
hand (this is a scripted replay, not the model's work); the loop, the tools and the real SmolLM2
tokenizer do everything else. The script checks that counting tokens with the tokenizer and
estimating them (⌈chars / 4⌉) compact at the same calls, so the replay is identical either way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.backends import BackendReply, ScriptedBackend, Settings  # noqa: E402
from agent.loop import StopReason, new_state, run  # noqa: E402
from agent.recording import RUNS_DIR, record_run, save_run  # noqa: E402
from agent.tools import CALCULATOR_TOOL, WEATHER, WEATHER_TOOL  # noqa: E402

CITIES = ("Berlin", "Paris", "London", "Madrid", "Rome", "Vienna", "Lisbon")
QUESTION = ("What is the weather today in Berlin, Paris, London, Madrid, Rome, Vienna and Lisbon, "
            "and what is their average temperature?")
SETTINGS = Settings(max_steps=12, max_new_tokens=128, context_budget=800, compact_at=0.6)
TOOLS = (WEATHER_TOOL, CALCULATOR_TOOL)


def replies() -> tuple[BackendReply, ...]:
    out = []
    for i, city in enumerate(CITIES):
        why = "I start with the first city." if i == 0 else f"I have {i} of the seven cities; next is {city}."
        call = json.dumps({"name": "get_weather", "arguments": {"city": city}})
        out.append(BackendReply(f"Thought: {why} I need the current weather in {city}.\n<tool_call>{call}</tool_call>"))
    temps = [WEATHER[c].split("°")[0] for c in CITIES]
    expression = f"({' + '.join(temps)}) / {len(temps)}"
    call = json.dumps({"name": "calculator", "arguments": {"expression": expression}})
    out.append(BackendReply(f"Thought: All seven temperatures are in; I average them.\n<tool_call>{call}</tool_call>"))
    report = "; ".join(f"{c} {WEATHER[c]}" for c in CITIES)
    out.append(BackendReply(f"Thought: The calculator gave the average.\nAnswer: {report}. "
                            f"The average temperature is {sum(map(int, temps)) / len(temps):.3g}°C."))
    return tuple(out)


def main() -> None:
    from agent.llm.model import load_model

    tok = load_model().tokenizer
    exact = run(new_state(QUESTION, "react", "native", SETTINGS), ScriptedBackend(replies(), tok), TOOLS)
    rough = run(new_state(QUESTION, "react", "native", SETTINGS), ScriptedBackend(replies()), TOOLS)
    plain = run(new_state(QUESTION, "react", "native", Settings(**{**SETTINGS.to_dict(), "compact_at": None})),
                ScriptedBackend(replies(), tok), TOOLS)
    final = exact[-1]
    print("with compaction:", final.stop_reason, final.compactions, "compactions,", len(final.usage), "calls")
    print("without:", plain[-1].stop_reason, len(plain[-1].usage), "calls")
    assert final.stop_reason == StopReason.FINAL_ANSWER and final.compactions >= 1 and len(final.usage) >= 8
    assert plain[-1].stop_reason == StopReason.CONTEXT_FULL
    assert rough[-1].history == final.history, "estimated and exact counts compact at different calls"
    d = record_run(final, TOOLS, "A long run through compaction (seven cities, ReAct, native tool calls)",
                   "Nine model calls on an 800-token budget with Compact at 60 %: older turns become summary "
                   "messages instead of the run stopping with “context window full”. Hand-written replies.")
    print(save_run(d, RUNS_DIR / "compaction-long-run.json"))


if __name__ == "__main__":
    main()
