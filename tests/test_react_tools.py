"""The ReAct tab's tool panels on real components (built, not launched), against the real MCP server
processes and the real sandbox: Berlin over MCP with the wire in view, the injection demo with the
defence (Approve / Deny), the code tool's task, the comparison; hostile values become messages."""

from __future__ import annotations

import pytest

from agent.loop import StopReason
from agent.mcp import client as mcp_client
from agent.messages import ToolResultMessage
from tests.page_api import merged, values
from viz.react import handlers as h
from viz.react import run as react_run
from viz.react import tool_panels
from viz.react import tools as rt
from viz.react import tools_tab as tt

BERLIN, PARIS_OFF, PARIS_ON = list(rt.MCP_TASKS)



def task(p, lm, first, name, **kw):
    c = react_run.Choices(task=name, budget=lm.context_window, **kw)
    return h.on_task(p, lm, first, False, *values(c))


def step(p, lm, s):
    """Next, pressed once."""
    return merged(h.on_next(p, lm, s, False))


def run_out(p, lm, s):
    """Run to end, pressed once."""
    return merged(h.on_run(p, lm, s, False))


def test_berlin_over_mcp_shows_every_frame_and_pairs_the_call_id_with_the_jsonrpc_id(tab, lm):
    p, first = tab
    out = task(p, lm, first, BERLIN)
    s = out[p.sess]
    assert out[p.tools_from] == "MCP server (stdio)" and s.key
    try:
        out = run_out(p, lm, s)
        s = out[p.sess]
        assert s.states[-1].done and "12°C" in s.states[-1].final_answer
        wire = tool_panels.wire_panel(rt.client_of(s.key, s.tools_from).frames())
        for method in ("initialize", "tools/list", "tools/call"):
            assert f"<td>{method}</td>" in wire
        assert "<td>call_1</td>" in wire
        assert "12°C" in out.get(p.mcp_wire, wire)
    finally:
        tt.ended(s)
    assert not mcp_client._sessions.get(s.key)


def test_the_defence_waits_for_approval_and_a_denied_injected_call_is_refused(tab, lm):
    p, first = tab
    s = task(p, lm, first, PARIS_ON)[p.sess]
    try:
        assert s.defence and s.tools_from == "Untrusted MCP server (demo)"
        out = run_out(p, lm, s)  # Run to end stops at the first untrusted call
        s = out[p.sess]
        assert rt.awaiting_call(s).name == "get_weather"
        assert "Approve" in out[p.msg] or "approval" in out[p.msg]
        assert out[p.approval_row].visible is True and "get_weather" in out[p.approval_html]
        assert step(p, lm, s)[p.sess].states == s.states  # Next does not step past it
        s = merged(tt.on_approve(p, lm, s, False))[p.sess]
        s = run_out(p, lm, s)[p.sess]
        assert rt.awaiting_call(s).name == "send_note"  # the injected instruction, followed by the model
        out = merged(tt.on_deny(p, lm, s, False))
        s = out[p.sess]
        refusal = s.states[-1].history[-1]
        assert refusal.content.startswith("POLICY:") and "send_note" in refusal.content
        assert "⚠ untrusted" in out[p.mcp_tools]
        s = run_out(p, lm, s)[p.sess]
        assert s.states[-1].done and "Paris" in s.states[-1].final_answer
    finally:
        tt.ended(s)


def test_a_denied_untrusted_call_changes_what_the_run_does_next(tab, lm):
    p, first = tab
    s = task(p, lm, first, PARIS_ON)[p.sess]
    try:
        out = run_out(p, lm, s)
        assert "replays a recording, which <b>approved</b> this call" in out[p.approval_html]
        out = merged(tt.on_deny(p, lm, out[p.sess], False))  # the recording approved get_weather
        s = out[p.sess]
        refusal = s.states[-1].history[-1]
        assert refusal.content.startswith("POLICY:") and "get_weather" in refusal.content
        final = run_out(p, lm, s)[p.sess].states[-1]
        assert final.stop_reason == StopReason.RECORDING_DIVERGED  # not the recorded "15°C … Paris"
        assert "15°C" not in final.final_answer and "call_1 was recorded with the result ok" in final.final_answer
    finally:
        tt.ended(s)


def test_without_the_defence_the_injected_call_runs(tab, lm):
    p, first = tab
    s = task(p, lm, first, PARIS_OFF)[p.sess]
    try:
        s = run_out(p, lm, s)[p.sess]
        results = [m.content for m in s.states[-1].history if isinstance(m, ToolResultMessage)]
        assert s.states[-1].done and not any(r.startswith("ERROR") for r in results)
        assert any("note sent" in r for r in results[1:])
    finally:
        tt.ended(s)


