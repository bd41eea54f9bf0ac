"""Compaction: older turns of the history replaced by one summary message (lecture, Part IV).

What it knows: where a history may be cut without separating an assistant tool call from its
results — only before a user message or after a complete call/result group, i.e. at an index
whose message is not a tool result — and which cut to take: the latest one that keeps the newest
model turn (and everything after it) word for word, and replaces everything between the user's
input and the cut. The summary is a UserMessage of origin SUMMARY that says what it replaced and
how many model turns (so a scripted replay still answers call i with reply i); its text comes
from the backend's model (`summarize_prompt`) or, under scripted replay or when the model
fails, from the deterministic rule `rule_summary`.

What it does not know: tokens, thresholds, backends — the loop decides when and by whom.

>>> from agent.messages import SystemMessage, UserMessage, AssistantMessage, ToolCall, ToolResultMessage
>>> c1 = ToolCall("call_1", "get_weather", '{"city": "Berlin"}')
>>> c2 = ToolCall("call_2", "get_weather", '{"city": "Paris"}')
>>> h = (SystemMessage("s"), UserMessage("q"), AssistantMessage(tool_calls=(c1,)), ToolResultMessage("call_1", "12°C"),
...      AssistantMessage(tool_calls=(c2,)), ToolResultMessage("call_2", "15°C"))
>>> cut_points(h)
[2, 4, 6]
>>> choose_cut(h)
(2, 4)
>>> print(rule_summary(h[2:4]))
Summary of 2 earlier messages (1 model turn), replaced by compaction:
- called get_weather({"city": "Berlin"}) → 12°C
"""

from __future__ import annotations

from agent.messages import (
    AssistantMessage,
    Message,
    Origin,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    model_turns,
)
from agent.template import Prompt

SUMMARY_CHARS = 160  # per line of the rule's summary
SUMMARY_LINES = 12
SUMMARIZE_INSTRUCTION = ("Summarize the conversation below in at most three sentences. Keep every "
                         "tool result, number and name that later steps may need.")


def head_length(history: tuple[Message, ...]) -> int:
    """The messages never compacted: the system prompt and the user's input (line 1)."""
    for i, m in enumerate(history):
        if isinstance(m, UserMessage) and m.origin == Origin.USER:
            return i + 1
    return len(history)


def cut_points(history: tuple[Message, ...]) -> list[int]:
    """Every index k after the head where history[k:] may start: not inside a call/result group."""
    return [k for k in range(head_length(history), len(history) + 1)
            if k == len(history) or not isinstance(history[k], ToolResultMessage)]


def choose_cut(history: tuple[Message, ...]) -> tuple[int, int] | None:
    """[start, end) to replace: from the head to the latest cut at or before the newest model turn;
    None when that would replace nothing but a summary (compaction cannot gain anything)."""
    start = head_length(history)
    last = max((i for i, m in enumerate(history) if isinstance(m, AssistantMessage)), default=-1)
    ends = [k for k in cut_points(history) if start < k <= last]
    if not ends:
        return None
    end = ends[-1]
    if end - start == 1 and _is_summary(history[start]):
        return None
    return start, end


def _is_summary(m: Message) -> bool:
    return isinstance(m, UserMessage) and m.origin == Origin.SUMMARY


def header(segment: tuple[Message, ...]) -> str:
    """The summary's first line: what it replaced. Model turns an earlier summary in the segment
    had replaced are counted apart (3 messages can hold 7 turns when one is such a summary).

    >>> header((UserMessage("…", Origin.SUMMARY, 6), AssistantMessage("a"), UserMessage("q")))
    'Summary of 3 earlier messages (7 model turns: 1 here, 6 in an earlier summary), replaced by compaction:'
    """
    n, turns = len(segment), model_turns(segment)
    earlier = sum(m.replaced for m in segment if _is_summary(m))
    split = f": {turns - earlier} here, {earlier} in an earlier summary" if earlier else ""
    return (f"Summary of {n} earlier message{'s' * (n != 1)} ({turns} model turn{'s' * (turns != 1)}{split}), "
            "replaced by compaction:")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS - 1] + "…"


def _lines(segment: tuple[Message, ...]) -> list[str]:
    calls = {c.id: c for m in segment if isinstance(m, AssistantMessage) for c in m.tool_calls}
    lines: list[str] = []
    for m in segment:
        if _is_summary(m):
            lines += [ln for ln in m.content.splitlines()[1:] if ln.startswith("- ")]
        elif isinstance(m, AssistantMessage) and (m.text or m.thought) and not m.tool_calls:
            lines.append("- said: " + _clip(m.text or m.thought))
        elif isinstance(m, ToolResultMessage) and m.tool_call_id in calls:
            c = calls[m.tool_call_id]
            lines.append(f"- called {c.name}({_clip(c.arguments)}) → {_clip(m.content)}")
        elif isinstance(m, UserMessage):
            lines.append("- note: " + _clip(m.content))
    return lines[-SUMMARY_LINES:]


def rule_summary(segment: tuple[Message, ...]) -> str:
    """The deterministic summary: one line per tool call with its result, per answer and note."""
    return "\n".join([header(segment), *_lines(segment)])


def transcript(segment: tuple[Message, ...]) -> str:
    """The replaced turns as plain text, for the model that writes the summary."""
    return "\n".join(_lines(segment)) or "(nothing)"


def summarize_prompt(segment: tuple[Message, ...]) -> Prompt:
    """The prompt of the one extra model call that writes the summary (no tools)."""
    return Prompt((SystemMessage(SUMMARIZE_INSTRUCTION), UserMessage(transcript(segment))))


def compact(history: tuple[Message, ...], cut: tuple[int, int], summary: str | None = None) -> tuple[Message, ...]:
    """history with [start, end) replaced by one summary message (the rule's text unless given)."""
    start, end = cut
    segment = history[start:end]
    text = rule_summary(segment) if not summary else header(segment) + "\n" + summary.strip()
    message = UserMessage(text, Origin.SUMMARY, model_turns(segment))
    return history[:start] + (message,) + history[end:]
