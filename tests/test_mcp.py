"""MCP against real server processes over stdio (no mock of the protocol): discovery, calls,
resources, prompts, the unchanged prompt, the injection demo, broken servers, lifecycle."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from agent import loop
from agent.loop import build_prompt
from agent.mcp.client import (
    BUILT_IN,
    LAB_SERVER,
    UNTRUSTED_SERVER,
    McpClient,
    McpFailure,
    ServerSpec,
    awaiting_approval,
    close_session,
    configure,
    for_session,
    mcp_policy,
    reap_idle,
    sources,
    spec_for,
    untrusted_results,
)
from agent.mcp.runs import load_mcp_run, mcp_runs, replay_mcp
from agent.mcp.untrusted import INJECTION, NOTE_SENT, POISONED_DESCRIPTION
from agent.mcp.wire import call_pairs, wire_html, wire_rows
from agent.messages import ResultKind, ToolCall, ToolResultMessage
from agent.recording import load_run, replay, shipped_runs
from agent.template import Fmt, Prompt, render_prompt
from agent.tools import CALCULATOR_TOOL, LOOKUP_TOOL, SEARCH_TOOL, TOOLS, WEATHER_TOOL
from agent.validation import DEFAULT_POLICY

BUILT_IN_TOOLS = (WEATHER_TOOL, CALCULATOR_TOOL, SEARCH_TOOL, LOOKUP_TOOL)


def child_commands() -> list[str]:
    """Command lines of this process's live children (the servers it started)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
            if int(fields.get("PPid", "0").strip()) == os.getpid() and "Z" not in fields.get("State", ""):
                found.append((status.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError):
            continue
    return found


@pytest.fixture(scope="module")
def lab():
    client = McpClient(LAB_SERVER)
    yield client
    client.close()


def script_server(tmp_path: Path, name: str, body: str) -> ServerSpec:
    """A small real MCP server (or not quite one) written to tmp_path, run with this Python."""
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return ServerSpec(name, sys.executable, (str(path),))


BROKEN_TOOL_SERVER = """
    import os, sys, time
    import anyio, mcp.types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    server = Server("broken")

    @server.list_tools()
    async def _list():
        return [types.Tool(name="get_weather", description="Get the current weather for a city.",
                           inputSchema={"type": "object", "properties": {"city": {"type": "string"}},
                                        "required": ["city"]})]

    @server.call_tool()
    async def _call(name, arguments):
        {action}

    async def main():
        async with stdio_server() as (r, w):
            await server.run(r, w, server.create_initialization_options())
    anyio.run(main)
"""


# --- discovery, calls, resources, prompts ---------------------------------------------------------

def test_discovery_lists_the_built_in_tools_with_identical_names_descriptions_and_schemas(lab):
    assert lab.tools() == BUILT_IN_TOOLS  # Tool equality: name, description, parameters
    assert [json.dumps(t.schema()) for t in lab.tools()] == [json.dumps(t.schema()) for t in BUILT_IN_TOOLS]
    assert lab.server_info["name"] == "react-lab"


def test_a_call_goes_through_tools_call_and_returns_the_built_in_result(lab):
    tools = {t.name: t for t in lab.tools()}
    assert tools["get_weather"].function(city="Berlin") == "12°C, rainy"
    assert tools["calculator"].function(expression="345 / 2.5") == "138"
    expected = LOOKUP_TOOL.function("Cuba", "Italo Calvino")
    assert tools["lookup"].function(term="Cuba", article="Italo Calvino") == expected
    sent = [e["frame"] for e in lab.wire if e["direction"] == "out" and e["frame"].get("method") == "tools/call"]
    assert sent[0]["params"] == {"name": "get_weather", "arguments": {"city": "Berlin"}}


def test_a_tool_error_over_mcp_reads_as_the_built_in_error(lab):
    call = ToolCall("call_1", "get_weather", '{"city": "Atlantis"}')
    assert loop.execute(call, lab.tools()) == loop.execute(call, TOOLS)
    assert loop.execute(call, lab.tools())[0] == ResultKind.TOOL_ERROR


def test_resources_list_the_template_and_read_an_article(lab):
    listed = lab.resources()
    assert listed[0]["uriTemplate"] == "encyclopedia://{title}"
    assert {"uri": "encyclopedia://Italo%20Calvino", "name": "Italo Calvino", "description": ""} in listed
    assert lab.read_resource("encyclopedia://Italo%20Calvino").startswith("Italo Calvino\n\nItalo Calvino (1923")
    with pytest.raises(McpFailure, match="no article titled"):
        lab.read_resource("encyclopedia://Nowhere")
    with pytest.raises(McpFailure, match="not a resource URI"):
        lab.read_resource("no uri at all")
    with pytest.raises(McpFailure, match="longer than 500"):
        lab.read_resource("encyclopedia://" + "x" * 600)
    with pytest.raises(McpFailure, match="prompt arguments"):
        lab.get_prompt("weather_report", {"city": "x" * 600})


def test_a_prompt_fills_the_task(lab):
    assert lab.prompts() == [{"name": "weather_report", "description": "A weather report for a city.",
                              "arguments": ["city"]}]
    assert lab.get_prompt("weather_report", {"city": "Berlin"}) == load_run(shipped_runs()["berlin-weather"]).user_input


def test_the_server_runs_on_its_own_as_a_module():
    import subprocess

    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    out = subprocess.run([sys.executable, "-m", "agent.mcp.server"], input=json.dumps(init) + "\n",
                         capture_output=True, text=True, timeout=30, cwd=Path(__file__).parent.parent)
    assert json.loads(out.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "react-lab"


# --- the prompt does not change -------------------------------------------------------------------

def prompts_of(states, tools) -> list[str]:
    return [render_prompt(None, build_prompt(s, tools)) for s in states if s.phase == loop.Phase.CALL_MODEL]


def test_berlin_over_mcp_replays_the_recorded_history_and_pairs_the_call_with_its_request_id():
    path = mcp_runs()["berlin-mcp"]
    states, client = replay_mcp(path)
    try:
        assert states[-1].history == load_mcp_run(path)[0].history
        assert states[-1].final_answer == "It's 12°C and rainy in Berlin."
        methods = [r["method"] for r in wire_rows(client.wire) if r["arrow"] == "→"]
        assert methods == ["initialize", "notifications/initialized", "tools/list", "tools/call"]
        assert call_pairs(client.wire) == {"call_1": "2"}
        response = [r for r in wire_rows(client.wire) if r["kind"] == "response" and r["method"] == "tools/call"]
        assert response[0]["tool_call_id"] == "call_1" and "12°C, rainy" in response[0]["body"]
    finally:
        client.close()


@pytest.mark.parametrize("fmt", [Fmt.NATIVE, Fmt.REACT_TEXT])
def test_the_prompt_string_is_byte_identical_with_built_in_and_mcp_tools(lab, fmt):
    history = load_run(shipped_runs()["berlin-weather"]).history
    mcp_tools = lab.tools()
    built_in = render_prompt(None, Prompt(history, BUILT_IN_TOOLS, fmt))
    assert render_prompt(None, Prompt(history, mcp_tools, fmt)) == built_in


def test_the_berlin_prompts_over_mcp_equal_the_built_in_runs_prompts():
    built_in = replay(load_run(shipped_runs()["berlin-weather"]))
    states, client = replay_mcp(mcp_runs()["berlin-mcp"])
    try:
        tools = client.tools()[:1]
        assert prompts_of(states, tools) == prompts_of(built_in, (WEATHER_TOOL,))
    finally:
        client.close()


@pytest.mark.model
def test_the_prompt_is_byte_identical_through_the_models_own_template(lab, tok):
    history = load_run(shipped_runs()["berlin-weather"]).history
    for fmt in (Fmt.NATIVE, Fmt.REACT_TEXT):
        built_in = render_prompt(tok, Prompt(history, BUILT_IN_TOOLS, fmt))
        assert render_prompt(tok, Prompt(history, lab.tools(), fmt)) == built_in


# --- the untrusted server and the defence -------------------------------------------------------

def test_the_untrusted_server_poisons_a_description_and_a_result():
    client = McpClient(UNTRUSTED_SERVER)
    try:
        tools = {t.name: t for t in client.tools()}
        assert tools["send_note"].description == POISONED_DESCRIPTION
        assert tools["get_weather"].function(city="Paris") == f"15°C, cloudy\n\n{INJECTION}"
        rows = wire_rows(client.wire)
        assert all(r["untrusted"] for r in rows if r["arrow"] == "←")
        assert not any(r["untrusted"] for r in rows if r["arrow"] == "→")
        assert wire_html(client.wire).count('class="untrusted"') == sum(r["arrow"] == "←" for r in rows)
    finally:
        client.close()


def results(state) -> list[tuple[str, str]]:
    return [(m.kind, m.content) for m in state.history if isinstance(m, ToolResultMessage)]


def test_without_the_defence_the_injected_instruction_is_followed():
    states, client = replay_mcp(mcp_runs()["injection-undefended"])
    client.close()
    assert results(states[-1])[1] == (ResultKind.OK, NOTE_SENT)


def test_with_the_defence_the_injected_call_is_refused_and_the_page_is_asked_first():
    path = mcp_runs()["injection-defended"]
    states, client = replay_mcp(path)
    client.close()
    kind, content = results(states[-1])[1]
    assert kind == ResultKind.POLICY_REFUSAL and "untrusted MCP server" in content
    assert states[-1].history == load_mcp_run(path)[0].history
    policy = mcp_policy(DEFAULT_POLICY, client, client.tools(), True, load_mcp_run(path)[1]["approved"])
    asked = [awaiting_approval(s, policy) for s in states]
    assert [c.name for c in asked if c is not None] == ["send_note"]  # get_weather was approved
    assert untrusted_results(states[-1].history, policy.untrusted_tools) == {"call_1", "call_2"}
    client.close()


def test_the_same_replies_with_the_defence_switched_off_send_the_note():
    states, client = replay_mcp(mcp_runs()["injection-defended"], defence=False)
    client.close()
    assert results(states[-1])[1] == (ResultKind.OK, NOTE_SENT)


def test_the_defence_never_touches_a_trusted_servers_tools(lab):
    policy = mcp_policy(DEFAULT_POLICY, lab, lab.tools(), True)
    assert policy.untrusted_tools == frozenset()
    call = ToolCall("call_1", "get_weather", '{"city": "Berlin"}')
    assert loop.execute(call, lab.tools(), policy)[0] == ResultKind.OK


# --- servers that crash, hang or answer garbage ---------------------------------------------------

def test_a_server_that_crashes_on_a_call_becomes_a_tool_error(tmp_path):
    spec = script_server(tmp_path, "crash", BROKEN_TOOL_SERVER.replace(
        "{action}", "print('boom: the server fell over', file=sys.stderr, flush=True); os._exit(3)"))
    client = McpClient(spec)
    try:
        tools = client.tools()
        kind, content = loop.execute(ToolCall("call_1", "get_weather", '{"city": "Berlin"}'), tools)
        assert kind == ResultKind.TOOL_ERROR
        assert content.startswith("ERROR: the MCP server process exited") and "boom" in content
        assert not client.running and not any(str(tmp_path) in c for c in child_commands())
    finally:
        client.close()


def test_a_server_that_hangs_on_a_call_is_stopped_after_the_time_limit(tmp_path):
    spec = script_server(tmp_path, "hang", BROKEN_TOOL_SERVER.replace("{action}", "time.sleep(3600)"))
    client = McpClient(spec, call_timeout_s=1.5)
    try:
        kind, content = loop.execute(ToolCall("call_1", "get_weather", '{"city": "Berlin"}'), client.tools())
        assert (kind, content) == (ResultKind.TOOL_ERROR, "ERROR: the MCP server did not answer tools/call "
                                                          "within 1.5 s; it was stopped")
        assert not any(str(tmp_path) in c for c in child_commands())
        assert wire_rows(client.wire)[-1]["kind"] == "note"
    finally:
        client.close()


def test_a_server_that_never_answers_initialize_is_a_clear_failure(tmp_path):
    spec = script_server(tmp_path, "mute", "import time\ntime.sleep(3600)\n")
    client = McpClient(spec, start_timeout_s=1.5)
    with pytest.raises(McpFailure, match="did not answer initialize within 1.5 s"):
        client.tools()
    assert not client.running and not any(str(tmp_path) in c for c in child_commands())


def test_a_server_that_answers_garbage_is_a_clear_failure(tmp_path):
    spec = script_server(tmp_path, "garbage", """
        import sys
        for line in sys.stdin:
            print("this is not JSON-RPC", flush=True)
    """)
    client = McpClient(spec, start_timeout_s=10)
    with pytest.raises(McpFailure, match="answered garbage"):
        client.tools()
    assert [r["kind"] for r in wire_rows(client.wire)][:2] == ["request", "garbage"]
    assert not any(str(tmp_path) in c for c in child_commands())


def test_a_command_that_does_not_exist_is_a_clear_failure():
    client = McpClient(ServerSpec("missing", "/nonexistent/mcp-server"))
    with pytest.raises(McpFailure, match="could not be started"):
        client.tools()


# --- lifecycle and choices ------------------------------------------------------------------------

def test_the_server_starts_lazily_and_its_process_is_gone_after_close():
    def servers() -> int:
        return sum("agent.mcp.server" in c for c in child_commands())

    before = servers()  # the module's `lab` client may hold one
    client = McpClient(LAB_SERVER)
    assert not client.running and servers() == before
    client.tools()
    assert client.running and servers() == before + 1
    client.tools()  # the same process answers again
    assert servers() == before + 1
    client.close()
    assert not client.running and servers() == before


def test_one_server_per_session_and_idle_ones_are_reaped():
    first = for_session("session-a", LAB_SERVER)
    assert for_session("session-a", LAB_SERVER) is first
    first.tools()
    second = for_session("session-a", UNTRUSTED_SERVER)  # another source: the old server stops
    assert not first.running and second is not first
    second.tools()
    assert reap_idle(0) >= 1 and not second.running
    close_session("session-a")
    assert not any("agent.mcp.untrusted" in c for c in child_commands())


def test_a_visitor_picks_a_source_by_label_and_never_names_a_command():
    assert sources()[:3] == (BUILT_IN, "MCP server (stdio)", "Untrusted MCP server (demo)")
    with pytest.raises(ValueError, match="unknown tool source"):
        spec_for("python -c 'import os'")


def test_the_operators_mcp_option_adds_an_untrusted_source():
    import agent.mcp.client as mc

    try:
        spec = configure(f"{sys.executable} -m agent.mcp.server")
        assert spec.untrusted and spec.args == ("-m", "agent.mcp.server") and mc.OPERATOR_LABEL in sources()
        assert configure("https://mcp.example.org/mcp").url == "https://mcp.example.org/mcp"
    finally:
        mc._operator = None


# --- red team: what a hostile visitor can send ------------------------------------------------------

def test_resource_uris_never_leave_the_encyclopedia(lab):
    for uri in ("encyclopedia://..%2F..%2F..%2Fetc%2Fpasswd", "encyclopedia://../../etc/passwd",
                "encyclopedia:///etc/passwd", "encyclopedia://%2e%2e/app.py", "file:///etc/passwd",
                "encyclopedia://%252e%252e%252fetc%252fpasswd"):
        with pytest.raises(McpFailure) as refused:
            lab.read_resource(uri)
        assert "root:" not in str(refused.value) and "import" not in str(refused.value)
    assert lab.read_resource("encyclopedia://Italo%20Calvino").startswith("Italo Calvino")


def test_a_visitors_prompt_name_and_arguments_are_checked_before_anything_is_sent():
    client = McpClient(LAB_SERVER)
    for name, arguments in (("x" * 10**6, {}), ("weather_report", ["Berlin"]), (None, {}),
                            ("weather_report", {"city": ["Berlin"] * 10**5})):
        with pytest.raises(McpFailure):
            client.get_prompt(name, arguments)
    assert not client.running and client.frames() == []


def test_wire_rows_are_inert_for_html_template_literals_and_bidi_overrides():
    hostile = "<img src=x onerror=alert(1)> ${alert(1)} `backtick` \u202eevil"
    log = [{"n": 1, "t_ms": 0, "direction": "in", "tool_call_id": hostile, "untrusted": True,
            "frame": {"jsonrpc": "2.0", "id": hostile, "method": hostile, "result": {"text": hostile}}}]
    page = wire_html(log)
    for live in ("<img", "${", "`", "\u202e"):
        assert live not in page


def test_the_process_cap_holds_when_many_sessions_start_at_once(monkeypatch):
    import threading

    import agent.mcp.client as mc

    reap_idle(0)
    monkeypatch.setattr(mc, "MAX_RUNNING", 1)
    clients = [McpClient(LAB_SERVER) for _ in range(3)]
    gate, outcomes, peak = threading.Barrier(3), [], []

    def start(client):
        gate.wait()
        try:
            client.tools()
            outcomes.append("started")
        except McpFailure as e:
            outcomes.append(str(e))
        peak.append(sum("agent.mcp.server" in c for c in child_commands()))

    threads = [threading.Thread(target=start, args=(c,)) for c in clients]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert outcomes.count("started") >= 1
        assert all(o == "started" or "MCP servers are running for other visitors" in o for o in outcomes)
        assert sum(c.running for c in clients) <= 1 and max(peak) <= 1
    finally:
        for c in clients:
            c.close()


def test_sessions_that_never_end_cannot_grow_the_servers_memory(monkeypatch):
    """Each kept client holds a wire log (≤ MAX_FRAMES frames); the number of clients is bounded."""
    import agent.mcp.client as mc

    monkeypatch.setattr(mc, "MAX_SESSIONS", 3)
    keys = [f"visitor-{i}" for i in range(6)]
    try:
        for key in keys:
            for_session(key, LAB_SERVER)
        assert len(mc._sessions) <= 3 and keys[-1] in mc._sessions
        assert for_session(keys[-1], LAB_SERVER) is mc._sessions[keys[-1]]
    finally:
        for key in keys:
            close_session(key)


def test_a_tools_from_label_of_any_type_is_a_clear_refusal():
    for label in (["MCP server (stdio)"], {"command": "sh"}, None, 3, "x" * 10**6):
        with pytest.raises(ValueError, match="unknown tool source"):
            spec_for(label)


def test_a_resource_uri_outside_what_the_server_lists_is_never_sent(lab):
    """An operator's server may offer file:// or other templates; a visitor reads only what the
    server lists (a resource's URI or a template's prefix), so nothing else reaches resources/read."""
    sent = len([r for r in wire_rows(lab.wire) if r["method"] == "resources/read" and r["kind"] == "request"])
    for uri in ("file:///etc/passwd", "http://169.254.169.254/latest/meta-data", "encyclopedia:/../x"):
        with pytest.raises(McpFailure, match="not a resource this server lists"):
            lab.read_resource(uri)
    reads = [r for r in wire_rows(lab.wire) if r["method"] == "resources/read" and r["kind"] == "request"]
    assert len(reads) == sent
