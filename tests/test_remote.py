"""The one way out: agent.llm.remote's guard and its OpenAI-compatible backend.

Against servers this file starts on 127.0.0.1: stubs speaking the wire format (streamed and not,
malformed, oversized, dripping, redirecting), a real `transformers serve` with the bundled model
(marked `model`), and the real app started as on a Space, driven through its own API with
gradio_client (marked `model` and `browser`, like tests/test_hostile.py). Every hostile case is
refused before a request leaves, or bounded in bytes and time; no message holds the reply's body.
"""

from __future__ import annotations

import html
import json
import os
import re
import select
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent import loop
from agent.backends import ScriptedBackend, Settings
from agent.budget import Usage
from agent.llm import remote
from agent.llm.remote import OpenAIBackend, RemoteRefused, parse_chat_completion
from agent.loop import StopReason, build_prompt, new_state, run, step
from agent.messages import AssistantMessage, ToolCall, ToolResultMessage
from agent.tools import TOOLS, WEATHER_TOOL
from tests.conftest import free_port
from viz.react import run as react_run
from viz.react import views as rv

SECRET = "SECRET-7f3a"  # in every hostile body: it must never reach a message
FAKE_LM = SimpleNamespace(name="SmolLM2-135M-Instruct", tokenizer=None, context_window=8192)  # views only


@pytest.fixture(autouse=True)
def fresh_config():
    """Each test configures agent.llm.remote itself; the app's configuration comes back after."""
    saved = dict(remote._config)
    yield
    remote._config.update(saved)
    remote._infos.clear()


# --- servers on loopback ---------------------------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self._serve()

    def do_POST(self):  # noqa: N802
        self._serve()

    def _serve(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        self.server.requests.append((self.command, self.path, json.loads(body) if body else None))
        behave = self.server.script.pop(0) if len(self.server.script) > 1 else self.server.script[0]
        try:
            behave(self)
        except (BrokenPipeError, ConnectionResetError):
            self.server.hangups.append(time.monotonic())

    def log_message(self, *args):
        pass


def answer(status: int, body: bytes, delay: float = 0.0, ctype="application/json", headers=()):
    def behave(h):
        time.sleep(delay)
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)
    return behave


def events(*chunks: dict | str):
    """A server-sent event stream of these chunks (a str is sent as it is, e.g. "[DONE]")."""
    lines = b"".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n".encode() for c in chunks)
    return answer(200, lines, ctype="text/event-stream")


def endless(piece: bytes, every_s: float, limit_s: float = 30.0, ctype="text/event-stream"):
    """Headers, then `piece` every `every_s` seconds until the client hangs up (or limit_s)."""
    def behave(h):
        h.send_response(200)
        h.send_header("Content-Type", ctype)
        h.end_headers()
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            h.wfile.write(piece)
            h.wfile.flush()
            _wait_or_hangup(h, every_s)
    return behave


def slow_status_line(every_s: float):
    def behave(h):
        for byte in b"HTTP/1.1 200 OK\r\n":
            h.wfile.write(bytes([byte]))
            h.wfile.flush()
            _wait_or_hangup(h, every_s)
    return behave


def _wait_or_hangup(h, seconds: float) -> None:
    """Sleep, but notice at once when the client closes its end (a read returns EOF)."""
    if select.select([h.connection], [], [], seconds)[0] and not h.connection.recv(1, socket.MSG_PEEK):
        raise BrokenPipeError("the client hung up")


@pytest.fixture
def stub():
    """start(*behaviours) → (server, base URL); behaviour i answers request i, the last repeats."""
    servers = []

    def start(*script):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.script, server.requests, server.hangups = list(script), [], []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _completion(message: dict, usage=(57, 12), finish="stop") -> bytes:
    return json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "stub-model",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }).encode()


def _berlin_prompt(fmt="native", tools=(WEATHER_TOOL,)):
    after_user = step(new_state("What's the weather in Berlin?", "act", fmt), ScriptedBackend(()), tools)
    return build_prompt(after_user, tools)


def _listed(url: str) -> OpenAIBackend:
    """The backend of a server the operator listed (its loopback address is then allowed)."""
    remote.configure([f"lab={url}"], free_url=False)
    return remote.backend_for("lab", "stub-model")


def _http_run(url, settings=None, fmt="native", tools=(WEATHER_TOOL,)):
    state = new_state("What's the weather in Berlin?", "act", fmt, settings or Settings())
    return run(state, _listed(url), tools)[-1]


# --- the hostile table: refused before any request leaves ------------------------------------------

def _loopback_names() -> list[str]:
    """Names other than "localhost" that this machine resolves to loopback (/etc/hosts)."""
    names = []
    for line in Path("/etc/hosts").read_text().splitlines():
        parts = line.split("#")[0].split()
        if parts and parts[0].startswith("127."):
            names += [n for n in parts[1:] if n != "localhost"]
    return names[:1]


LOOPBACK = ["127.0.0.1", "127.1", "localhost", "[::1]", "0.0.0.0", "2130706433", "0x7f.0.0.1",
            "0177.0.0.1", "[::ffff:127.0.0.1]", "127.0.0.1.", *_loopback_names()]


