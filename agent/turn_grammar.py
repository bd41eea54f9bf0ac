"""The grammar of one assistant turn: a thought, then a tool call — or, later, the answer.

LocalBackend masks the bundled model's tokens by it when a run is constrained (Settings.constrained):
the first model call of a task must be a tool call (OpenAI's tool_choice "required") — and not
`finish`, which would end the run without evidence — later calls a tool call or the answer
("auto"); either way every call parses and matches a tool's schema, and the loop still decides
"no tool call → final answer" (line 5). The thought is one line of at most MAX_THOUGHT_CHARS, so a
degenerate thought cannot eat the reply budget before the call.

Two formats, each the one its system prompt teaches (agent/template.py): the native
`<tool_call>{json}` (turn_grammar) and Yao et al.'s `Thought: …` / `Action: tool[argument]`
(react_turn_grammar; a JSON object in the brackets for a tool with several parameters).

>>> from agent.tools import TOOLS
>>> turn_grammar(TOOLS, call_required=True).source.splitlines()[0]
'start: thought? call'

What it does not know: the model, tokens, or how the grammar is enforced (agent.constraints).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from agent.tools import FINISH, Tool

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
MAX_THOUGHT_CHARS = 240


# The whole assistant turn of the native format, as one Lark grammar: an optional one-line thought
# (the lecture's t_k; no "<" in it, so no half-written tag), then the action a_k: a call whose JSON
# matches one tool's schema — or, once a tool result is in, free text: the final answer. The text
# may not contain "<tool_call" (every call is a whole, valid one) nor start with "Thought" (a
# thought is followed by a call or by "Answer:", so that parse_reply can tell the two apart).
_TURN_RULES = {
    True: 'start: thought? call',  # the first call of a task: an action is required
    False: 'start: thought? (call | "Answer:" TEXT) | TEXT',  # later: an action or the answer
}
_TURN_LEXEMES = (
    'thought: "Thought:" THOUGHT "\\n"',
    f'THOUGHT: / [^\\n<]{{1,{MAX_THOUGHT_CHARS}}}/',
    'TEXT: /(.|\\n)+/ & ~/(.|\\n)*<tool_call(.|\\n)*/ & ~/\\s*Thought(.|\\n)*/',
)


def turn_grammar(tools: Sequence[Tool], call_required: bool):
    """The grammar of one native assistant turn (agent.constraints.Grammar, kind "lark").

    call_required=True — the first model call of a task: "Thought: …" (optional) and a tool call.
    Without it a small model answers from its parametric memory (SmolLM2-135M: "22°C, sunny").
    call_required=False — after a tool result: a tool call, or free text that the loop returns
    as the final answer (line 5: no tool calls → return response.text). The call is left open
    (`<tool_call>{…}`); LocalBackend writes the closing tag.
    """
    from agent.constraints import JSON_FORMAT, Grammar, tool_call_schema  # llguidance: loaded on first use

    callable_ = first_call_tools(tools) if call_required else tuple(tools)
    schema = json.dumps({"x-guidance": JSON_FORMAT, **tool_call_schema([t.schema() for t in callable_])})
    lines = (_TURN_RULES[call_required], f'call: "{TOOL_CALL_OPEN}" %json {schema}', *_TURN_LEXEMES)
    name = "tool call" if call_required else "tool call or answer"
    return Grammar("lark", "\n".join(lines) + "\n", name)


def first_call_tools(tools: Sequence[Tool]) -> tuple[Tool, ...]:
    """The tools a task's first call may name: all but `finish` (an answer needs evidence first).

    >>> from agent.tools import TOOLS
    >>> [t.name for t in first_call_tools(TOOLS)]
    ['get_weather', 'calculator', 'search', 'lookup']
    """
    return tuple(t for t in tools if t.name != FINISH) or tuple(tools)


def react_turn_grammar(tools: Sequence[Tool], call_required: bool):
    """The ReAct text turn exactly as its system prompt teaches it: `Thought: …⏎Action: tool[arg]`
    — the bare argument for a tool with one string parameter, a JSON object matching the tool's
    parameters otherwise — or, once a tool result is in, `Final Answer: …`.

    >>> from agent.tools import TOOLS
    >>> react_turn_grammar(TOOLS, True).source.splitlines()[0]
    'start: "Thought: " THOUGHT "\\\\n" "Action: " call'

    """
    from agent.constraints import JSON_FORMAT, Grammar  # llguidance: loaded on first use

    callable_ = first_call_tools(tools) if call_required else tuple(tools)
    start = 'start: "Thought: " THOUGHT "\\n" "Action: " call'
    if not call_required:
        start += ' | ("Thought: " THOUGHT "\\n")? "Final Answer: " LINE'
    rules, names = [], []
    for i, tool in enumerate(callable_):
        names.append(f"call_{i}")
        param = tool.single_parameter
        if param is not None and tool.parameters["properties"][param].get("type") == "string":
            rules.append(f'call_{i}: "{tool.name}[" ARGUMENT "]"')
        else:
            schema = json.dumps({"x-guidance": JSON_FORMAT, **tool.parameters})
            rules.append(f'call_{i}: "{tool.name}[" %json {schema} "]"')
    lines = (start, "call: " + " | ".join(names), *rules, f"THOUGHT: /[^\\n]{{1,{MAX_THOUGHT_CHARS}}}/",
             "ARGUMENT: /[^\\]\\n]{1,200}/", "LINE: /[^\\n]+/")
    return Grammar("lark", "\n".join(lines) + "\n", "ReAct action" if call_required else "ReAct action or answer")
