"""The ReAct tab's tool panels as HTML: the advertised tools, the `mcp-wire` frames, the call that
waits for approval and the policy table — pure functions of a Session, which every stepping event
adds to its views (viz/react/handlers.views; sent only when they changed). Every text that came
from a server is escaped (viz/render.esc, agent/mcp/wire.inert): shown, never run.

What it does not know: the layout or the handlers (viz/react/tools_tab.py), the run itself.
"""

from __future__ import annotations

from dataclasses import replace

import gradio as gr

from agent import codeact, sandbox
from agent.mcp import wire as mcp_wire
from agent.mcp.client import BUILT_IN
from agent.tools import PARSING_VS_POLICY
from viz.react import tools as rt
from viz.react.run import Session
from viz.render import esc


def tool_views(p, s: Session) -> dict:
    """The tool panels and the approval row for the session; {} when the page shows them already."""
    client = rt.client_of(s.key, s.tools_from) if s.key and s.tools_from != BUILT_IN else None
    frames = client.frames() if client else []
    waiting = rt.awaiting_call(s) if s.index == len(s.states) - 1 else None
    panels = (tools_panel(s, client), wire_panel(frames),
              waiting_html(waiting, s.tools_from, rt.recorded_choice(s, waiting) if waiting else ""))
    digest = 0 if client is None and waiting is None else hash(panels)
    if digest == s.wire_shown:
        return {}
    return {p.sess: replace(s, wire_shown=digest), p.mcp_tools: panels[0], p.mcp_wire: panels[1],
            p.approval_html: panels[2], p.approval_row: gr.Row(visible=waiting is not None)}


def tools_panel(s: Session, client) -> str:
    """The advertised tools (descriptions from an untrusted server marked) and the untrusted results."""
    if client is None:
        return ""
    untrusted = client.spec.untrusted
    mark = '<span class="untrusted-mark">⚠ untrusted</span> ' if untrusted else ""
    items = "".join(f"<li>{mark}<b>{esc(t.name)}</b>: {esc(t.description)}</li>" for t in s.tools)
    results = rt.untrusted_result_ids(s)
    marked = ("<p>Results from the untrusted server (data, not instructions): "
              + ", ".join(f"<code>{esc(i)}</code>" for i in sorted(results)) + "</p>") if results else ""
    return (f'<div class="mcp-tools"><p><b>Tools from {esc(s.tools_from)}</b> — discovered with '
            f"tools/list, advertised to the model as ordinary tools:</p><ul>{items}</ul>{marked}</div>")


WIRE_STYLE = ("<style>table.mcp-wire td{padding:2px 6px;vertical-align:top}"
              "table.mcp-wire tr.untrusted td{background:rgba(220,38,38,.12)}"
              ".untrusted-mark{color:#b91c1c;font-weight:600}</style>")


def wire_panel(frames) -> str:
    head = ("<p><b>The wire</b>: every JSON-RPC frame between the runtime and the MCP server, in order; "
            "a tools/call request carries the loop's tool_call_id.</p>")
    if not frames:
        return head + "<p>No MCP server in this run.</p>"
    return (f"{head}{WIRE_STYLE}<div style=\"max-height:30em;overflow:auto;font-size:0.7em\">"
            f"{mcp_wire.wire_html(frames)}</div>")


def waiting_html(call, source: str, recorded: str = "") -> str:
    """The waiting call and what Approve / Deny do; in a replayed recording (`recorded`: what it
    did with this call), that its later replies were written for that choice only."""
    if call is None:
        return ""
    note = "" if not recorded else (
        f'<p class="approval-recorded" id="react-approval-recorded">This run replays a recording, which '
        f"<b>{recorded}</b> this call: its next replies were written for that choice. "
        f"{'Approve' if recorded == 'denied' else 'Deny'} still reaches the model as the tool result "
        f"({'the tool runs' if recorded == 'denied' else 'the policy refusal, POLICY: …'}), but the "
        "recording cannot answer it, so the replay stops there (“the recording cannot follow”). "
        "With Backend “Local model” the model reads your choice and what follows depends on it.</p>")
    return (f'<p class="approval">⚠ <b>{esc(call.name)}</b>(<code>{esc(call.arguments)}</code>) '
            f"— a tool of {esc(source)} — {esc(rt.APPROVAL_NOTE)}</p>{note}")


def policy_html(table: list | None = None) -> str:
    """PARSING_VS_POLICY, the sandbox's guarantees, the code of the code-tool run (inert), and the
    comparison table when computed."""
    rows = "".join(f"<tr><td>{esc(a)}</td><td>{esc(b)}</td><td>{esc(c)}</td></tr>" for a, b, c in table or ())
    compared = (f'<table class="react-compare"><thead><tr><th></th><th>specific tools</th><th>code tool</th>'
                f"</tr></thead><tbody>{rows}</tbody></table>") if table else ""
    guarantees = "".join(f"<li>{esc(g)}</li>" for g in sandbox.guarantees())
    return (f"{compared}<p><b>Parsing vs policy.</b> {esc(PARSING_VS_POLICY)}</p>"
            f"<p>The code tool's one action:</p><pre>{esc(codeact.CODE)}</pre>"
            f"<p><b>What the sandbox guarantees</b></p><ul>{guarantees}</ul>")