@pytest.mark.parametrize("free_url", [True, False], ids=["opt-in: public only", "listed servers only"])
@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_in_any_spelling_is_refused_and_the_listener_counts_zero(stub, host, free_url):
    listener, url = stub(answer(200, _completion({"content": SECRET})))
    remote.configure([], free_url=free_url)
    target = f"http://{host}:{listener.server_address[1]}/v1"
    with pytest.raises(RemoteRefused) as refused:
        remote.backend_for(target, "m").complete(_berlin_prompt(), Settings(timeout_s=2))
    with pytest.raises(RemoteRefused):
        remote.list_models(target)
    assert listener.requests == [] and SECRET not in str(refused.value)
    why = "loopback|unspecified|IPv4-mapped|cannot resolve" if free_url else "operator listed"
    assert re.search(why, str(refused.value))


PRIVATE = [("10.0.0.1", "private"), ("172.16.5.4", "private"), ("192.168.1.1", "private"),
           ("169.254.169.254", "cloud metadata"), ("[fd00:ec2::254]", "cloud metadata"),
           ("169.254.1.1", "link-local"), ("[fe80::1]", "link-local"), ("100.64.0.1", "CGNAT"),
           ("224.0.0.1", "multicast"), ("[ff02::1]", "multicast"), ("240.0.0.1", "reserved"),
           ("[fc00::1]", "private"), ("[::]", "unspecified"), ("[::ffff:10.0.0.1]", "IPv4-mapped")]


@pytest.mark.parametrize("host, kind", PRIVATE)
def test_private_link_local_metadata_and_reserved_addresses_are_refused_without_connecting(host, kind):
    remote.configure([], free_url=True)
    start = time.perf_counter()
    with pytest.raises(RemoteRefused, match=kind):
        remote.backend_for(f"http://{host}/latest/meta-data/", "m").complete(_berlin_prompt(), Settings())
    assert time.perf_counter() - start < 1.0  # refused by the check, no connection attempted


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/", "gopher://127.0.0.1:70/",
                                 "javascript:alert(1)", "http://user:pw@example.com/", "http://@127.0.0.1/",
                                 "", "http://", "http://" + "a" * 600 + ".com/", "http://[::1/"])
def test_only_http_and_https_urls_without_userinfo_are_accepted(url):
    remote.configure([], free_url=True)
    with pytest.raises(RemoteRefused):
        remote.backend_for(url, "m").complete(_berlin_prompt(), Settings())


def test_without_the_opt_in_only_listed_servers_are_reached(stub):
    allowed, allowed_url = stub(answer(200, _completion({"content": "hi"})))
    other, other_url = stub(answer(200, _completion({"content": SECRET})))
    remote.configure([f"lab={allowed_url}"], free_url=False)
    assert [s.label for s in remote.servers()] == ["lab"] and not remote.free_url_allowed()
    assert remote.backend_for("lab", "m").complete(_berlin_prompt(), Settings()).text == "hi"
    with pytest.raises(RemoteRefused, match="operator listed"):
        remote.backend_for(other_url, "m")
    assert len(allowed.requests) == 1 and other.requests == []


def test_local_mode_reaches_loopback_but_never_metadata(stub):
    server, url = stub(answer(200, _completion({"content": "from a local Ollama"})))
    remote.configure([], free_url=True, free_url_private=True)
    assert remote.backend_for(url, "m").complete(_berlin_prompt(), Settings()).text == "from a local Ollama"
    for refused in ("http://169.254.169.254/", "http://0.0.0.0:1/", "http://224.0.0.1/"):
        with pytest.raises(RemoteRefused):
            remote.backend_for(refused, "m").complete(_berlin_prompt(), Settings())


def test_a_redirect_to_a_private_address_is_not_followed(stub):
    private, private_url = stub(answer(200, _completion({"content": SECRET})))
    for location in (private_url + "/v1/chat/completions", "http://10.0.0.1/", "http://169.254.169.254/"):
        _, url = stub(answer(302, SECRET.encode(), headers=[("Location", location)]))
        with pytest.raises(RemoteRefused, match="redirects are not followed") as refused:
            _listed(url).complete(_berlin_prompt(), Settings())
        assert SECRET not in str(refused.value)
    assert private.requests == []


# --- bounded in bytes and time ---------------------------------------------------------------------

def test_an_oversized_reply_is_cut_at_a_megabyte(stub):
    _, url = stub(answer(200, b'{"x": "' + b"a" * 20_000_000 + b'"}'))
    start = time.perf_counter()
    with pytest.raises(RemoteRefused, match="over 1,000,000 bytes"):
        _listed(url).complete(_berlin_prompt(), Settings(timeout_s=10))
    assert time.perf_counter() - start < 5


