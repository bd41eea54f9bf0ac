"""Scripted replays over MCP: the model's replies are recorded, the tools run on a real server.

A run file in assets/runs/mcp/ is a react-lab-run/1 file (agent.recording) with three more keys:

    "tools_from": "MCP server (stdio)" | "Untrusted MCP server (demo)",   # a "Tools from" choice
    "defence": true | false,          # the policy layer's approval defence
    "approved": ["get_weather {\"city\": \"Paris\"}", …]   # approval_key of the calls approved

They live in their own folder because their tools come from a server (send_note is no built-in
tool), so agent.recording.shipped_runs and its tests, which replay with the built-in tools, do not
see them. Replaying starts the server, discovers its tools and steps the loop with the recorded
replies; the wire log fills as in a live run, and no model is needed.

What it does not know: the UI.

>>> sorted(mcp_runs())
['berlin-mcp', 'injection-defended', 'injection-undefended']
"""

from __future__ import annotations

import json
from pathlib import Path

from agent.loop import State
from agent.mcp.client import McpClient, mcp_policy, spec_for, step
from agent.recording import RUNS_DIR, RecordedRun, record_run, replay_start, run_from_dict, tools_of
from agent.tools import Tool
from agent.validation import DEFAULT_POLICY, Policy

MCP_RUNS_DIR = RUNS_DIR / "mcp"


def mcp_runs(folder: Path = MCP_RUNS_DIR) -> dict[str, Path]:
    return {p.stem: p for p in sorted(folder.glob("*.json"))}


def load_mcp_run(path: Path | str) -> tuple[RecordedRun, dict]:
    """The recorded run and its MCP keys {tools_from, defence, approved}."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    spec_for(d["tools_from"])  # ValueError for a source that does not exist
    extra = {"tools_from": d["tools_from"], "defence": bool(d.get("defence", False)),
             "approved": frozenset(d.get("approved", ()))}
    return run_from_dict(d), extra


def replay_mcp(path: Path | str, client: McpClient | None = None, defence: bool | None = None,
               base: Policy = DEFAULT_POLICY, max_phases: int = 100) -> tuple[tuple[State, ...], McpClient]:
    """Every state of the replayed run, and the client (its wire log); the caller closes it.
    `defence` overrides the recorded one (to show the same replies with the defence switched)."""
    run, extra = load_mcp_run(path)
    client = client or McpClient(spec_for(extra["tools_from"]))
    tools = tools_of(run, client.tools())
    on = extra["defence"] if defence is None else defence
    policy = mcp_policy(base, client, tools, on, extra["approved"])
    state, backend = replay_start(run)
    states = [state]
    while not states[-1].done and len(states) <= max_phases:
        states.append(step(states[-1], backend, tools, policy, client))
    return tuple(states), client


def record_mcp_run(state: State, tools: tuple[Tool, ...], tools_from: str, defence: bool,
                   approved: frozenset[str] = frozenset(), title: str = "", description: str = "") -> dict:
    d = record_run(state, tools, title, description)
    d.update(tools_from=tools_from, defence=defence, approved=sorted(approved))
    return d
