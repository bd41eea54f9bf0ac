"""The wire log as rows a view can show: one per JSON-RPC frame, in order (the `mcp-wire` panel).

What it knows: the entries agent.mcp.client.McpClient.wire records — {n, t_ms, direction ("out":
client → server, "in": server → client, "note": the runtime's own note), frame (the JSON-RPC
message as serialized), tool_call_id, untrusted}. It pairs each response with its request's method
by JSON-RPC id, and carries the loop's tool_call_id from a tools/call request to its response.

What it does not know: Gradio. `wire_rows` returns plain strings (cut to a bounded length);
`wire_html` escapes every one of them, so a hostile server's text is shown, never interpreted.

>>> log = [{"n": 1, "t_ms": 0, "direction": "out", "tool_call_id": "call_1", "untrusted": False,
...         "frame": {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
...                   "params": {"name": "get_weather", "arguments": {"city": "Berlin"}}}},
...        {"n": 2, "t_ms": 9, "direction": "in", "tool_call_id": None, "untrusted": False,
...         "frame": {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "12°C, rainy"}]}}}]
>>> [(r["arrow"], r["kind"], r["method"], r["id"], r["tool_call_id"]) for r in wire_rows(log)]
[('→', 'request', 'tools/call', '2', 'call_1'), ('←', 'response', 'tools/call', '2', 'call_1')]
>>> "<script>" in wire_html([{**log[1], "frame": {"id": 3, "result": "<script>"}}])
False
"""

from __future__ import annotations

import html
import json

BODY_CHARS = 400
COLUMNS = ("#", "dir", "kind", "method", "id", "tool_call_id", "params / result")
ARROWS = {"out": "→", "in": "←", "note": "·"}


def _kind(frame: dict) -> str:
    if "garbage" in frame:
        return "garbage"
    if "note" in frame:
        return "note"
    if "method" in frame:
        return "request" if "id" in frame else "notification"
    return "error" if "error" in frame else "response"


def _body(frame: dict) -> str:
    for key in ("params", "result", "error", "garbage", "note", "truncated"):
        if key in frame:
            value = frame[key]
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            return text if len(text) <= BODY_CHARS else text[:BODY_CHARS] + " …"
    return ""


def wire_rows(log) -> list[dict]:
    """Entries → [{n, arrow, kind, method, id, tool_call_id, body, untrusted}] with plain strings."""
    methods: dict[str, str] = {}
    labels: dict[str, str] = {}
    rows = []
    for entry in log:
        frame = entry.get("frame", {})
        kind, rid = _kind(frame), "" if frame.get("id") is None else str(frame["id"])
        if kind == "request":
            methods[rid] = str(frame.get("method", ""))
            if entry.get("tool_call_id"):
                labels[rid] = entry["tool_call_id"]
        method = str(frame.get("method", "")) or methods.get(rid, "")
        from_server = entry.get("direction") == "in"
        rows.append({"n": str(entry.get("n", "")), "arrow": ARROWS.get(entry.get("direction"), "?"),
                     "kind": kind, "method": method[:100], "id": rid[:40],
                     "tool_call_id": str(entry.get("tool_call_id") or (labels.get(rid, "") if rid else ""))[:100],
                     "body": _body(frame), "untrusted": bool(entry.get("untrusted")) and from_server})
    return rows


def wire_table(log) -> list[list[str]]:
    """The rows as a table (COLUMNS), for a Dataframe; untrusted rows say so in the kind column."""
    return [[r["n"], r["arrow"], r["kind"] + (" (untrusted)" if r["untrusted"] else ""), r["method"],
             r["id"], r["tool_call_id"], r["body"]] for r in wire_rows(log)]


_INERT = {ord("$"): "&#36;", ord("{"): "&#123;", ord("}"): "&#125;", ord("`"): "&#96;",
          **{c: f"&#{c};" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}}


def inert(text: str) -> str:
    """Escaped for HTML, and for a JS template literal (`${…}`, backticks) should a view embed
    the table in one; bidi overrides shown as character references, not applied.

    >>> inert("<b>${x}</b>`")
    '&lt;b&gt;&#36;&#123;x&#125;&lt;/b&gt;&#96;'
    """
    return html.escape(str(text), quote=True).translate(_INERT)


def wire_html(log) -> str:
    """An escaped HTML table (`inert`); rows from an untrusted server carry class "untrusted"."""
    head = "".join(f"<th>{inert(c)}</th>" for c in COLUMNS)
    body = []
    for row in wire_table(log):
        cls = ' class="untrusted"' if "(untrusted)" in row[2] else ""
        body.append(f"<tr{cls}>" + "".join(f"<td>{inert(cell)}</td>" for cell in row) + "</tr>")
    return f'<table class="mcp-wire"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def call_pairs(log) -> dict[str, str]:
    """tool_call_id → JSON-RPC request id, for every labelled tools/call."""
    return {r["tool_call_id"]: r["id"] for r in wire_rows(log)
            if r["kind"] == "request" and r["method"] == "tools/call" and r["tool_call_id"]}
