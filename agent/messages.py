"""The typed messages the loop stores in `history` (lecture, Part IV "Message Types").

What it knows: the four roles — system, user, assistant, tool — as one frozen dataclass each, their
OpenAI chat-format dicts (the strings sent to an API), and the pairing invariant: every tool call
gets exactly one ToolResultMessage carrying its id before the next assistant turn, and no result
arrives without its call.

What it does not know: chat templates, tool schemas, how a reply is parsed or how a tool runs.

>>> call = ToolCall("call_1", "get_weather", '{"city": "Berlin"}')
>>> AssistantMessage(tool_calls=(call,)).to_dict()["tool_calls"][0]["function"]["name"]
'get_weather'
>>> pairing_violations([AssistantMessage(tool_calls=(call,)), ToolResultMessage("call_1", "12°C, rainy")])
[]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class ResultKind(StrEnum):
    """What kind of tool result a ToolResultMessage carries, so a UI can show each as its own event."""

    OK = "ok"
    VALIDATION_ERROR = "validation_error"  # one of the lecture's three checks failed
    POLICY_REFUSAL = "policy_refusal"  # well-formed, but not permitted ("validation is not policy")
    TOOL_ERROR = "tool_error"  # the tool itself raised: "ERROR: " + message(e)


class Origin(StrEnum):
    """Who wrote a UserMessage: the person, or the runtime feeding a parse error back."""

    USER = "user"
    RUNTIME = "runtime"
    SUMMARY = "summary"  # compaction's summary of the turns it replaced (agent.context.compaction)


@dataclass(frozen=True)
class ToolCall:
    """One requested call: {id, name, arguments}; `arguments` is a JSON string, as the model wrote it.

    >>> ToolCall("call_1", "get_weather", '{"city": "Berlin"}').to_dict()["type"]
    'function'
    """

    id: str
    name: str
    arguments: str

    def to_dict(self) -> dict:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}

    @staticmethod
    def from_dict(d: dict) -> ToolCall:
        fn = d["function"]
        return ToolCall(id=str(d["id"]), name=str(fn["name"]), arguments=str(fn["arguments"]))


@dataclass(frozen=True)
class SystemMessage:
    """The standing instructions; the first message of every call."""

    content: str

    def to_dict(self, extras: bool = False) -> dict:
        return {"role": "system", "content": self.content}

    @staticmethod
    def from_dict(d: dict) -> SystemMessage:
        return SystemMessage(content=d.get("content") or "")


@dataclass(frozen=True)
class UserMessage:
    """A user turn. `origin` RUNTIME marks the runtime's own feedback (an unparsable reply),
    SUMMARY compaction's summary, which replaced `replaced` model turns."""

    content: str
    origin: Origin = Origin.USER
    replaced: int = 0

    def to_dict(self, extras: bool = False) -> dict:
        d: dict = {"role": "user", "content": self.content}
        if extras and self.origin != Origin.USER:
            d["origin"] = str(self.origin)
        if extras and self.replaced:
            d["replaced"] = self.replaced
        return d

    @staticmethod
    def from_dict(d: dict) -> UserMessage:
        return UserMessage(content=d.get("content") or "", origin=Origin(d.get("origin", "user")),
                           replaced=int(d.get("replaced", 0)))


