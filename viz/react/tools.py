"""Where a ReAct run's tools come from, without a page: the built-in functions, the code tool, or an
MCP server (lecture Part III, "Standardising Tools: MCP"; "Specific Tools vs. a Code Tool").

    tools = tools_for(c, run, key)           # Tool objects: built-in, a tool set, or discovered
    state = step(s, state, backend, on_token)  # loop.step, or mcp_client.step with the policy
    awaiting_call(s)                        # the pending call the page must ask about (or None)

What it knows: the "Tools from" choices (agent.mcp.client.sources), the tool sets
(agent.tools.tool_sets), the scripted MCP replays (assets/runs/mcp, as Task entries), one MCP
client per session key (agent.mcp.client.for_session), the defence (approval in the page).
A visitor picks labels only; commands and URLs are the operator's (agent.mcp.client.configure).

What it does not know: Gradio, the views, how the loop or the MCP client work inside.

>>> mcp_client.sources()[0], TOOL_SET_NAMES[0]
('Built-in functions', 'specific tools')
>>> sorted(MCP_TASKS.values())
['mcp/berlin-mcp', 'mcp/injection-defended', 'mcp/injection-undefended']
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import replace
from functools import lru_cache

from agent import loop
from agent.backends import ScriptedBackend
from agent.llm.batching import current_session
from agent.mcp import client as mcp_client
from agent.mcp.client import BUILT_IN, McpFailure, spec_for
from agent.mcp.runs import load_mcp_run, mcp_runs
from agent.messages import ResultKind, ToolResultMessage
from agent.recording import RecordedRun, tools_of
from agent.tools import TOOL_SETS, Tool, tool_sets
from agent.validation import DEFAULT_POLICY, approval_key

TOOL_SET_NAMES = tuple(TOOL_SETS)
DEFAULT_TOOL_SET = TOOL_SET_NAMES[0]
MCP_PREFIX = "mcp/"
MCP_TASKS = {  # the Task dropdown's scripted MCP replays → "mcp/<stem>" of assets/runs/mcp
    "What's the weather in Berlin? (over MCP)": "mcp/berlin-mcp",
    "What's the weather in Paris? (an untrusted MCP server, no defence)": "mcp/injection-undefended",
    "What's the weather in Paris? (an untrusted MCP server, defence on)": "mcp/injection-defended",
}
STARTING_INFO = "an MCP server is started on Reset: its first use takes a few seconds"
APPROVAL_NOTE = ("A call to a tool of an untrusted MCP server waits for your approval: Approve runs "
                 "it, Deny lets the policy layer refuse it.")


@lru_cache(maxsize=1)
def mcp_recorded() -> dict[str, tuple[RecordedRun, dict]]:
    """"mcp/<stem>" → (the recorded run, its MCP keys {tools_from, defence, approved})."""
    return {MCP_PREFIX + stem: load_mcp_run(path) for stem, path in mcp_runs().items()}


def extra_of(run: RecordedRun | None) -> dict | None:
    """The MCP keys of a shipped MCP replay (None for any other run)."""
    return next((x for r, x in mcp_recorded().values() if r is run), None) if run else None


def checked_source(tools_from, tool_set) -> tuple[str, str]:
    """The two choices, checked; ValueError with the choices a person may pick.

    >>> checked_source("MCP server (stdio)", "specific tools")
    ('MCP server (stdio)', 'specific tools')
    >>> checked_source("rm -rf /", "specific tools")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: unknown tool source 'rm -rf /'; choose one of: Built-in functions, MCP server ...
    """
    tools_from = BUILT_IN if tools_from in (None, "") else tools_from
    spec_for(tools_from)  # ValueError for anything but a choice
    tool_set = DEFAULT_TOOL_SET if tool_set in (None, "") else tool_set
    if tool_set not in tool_sets():
        raise ValueError(f"unknown tool set {str(tool_set)[:80]!r}; choose one of: {', '.join(tool_sets())}")
    return tools_from, tool_set


def new_key(key: str = "") -> str:
    """The session's key for its MCP client (kept across a tab's runs: one server per session)."""
    return key or uuid.uuid4().hex


def client_of(key: str, tools_from: str):
    """The session's MCP client for a source (None for the built-in functions); the page whose
    event asks (agent.llm.batching.current_session) owns the key, so closing it stops the server."""
    spec = spec_for(tools_from)
    if spec is None:
        return None
    page = current_session()
    if page is not None:
        with _owners_lock:
            _owners.setdefault(page, set()).add(key)
            while len(_owners) > MAX_PAGES:
                _owners.pop(next(iter(_owners)))
    return mcp_client.for_session(key, spec)


_owners: dict[object, set[str]] = {}  # a page's session → the MCP keys its events used
_owners_lock = threading.Lock()
MAX_PAGES = 4 * mcp_client.MAX_SESSIONS  # pages remembered; the reaper still stops idle servers


def page_closed(page) -> int:
    """The page `page` closed (Gradio's unload): stop every MCP server its events started, at once
    rather than when its state expires an hour later; how many sessions' servers were stopped."""
    with _owners_lock:
        keys = _owners.pop(page, set())
    for key in keys:
        mcp_client.close_session(key)
    return len(keys)


def tools_for(tools_from: str, tool_set: str, run: RecordedRun | None, key: str) -> tuple[Tool, ...]:
    """The run's tools: a recorded run's names resolved against the source's tools; a typed task
    gets the tool set (built-in) or every tool the server lists. McpFailure → ValueError."""
    client = client_of(key, tools_from)
    if client is None:
        return tools_of(run) if run else tool_sets()[tool_set]
    try:
        listed = client.tools()
    except McpFailure as e:
        raise ValueError(f"The MCP server failed: {e}") from None
    return tools_of(run, listed) if run else listed


def policy_of(s):
    """The policy of a session's run: the default, plus the defence for an untrusted server."""
    client = client_of(s.key, s.tools_from) if s.key else None
    return mcp_client.mcp_policy(DEFAULT_POLICY, client, s.tools, s.defence, s.approved)


def step(s, state: loop.State, backend, on_token=None) -> loop.State:
    """One phase: loop.step for the built-in functions, mcp_client.step (tools/call labelled with
    the call's id, the defence in the policy) for a server."""
    if s.tools_from == BUILT_IN or not s.key:
        return loop.step(state, backend, s.tools, on_token=on_token)
    recorded = recorded_history(s)
    if recorded and isinstance(backend, ScriptedBackend):  # a denial the recording ran stops the replay
        backend = replace(backend, recorded=recorded)
    return mcp_client.step(state, backend, s.tools, policy_of(s), client_of(s.key, s.tools_from), on_token)


def recorded_history(s) -> tuple:
    """The history of the shipped MCP recording the session replays (() for any other run)."""
    replies = getattr(s.backend, "replies", None)
    return next((r.history for r, _ in mcp_recorded().values() if replies is not None and r.replies is replies), ())


def recorded_choice(s, call) -> str:
    """What the replayed recording did with `call`: "approved", "denied" or "" (not a recording,
    or a call it never made)."""
    kinds = {m.tool_call_id: m.kind for m in recorded_history(s) if isinstance(m, ToolResultMessage)}
    kind = kinds.get(call.id)
    return "" if kind is None else "denied" if kind == ResultKind.POLICY_REFUSAL else "approved"


def awaiting_call(s):
    """The newest state's pending call that waits for approval (None: step freely). A call the
    visitor denied no longer waits: the next step lets the policy layer refuse it."""
    if s.tools_from == BUILT_IN or not s.defence:
        return None
    call = mcp_client.awaiting_approval(s.states[-1], policy_of(s))
    return None if call is None or call_key(call) in s.denied else call


def call_key(call) -> str:
    """approval_key of a pending call (its arguments as the model wrote them)."""
    return approval_key(call.name, json.loads(call.arguments or "{}"))


def untrusted_result_ids(s) -> frozenset[str]:
    """The tool_call_ids of the shown state whose results came from an untrusted server."""
    if s.tools_from == BUILT_IN or not s.key:
        return frozenset()
    return mcp_client.untrusted_results(s.state.history, policy_of(s).untrusted_tools)


def close(key: str) -> None:
    """The session ended: its server process goes."""
    if key:
        mcp_client.close_session(key)