def test_a_never_ending_stream_is_cut_at_a_megabyte_and_streams_less(stub):
    chunk = f'data: {json.dumps({"choices": [{"delta": {"content": "x" * 1000}}]})}\n\n'.encode()
    _, url = stub(endless(chunk, 0.0))
    pieces = []
    with pytest.raises(RemoteRefused, match="over 1,000,000 bytes"):
        _listed(url).complete(_berlin_prompt(), Settings(timeout_s=20), pieces.append)
    assert 900_000 < len("".join(pieces)) <= remote.MAX_REPLY_BYTES


@pytest.mark.parametrize("behaviour", [endless(b"d", 5.0), endless(b": keep-alive\n", 0.5), slow_status_line(5.0)],
                         ids=["a byte every 5 s", "comments every 0.5 s", "a status line byte every 5 s"])
def test_a_dripping_server_ends_within_the_budget_and_its_socket_is_closed(stub, behaviour):
    server, url = stub(behaviour)
    start = time.perf_counter()
    with pytest.raises(RemoteRefused, match="timed out"):
        _listed(url).complete(_berlin_prompt(), Settings(timeout_s=2))
    assert time.perf_counter() - start < 2.5
    deadline = time.monotonic() + 8  # the server notices the closed socket at its next write
    while not server.hangups and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.hangups, "the connection was left open"


def test_a_cheap_request_stays_fast_while_a_server_drips(stub):
    _, slow_url = stub(endless(b"d", 1.0))
    _, fast_url = stub(answer(200, _completion({"content": "quick"})))
    remote.configure([f"slow={slow_url}", f"fast={fast_url}"], free_url=False)
    slow = threading.Thread(target=lambda: pytest.raises(
        RemoteRefused, remote.backend_for("slow", "m").complete, _berlin_prompt(), Settings(timeout_s=3)))
    slow.start()
    time.sleep(0.3)
    start = time.perf_counter()
    assert remote.backend_for("fast", "m").complete(_berlin_prompt(), Settings()).text == "quick"
    assert time.perf_counter() - start < 1.0
    slow.join(5)
    assert not slow.is_alive()


# --- no reply body in any message ------------------------------------------------------------------

HOSTILE_BODIES = [
    (answer(200, f"<html>{SECRET}</html>".encode()), "JSONDecodeError"),
    (answer(200, json.dumps({"choices": [], "note": SECRET}).encode()), "IndexError"),
    (answer(200, json.dumps({"choices": [{"message": {"content": 42}}], "x": SECRET}).encode()), "content is int"),
    (answer(200, json.dumps({"choices": [{"message": {"tool_calls": [{"function": {SECRET: 1}}]}}]}).encode()),
     "KeyError"),
    (answer(200, json.dumps({"choices": [{"message": {"content": "x"}}],
                             "usage": {"prompt_tokens": SECRET}}).encode()), "ValueError"),
    (events({"choices": [{"delta": {"content": "x"}}], "usage": {"prompt_tokens": SECRET}}), "ValueError"),
    (answer(200, f"data: {{{SECRET}\n\n".encode(), ctype="text/event-stream"), "JSONDecodeError"),
    (answer(200, f"data: [\"{SECRET}\"]\n\n".encode(), ctype="text/event-stream"), "not an object"),
    (answer(200, f": {SECRET}\n\n".encode(), ctype="text/event-stream"), "empty stream: the prompt may exceed"),
    (answer(500, SECRET.encode()), "HTTP 500"),
    (answer(404, json.dumps({"error": SECRET}).encode()), "HTTP 404"),
]


@pytest.mark.parametrize("behaviour, detail", HOSTILE_BODIES)
def test_a_malformed_or_failed_reply_is_a_backend_error_that_never_echoes_the_body(stub, behaviour, detail):
    _, url = stub(behaviour)
    final = _http_run(url)
    assert final.stop_reason == StopReason.BACKEND_ERROR
    assert detail in final.final_answer and SECRET not in final.final_answer


def test_refused_connection_and_timeout_are_backend_errors(stub):
    port = free_port()
    final = _http_run(f"http://127.0.0.1:{port}/v1")
    assert final.stop_reason == StopReason.BACKEND_ERROR and "refused" in final.final_answer
    _, url = stub(answer(200, _completion({"content": "late"}), delay=1.0))
    start = time.perf_counter()
    final = _http_run(url, Settings(timeout_s=0.2))
    assert time.perf_counter() - start < 0.9
    assert final.stop_reason == StopReason.BACKEND_ERROR and "within 0.2 s (timed out)" in final.final_answer


# --- the wire format -------------------------------------------------------------------------------

