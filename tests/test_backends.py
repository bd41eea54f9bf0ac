"""Backends: scripted replay of recorded runs, an OpenAI-compatible server (a stub speaking the real
wire format on 127.0.0.1), and the bundled model (marked `model`)."""

import dataclasses
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent.backends import (
    BackendError,
    BackendReply,
    LocalBackend,
    OpenAIBackend,
    ScriptedBackend,
    Settings,
    _Stream,
    parse_chat_completion,
)
from agent.budget import Usage
from agent.loop import StopReason, build_prompt, new_state, run, step
from agent.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage, pairing_violations
from agent.parsing import parse_reply
from agent.recording import FORMAT, load_run, record_run, replay, run_from_dict, save_run, shipped_runs, tools_of
from agent.template import Fmt, Prompt, render_prompt
from agent.tools import TOOLS, WEATHER_TOOL
from agent.validation import validate_call

# --- scripted replay and recorded runs -----------------------------------------------------------


def test_shipped_runs_include_the_lecture_trace_and_a_search_and_an_arithmetic_run():
    assert {"berlin-weather", "two-hop-search", "arithmetic"} <= set(shipped_runs())


def test_shipped_berlin_run_is_the_lectures_trace():
    recorded = load_run(shipped_runs()["berlin-weather"])
    assert recorded.history[1:] == (
        UserMessage("What's the weather in Berlin?"),
        AssistantMessage(tool_calls=(ToolCall("call_1", "get_weather", '{"city": "Berlin"}'),)),
        ToolResultMessage("call_1", "12°C, rainy"),
        AssistantMessage("It's 12°C and rainy in Berlin."))


@pytest.mark.parametrize("stem", sorted(shipped_runs()))
def test_every_shipped_run_replays_to_its_recorded_history(stem):
    recorded = load_run(shipped_runs()[stem])
    final = replay(recorded)[-1]
    assert final.history == recorded.history
    assert (final.stop_reason, final.final_answer) == (recorded.stop_reason, recorded.final_answer)
    assert pairing_violations(final.history) == []


def test_two_hop_run_answers_from_the_encyclopedia():
    final = replay(load_run(shipped_runs()["two-hop-search"]))[-1]
    assert (final.stop_reason, final.final_answer) == (StopReason.FINISH, "Cuba")
    assert "Santiago de las Vegas, near Havana, Cuba" in final.history[5].content


def test_record_save_load_round_trip(tmp_path):
    recorded = load_run(shipped_runs()["arithmetic"])
    final = replay(recorded)[-1]
    path = save_run(record_run(final, tools_of(recorded), recorded.title, recorded.description), tmp_path / "r.json")
    again = load_run(path)
    assert again.usage == final.usage  # counted anew: estimates here, the tokenizer's when recorded
    assert dataclasses.replace(again, usage=recorded.usage) == recorded
    assert json.loads(path.read_text(encoding="utf-8"))["format"] == FORMAT


def test_loading_refuses_another_format():
    with pytest.raises(ValueError, match="not a recorded run"):
        run_from_dict({"format": "something-else/2"})


def test_scripted_reply_depends_on_the_prompt_not_on_call_order():
    backend = ScriptedBackend((BackendReply("first"), BackendReply("second")))
    prompt1 = Prompt((UserMessage("q"),))
    prompt2 = Prompt((UserMessage("q"), AssistantMessage("first"), UserMessage("again")))
    assert [backend.complete(p, Settings()).text for p in (prompt2, prompt1, prompt2)] == ["second", "first", "second"]


def test_scripted_backend_streams_the_reply_and_reports_an_exhausted_script():
    pieces = []
    backend = ScriptedBackend((BackendReply("It's 12°C and rainy."),))
    backend.complete(Prompt((UserMessage("q"),)), Settings(), pieces.append)
    assert "".join(pieces) == "It's 12°C and rainy." and len(pieces) == 4
    with pytest.raises(BackendError, match="the script has no reply #2: it holds 1"):
        backend.complete(Prompt((UserMessage("q"), AssistantMessage("x"))), Settings())


