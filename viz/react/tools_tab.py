"""The ReAct tab's tool panels: "Tools from" (built-in functions or an MCP server), the tool set of a
typed task (specific tools or the code tool), the defence with Approve / Deny, the `mcp-wire` panel,
the server's resources and prompts, and specific tools vs. the code tool side by side.

Layout functions (`controls`, `approval`) add their components to the dict that becomes
viz/react_tab.Parts; handlers take (p, lm, …values) and return {component: value}; `tool_views`
is what every stepping event adds to the views (sent only when it changed). Every text that came
from a server or from code is escaped (viz/render.esc, agent/mcp_wire.inert): shown, never run.

What it does not know: how the MCP client, the sandbox or the loop work inside; the run itself
(viz/react/run.py, viz/react/tools.py).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import gradio as gr

from agent import codeact, sandbox
from agent.mcp import client as mcp_client
from agent.mcp.client import BUILT_IN, McpFailure
from agent.tools import tool_sets
from viz.react import handlers as h
from viz.react import run, tool_panels
from viz.react import tools as rt
from viz.react.run import FREE_TEXT, Session
from viz.render import esc, message

SAME_PROMPT = ("The prompt sent to the model is byte-identical with the built-in functions and with "
               "the MCP server's tools: MCP is a matter of the runtime; the model has no knowledge of it.")
MAX_CITY_CHARS = 100
PROMPT_NAME = "weather_report"


# --- layout --------------------------------------------------------------------------------------

def controls(d: dict, c: run.Choices) -> None:
    """The tool controls and panels, in an accordion below the views (the first screen stays the
    pseudo-code, the history and the stop reason)."""
    with gr.Accordion("Tools: built-in functions, an MCP server, or the code tool", open=False,
                      elem_id="react-tools-box"):
        with gr.Row(equal_height=True):
            d["tools_from"] = gr.Dropdown(list(mcp_client.sources()), value=c.tools_from, label="Tools from",
                                          info=rt.STARTING_INFO, scale=2, elem_id="react-tools-from")
            d["tool_set"] = gr.Dropdown(list(tool_sets()), value=c.tool_set, label="Tool set (free text)",
                                        scale=1, elem_id="react-tool-set")
            d["defence"] = gr.Checkbox(c.defence, label="Defence: calls to an untrusted server's tools "
                                       "wait for approval", scale=2, elem_id="react-defence")
        gr.Markdown(SAME_PROMPT + " Tools from, the tool set and the defence apply on Reset.",
                    elem_id="react-same-prompt")
        d["mcp_tools"] = gr.HTML("", elem_id="mcp-tools", js_on_load=None)
        d["mcp_wire"] = gr.HTML(tool_panels.wire_panel([]), elem_id="mcp-wire", js_on_load=None)
        _mcp_lists(d)
        _comparison(d)


def _mcp_lists(d: dict) -> None:
    with gr.Row(equal_height=True):
        d["resources_btn"] = gr.Button("List resources and prompts", size="sm", elem_id="mcp-list-btn")
        d["mcp_city"] = gr.Textbox(label="City (weather_report prompt)", value="Berlin",
                                   max_length=MAX_CITY_CHARS, elem_id="mcp-city")
        d["prompt_btn"] = gr.Button("The prompt fills the task", size="sm", elem_id="mcp-prompt-btn")
    d["mcp_lists"] = gr.HTML("", elem_id="mcp-lists", js_on_load=None)


def _comparison(d: dict) -> None:
    d["compare_btn"] = gr.Button("Compare specific tools and the code tool (same question)", size="sm",
                                 elem_id="react-compare-btn")
    d["compare_html"] = gr.HTML(tool_panels.policy_html(), elem_id="react-compare", js_on_load=None)


def approval(d: dict) -> None:
    """Approve / Deny, shown only while a call to an untrusted server's tool waits."""
    with gr.Row(visible=False, equal_height=True, elem_id="react-approval") as d["approval_row"]:
        d["approval_html"] = gr.HTML("", elem_id="react-approval-text", js_on_load=None)
        d["approve_btn"] = gr.Button("Approve", variant="primary", min_width=110, elem_id="react-approve")
        d["deny_btn"] = gr.Button("Deny", variant="stop", min_width=110, elem_id="react-deny")


def wire(p, lm) -> None:
    """The listeners of the tool panels (the stepping ones add `tool_views` through react_handlers)."""
    quiet = dict(show_progress="hidden")
    shown = [p.sess, p.show_tokens]
    p.approve_btn.click(partial(on_approve, p, lm), shown, p.stepped, api_name="on_approve", **quiet)
    p.deny_btn.click(partial(on_deny, p, lm), shown, p.stepped, api_name="on_deny", **quiet)
    p.resources_btn.click(partial(on_lists, p), p.sess, [p.mcp_lists, p.msg], api_name="on_mcp_lists")
    p.prompt_btn.click(partial(on_prompt, p), [p.sess, p.mcp_city, p.backend], [p.task, p.task_text, p.backend, p.msg],
                       api_name="on_mcp_prompt")
    p.compare_btn.click(partial(on_compare, p, lm), None, [p.compare_html, p.msg], api_name="on_compare")


