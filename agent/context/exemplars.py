"""Few-shot exemplars: worked trajectories shown in the prompt (lecture, Part II: in-context learning).

What it knows: three worked tasks — a weather question, an arithmetic word problem, a two-hop
book question — written for each Mode and output format in the lecture's ⟨input, chain of
thought, output⟩ form, with observations the real tools return (they are computed, never typed).
`exemplar_block(n, mode, fmt)` is the text of the first n; the loop sends it with the system turn
of EVERY call (the model is stateless: the examples are tokens re-sent each time, while
post-training puts the format in the weights). Exemplars never enter the history.

What it does not know: the loop, tokens, or whether the model follows them.

>>> print(exemplar_block(1, "act", "react"))  # doctest: +NORMALIZE_WHITESPACE
Worked examples of the format (input, chain of thought, output):
<BLANKLINE>
Example 1
Input: What's the weather in Madrid?
Chain of thought:
Action: get_weather[Madrid]
Observation: 24°C, sunny
Action: finish[It is 24°C and sunny in Madrid.]
Output: It is 24°C and sunny in Madrid.
>>> exemplar_block(0, "react", "native")
''
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from agent.messages import ToolCall
from agent.template import Fmt, Mode, call_text
from agent.tools import TOOLS, tool_named


@dataclass(frozen=True)
class Hop:
    """One tool call of a worked task, with the thought before it (ReAct mode writes it)."""

    thought: str
    tool: str
    arguments: dict


@dataclass(frozen=True)
class Exemplar:
    """One worked task: the question, its tool hops, the answer, and the reasoning CoT writes."""

    question: str
    hops: tuple[Hop, ...]
    answer: str
    reasoning: str  # CoT mode: no tools, the chain is written out


EXEMPLARS: tuple[Exemplar, ...] = (
    Exemplar("What's the weather in Madrid?",
             (Hop("I need the current weather in Madrid.", "get_weather", {"city": "Madrid"}),),
             "It is 24°C and sunny in Madrid.",
             "I cannot look up the weather, so I say so."),
    Exemplar("A cyclist rides 42 km in 1.5 hours. What is her average speed in km/h?",
             (Hop("Average speed is distance divided by time: 42 / 1.5.", "calculator",
                  {"expression": "42 / 1.5"}),),
             "Her average speed is 28 km/h.",
             "Average speed is distance divided by time: 42 / 1.5 = 28."),
    Exemplar("Who wrote Don Quixote, and in which country was the writer born?",
             (Hop("I need the author of Don Quixote.", "search", {"query": "Don Quixote"}),
              Hop("The author is Miguel de Cervantes; now I need where he was born.", "search",
                  {"query": "Miguel de Cervantes"})),
             "Don Quixote was written by Miguel de Cervantes, who was born in Spain.",
             "Don Quixote is a novel by Miguel de Cervantes, a Spanish writer born in Spain."),
)
COT_ANSWERS = ("I cannot know the current weather in Madrid.", "28 km/h", "Miguel de Cervantes, born in Spain.")
HEADER = "Worked examples of the format (input, chain of thought, output):"


@lru_cache(maxsize=64)
def observation(tool: str, arguments: str) -> str:
    """What the real tool returns for these arguments (a JSON string)."""
    return str(tool_named(TOOLS, tool).function(**json.loads(arguments)))


def chain(ex: Exemplar, mode: Mode, fmt: Fmt) -> list[str]:
    """The chain of thought and actions of one exemplar, line by line, as the model should write it."""
    if mode == Mode.COT:
        return [f"Thought: {ex.reasoning}"]
    lines = []
    for i, hop in enumerate(ex.hops, 1):
        args = json.dumps(hop.arguments, ensure_ascii=False)
        lines += [f"Thought: {hop.thought}"] if mode == Mode.REACT else []
        lines += [call_text(ToolCall(f"call_{i}", hop.tool, args), fmt, TOOLS),
                  f"Observation: {observation(hop.tool, args)}"]
    if fmt == Fmt.REACT_TEXT:
        final = json.dumps({"answer": ex.answer}, ensure_ascii=False)
        lines += (["Thought: I have the answer."] if mode == Mode.REACT else [])
        lines.append(call_text(ToolCall("call_0", "finish", final), fmt, TOOLS))
    return lines


def exemplar_text(k: int, ex: Exemplar, mode: Mode, fmt: Fmt) -> str:
    output = COT_ANSWERS[EXEMPLARS.index(ex)] if mode == Mode.COT else ex.answer
    return "\n".join([f"Example {k}", f"Input: {ex.question}", "Chain of thought:",
                      *chain(ex, mode, fmt), f"Output: {output}"])


def exemplar_block(n: int, mode: Mode | str, fmt: Fmt | str) -> str:
    """The first n exemplars for this mode and output format ('' for n = 0)."""
    mode, fmt = Mode(mode), Fmt(fmt)
    if mode == Mode.COT:
        fmt = Fmt.NATIVE
    shown = EXEMPLARS[:max(0, min(n, len(EXEMPLARS)))]
    if not shown:
        return ""
    return HEADER + "\n\n" + "\n\n".join(exemplar_text(k, ex, mode, fmt) for k, ex in enumerate(shown, 1))