# --- an OpenAI-compatible server: a stub on 127.0.0.1 --------------------------------------------

def _completion(message: dict, usage=(57, 12), finish="stop") -> bytes:
    return json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "stub",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }).encode()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append((self.path, json.loads(body)))
        status, payload, delay = self.server.script.pop(0)
        time.sleep(delay)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub():
    """Start a stub server answering with a script of (status, body, delay); yields its base URL."""
    servers = []

    def start(*script):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.script, server.requests = list(script), []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server, f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


BERLIN_CALL = {"content": None, "tool_calls": [{"id": "call_abc", "type": "function", "function": {
    "name": "get_weather", "arguments": '{"city": "Berlin"}'}}]}


def _http_run(url, settings=None, fmt="native", tools=(WEATHER_TOOL,)):
    state = new_state("What's the weather in Berlin?", "act", fmt, settings or Settings())
    return run(state, OpenAIBackend(url, "stub-model"), tools)[-1]


def test_http_tool_call_round_trip_in_the_openai_wire_format(stub):
    server, url = stub((200, _completion(BERLIN_CALL, (57, 12), "tool_calls"), 0),
                       (200, _completion({"content": "It's 12°C and rainy in Berlin."}, (81, 9)), 0))
    final = _http_run(url)
    assert final.final_answer == "It's 12°C and rainy in Berlin."
    assert final.usage == (Usage(57, 12, "server"), Usage(81, 9, "server"))
    (path1, first), (path2, second) = server.requests
    assert path1 == path2 == "/v1/chat/completions"
    assert first["model"] == "stub-model" and first["tools"] == [WEATHER_TOOL.schema()]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert second["messages"][2:] == [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_weather", "arguments": '{"city": "Berlin"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "12°C, rainy"}]


def test_http_react_format_sends_text_stop_sequence_and_no_tools(stub):
    server, url = stub((200, _completion({"content": "Thought: known.\nAction: finish[rainy]"}), 0))
    final = _http_run(url, fmt="react", tools=TOOLS)
    body = server.requests[0][1]
    assert "tools" not in body and body["stop"] == ["\nObservation:"]
    assert (final.stop_reason, final.final_answer) == (StopReason.FINISH, "rainy")


def test_http_refused_connection_is_a_backend_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    final = _http_run(f"http://127.0.0.1:{port}/v1")
    assert final.stop_reason == StopReason.BACKEND_ERROR
    assert final.final_answer.startswith(f"stopped: backend error: cannot reach http://127.0.0.1:{port}/v1/chat")
    assert "refused" in final.final_answer.lower()


def test_http_timeout_is_a_backend_error(stub):
    _, url = stub((200, _completion({"content": "late"}), 1.0))
    start = time.perf_counter()
    final = _http_run(url, Settings(timeout_s=0.2))
    assert time.perf_counter() - start < 0.9
    assert final.stop_reason == StopReason.BACKEND_ERROR and "within 0.2 s (timed out)" in final.final_answer


@pytest.mark.parametrize("status", [404, 500])
def test_http_error_status_is_a_backend_error(stub, status):
    _, url = stub((status, b'{"error": "model not loaded"}', 0))
    final = _http_run(url)
    assert final.stop_reason == StopReason.BACKEND_ERROR
    assert f"answered HTTP {status}" in final.final_answer and "model not loaded" in final.final_answer


@pytest.mark.parametrize("body, detail", [
    (b"<html>not json</html>", "JSONDecodeError"),
    (b'{"choices": []}', "IndexError"),
    (b'{"choices": [{"message": {"content": 42}}]}', "content is int"),
    (b'{"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}', "KeyError"),
])
def test_http_malformed_reply_is_a_backend_error(stub, body, detail):
    _, url = stub((200, body, 0))
    final = _http_run(url)
    assert final.stop_reason == StopReason.BACKEND_ERROR
    assert "malformed reply from" in final.final_answer and detail in final.final_answer


def test_ollama_style_object_arguments_become_a_json_string():
    raw = _completion({"content": "", "tool_calls": [{"function": {"name": "get_weather",
                                                                    "arguments": {"city": "Berlin"}}}]})
    assert parse_chat_completion(raw).tool_calls[0].arguments == '{"city": "Berlin"}'


def test_base_url_with_or_without_v1():
    assert OpenAIBackend("http://h:11434", "m").url == OpenAIBackend("http://h:11434/v1/", "m").url \
        == "http://h:11434/v1/chat/completions"


# --- the bundled model ---------------------------------------------------------------------------

def _berlin_prompt(fmt="native", tools=(WEATHER_TOOL,)):
    """The prompt of the first model call: system + user, after line 1."""
    after_user = step(new_state("What's the weather in Berlin?", "act", fmt), ScriptedBackend(()), tools)
    return build_prompt(after_user, tools)


@pytest.mark.model
def test_local_backend_counts_the_rendered_prompt_and_streams_its_reply(lm):
    prompt, pieces = _berlin_prompt(), []
    reply = LocalBackend(lm).complete(prompt, Settings(max_new_tokens=24), pieces.append)
    assert reply.usage.prompt_tokens == len(lm.encode(render_prompt(lm.tokenizer, prompt)))
    assert 0 < reply.usage.completion_tokens <= 24 and reply.finish_reason in ("stop", "length")
    assert "".join(pieces) == reply.text and "<|im_end|>" not in reply.text


@pytest.mark.model
def test_local_backend_greedy_is_deterministic(lm):
    backend = LocalBackend(lm)
    settings = Settings(max_new_tokens=12)
    assert backend.complete(_berlin_prompt(), settings).text == backend.complete(_berlin_prompt(), settings).text


def test_stream_cuts_at_the_stop_sequence_and_never_streams_part_of_it():
    pieces = []
    stream = _Stream(("\nObservation:", "<|im_end|>"), pieces.append)
    decoded = "Thought: t\nAction: search[X]\nObservation: invented"
    hits = [stream.update(decoded[:n]) for n in range(1, len(decoded) + 1)]
    assert hits.index(True) == decoded.index("\nObservation:") + len("\nObservation:") - 1
    assert stream.finish() == "".join(pieces) == "Thought: t\nAction: search[X]"


def test_stream_holds_back_an_unfinished_character():
    pieces = []
    stream = _Stream((), pieces.append)
    stream.update("12\ufffd")
    stream.update("12°C")
    assert pieces == ["12", "°C"]


@pytest.mark.model
def test_local_backend_react_reply_stops_before_inventing_the_observation(lm):
    reply = LocalBackend(lm).complete(_berlin_prompt("react"), Settings(max_new_tokens=24, temperature=0.8, seed=3))
    assert "\nObservation:" not in reply.text


@pytest.mark.model
def test_local_backend_wall_clock_limit(lm):
    reply = LocalBackend(lm).complete(_berlin_prompt(), Settings(timeout_s=0.0))
    assert reply.finish_reason == "time" and reply.usage.completion_tokens == 0


@pytest.mark.model
def test_constrained_native_reply_is_a_valid_tool_call(lm):
    reply = LocalBackend(lm).complete(_berlin_prompt(), Settings(max_new_tokens=40, constrained=True))
    parsed = parse_reply(reply.text, Fmt.NATIVE)
    assert parsed.error == "" and len(parsed.tool_calls) == 1
    assert validate_call(parsed.tool_calls[0], (WEATHER_TOOL,)).ok


@pytest.mark.model
def test_loop_runs_on_the_local_model_and_keeps_the_pairing_invariant(lm):
    state = new_state("What's the weather in Berlin?", "act", "native", Settings(max_steps=2, max_new_tokens=32))
    final = run(state, LocalBackend(lm), TOOLS)[-1]
    assert final.done and final.stop_reason != StopReason.BACKEND_ERROR
    assert pairing_violations(final.history, allow_pending=True) == []
    assert all(u.source == "model" for u in final.usage) and len(final.usage) == final.step