@dataclass(frozen=True)
class AssistantMessage:
    """A model turn: final text, an optional thought (ReAct), and the tool calls it requests.

    >>> AssistantMessage("It's 12°C and rainy in Berlin.").to_dict()
    {'role': 'assistant', 'content': "It's 12°C and rainy in Berlin."}
    """

    text: str = ""
    thought: str = ""
    tool_calls: tuple[ToolCall, ...] = ()

    def to_dict(self, extras: bool = False) -> dict:
        """OpenAI format; `content` is None for a call-only turn. extras=True keeps the thought."""
        d: dict = {"role": "assistant", "content": self.text if self.text or not self.tool_calls else None}
        if self.tool_calls:
            d["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if extras and self.thought:
            d["thought"] = self.thought
        return d

    @staticmethod
    def from_dict(d: dict) -> AssistantMessage:
        calls = tuple(ToolCall.from_dict(c) for c in d.get("tool_calls") or ())
        return AssistantMessage(text=d.get("content") or "", thought=d.get("thought", ""), tool_calls=calls)


@dataclass(frozen=True)
class ToolResultMessage:
    """The result of one call, paired with it by `tool_call_id`; `kind` says ok or which failure."""

    tool_call_id: str
    content: str
    kind: ResultKind = ResultKind.OK

    def to_dict(self, extras: bool = False) -> dict:
        d = {"role": "tool", "tool_call_id": self.tool_call_id, "content": self.content}
        if extras:
            d["kind"] = str(self.kind)
        return d

    @staticmethod
    def from_dict(d: dict) -> ToolResultMessage:
        return ToolResultMessage(tool_call_id=str(d["tool_call_id"]), content=d.get("content") or "",
                                 kind=ResultKind(d.get("kind", "ok")))


Message = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage
_BY_ROLE = {"system": SystemMessage, "user": UserMessage, "assistant": AssistantMessage,
            "tool": ToolResultMessage}


def message_from_dict(d: dict) -> Message:
    """An OpenAI-format dict (optionally with this module's extras) → its typed message."""
    try:
        cls = _BY_ROLE[d["role"]]
    except KeyError as e:
        raise ValueError(f"unknown message role {d.get('role')!r}") from e
    return cls.from_dict(d)


def model_turns(history: Iterable[Message]) -> int:
    """Model calls answered so far: the assistant turns, plus those a compaction summary replaced.

    >>> model_turns([UserMessage("q"), UserMessage("summary", Origin.SUMMARY, 3), AssistantMessage("a")])
    4
    """
    return sum(1 if isinstance(m, AssistantMessage) else getattr(m, "replaced", 0) for m in history)


def history_to_dicts(history: Iterable[Message], extras: bool = False) -> list[dict]:
    return [m.to_dict(extras=extras) for m in history]


def history_from_dicts(dicts: Iterable[dict]) -> tuple[Message, ...]:
    return tuple(message_from_dict(d) for d in dicts)


def pairing_violations(history: Iterable[Message], allow_pending: bool = False) -> list[str]:
    """Every breach of the pairing invariant, named; [] when the history is well paired.

    Unanswered calls of the last assistant turn count only when allow_pending is False (a run
    between lines 4 and 8 of the loop legitimately has them).

    >>> a = AssistantMessage(tool_calls=(ToolCall("call_1", "get_weather", "{}"),))
    >>> pairing_violations([a, ToolResultMessage("call_9", "x")])[0]
    "message 1: orphan tool result: no call has tool_call_id 'call_9'"
    """
    problems: list[str] = []
    seen: set[str] = set()  # every call id so far
    open_calls: dict[str, str] = {}  # id → tool name, calls of the latest turn without a result
    closed: set[str] = set()  # ids of calls that already got their result
    for i, m in enumerate(history):
        if isinstance(m, AssistantMessage):
            problems += [f"message {i}: call {cid} ({name}) has no result before the next assistant turn"
                         for cid, name in open_calls.items()]
            open_calls = {}
            for c in m.tool_calls:
                if c.id in seen:
                    problems.append(f"message {i}: tool_call_id {c.id!r} is used by an earlier call")
                seen.add(c.id)
                open_calls[c.id] = c.name
        elif isinstance(m, ToolResultMessage):
            problems += _result_problem(i, m.tool_call_id, seen, open_calls, closed)
    if not allow_pending:
        problems += [f"end of history: call {cid} ({name}) has no result" for cid, name in open_calls.items()]
    return problems


def _result_problem(i: int, cid: str, seen: set[str], open_calls: dict[str, str], closed: set[str]) -> list[str]:
    """Check one tool result against the calls seen so far; close its call when it is in order."""
    if cid in open_calls:
        del open_calls[cid]
        closed.add(cid)
        return []
    if cid in closed:
        return [f"message {i}: second result for call {cid}"]
    if cid in seen:
        return [f"message {i}: result for call {cid} arrives after the next assistant turn"]
    return [f"message {i}: orphan tool result: no call has tool_call_id {cid!r}"]