def _delta(d: dict, finish=None) -> dict:
    return {"choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


def _call_delta(index, **fn):
    extra = {"id": f"call_{index}", "type": "function"} if "name" in fn else {}
    return _delta({"tool_calls": [{"index": index, **extra, "function": fn}]})


def test_a_stream_is_assembled_from_its_deltas_and_only_new_text_is_passed_on(stub):
    server, url = stub(events(
        _delta({"role": "assistant"}), _delta({"content": "Thought: "}), _delta({"content": "two cities."}),
        _call_delta(0, name="get_weather", arguments=""), _call_delta(1, name="get_weather"),
        _call_delta(0, arguments='{"city": '), _call_delta(1, arguments='{"city": "Paris"}'),
        _call_delta(0, arguments='"Berlin"}'), _delta({}, "tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 57, "completion_tokens": 30}}, "[DONE]"))
    pieces = []
    reply = _listed(url).complete(_berlin_prompt(), Settings(), pieces.append)
    assert pieces == ["Thought: ", "two cities."] and reply.text == "Thought: two cities."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("call_0", "get_weather", {"city": "Berlin"}), ("call_1", "get_weather", {"city": "Paris"})]
    assert reply.usage == Usage(57, 30, "server") and reply.finish_reason == "tool_calls"
    body = server.requests[0][2]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_a_stream_that_ends_before_its_finish_is_a_cut_reply_never_an_answer():
    """A stream with text but neither a finish_reason nor [DONE] (the server died, the proxy cut it):
    the loop stops with a backend error that says so. (Against a real server: the `served` tests.)"""
    cut = [f"data: {json.dumps(_delta({'content': w}))}\n".encode() for w in ("Once", " upon", " a")]
    with pytest.raises(remote.BackendError, match="^the reply was cut off after 3 tokens$"):
        remote.read_stream(iter(cut), None)
    whole = remote.read_stream(iter(cut + [f"data: {json.dumps(_delta({}, 'stop'))}\n".encode()]), None)
    assert (whole.text, whole.finish_reason, whole.from_server) == ("Once upon a", "stop", True)
    assert remote.read_stream(iter(cut + [b"data: [DONE]\n"]), None).text == "Once upon a"


def test_a_connection_lost_mid_reply_is_a_cut_reply():
    def failing():
        yield f"data: {json.dumps(_delta({'content': 'Once'}))}\n".encode()
        raise remote.ConnectionLost("the connection to http://x failed: ConnectionResetError")
    with pytest.raises(remote.BackendError, match="cut off after 1 token .*ConnectionResetError"):
        remote.read_stream(failing(), None)


def test_an_empty_200_stream_names_the_likely_cause_and_the_window(stub):
    """A fake server: an overflowing prompt answered with HTTP 200 and no event is what the issue saw
    from llama.cpp's server; no test here overflows the real one (tests/test_engine.py starts
    llama-cpp-python's), and transformers serve answers otherwise."""
    _, url = stub(answer(200, b"", ctype="text/event-stream"))
    backend = _listed(url)
    backend.context_window = 4096
    final = run(new_state("What's the weather in Berlin?", "act"), backend, (WEATHER_TOOL,))[-1]
    assert final.stop_reason == StopReason.BACKEND_ERROR
    assert final.final_answer.endswith("empty stream: the prompt may exceed the server's context window "
                                       "(4,096 tokens)")


@pytest.mark.parametrize("path, body, expected", [
    ("/props", {"default_generation_settings": {"n_ctx": 4096}}, ("llama.cpp", 4096, "/props n_ctx")),
    ("/v1/models", {"data": [{"id": "stub-model", "max_model_len": 32768, "owned_by": "vllm"}]},
     ("vLLM", 32768, "/v1/models max_model_len")),
    ("/nowhere", {}, ("unknown", 2048, "operator setting")),
])
def test_the_window_is_the_servers_own_else_the_operators(stub, path, body, expected):
    """Fake servers: llama.cpp's own llama-server's /props and vLLM's max_model_len, as their docs
    show them; neither is built or installed here (llama-cpp-python's server, tests/test_engine.py,
    has neither, nor has transformers serve: the operator's)."""
    def info(h):
        found = h.path == path
        answer(200 if found else 404, json.dumps(body if found else {"error": "no"}).encode())(h)
    server, url = stub(info)
    remote.configure([f"lab={url}"], free_url=False, context_window=2048)
    backend = remote.backend_for("lab", "stub-model", probe=True)
    assert (backend.info.kind, backend.context_window, backend.info.window_from) == expected
    assert remote.known_info("lab", "stub-model") == backend.info  # the views read it without a request
    state = new_state("q", "act", settings=Settings(context_budget=1_000_000))
    assert loop.context_budget(state, backend) == expected[1]  # never past the server's window


def test_tool_call_round_trip_with_a_server_that_does_not_stream(stub):
    berlin = {"content": None, "tool_calls": [{"id": "call_abc", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Berlin"}'}}]}
    server, url = stub(answer(200, _completion(berlin, (57, 12), "tool_calls")),
                       answer(200, _completion({"content": "It's 12°C and rainy in Berlin."}, (81, 9))))
    final = _http_run(url)
    assert final.final_answer == "It's 12°C and rainy in Berlin."
    assert final.usage == (Usage(57, 12, "server"), Usage(81, 9, "server"))
    (_, path1, first), (_, path2, second) = server.requests
    assert path1 == path2 == "/v1/chat/completions"
    assert first["model"] == "stub-model" and first["tools"] == [WEATHER_TOOL.schema()]
    assert first["tool_choice"] == "auto"  # llama.cpp's function-calling format renders tools only with one
    assert second["messages"][2:] == [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Berlin"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12°C, rainy"}]


def _refuses_null_content(reply):
    """llama.cpp's server: HTTP 500 for an assistant turn whose content is null, else `reply`."""
    def behave(h):
        sent = h.server.requests[-1][2]["messages"]
        if any(m["role"] == "assistant" and m.get("content") is None for m in sent):
            return answer(500, b'{"error": "content must be a string"}')(h)
        return reply(h)
    return behave


def test_a_constrained_stream_repeating_the_name_and_a_server_refusing_null_content(stub):
    """A fake server, for what no server here can be made to do on demand: llama.cpp's server
    repeats function.name in every chunk of a constrained call (tests/test_engine.py runs the real
    llama-cpp-python server's constrained call through the same assembly), and answers HTTP 500 to
    an assistant turn sent with "content": null. The Berlin run must come through both."""
    name = {"id": "call_x", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    repeat = [_delta({"tool_calls": [{**name, "index": 0, "function": {"name": "get_weather", "arguments": a}}]})
              for a in ('{"city":', ' "Berlin"', '}')]
    server, url = stub(_refuses_null_content(events(_delta({"tool_calls": [{**name, "index": 0}]}), *repeat,
                                                    _delta({}, "tool_calls"), "[DONE]")),
                       _refuses_null_content(events(_delta({"content": "12°C and rainy."}, "stop"), "[DONE]")))
    final = _http_run(url)
    assert final.replies[0].tool_calls[0].name == "get_weather"
    assert json.loads(final.replies[0].tool_calls[0].arguments) == {"city": "Berlin"}
    assert (final.stop_reason, final.final_answer) == (StopReason.FINAL_ANSWER, "12°C and rainy.")
    assert server.requests[1][2]["messages"][2]["content"] == ""


def _no_usage_run(stub, tokenizer):
    """A fake server: llama.cpp's stream sends no usage chunk; transformers serve always does."""
    _, url = stub(events(_delta({"content": "It is twelve degrees"}, "stop"), "[DONE]"))
    remote.configure([f"lab={url}"], free_url=False)
    backend = remote.backend_for("lab", "stub-model", tokenizer)
    return run(new_state("What's the weather in Berlin?", "act"), backend, (WEATHER_TOOL,))[-1]


def test_without_a_usage_chunk_the_count_is_a_said_estimate(stub):
    """(The budget view then says so: tests/test_react_views.py.)"""
    usage = _no_usage_run(stub, None).usage[-1]
    assert (usage.source, usage.completion_tokens) == ("estimate", 5)  # ⌈20 characters / 4⌉


def test_without_a_usage_chunk_the_bundled_models_tokenizer_counts(stub, tok):
    usage = _no_usage_run(stub, tok).usage[-1]
    assert usage.source == "tokenizer" and usage.completion_tokens == len(tok("It is twelve degrees")["input_ids"])


@pytest.mark.parametrize("kind, tools, first, later, says", [
    ("llama.cpp", (WEATHER_TOOL,), {"type": "function", "function": {"name": "get_weather"}}, "auto",
     "server-side: tool_choice names get_weather"),
    ("llama.cpp", TOOLS, "auto", "auto", "no effect on this call: llama.cpp constrains a call only to one"),
    ("vLLM", TOOLS, "required", "auto", 'server-side: tool_choice "required"'),
    ("unknown", (WEATHER_TOOL,), "auto", "auto", "no effect on this backend"),
    ("llama-cpp-python", (WEATHER_TOOL,), {"type": "function", "function": {"name": "get_weather"}}, "auto",
     "server-side: tool_choice names get_weather"),
])
def test_constrained_tool_calls_send_the_servers_own_constraint_and_the_page_says_which(kind, tools, first,
                                                                                     later, says):
    backend = OpenAIBackend("http://h:1", "m", info=remote.ServerInfo(kind))
    start = new_state("What's the weather in Berlin?", "act", settings=Settings(constrained=True))
    state = step(start, ScriptedBackend(()), tools)
    assert backend.request_body(build_prompt(state, tools), state.settings)["tool_choice"] == first
    observed = replace(state, history=state.history + (
        AssistantMessage(tool_calls=(ToolCall("call_1", "get_weather", '{"city": "Berlin"}'),)),
        ToolResultMessage("call_1", "12°C")))
    assert backend.request_body(build_prompt(observed, tools), state.settings)["tool_choice"] == later
    assert backend.request_body(build_prompt(state, tools), Settings())["tool_choice"] == "auto"
    remote._infos[("lab", "m")] = (time.monotonic(), remote.ServerInfo(kind))
    session = react_run.Session((start, state), 1, tools, react_run.BackendSpec(react_run.REMOTE, url="lab", model="m"),
                                "Berlin")
    view = html.unescape(rv.template_view(react_run.frame_of(session, FAKE_LM)))
    assert f"⚠ Constrained tool calls: {says}" in view


def test_llama_cpp_python_gets_a_whole_reply_where_the_model_may_choose_a_tool_and_the_page_says_so():
    """Its chatml-function-calling format raises "Automatic streaming tool choice is not supported"
    on a streamed "auto" request (seen against the real server: HTTP 200, no event): such a request
    asks for the whole reply; a call constrained by name still streams."""
    backend = OpenAIBackend("http://h:1", "m", info=remote.ServerInfo("llama-cpp-python"))
    start = new_state("What's the weather in Berlin?", "act", settings=Settings(constrained=True))
    state = step(start, ScriptedBackend(()), (WEATHER_TOOL,))
    named = backend.request_body(build_prompt(state, (WEATHER_TOOL,)), state.settings)
    auto = backend.request_body(build_prompt(state, (WEATHER_TOOL,)), Settings())
    assert named["stream"] is True and named["stream_options"] == {"include_usage": True}
    assert auto["stream"] is False and "stream_options" not in auto
    remote._infos[("lab", "m")] = (time.monotonic(), remote.ServerInfo("llama-cpp-python"))
    for settings, says in ((state.settings, False), (Settings(), True)):
        shown = replace(state, settings=settings)
        session = react_run.Session((start, shown), 1, (WEATHER_TOOL,),
                                    react_run.BackendSpec(react_run.REMOTE, url="lab", model="m"), "Berlin")
        view = html.unescape(rv.template_view(react_run.frame_of(session, FAKE_LM)))
        assert ("this reply does not stream" in view) is says


def test_a_server_prompt_count_without_the_tools_block_is_named_in_the_template_view():
    """The issue's numbers: the server counted 87 prompt tokens where the rendered prompt holds ~500."""
    state = step(new_state("What's the weather in Berlin?", "act"), ScriptedBackend(()), TOOLS)
    prompt = build_prompt(state, TOOLS)
    composition = loop._prompt_counts(loop._count(state, prompt, ScriptedBackend(())))
    for reported, shown in ((87, True), (sum(composition.values()), False)):
        after = replace(state, usage=(Usage(reported, 9, "server"),), composition=(composition,))
        session = react_run.Session((state, after), 1, TOOLS, react_run.BackendSpec(react_run.REMOTE, url="lab",
                                                                                    model="m"), "Berlin")
        view = html.unescape(rv.template_view(react_run.frame_of(session, FAKE_LM)))
        assert ("⚠ this server's chat template did not render the tools: it counted 87" in view) is shown


def test_react_format_sends_its_stop_sequence_and_no_tools(stub):
    server, url = stub(events(_delta({"content": "Thought: known.\nAction: finish[rainy]"}), "[DONE]"))
    final = _http_run(url, fmt="react", tools=TOOLS)
    body = server.requests[0][2]
    assert "tools" not in body and body["stop"] == ["\nObservation:"]
    assert (final.stop_reason, final.final_answer) == (StopReason.FINISH, "rainy")


def test_ollama_style_object_arguments_become_a_json_string():
    raw = _completion({"content": "", "tool_calls": [{"function": {"name": "get_weather",
                                                                    "arguments": {"city": "Berlin"}}}]})
    assert parse_chat_completion(raw).tool_calls[0].arguments == '{"city": "Berlin"}'


def test_base_url_with_or_without_v1():
    assert OpenAIBackend("http://h:11434", "m").url == OpenAIBackend("http://h:11434/v1/", "m").url \
        == "http://h:11434/v1/chat/completions"


def test_the_model_list_comes_from_the_listed_server(stub):
    server, url = stub(answer(200, json.dumps({"object": "list", "data": [
        {"id": "qwen2.5:7b"}, {"id": "smollm2"}]}).encode()))
    remote.configure([f"ollama={url}"], free_url=False)
    assert remote.list_models("ollama") == ("qwen2.5:7b", "smollm2")
    assert server.requests[0][:2] == ("GET", "/v1/models")


def test_configure_reads_urls_and_labels_and_refuses_other_schemes():
    remote.configure(["ollama=http://127.0.0.1:11434/v1", " https://api.example.com/v1 ", ""], True)
    assert remote.servers() == (remote.Server("ollama", "http://127.0.0.1:11434/v1"),
                                remote.Server("api.example.com:443", "https://api.example.com/v1"))
    with pytest.raises(RemoteRefused):
        remote.configure(["file:///etc/passwd"], False)


def test_a_model_name_is_bounded():
    remote.configure(["lab=http://127.0.0.1:1/v1"], False)
    for bad in ("", " ", "m" * 201):
        with pytest.raises(RemoteRefused, match="1 to 200"):
            remote.backend_for("lab", bad)


# --- a real OpenAI-compatible server: transformers serve -------------------------------------------

@pytest.fixture(scope="module")
def served_folder(lm, tmp_path_factory) -> Path:
    """The bundled model's cached folder as `transformers serve` reads it (+ architectures), under
    the bundled model's name, so the lab knows it serves the bundled model."""
    from agent.llm.model import _gguf_cache_dir, bundled_gguf, cache_is_valid

    cached = _gguf_cache_dir(bundled_gguf())
    assert cache_is_valid(cached)
    folder = tmp_path_factory.mktemp("served") / lm.name
    folder.mkdir()
    for f in cached.iterdir():
        if f.name not in ("config.json", "manifest.json"):
            os.symlink(f, folder / f.name)
    config = json.loads((cached / "config.json").read_text())
    config.pop("quantization_config", None)  # the cache holds plain float weights
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["LlamaForCausalLM"]}))
    return folder


def start_serve(folder: Path) -> tuple[subprocess.Popen, str]:
    """`transformers serve` on a free loopback port, offline; (process, base URL) once /health answers."""
    port = free_port()
    cli = shutil.which("transformers", path=str(Path(sys.executable).parent))
    proc = subprocess.Popen([cli, "serve", str(folder), "--host", "127.0.0.1", "--port", str(port),
                             "--device", "cpu", "--dtype", "float32"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            urllib.request.urlopen(url + "/health", timeout=2).read()
            return proc, url
        except OSError:
            time.sleep(1)
    proc.kill()
    pytest.fail(f"transformers serve did not start: {proc.stderr.read().decode()[-2000:]}")


def stop_serve(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest.fixture(scope="module")
def served(served_folder):
    """(base URL, model id) of a `transformers serve` shared by this module's tests."""
    proc, url = start_serve(served_folder)
    yield url, str(served_folder)
    stop_serve(proc)


@pytest.mark.model
def test_berlin_runs_end_to_end_on_a_real_openai_compatible_server(served, lm):
    """transformers serve: its model info says no window, and its chat template (SmolLM2's) drops
    the tools — its own prompt count shows it, and the template view says so."""
    url, model = served
    remote.configure([f"serve={url}"], free_url=False)
    assert model in remote.list_models("serve")
    backend = remote.backend_for("serve", model, lm.tokenizer, probe=True)
    assert backend.info == remote.ServerInfo("unknown", None, "")
    pieces = []
    state = new_state("What's the weather in Berlin?", "act", "native",
                      Settings(max_steps=2, max_new_tokens=24, constrained=True))
    states = run(state, backend, TOOLS, on_token=pieces.append)
    final = states[-1]
    assert final.done and final.stop_reason not in (StopReason.BACKEND_ERROR, None)
    assert len(pieces) > 1 and final.usage and all(u.source == "server" for u in final.usage)
    assert all(u.prompt_tokens > 0 and 0 < u.completion_tokens <= 24 for u in final.usage)
    session = react_run.Session(states, len(states) - 1, TOOLS,
                                react_run.BackendSpec(react_run.REMOTE, url="serve", model=model), "Berlin")
    view = html.unescape(rv.template_view(react_run.frame_of(session, lm)))
    assert "⚠ this server's chat template did not render the tools" in view
    assert "⚠ Constrained tool calls: no effect on this backend" in view


@pytest.mark.model
def test_a_real_server_streams_token_by_token_and_reports_its_usage(served):
    url, model = served
    remote.configure([f"serve={url}"], free_url=False)
    pieces = []
    reply = remote.backend_for("serve", model).complete(_berlin_prompt(), Settings(max_new_tokens=16),
                                                        pieces.append)
    assert len(pieces) >= 4 and "".join(pieces) == reply.text
    assert reply.usage.source == "server"  # the server's own count, not an estimate
    assert reply.usage.completion_tokens == 16 or reply.finish_reason == "stop"


@pytest.mark.model
def test_a_real_servers_length_stop_is_shown_as_such(served):
    url, model = served
    remote.configure([f"serve={url}"], free_url=False)
    state = new_state("Tell me a long story about a dragon.", "act", "native",
                      Settings(max_steps=1, max_new_tokens=6))
    final = run(state, remote.backend_for("serve", model), ())[-1]
    assert final.stop_reason == StopReason.TOKEN_LIMIT_SERVER and final.replies[-1].finish_reason == "length"
    assert final.final_answer == "stopped: token limit (server)"
    assert final.usage[-1].source == "server" and final.usage[-1].completion_tokens == 6


@pytest.mark.model
def test_a_server_killed_mid_reply_is_a_cut_reply_not_an_answer(served_folder):
    """The issue's "killing the server 1.5 s into a reply": here at its third streamed token."""
    proc, url = start_serve(served_folder)
    pieces: list[str] = []

    def on_token(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 3:
            proc.kill()
    try:
        remote.configure([f"serve={url}"], free_url=False)
        state = new_state("Tell me a long story about a dragon.", "act", "native",
                          Settings(max_steps=1, max_new_tokens=200))
        final = run(state, remote.backend_for("serve", str(served_folder)), (), on_token=on_token)[-1]
    finally:
        stop_serve(proc)
    assert final.stop_reason == StopReason.BACKEND_ERROR, final.final_answer
    n = int(re.search(r"^stopped: backend error: the reply was cut off after (\d+) tokens", final.final_answer)[1])
    assert n >= 3 and len(pieces) == n


# --- the app as on a Space, through its own API ----------------------------------------------------

def _react_inputs(api: dict, endpoint: str, by_label: dict) -> list:
    """The endpoint's inputs (from client.view_api): their defaults, those named by label replaced."""
    return [by_label.get(p["label"], p.get("parameter_default")) for p in api[endpoint]["parameters"]]


@pytest.mark.model
@pytest.mark.browser
def test_on_a_space_a_visitors_server_url_sends_zero_requests(app_url, stub):
    from gradio_client import Client

    import app as app_module

    app_module.configure_remote(app_module.parse_args(["--host", "127.0.0.1"]), env={"SPACE_ID": "u/react-lab"})
    assert not remote.free_url_allowed() and remote.servers() == ()
    listener, listener_url = stub(answer(200, _completion({"content": SECRET})))
    port = listener.server_address[1]
    client = Client(app_url, verbose=False)
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    timings, stop, nexting = [], threading.Event(), threading.Event()
    # One warm /config first, so that no one-time cost of the route is timed below.
    urllib.request.urlopen(app_url + "config", timeout=30).read()

    def cheap():  # another visitor's cheap request, while the hostile Next runs
        while not stop.is_set():
            if not nexting.wait(0.05):
                continue
            start = time.perf_counter()
            urllib.request.urlopen(app_url + "config", timeout=5).read()
            timings.append(time.perf_counter() - start)
            time.sleep(0.1)

    prober = threading.Thread(target=cheap, daemon=True)
    prober.start()
    try:
        for host in ("127.0.0.1", "127.1", "localhost", "[::1]", "0.0.0.0", "2130706433", "0x7f.0.0.1"):
            url = f"http://{host}:{port}/v1"
            inputs = _react_inputs(api, "/on_reset", {"Backend": "OpenAI-compatible server",
                                                         "Server URL": url, "Server model": "m"})
            client.predict(*inputs, api_name="/on_reset")
            start = time.perf_counter()
            nexting.set()
            out = client.predict(*_react_inputs(api, "/on_next", {}), api_name="/on_next")
            nexting.clear()
            assert time.perf_counter() - start < 5
            page = json.dumps(out)
            assert "operator listed" in page and SECRET not in page, page[:500]
    finally:
        stop.set()
        prober.join(6)
    assert listener.requests == []
    # Never blocked behind the Next: the typical cheap request stays fast, and none waits out a
    # hostile call. One CI run saw a single 1.19 s outlier among ~0.05 s ones (in the full suite; alone it
    # never showed), so the bound is on the median, with a ceiling for the worst.
    assert timings, "no cheap request was timed"
    assert statistics.median(timings) < 0.5 and max(timings) < 3.0, timings


@pytest.mark.model
def test_every_response_carries_the_security_headers(app_url):
    with urllib.request.urlopen(app_url, timeout=10) as r:
        headers = r.headers
    assert "frame-ancestors" in headers["Content-Security-Policy"]
    assert "object-src 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "strict-origin-when-cross-origin"
    assert headers["X-Frame-Options"] == "SAMEORIGIN"
    with urllib.request.urlopen(app_url + "config", timeout=10) as r:
        assert r.headers["X-Content-Type-Options"] == "nosniff"


def test_analytics_are_off():
    import gradio as gr

    import app  # noqa: F401 — importing it sets the default before gradio makes a Blocks

    assert os.environ["GRADIO_ANALYTICS_ENABLED"] == "False"
    assert gr.Blocks().analytics_enabled is False


def test_mode_detection_and_the_opt_in():
    import app

    def configured(argv, env):
        app.configure_remote(app.parse_args(argv), env)
        return remote.free_url_allowed(), remote._config["free_allow"]

    assert configured([], {}) == (True, remote.LOCAL)  # make run: loopback, no SPACE_ID
    assert configured(["--host", "0.0.0.0"], {}) == (False, remote.PUBLIC)
    assert configured([], {"SPACE_ID": "u/s"}) == (False, remote.PUBLIC)
    assert configured(["--allow-any-remote"], {"SPACE_ID": "u/s"}) == (True, remote.PUBLIC)
    assert configured(["--remote", "a=http://10.0.0.2:8000,http://10.0.0.3:8000"], {"SPACE_ID": "u/s"})[0] is False
    assert [s.label for s in remote.servers()] == ["a", "10.0.0.3:8000"]


@pytest.mark.model
@pytest.mark.browser
def test_the_page_works_under_its_content_security_policy(browser, app_url):
    """Both tabs load and answer a click in Chromium with no CSP violation reported."""
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    pg = context.new_page()
    violations, errors = [], []
    pg.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.add_init_script("document.addEventListener('securitypolicyviolation', e => console.error("
                       "'Content Security Policy: ' + e.violatedDirective + ' ' + e.blockedURI))")
    try:
        pg.goto(app_url)
        pg.locator("#rl-help").wait_for(state="attached", timeout=30_000)  # the page's own JS ran
        pg.get_by_role("tab", name="ReAct loop").click()
        before = pg.locator("#react-history").inner_text()
        pg.locator("#react-next").click()
        pg.wait_for_function("(b) => document.querySelector('#react-history').innerText !== b", arg=before,
                             timeout=30_000)
        pg.get_by_role("tab", name="Sampling").click()
        pg.wait_for_timeout(500)
        assert violations == [] and errors == []
    finally:
        context.close()
