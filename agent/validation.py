"""The lecture's three checks on a tool call, and — separately — policy ("Validating Tool Calls").

A tool call is a string the model sampled. Before any tool code runs, the runtime checks, in order:
  1. valid JSON: the arguments string parses (to an object),
  2. tool existence: a tool of that name is in the tool set,
  3. schema conformity: the arguments match the tool's JSON Schema (jsonschema).
A failure is not raised: it becomes the tool result "ERROR: invalid arguments …" that the model
reads and can repair. Policy is a different question — the call is well-formed, but is it
permitted? — answered by check_policy with "POLICY: …".

What it does not know: how the tool runs, or the loop.

>>> from agent.tools import TOOLS
>>> from agent.messages import ToolCall
>>> validate_call(ToolCall("call_1", "get_weather", '{"city": "Berlin"}'), TOOLS).ok
True
>>> validate_call(ToolCall("call_1", "get_weather", '{"city": '), TOOLS).check
1
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import jsonschema

from agent.messages import ToolCall
from agent.tools import Tool, normalize, tool_named

CHECK_JSON, CHECK_EXISTS, CHECK_SCHEMA = 1, 2, 3
CHECK_NAMES = {CHECK_JSON: "valid JSON", CHECK_EXISTS: "tool existence", CHECK_SCHEMA: "schema conformity"}


@dataclass(frozen=True)
class Validation:
    """The outcome of the three checks: `check` is the number of the one that failed (None: passed)."""

    ok: bool
    message: str = ""  # the tool result the model reads when a check failed
    check: int | None = None
    arguments: dict | None = None  # the parsed arguments, when check 1 passed
    tool: Tool | None = None


def validate_call(call: ToolCall, tools: tuple[Tool, ...]) -> Validation:
    """Run checks 1 → 2 → 3 on one call; the first failure ends it with a detailed message."""
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as e:
        return Validation(False, f"ERROR: invalid arguments for {call.name}: not valid JSON "
                                 f"({e.msg} at column {e.colno}): {call.arguments}", CHECK_JSON)
    tool = tool_named(tools, call.name)
    if tool is None:
        names = ", ".join(t.name for t in tools) or "none"
        return Validation(False, f"ERROR: unknown tool {call.name!r}; available tools: {names}",
                          CHECK_EXISTS, arguments)
    problems = schema_problems(arguments, tool.parameters)
    if problems:
        return Validation(False, f"ERROR: invalid arguments for {call.name}: {'; '.join(problems)}",
                          CHECK_SCHEMA, arguments, tool)
    return Validation(True, arguments=arguments, tool=tool)


def schema_problems(instance: object, schema: dict) -> list[str]:
    """jsonschema's messages, each with where it applies: ["'city' is a required property"]."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    return [e.message + (f" (at {'/'.join(map(str, e.absolute_path))})" if e.absolute_path else "")
            for e in errors]


@dataclass(frozen=True)
class Policy:
    """What is permitted, decided after validation at the security boundary.

    weather_cities: the cities get_weather may be asked about (None: any).
    max_expression_chars: the longest expression the calculator may be given (None: no limit).
    untrusted_tools: the tools that came from an untrusted MCP server (agent.mcp.client names them).
    approval_required: the defence against tool poisoning and injection — a call to an untrusted
        tool runs only if it was approved (its approval_key is in `approved`); off: it just runs.
    """

    weather_cities: frozenset[str] | None = None
    max_expression_chars: int | None = 100
    untrusted_tools: frozenset[str] = frozenset()
    approval_required: bool = False
    approved: frozenset[str] = frozenset()


DEFAULT_POLICY = Policy()
NO_POLICY = Policy(weather_cities=None, max_expression_chars=None)
EUROPE_ONLY = Policy(weather_cities=frozenset({"Berlin", "Paris", "London", "Madrid", "Rome",
                                               "Vienna", "Prague", "Stockholm", "Lisbon"}))


def approval_key(name: str, arguments: dict) -> str:
    """What an approval in the page names: the tool and its exact arguments.

    >>> approval_key("send_note", {"text": "hi"})
    'send_note {"text": "hi"}'
    """
    return f"{name} {json.dumps(arguments, sort_keys=True, ensure_ascii=False)}"


def check_policy(name: str, arguments: dict, policy: Policy) -> str | None:
    """The refusal ("POLICY: …") for a well-formed call that is not permitted; None if permitted.

    >>> check_policy("get_weather", {"city": "Tokyo"}, EUROPE_ONLY)[:30]
    'POLICY: get_weather is not per'
    """
    if (policy.approval_required and name in policy.untrusted_tools
            and approval_key(name, arguments) not in policy.approved):
        return (f"POLICY: {name} comes from an untrusted MCP server; with the defence on, its calls "
                f"run only when approved, and this one was not approved")
    if name == "get_weather" and policy.weather_cities is not None:
        allowed = {normalize(c) for c in policy.weather_cities}
        if normalize(str(arguments.get("city", "")).split(",")[0]) not in allowed:
            return (f"POLICY: get_weather is not permitted for {arguments.get('city')!r}; "
                    f"permitted cities: {', '.join(sorted(policy.weather_cities))}")
    if name == "calculator" and policy.max_expression_chars is not None:
        n = len(str(arguments.get("expression", "")))
        if n > policy.max_expression_chars:
            return (f"POLICY: calculator expressions are limited to {policy.max_expression_chars} "
                    f"characters; this one has {n}")
    return None
