"""Fair shares and the server's own guards (issue 21): the model events in the batcher's group, a
flood of uploaded code runs that leaves another student's replay fast, DNS rebinding refused on a
loopback bind, uploads limited per client.

Against the real app (launched on loopback by tests/conftest.py) and its real sandbox.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

import app
from agent import enforcing, recording
from agent.llm import batching
from tests.page_api import outside_any_loop

MODEL_API_NAMES = ("run_prompt", "example", "sample", "greedy", "back", "reroll", "pick", "seed", "constraint",
                   "apply_grammar", "sample_n")
REACT_API_NAMES = ("on_next", "on_run", "on_approve", "on_deny")


def test_a_partial_listener_is_named_by_its_function():
    import functools

    def on_next(p, lm, s):
        return s

    assert app.handler_name(functools.partial(functools.partial(on_next, 1), 2)) == "on_next"


@pytest.mark.model
def test_every_model_event_is_in_the_batchers_group(app_demo):
    demo = app_demo[0]
    groups = {fn.api_name: (fn.concurrency_id, fn.concurrency_limit) for fn in demo.fns.values()}
    for name in MODEL_API_NAMES:
        assert groups[name] == (batching.CONCURRENCY_ID, batching.MAX_BATCH), name
    for name in REACT_API_NAMES:  # a reply holds its place for seconds: not one of the presses' places
        assert groups[name] == (app.REACT_GROUP, app.REACT_REPLIES), name
    for fn in demo.fns.values():
        if fn.fn is not None and app.handler_name(fn.fn) in app.MODEL_EVENTS and fn.api_name != "spec_run":
            assert fn.concurrency_id in (batching.CONCURRENCY_ID, app.REACT_GROUP, "speculative"), fn.api_name
    assert groups["asking"] == ("asking", enforcing.ASKING_SESSIONS)


def _request(url: str, host: str | None) -> int:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.mark.model
@pytest.mark.parametrize("host", ["evil.example", "evil.example:7860", "127.0.0.1.evil.example", "localhost.evil"])
def test_a_rebinding_host_gets_4xx_in_local_mode(app_url, host):
    assert 400 <= _request(app_url + "config", host) < 500


@pytest.mark.model
@pytest.mark.parametrize("host", [None, "localhost", "LOCALHOST:1", "[::1]:7860"])
def test_loopback_hosts_are_served(app_url, host):
    assert _request(app_url + "config", host) == 200


def test_a_public_bind_does_not_check_the_host():
    middleware = app.launch_kwargs("0.0.0.0", env={})["app_kwargs"]["middleware"]
    assert app.LoopbackHostOnly not in [m.cls for m in middleware]
    middleware = app.launch_kwargs("127.0.0.1", env={})["app_kwargs"]["middleware"]
    assert app.LoopbackHostOnly in [m.cls for m in middleware]


def test_uploads_past_the_limit_get_429_per_client():
    seen = []

    async def inner(scope, receive, send):
        seen.append(scope["path"])

    async def run(client: str, n: int) -> list[int]:
        statuses = []
        for _ in range(n):
            sent = []

            async def send(message, sent=sent):
                sent.append(message)
            scope = {"type": "http", "path": app.UPLOAD_PATH, "headers": [], "client": (client, 1)}
            await guard(scope, None, send)
            statuses.append(sent[0]["status"] if sent else 200)
        return statuses

    guard = app.UploadLimit(inner, per_minute=3)
    with ThreadPoolExecutor(1) as pool:  # a loop of its own: the suite may run one in this thread
        assert pool.submit(asyncio.run, run("10.0.0.1", 5)).result() == [200, 200, 200, 429, 429]
        assert pool.submit(asyncio.run, run("10.0.0.2", 1)).result() == [200]  # another client's own share
    assert len(seen) == 4


def _slow_code_run() -> dict:
    """An upload with MAX_CODE_CALLS_PER_RUN run_python calls, each spinning to its wall clock."""
    n = recording.MAX_CODE_CALLS_PER_RUN
    calls = [{"name": "run_python", "arguments": {"code": f"while True:\n    pass  # {i}"}} for i in range(n)]
    replies = [{"text": "Thought: spin.\n<tool_call>" + json.dumps(call) + "</tool_call>", "finish_reason": "stop"}
               for call in calls] + [{"text": "done", "finish_reason": "stop"}]
    return {"format": recording.FORMAT, "title": "spin", "user_input": "spin", "mode": "react", "fmt": "native",
            "settings": {"max_steps": n + 2}, "tools": ["run_python", "finish"], "replies": replies, "history": []}


def _inputs(api: dict, endpoint: str, by_label: dict | None = None) -> list:
    return [(by_label or {}).get(p["label"], p.get("parameter_default")) for p in api[endpoint]["parameters"]]


@pytest.mark.model
@pytest.mark.browser
def test_four_flooding_sessions_leave_a_victims_replay_fast(app_url, tmp_path):
    """Four sessions each upload a run of slow run_python calls and press Run to end; a fifth
    student's Berlin replay (Reset, Run to end) finishes within 30 s."""
    from gradio_client import Client, handle_file

    path = tmp_path / "spin.json"
    path.write_text(json.dumps(_slow_code_run()), encoding="utf-8")
    started = threading.Barrier(5)

    def attacker():
        c = Client(app_url, verbose=False)
        api = c.view_api(return_format="dict", print_info=False)["named_endpoints"]
        c.predict(handle_file(str(path)), False, api_name="/on_load")
        started.wait(30)
        return c.predict(*_inputs(api, "/on_run"), api_name="/on_run")

    with ThreadPoolExecutor(4) as pool:
        floods = [pool.submit(attacker) for _ in range(4)]
        victim = Client(app_url, verbose=False)
        api = victim.view_api(return_format="dict", print_info=False)["named_endpoints"]
        victim.predict(*_inputs(api, "/on_reset"), api_name="/on_reset")
        started.wait(30)
        time.sleep(1.0)  # the floods are running
        start = time.monotonic()
        out = victim.predict(*_inputs(api, "/on_run"), api_name="/on_run")
        took = time.monotonic() - start
        for f in floods:
            f.result(timeout=120)
    assert "12°C and rainy in Berlin" in json.dumps(out, ensure_ascii=False)
    assert took < 30, f"the victim's replay took {took:.1f} s"


