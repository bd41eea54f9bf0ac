"""The model's reply text → the fields of an AssistantMessage: thought, answer text, tool calls.

Two output formats (agent.formats.Fmt):
  native      — <tool_call>{"name": …, "arguments": {…}}</tool_call>, a leading "Thought: …" line
                being the ReAct thought; text without a call is the answer.
  react text  — Yao et al.'s "Thought: …" / "Action: tool[argument]" (or a JSON action, as a
                grammar-constrained reply writes it) / "Final Answer: …"; an invented
                "Observation:" and whatever follows it is dropped.
Nothing here raises on a bad reply: ParsedReply.error says why it is unusable, and broken JSON
with a readable tool name still becomes a call, so that the runtime's check 1 (valid JSON) can
tell the model its mistake.

What it does not know: rendering (agent.template), tokens, validation or the loop.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from agent.formats import Fmt
from agent.messages import ToolCall
from agent.stops import END_OF_TURN
from agent.tools import TOOLS, Tool, tool_named  # noqa: F401 (TOOLS: doctest)


@dataclass(frozen=True)
class ParsedReply:
    """The fields of an AssistantMessage read from reply text; `error` says why it is unusable."""

    thought: str = ""
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    error: str = ""


_ANSWER = re.compile(r"^\s*(?:final\s+)?answer\s*:\s*", re.I)
_END_OF_THOUGHT = re.compile(r"<tool_call>|\n\s*\n|\n(?=\s*(?:final\s+)?answer\s*:)", re.I)


def split_thought(text: str) -> tuple[str, str]:
    """A leading "Thought: …" (up to a tool call, a blank line or an "Answer:" line) and the rest.

    >>> split_thought("Thought: 345 km in 2.5 h.\\nAnswer: 138 km/h")
    ('345 km in 2.5 h.', '138 km/h')
    """
    stripped = text.strip()
    m = re.match(r"thought\s*:\s*", stripped, re.I)
    if not m:
        return "", _ANSWER.sub("", stripped, count=1).strip()
    body = stripped[m.end():]
    end = _END_OF_THOUGHT.search(body)
    cut = end.start() if end else len(body)
    return body[:cut].strip(), _ANSWER.sub("", body[cut:].strip(), count=1).strip()


def parse_reply(text: str, fmt: Fmt | str, tools: tuple[Tool, ...] = (), next_id: int = 1) -> ParsedReply:
    """Reply text → thought, text, tool calls (ids call_{next_id}, …), or an error. Never raises.

    >>> parse_reply('<tool_call>{"name": "get_weather", "arguments": {"city": "Berlin"}}</tool_call>',
    ...             "native").tool_calls
    (ToolCall(id='call_1', name='get_weather', arguments='{"city": "Berlin"}'),)
    >>> parse_reply("Thought: I need the author.\\nAction: search[Invisible Cities]", "react",
    ...             TOOLS).tool_calls[0].arguments
    '{"query": "Invisible Cities"}'
    """
    text = text.split(END_OF_TURN)[0]
    if Fmt(fmt) == Fmt.REACT_TEXT:
        return _parse_react(text, tools, next_id)
    return _parse_native(text, next_id)


def _parse_native(text: str, next_id: int) -> ParsedReply:
    calls = []
    for i, m in enumerate(re.finditer(r"<tool_call>(.*?)(?:</tool_call>|$)", text, re.S)):
        call, error = _block_call(m.group(1), f"call_{next_id + i}")
        if error:
            return ParsedReply(error=error)
        calls.append(call)
    rest = re.sub(r"<tool_call>.*?(?:</tool_call>|$)", "", text, flags=re.S)
    thought, answer = split_thought(rest)
    if not calls and not answer:
        return ParsedReply(thought=thought, error=(
            "a thought but no tool call and no answer" if thought else "the reply is empty"))
    return ParsedReply(thought, answer, tuple(calls))


def _block_call(body: str, call_id: str) -> tuple[ToolCall | None, str]:
    """One <tool_call> body → a call. Broken JSON with a readable name still becomes a call, so the
    runtime's check 1 (valid JSON) reports the mistake to the model as a tool result."""
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        name = re.search(r'"name"\s*:\s*"([^"]+)"', body)
        if not name:
            return None, f"the <tool_call> is not valid JSON ({e.msg}) and names no tool: {body.strip()[:200]}"
        args = re.search(r'"arguments"\s*:\s*(.*?)\s*\}?\s*$', body, re.S)
        return ToolCall(call_id, name.group(1), args.group(1) if args else body.strip()), ""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None, f'a <tool_call> needs {{"name": …, "arguments": {{…}}}}, got: {body.strip()[:200]}'
    args = obj.get("arguments", {})
    arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return ToolCall(call_id, obj["name"], arguments), ""


def _parse_react(text: str, tools: tuple[Tool, ...], next_id: int) -> ParsedReply:
    text = re.split(r"^\s*Observation\s*:", text, maxsplit=1, flags=re.M | re.I)[0]
    thought = re.search(r"^\s*Thought\s*:\s*(.*?)(?=^\s*Action\s*:|\Z)", text, re.M | re.S | re.I)
    thought_text = thought.group(1).strip() if thought else ""
    action = re.search(r"^\s*Action\s*:\s*(.*)$", text, re.M | re.I)
    final = re.search(r"^\s*Final Answer\s*:\s*(.*)", text, re.M | re.I | re.S)
    if not action and final and final.group(1).strip():  # the common alternative to finish[answer]
        return ParsedReply(thought_text, final.group(1).strip())
    if not action:
        return ParsedReply(thought=thought_text, error=(
            "no 'Action:' line; write Action: tool[argument], or Action: finish[answer] to answer"))
    line = action.group(1).strip()
    if line.startswith("{"):  # a JSON action, as a grammar-constrained reply writes it
        call, error = _block_call(text[action.start(1):].strip(), f"call_{next_id}")
        return ParsedReply(thought=thought_text, error=error) if error else ParsedReply(thought_text, "", (call,))
    m = re.fullmatch(r"([A-Za-z_][\w.-]*)\s*\[(.*)\]", line, re.S)
    if not m:  # an argument may run over several lines
        m = re.fullmatch(r"([A-Za-z_][\w.-]*)\s*\[(.*)\]", text[action.start(1):].strip(), re.S)
    if not m:
        return ParsedReply(thought=thought_text, error=f"cannot read the action {line!r}: write tool[argument]")
    name, raw = m.group(1), m.group(2)
    call = ToolCall(f"call_{next_id}", name, _react_arguments(raw, tool_named(tools, name)))
    return ParsedReply(thought_text, "", (call,))


def _react_arguments(raw: str, tool: Tool | None) -> str:
    """tool[argument] → a JSON arguments string: a JSON object as written; a plain argument fills
    the tool's one required parameter; otherwise the argument as a JSON string (check 3 will say)."""
    value: object = raw.strip()
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        pass
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    text = value if isinstance(value, str) else raw.strip()
    if tool is not None and tool.single_parameter:
        return json.dumps({tool.single_parameter: text}, ensure_ascii=False)
    return json.dumps(text, ensure_ascii=False)
