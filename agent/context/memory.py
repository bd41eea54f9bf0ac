"""Long-term memory: facts kept across runs within ONE browser session (lecture, Part IV).

What it knows: a Memory is a frozen value — a bounded tuple of short facts — that the session
state of the UI holds and passes to each new run; nothing here is global, so one visitor's
memory can never reach another's. Facts come from the user pinning them (`pin`) or from the
model calling the `remember` tool (`after_run` collects the successful calls of a finished run).
The loop injects `memory_block` into every call as its own budget category.

What it does not know: Gradio, the loop's state machine, or how facts are used.

>>> m = pin(Memory(), "The user lives in Lisbon.")
>>> memory_block(m)
'Memory (facts kept from earlier runs in this session):\\n- The user lives in Lisbon.'
>>> len(pin(Memory(tuple(f"fact {i}" for i in range(MAX_FACTS))), "one more").facts) == MAX_FACTS
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agent.messages import AssistantMessage, Message, ResultKind, ToolResultMessage
from agent.tools import Tool, ToolError

MAX_FACTS = 8
MAX_FACT_CHARS = 200
REMEMBER = "remember"


@dataclass(frozen=True)
class Memory:
    facts: tuple[str, ...] = ()


def check_fact(fact: object) -> str:
    """A fact as kept: a non-empty string of at most MAX_FACT_CHARS characters, stripped."""
    if not isinstance(fact, str) or not fact.strip():
        raise ToolError("a fact must be a non-empty string")
    if len(fact) > MAX_FACT_CHARS:
        raise ToolError(f"a fact may have at most {MAX_FACT_CHARS} characters, got {len(fact)}")
    return " ".join(fact.split())


def pin(memory: Memory, fact: str) -> Memory:
    """The memory with `fact` added last (once); beyond MAX_FACTS the oldest fact is dropped."""
    fact = check_fact(fact)
    kept = tuple(f for f in memory.facts if f != fact) + (fact,)
    return Memory(kept[-MAX_FACTS:])


def forget(memory: Memory, index: int) -> Memory:
    return Memory(tuple(f for i, f in enumerate(memory.facts) if i != index))


def remember(fact: str) -> str:
    """The tool's function: pure; the runtime keeps the fact after the run (`after_run`)."""
    return f"remembered: {check_fact(fact)}"


REMEMBER_TOOL = Tool(REMEMBER, "Save a short fact about the user or the task for later conversations.",
                     {"type": "object", "properties": {"fact": {"type": "string"}}, "required": ["fact"],
                      "additionalProperties": False}, remember)


def after_run(memory: Memory, history: tuple[Message, ...]) -> Memory:
    """The memory plus every fact a successful `remember` call of this history saved."""
    calls = {c.id: c for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls}
    for m in history:
        call = calls.get(m.tool_call_id) if isinstance(m, ToolResultMessage) else None
        if call is not None and call.name == REMEMBER and m.kind == ResultKind.OK:
            memory = pin(memory, json.loads(call.arguments)["fact"])
    return memory


def memory_block(memory: Memory) -> str:
    if not memory.facts:
        return ""
    return "Memory (facts kept from earlier runs in this session):\n" + "\n".join(f"- {f}" for f in memory.facts)