def test_approving_when_no_call_waits_is_a_message(tab, lm):
    p, first = tab
    out = merged(tt.on_approve(p, lm, first, False))
    assert "No call is waiting for approval" in out[p.msg]
    assert out[p.sess].states == first.states


@pytest.mark.parametrize("field, value, says", [
    ("tools_from", "bash -c 'rm -rf /'", "unknown tool source"),
    ("tools_from", ["MCP server (stdio)"], "unknown tool source"),
    ("tool_set", "every tool", "unknown tool set"),
])
def test_a_value_that_is_not_a_choice_is_a_message(tab, lm, field, value, says):
    p, first = tab
    c = react_run.Choices(budget=lm.context_window, **{field: value})
    out = h.on_reset(p, lm, first, False, *values(c))
    assert says in out[p.msg] and out[p.sess].states == first.states


def test_a_huge_prompt_argument_or_no_server_is_a_message(tab, lm):
    p, first = tab
    assert "1 to 100 characters" in tt.on_prompt(p, first, "x" * 1_000_000)[p.msg]
    assert "choose an MCP server" in tt.on_prompt(p, first, "Berlin")[p.msg]
    assert "choose an MCP server" in tt.on_lists(p, first)[p.msg]


def test_the_servers_prompt_fills_the_task_and_its_lists_are_shown(tab, lm):
    p, first = tab
    s = task(p, lm, first, BERLIN)[p.sess]
    try:
        out = tt.on_prompt(p, s, "Rome", react_run.SCRIPTED)
        assert out[p.task] == react_run.FREE_TEXT and "Rome" in out[p.task_text].value
        assert out[p.backend] == react_run.LOCAL  # a scripted replay cannot run a typed task
        assert p.backend not in tt.on_prompt(p, s, "Rome", react_run.LOCAL)
        lists = tt.on_lists(p, s)[p.mcp_lists]
        assert "encyclopedia://" in lists and "weather_report" in lists
    finally:
        tt.ended(s)


def test_the_code_tool_task_reaches_the_answer_through_the_real_sandbox(tab, lm):
    p, first = tab
    s = task(p, lm, first, react_run.CODE_TASK)[p.sess]
    assert [t.name for t in s.tools] == ["run_python", "finish"]
    s = run_out(p, lm, s)[p.sess]
    results = [m.content for m in s.states[-1].history if isinstance(m, ToolResultMessage)]
    assert "[12, 24, 21]" in results[0] or "19" in results[0]
    assert "19°C" in s.states[-1].final_answer


def test_a_typed_task_gets_the_chosen_tool_set(lm):
    c = react_run.checked(lm, react_run.Choices(task=react_run.FREE_TEXT, task_text="2+2?", backend="Local model",
                                                budget=lm.context_window, tool_set="code tool"))
    assert [t.name for t in react_run.start(c).tools] == ["run_python", "finish"]


def test_the_comparison_shows_both_runs_side_by_side(tab, lm):
    p, _ = tab
    out = tt.on_compare(p, lm)
    html = out[p.compare_html]
    assert "model calls" in html and "specific tools" in html and "code tool" in html
    assert "<script" not in html and "<script" not in tool_panels.policy_html()
    assert tt.on_compare(p, lm)[p.compare_html] is html  # computed once per process


def test_the_tools_panel_says_parsing_vs_policy_once():
    assert tool_panels.policy_html().lower().count("parsing vs policy") == 1


def test_closing_the_page_stops_its_mcp_server_at_once(tab, lm):
    from agent.llm import batching

    p, first = tab
    batching.set_session_resolver(lambda: ("gradio", "closing-page"))
    try:
        s = task(p, lm, first, PARIS_OFF)[p.sess]
        client = mcp_client._sessions[s.key]
        assert client in mcp_client._running  # the untrusted server runs for this page
        assert rt.page_closed(("gradio", "closing-page")) == 1
        assert s.key not in mcp_client._sessions and client not in mcp_client._running
        assert rt.page_closed(("gradio", "closing-page")) == 0
    finally:
        batching.set_session_resolver(None)
        tt.ended(s)


def test_the_app_stops_a_closed_pages_servers_on_unload(lm, monkeypatch):
    from types import SimpleNamespace

    import app

    unload = [d.fn for d in app.build_demo(lm).fns.values() if any(t[1] == "unload" for t in d.targets)]
    closed = []
    monkeypatch.setattr(rt, "page_closed", closed.append)
    unload[0](SimpleNamespace(session_hash="abc"))
    assert closed == [("gradio", "abc")]