def test_an_upload_with_too_many_code_calls_is_refused():
    run = _slow_code_run()
    run["replies"].insert(0, run["replies"][0])
    with pytest.raises(recording.RunTooLarge, match="run_python calls; the limit is 8"):
        recording.run_from_dict(run)


def test_a_left_out_output_is_skipped_without_rebuilding_its_component(monkeypatch):
    """Issue 25: app.lean_skips answers a partial {component: value} exactly as Gradio does (the left-out
    outputs as {"__type__": "update"}, the State kept) without constructing a component per left-out
    output; full answers and single outputs take Gradio's own path."""
    import gradio as gr
    from gradio.state_holder import SessionState

    with gr.Blocks() as demo:
        state = gr.State(0)
        views = [gr.HTML(f"<p>view {i}</p>") for i in range(5)]
        button = gr.Button()
        button.click(lambda: None, None, [state, *views])
    fn = next(iter(demo.fns.values()))
    answers = [{state: 7, views[0]: "<b>new</b>", views[3]: "<i>also</i>"}, {views[1]: "<b>one</b>"},
               {state: 8, **{v: f"<u>{i}</u>" for i, v in enumerate(views)}}]
    expected = [outside_any_loop(demo.postprocess_data(fn, dict(a), SessionState(demo))) for a in answers]
    app.lean_skips(demo)
    built = []
    original_init = gr.HTML.__init__

    def counting_init(self, *args, **kwargs):
        built.append(kwargs)
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(gr.HTML, "__init__", counting_init)
    for answer, want in zip(answers, expected, strict=True):
        session = SessionState(demo)
        got = outside_any_loop(demo.postprocess_data(fn, dict(answer), session))
        for c, mine, gradios in zip([state, *views], got, want, strict=True):
            if c in answer or c is state:
                assert mine == gradios
            else:  # Gradio's own skip of an HTML also carries props {"__type__": "update"}: no value either way
                assert mine == {"__type__": "update"} and gradios["__type__"] == "update" and "value" not in gradios
        if state in answer:
            assert session[state._id] == answer[state]
    assert got[1:] == [f"<u>{i}</u>" for i in range(5)]
    assert built == [], f"{len(built)} components rebuilt for left-out outputs"


def test_the_queue_never_rebuilds_its_analytics_summary(app_demo):
    """Issue 25: Gradio's per-event pandas summary of past events (2–6 ms of CPU per event) is off."""
    queue = app_demo[0]._queue
    assert queue.ANAYLTICS_CACHE_FREQUENCY >= 2**62 and queue.ANALYTICS_MAX_EVENTS <= 100
    before = queue.cached_event_analytics_summary
    queue.events_recorded += 1000
    assert queue.compute_analytics_summary([{"function": "x", "status": "success", "process_time": 1.0}]) is before