def ended(s: Session | None) -> None:
    """gr.State's delete callback: the session's exports and its MCP server go."""
    h.remove_exports(s)
    if isinstance(s, Session):
        rt.close(s.key)


# --- handlers ------------------------------------------------------------------------------------

def _decide(p, lm, s: Session, show_tokens, approve: bool):
    s = replace(s, index=len(s.states) - 1)
    call = rt.awaiting_call(s)
    if call is None:
        yield h.views(p, lm, s, show_tokens, "No call is waiting for approval: Next steps the run.", "error")
        return
    key = rt.call_key(call)
    s = replace(s, approved=s.approved | {key}) if approve else replace(s, denied=s.denied | {key})
    try:
        yield from h.advance(p, lm, s, show_tokens, 1)
    except Exception as e:  # noqa: BLE001 — never a crash: the run stays as it was
        yield h.failed(p, lm, s, show_tokens, f"The call failed: {e.__class__.__name__}: {e}")


def on_approve(p, lm, s: Session, show_tokens):
    """Approve the waiting call (the server computes which: a visitor cannot name another) and run it."""
    yield from _decide(p, lm, s, show_tokens, True)


def on_deny(p, lm, s: Session, show_tokens):
    """Deny the waiting call: the policy layer refuses it (POLICY: …) and the model reads that."""
    yield from _decide(p, lm, s, show_tokens, False)


def _client(s: Session):
    if not isinstance(s, Session) or s.tools_from == BUILT_IN or not s.key:
        raise McpFailure("choose an MCP server under “Tools from” and press Reset first")
    return rt.client_of(s.key, s.tools_from)


def on_lists(p, s: Session) -> dict:
    """resources/list, resources/templates/list and prompts/list of the run's server."""
    try:
        client = _client(s)
        resources, prompts = client.resources(), client.prompts()
    except McpFailure as e:
        return {p.msg: message(f"No lists: {e}", "error")}
    res = "".join(f"<li><code>{esc(r.get('uri') or r.get('uriTemplate'))}</code> {esc(r['name'])}</li>"
                  for r in resources[:50])
    pro = "".join(f"<li><b>{esc(x['name'])}</b>({esc(', '.join(x['arguments']))}): {esc(x['description'])}</li>"
                  for x in prompts[:20])
    html = f"<p><b>Resources</b></p><ul>{res}</ul><p><b>Prompts</b></p><ul>{pro}</ul>"
    return {p.mcp_lists: html, p.msg: message(f"{len(resources)} resources, {len(prompts)} prompts.")}


def on_prompt(p, s: Session, city, backend=None) -> dict:
    """prompts/get weather_report(city) → the task box (Free text); Reset runs it, on the Local model
    if Backend showed a scripted replay (which replays recorded runs only)."""
    city = str(city or "").replace("\x00", "").strip()
    if not city or len(city) > MAX_CITY_CHARS:
        return {p.msg: message(f"Type a city of 1 to {MAX_CITY_CHARS} characters.", "error")}
    try:
        text = _client(s).get_prompt(PROMPT_NAME, {"city": city})
    except McpFailure as e:
        return {p.msg: message(f"No prompt: {e}", "error")}
    text = text[:run.MAX_TASK_CHARS]
    typed = run.backend_for_typed_task(backend)
    moved = typed != backend
    return {p.task: FREE_TEXT, p.task_text: gr.Textbox(value=text, visible=True),
            **({p.backend: typed} if moved else {}),
            p.msg: message("The server's prompt filled “Your task”" + (" and Backend is now the Local model"
                                                                       if moved else "") + ": press Reset to run it.")}


_compared: dict[int, str] = {}


def on_compare(p, lm) -> dict:
    """Both recorded runs replayed (one real sandbox call), counted with the model's tokenizer;
    computed once per process."""
    if not sandbox.code_tool_enabled():
        return {p.msg: message("The code tool is switched off on this deployment.", "error")}
    if id(lm) not in _compared:
        runs = run.recorded_runs()
        figures = codeact.compare(runs[codeact.SPECIFIC_STEM], runs[codeact.CODE_STEM], lm.tokenizer,
                                  lm.context_window)
        _compared[id(lm)] = tool_panels.policy_html(codeact.comparison_table(*figures))
    return {p.compare_html: _compared[id(lm)]}  # no message: it would push the views down
