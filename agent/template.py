"""Messages + tool schemas → the exact string the model continues (reading the reply: agent.parsing).

What it knows (lecture, "System Prompt, Chat Template & Statelessness"): a call is stateless, so
the whole prompt — the system prompt, the advertised tools, every turn of `history` — is rendered
again for every call, through the model's own chat template (`tokenizer.apply_chat_template`).
Where the template has no tool support (SmolLM2's ChatML renders only role + content), tools are
written the Qwen/Hermes way: the schemas between <tools></tools> in the system message, each call
as <tool_call>{"name": …, "arguments": {…}}</tool_call> in the assistant turn, results as "tool"
turns. Two output formats share the loop:
  native — that <tool_call> JSON (a leading "Thought: …" line is the ReAct thought);
  react  — Yao et al.'s text: "Thought: …" / "Action: tool[argument]" / "Observation: …", with
           finish[answer] as the explicit exit and "\\nObservation:" as the stop sequence.
Observations of the react format go back as user turns ("Observation: …"), since the text
format has no tool role. `render` also returns spans: which characters of the string came from
which message and which category (system, tools, user, thought, tool_call, assistant_text,
tool_result; the rest is template overhead) — agent.budget counts tokens by them.

What it does not know: tokens, the model's weights, how a tool runs, or the loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agent.formats import Fmt, Mode
from agent.messages import AssistantMessage, Message, Origin, SystemMessage, ToolCall, ToolResultMessage, UserMessage
from agent.stops import END_OF_TURN
from agent.tools import TOOLS, Tool, tool_named  # noqa: F401 (TOOLS: doctest)

CATEGORIES = ("system", "tools", "exemplars", "documents", "memory", "user", "thought", "tool_call",
              "tool_result", "assistant_text", "summary", "template")
BLOCK_CATEGORIES = ("exemplars", "documents", "memory")  # sent with the system turn, never in history
GENERATION_PROMPT = "generation prompt"

# The native prompts are worded for the bundled 135M model, which follows few instructions: it
# answers "What's the weather in Berlin?" from its parametric memory ("22°C, sunny") unless told it
# cannot know such facts, and after the tool result it paraphrases it away ("quite rainy") unless
# told to repeat it word for word. Measured with constrained decoding at T = 0 (bench/bench_agent.py).
_NEEDS_TOOLS = "You cannot know current facts such as the weather, nor compute exactly: call a tool to get them."
_ANSWER_RULE = ("Then answer in one short sentence that repeats the tool result word for word. Write the "
                "answer as plain text without a tool call.")
SYSTEM_PROMPTS = {
    (Mode.REACT, Fmt.NATIVE): (
        f"You are a helpful assistant. {_NEEDS_TOOLS} Before each tool call, write one line that "
        f'starts with "Thought:" and says what you need and why. {_ANSWER_RULE}'),
    (Mode.ACT, Fmt.NATIVE): (f"You are a helpful assistant. {_NEEDS_TOOLS} {_ANSWER_RULE} Do not "
                             "explain your reasoning."),
    (Mode.REACT, Fmt.REACT_TEXT): (
        "Solve the task with interleaved Thought, Action and Observation steps. Thought reasons "
        "about what to do next. Action calls one tool as tool[argument]; its result comes back as "
        "Observation. Write one Thought and one Action, then stop. To give the final answer, write "
        "Action: finish[answer]."),
    (Mode.ACT, Fmt.REACT_TEXT): (
        "Solve the task with Action and Observation steps. Action calls one tool as "
        "tool[argument]; its result comes back as Observation. Write one Action line, then stop. "
        "To give the final answer, write Action: finish[answer]. Do not explain your reasoning."),
}
COT_PROMPT = ('You are a helpful assistant. Think step by step: start with "Thought:" and write '
              'your reasoning, then give the final answer on a new line that starts with "Answer:".')


def system_prompt(mode: Mode | str, fmt: Fmt | str) -> str:
    """The standing instructions for a mode and output format (CoT ignores the format)."""
    return COT_PROMPT if Mode(mode) == Mode.COT else SYSTEM_PROMPTS[(Mode(mode), Fmt(fmt))]


def stop_sequences(fmt: Fmt | str) -> tuple[str, ...]:
    """Turn boundaries besides end-of-turn: ReAct stops before it would invent the Observation."""
    return ("\nObservation:",) if Fmt(fmt) == Fmt.REACT_TEXT else ()


@dataclass(frozen=True)
class Block:
    """Context sent with every call besides the history: few-shot exemplars, retrieved documents
    or memory (category one of BLOCK_CATEGORIES); rendered after the system prompt and the tools."""

    category: str
    text: str


@dataclass(frozen=True)
class Prompt:
    """What one model call sees: system + history, the advertised tools, the output format, and
    the blocks re-sent with the system turn (lecture: history + tool schemas + retrieved
    documents + long-term memory)."""

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    fmt: Fmt = Fmt.NATIVE
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True)
class Span:
    """Characters [start, end) of the rendered string; `message` indexes prompt.messages
    (len(messages) for the generation prompt that opens the reply)."""

    start: int
    end: int
    category: str
    message: int


@dataclass(frozen=True)
class _Piece:
    text: str
    category: str


# --- writing tools and calls as text -------------------------------------------------------------

def tools_block(tools: tuple[Tool, ...], fmt: Fmt | str) -> str:
    """The tool descriptions added to the system message (empty when no tool is advertised)."""
    if not tools:
        return ""
    if Fmt(fmt) == Fmt.REACT_TEXT:
        return "\n\nTools:\n" + "\n".join(_react_tool_line(t) for t in tools)
    schemas = "\n".join(json.dumps(t.schema(), ensure_ascii=False) for t in tools)
    return ('\n\nTo call a tool, write <tool_call>{"name": <tool-name>, "arguments": '
            f"<args-json-object>}}</tool_call>. The tools:\n<tools>\n{schemas}\n</tools>")


def _react_tool_line(tool: Tool) -> str:
    param = tool.single_parameter
    line = f"- {tool.name}[{param or 'json'}]: {tool.description}"
    if param is None or len(tool.parameters.get("properties", {})) > 1:
        keys = ", ".join(f'"{k}": …' for k in tool.parameters.get("properties", {}))
        line += f" (or {tool.name}[{{{keys}}}])"
    return line


def call_text(call: ToolCall, fmt: Fmt | str, tools: tuple[Tool, ...] = ()) -> str:
    """One call as the model writes it: <tool_call>{…}</tool_call>, or Action: tool[argument]
    (the bare argument when it fills the tool's one required parameter, else the JSON object).

    >>> call_text(ToolCall("call_1", "search", '{"query": "Italo Calvino"}'), "react", TOOLS)
    'Action: search[Italo Calvino]'
    """
    if Fmt(fmt) == Fmt.REACT_TEXT:
        args, tool = _loads_or_raw(call.arguments), tool_named(tools, call.name)
        param = tool.single_parameter if tool else None
        if isinstance(args, dict) and list(args) == [param] and isinstance(args[param], str):
            return f"Action: {call.name}[{args[param]}]"
        return f"Action: {call.name}[{call.arguments}]"
    arguments = call.arguments if call.arguments.strip() else "{}"
    return f'<tool_call>{{"name": {json.dumps(call.name)}, "arguments": {arguments}}}</tool_call>'


def _assistant_pieces(m: AssistantMessage, fmt: Fmt, with_calls: bool, tools: tuple[Tool, ...]) -> list[_Piece]:
    parts = [("Thought: " + m.thought, "thought")] if m.thought else []
    parts += [(m.text, "assistant_text")] if m.text else []
    parts += [(call_text(c, fmt, tools), "tool_call") for c in m.tool_calls] if with_calls else []
    # the newline between two parts is charged to the part it introduces
    return [_Piece(("\n" if i else "") + t, c) for i, (t, c) in enumerate(parts)]


def _turn(m: Message, fmt: Fmt, native: bool, tools: tuple[Tool, ...]) -> tuple[dict, list[_Piece]]:
    """One message → (its dict for the chat template, the pieces its content is made of)."""
    if isinstance(m, SystemMessage):
        return {"role": "system", "content": m.content}, [_Piece(m.content, "system")]
    if isinstance(m, UserMessage):
        category = {Origin.RUNTIME: "tool_result", Origin.SUMMARY: "summary"}.get(m.origin, "user")
        return {"role": "user", "content": m.content}, [_Piece(m.content, category)]
    if isinstance(m, ToolResultMessage):
        if fmt == Fmt.REACT_TEXT:
            return _content("user", [_Piece("Observation: " + m.content, "tool_result")])
        d, pieces = _content("tool", [_Piece(m.content, "tool_result")])
        return {**d, "tool_call_id": m.tool_call_id}, pieces
    pieces = _assistant_pieces(m, fmt, not native, tools)
    d, _ = _content("assistant", pieces)
    if native and m.tool_calls:  # the template writes the calls; find them by their JSON
        d["tool_calls"] = [{"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": _loads_or_raw(c.arguments)}}
                           for c in m.tool_calls]
        pieces = pieces + [_Piece(json.dumps({"name": c.name, "arguments": _loads_or_raw(c.arguments)},
                                             ensure_ascii=False), "tool_call") for c in m.tool_calls]
    return d, pieces


def _content(role: str, pieces: list[_Piece]) -> tuple[dict, list[_Piece]]:
    return {"role": role, "content": "".join(p.text for p in pieces)}, pieces


def _loads_or_raw(arguments: str) -> object:
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments


def _turns(prompt: Prompt, native: bool) -> list[tuple[dict, list[_Piece]]]:
    """Every message as a chat-template turn. The tools (unless `native`: the template has its own
    tool support and receives them through tools=) and then the blocks go into the system turn."""
    turns = [_turn(m, Fmt(prompt.fmt), native, prompt.tools) for m in prompt.messages]
    block = "" if native else tools_block(prompt.tools, prompt.fmt)
    added = ([_Piece(block, "tools")] if block else []) + [
        _Piece("\n\n" + b.text, b.category) for b in prompt.blocks if b.text]
    system = bool(turns) and turns[0][0]["role"] == "system"
    if added and system:
        d, pieces = turns[0]
        turns[0] = ({**d, "content": d["content"] + "".join(p.text for p in added)}, pieces + added)
    elif added:
        added[0] = _Piece(added[0].text.lstrip(), added[0].category)
        turns.insert(0, ({"role": "system", "content": "".join(p.text for p in added)}, added))
    if native and system:
        schemas = [_Piece(json.dumps(t.schema(), ensure_ascii=False), "tools") for t in prompt.tools]
        turns[0] = (turns[0][0], turns[0][1] + schemas)
    return turns


# --- rendering -----------------------------------------------------------------------------------

def supports_tools(tokenizer) -> bool:
    """Whether the model's chat template renders tools itself (Qwen's does, SmolLM2's does not)."""
    template = getattr(tokenizer, "chat_template", None) or ""
    return isinstance(template, str) and "tools" in template


def render_chatml(messages: list[dict], add_generation_prompt: bool = True) -> str:
    """The lecture's ChatML, for when no tokenizer is at hand (a scripted or remote backend)."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content'] or ''}{END_OF_TURN}\n" for m in messages)
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def _apply(tokenizer, messages: list[dict], tools: list[dict] | None, generation: bool) -> str:
    if tokenizer is None:
        return render_chatml(messages, generation)
    extra = {"tools": tools} if tools else {}
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation, **extra)


@dataclass(frozen=True)
class Rendered:
    """What `render` returns: the prompt string and its spans, in order."""

    text: str
    spans: tuple[Span, ...]


def render(prompt: Prompt, tokenizer=None) -> Rendered:
    """The exact prompt string and its spans. tokenizer=None renders ChatML directly."""
    native = (tokenizer is not None and supports_tools(tokenizer) and Fmt(prompt.fmt) == Fmt.NATIVE
              and bool(prompt.tools))
    turns = _turns(prompt, native)
    messages = [d for d, _ in turns]
    tools = [t.schema() for t in prompt.tools] if native else None
    text = _apply(tokenizer, messages, tools, True)
    bounds = _message_bounds(tokenizer, messages, tools, text)
    offset = len(turns) - len(prompt.messages)  # 1 when a tools-only system turn was inserted
    spans: list[Span] = []
    cursor = 0
    for k, (_, pieces) in enumerate(turns):
        message = max(k - offset, 0)
        end = bounds[k + 1] if bounds else len(text)
        found, stop = _locate(text, cursor, end, pieces, message)
        spans += found
        if bounds:  # the rest of the turn (end-of-turn marker) is its overhead
            spans.append(Span(stop, end, "template", message))
        cursor = end if bounds else stop
    spans.append(Span(cursor, len(text), "template", len(prompt.messages)))
    return Rendered(text, tuple(s for s in spans if s.end > s.start))


def render_prompt(tokenizer, prompt: Prompt) -> str:
    """The exact string sent to the model for this prompt."""
    return render(prompt, tokenizer).text


def _message_bounds(tokenizer, messages: list[dict], tools, text: str) -> list[int] | None:
    """Where each turn starts: the length of the rendering of the turns before it. Exact for
    prefix-stable templates such as ChatML; None when the template is not prefix-stable."""
    bounds = [0]
    for k in range(1, len(messages) + 1):
        try:
            prefix = _apply(tokenizer, messages[:k], tools, False)
        except Exception:  # some templates refuse a conversation that ends on a tool turn
            return None
        if not text.startswith(prefix) or len(prefix) < bounds[-1]:
            return None
        bounds.append(len(prefix))
    return bounds + [len(text)]


def _locate(text: str, start: int, end: int, pieces: list[_Piece], message: int) -> tuple[list[Span], int]:
    """Find the pieces in order inside [start, end); what lies between them is template overhead.
    Returns the spans up to the last piece found, and where that piece ends."""
    spans, cursor = [], start
    for p in pieces:
        at = text.find(p.text, cursor, end) if p.text else -1
        if at < 0:  # the template changed this piece (e.g. trimmed it): it stays overhead
            continue
        spans += [Span(cursor, at, "template", message), Span(at, at + len(p.text), p.category, message)]
        cursor = at + len(p.text)
    return spans, cursor


def wire_messages(prompt: Prompt) -> tuple[list[dict], list[dict]]:
    """(messages, tools) for an OpenAI-compatible server, which applies the template itself.

    native: tools go in `tools`, calls as structured tool_calls, results as role "tool";
    react: everything as text, exactly as render() writes it, and no `tools`.
    """
    if Fmt(prompt.fmt) == Fmt.REACT_TEXT or not prompt.tools:
        return [d for d, _ in _turns(prompt, native=False)], []
    messages = []
    extra = "".join("\n\n" + b.text for b in prompt.blocks if b.text)
    for k, m in enumerate(prompt.messages):
        d = m.to_dict()
        if k == 0 and extra and isinstance(m, SystemMessage):
            d["content"] += extra
        if isinstance(m, AssistantMessage):
            content = "\n".join(p.text.lstrip("\n") for p in _assistant_pieces(m, Fmt.NATIVE, False, ()))
            d["content"] = content  # "" with tool calls: llama.cpp's server refuses null (HTTP 500)
        messages.append(d)
    return messages, [t.schema() for t in prompt.tools]
