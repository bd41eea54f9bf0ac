"""No visitor input runs unbounded in the server process (issue #18): schema patterns, long prompts under
Asking vs enforcing, uploaded runs with many tool calls, and a grammar's work per click.

At the agent level on the real model and llguidance, and through the page's own endpoints (gradio_client
on the real app, as tests/test_hostile.py). Bounds are asserted on work (tokens fed to the parser,
tokens written, calls refused); wall-clock figures appear only as generous ceilings for "it ends" and for
"another visitor was not frozen", the symptom the issue measured (38 s).
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from agent import enforcing, recording, sampling
from agent.constraints import PRESET_TOOLS, PRESETS, Grammar, constraint_for, tokenizer_info
from agent.llm import continuation as cont
from agent.recording import (
    FORMAT,
    MAX_CALLS_PER_REPLY,
    RunTooLarge,
    load_run,
    run_from_dict,
    shipped_runs,
)
from agent.tools import TOOLS
from tests.page_api import SETTINGS, call, message

pytestmark = pytest.mark.model

CATASTROPHIC = "^(.+.+)+!$"  # Python's re: time doubles with each character of a non-matching string
UNPARSABLE = r"\p{L}+"  # llguidance's regex accepts it; Python's re raises "bad escape \p"


def schema_with(pattern: str) -> Grammar:
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}},
              "required": ["code"], "additionalProperties": False}
    return Grammar("json_schema", json.dumps(schema), "Custom")


def check(lm, grammar: Grammar, text: str) -> enforcing.Outcome:
    return enforcing.check(lm, grammar, tuple(lm.encode(text)), text)


class GilWatch:
    """A thread that wakes every 10 ms: its longest lateness is how long another visitor's cheap
    request would have waited for the interpreter lock."""

    def __init__(self):
        self.worst, self._stop = 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            t = time.monotonic()
            time.sleep(0.01)
            self.worst = max(self.worst, time.monotonic() - t - 0.01)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


# --- schema patterns never reach Python's re ---------------------------------------------------------


@pytest.fixture
def warm(lm):
    """llguidance's token table, built once per model at start-up (2.4 s of Python: not per request)."""
    tokenizer_info(lm)
    return lm


def test_catastrophic_pattern_is_decided_by_llguidance_without_freezing_the_server(warm):
    lm, grammar = warm, schema_with(CATASTROPHIC)
    with GilWatch() as watch:
        bad = check(lm, grammar, json.dumps({"code": "a" * 40}))  # re: 2**40 steps
        good = check(lm, grammar, json.dumps({"code": "ab!"}))
    assert bad.parses and not bad.valid and "does not match the schema" in bad.error
    assert good.valid and good.error == ""
    assert watch.worst < 1.0


def test_unparsable_pattern_is_checked_by_llguidance_with_a_clear_message(lm):
    grammar = schema_with(UNPARSABLE)
    assert check(lm, grammar, json.dumps({"code": "Grüße"}, ensure_ascii=False)).valid
    wrong = check(lm, grammar, json.dumps({"code": "123"}))
    assert not wrong.valid and wrong.error.startswith("schema: ") and "does not match" in wrong.error


def test_pattern_properties_are_checked_by_llguidance(lm):
    schema = {"type": "object", "patternProperties": {"^(a+)+$": {"type": "integer"}},
              "additionalProperties": False}
    grammar = Grammar("json_schema", json.dumps(schema), "Custom")
    assert check(lm, grammar, '{"aaa": 1}').valid
    assert not check(lm, grammar, '{"aaab": 1}').valid


def test_schemas_without_patterns_keep_jsonschema_messages_and_fetch_nothing(lm):
    grammar = PRESETS["Person (JSON Schema)"]
    o = check(lm, grammar, '{"name": "Ada"}')
    assert not o.valid and o.error == "schema: 'age' is a required property"
    assert check(lm, grammar, '{"age": 36, "name": "Ada"}').valid  # key order is free here


def test_catastrophic_pattern_under_asking_ends_in_budget_and_others_stay_served(warm):
    lm, grammar = warm, schema_with(CATASTROPHIC)
    prompt = f"Repeat this JSON Schema exactly, then write one object for it: {grammar.source}"
    config = sampling.SamplingConfig(temperature=0.0)
    with GilWatch() as watch:
        *_, comp = enforcing.compare(lm, prompt, grammar, config, seed=0, n=1)
    assert len(comp.asked) == len(comp.enforced) == 1
    assert comp.seconds < enforcing.REQUEST_TIME_S + enforcing.TIME_LIMIT_S
    assert all(o.error == "" or o.error.startswith(("schema: ", "not JSON", "the grammar")) for o in comp.asked)
    assert watch.worst < 1.0


# --- Asking vs enforcing: the prompt cap and one budget per request ---------------------------------


def test_long_prompt_under_asking_is_cut_to_the_prompt_cap(lm):
    prompt = "The weather in Berlin is rainy today. " * 900  # ≈ 7,900 tokens
    grammar = PRESETS["yes / no / maybe"]
    *_, comp = enforcing.compare(lm, prompt, grammar, sampling.SamplingConfig(temperature=0.0), seed=0, n=2)
    messages = [{"role": "user", "content": enforcing.instruction(prompt, grammar)}]
    full = len(lm.encode(lm.apply_chat_template(messages)))
    assert full > 7_000
    assert comp.prompt_truncated == full - cont.MAX_PROMPT_TOKENS
    assert comp.seconds < enforcing.REQUEST_TIME_S + enforcing.TIME_LIMIT_S


def test_one_request_shares_one_token_budget(lm, monkeypatch):
    monkeypatch.setattr(enforcing, "REQUEST_TOKENS", 60)
    grammar = PRESETS["JSON tool call"]
    *_, comp = enforcing.compare(lm, "What's the weather in Berlin?", grammar,
                                 sampling.SamplingConfig(temperature=1.0), seed=3, n=enforcing.MAX_RUNS)
    written = sum(len(lm.encode(o.text)) for o in comp.asked + comp.enforced)
    assert len(comp.asked) + len(comp.enforced) < 2 * enforcing.MAX_RUNS
    assert written <= 60 + 2 * len(comp.asked)  # re-encoding may split differently
    assert comp.note.startswith("Stopped after") and "60 tokens" in comp.note


def test_sampling_tab_and_asking_use_one_prompt_cap(lm):
    ids, cut = cont.cap_prompt(lm, range(5_000), enforcing.MAX_NEW_TOKENS)
    assert len(ids) == cont.MAX_PROMPT_TOKENS == 2048 and cut == 5_000 - 2048


# --- uploaded runs ---------------------------------------------------------------------------------


def upload(n_calls: int, structured: bool = True) -> dict:
    call = {"name": "get_weather", "arguments": {"city": "Berlin"}}
    reply = ({"text": "", "tool_calls": [{"id": f"c{i}", "type": "function", "function": {
        "name": "get_weather", "arguments": json.dumps(call["arguments"])}} for i in range(n_calls)]}
        if structured else {"text": "".join(f"<tool_call>{json.dumps(call)}</tool_call>" for _ in range(n_calls))})
    return {"format": FORMAT, "user_input": "Weather?", "mode": "react", "fmt": "native",
            "tools": ["get_weather"], "replies": [reply, {"text": "It rains."}], "history": []}


def test_upload_with_2000_tool_calls_in_one_reply_is_refused():
    with pytest.raises(RunTooLarge, match="2,000 tool calls; the limit is 8"):
        run_from_dict(upload(2_000))


def test_tool_calls_written_in_the_reply_text_count_too():
    with pytest.raises(RunTooLarge, match="50 tool calls"):
        run_from_dict(upload(50, structured=False))
    assert len(run_from_dict(upload(MAX_CALLS_PER_REPLY)).replies[0].tool_calls) == MAX_CALLS_PER_REPLY


def test_oversized_replies_and_too_many_replies_are_refused():
    d = upload(1)
    d["replies"][1]["text"] = "x" * 20_000
    with pytest.raises(RunTooLarge, match="characters; the limit is 16,000"):
        run_from_dict(d)
    d = upload(1)
    d["replies"] = d["replies"] * 60
    with pytest.raises(RunTooLarge, match="replies"):
        run_from_dict(d)


def test_shipped_runs_are_within_the_upload_bounds():
    runs = {name: load_run(path) for name, path in shipped_runs().items()}  # load_run raises past a bound
    assert len(runs) >= 8
    for name, run in runs.items():
        assert len(run.replies) <= recording.MAX_REPLIES, name
        assert max(len(r.text) for r in run.replies) <= recording.MAX_REPLY_CHARS, name


def test_a_run_one_past_a_bound_is_refused():
    """What the test above relies on: load_run refuses a file past a bound (here, one reply too many)."""
    d = json.loads(next(iter(shipped_runs().values())).read_text(encoding="utf-8"))
    d["replies"] = d["replies"] * (recording.MAX_REPLIES // len(d["replies"]) + 1)
    with pytest.raises(recording.RunTooLarge, match="replies"):
        run_from_dict(d)


def test_react_tab_load_refuses_the_2000_call_upload_with_a_message(lm, tmp_path):
    from viz.react.run import load_session

    path = tmp_path / "run.json"
    path.write_text(json.dumps(upload(2_000)), encoding="utf-8")
    with pytest.raises(ValueError, match="2,000 tool calls; the limit is 8"):
        load_session(str(path), lm)


# --- grammars advance one token at a time ----------------------------------------------------------


LONG_THOUGHT = "Thought: " + "I need the weather in Berlin before I answer the question, " * 12 + "\nAction:"


def test_lark_step_feeds_one_token_whatever_the_length(lm):
    grammar = PRESETS["ReAct format"]
    ids = lm.encode(LONG_THOUGHT + ' {"name": "get_weather", "arguments": {"city": "Berlin"}}')
    assert len(ids) > 120
    c = constraint_for(grammar, lm, ids[:1])
    for k in range(2, len(ids) + 1):
        nxt = constraint_for(grammar, lm, ids[:k], start=c)
        assert nxt.tokens_fed - c.tokens_fed == 1
        c = nxt
    back = constraint_for(grammar, lm, ids[:-1], start=c)  # Back: a rollback, nothing re-parsed
    assert back.tokens_fed == c.tokens_fed
    fresh = constraint_for(grammar, lm, ids[:-1])
    assert (back.allowed_mask() == fresh.allowed_mask()).all() and back.state() == fresh.state()


def test_continuation_steps_and_back_restore_exactly(lm):
    grammar = PRESETS["ReAct format"]
    c = cont.start(lm, "What's the weather in Berlin?", True, seed=0, grammar=grammar)
    ids = lm.encode(LONG_THOUGHT)[:24]  # the length-independence is the test above; here: exact Back
    history = [c]
    for token in ids:
        nxt = cont.append(lm, c, token, 0.5, consume_u=False)
        assert nxt.constraint.tokens_fed - c.constraint.tokens_fed == 1
        history.append(c := nxt)
    for before in reversed(history[:-1]):
        c = cont.back(lm, c)
        assert c.ids == before.ids and c.grammar_state == before.grammar_state
        assert (c.mask == before.mask).all()
    assert history[-1].constraint.consumed() == tuple(ids)  # values are frozen: Back changed no earlier one


def test_presets_read_the_tools_from_agent_tools():
    assert PRESET_TOOLS == tuple(t.schema() for t in TOOLS)
    lookup = next(t["function"] for t in PRESET_TOOLS if t["function"]["name"] == "lookup")
    assert "article" in lookup["parameters"]["properties"]


# --- through the page's own endpoints ----------------------------------------------------------------

# The slowest cheap request (another visitor's "Link to this view": no model) while one visitor's
# request runs. The goal is 1 s and the interpreter lock is held far less (GilWatch above:
# < 1 s); through the page the request also shares 2 busy cores with the model's forward passes:
# 1.4–1.8 s measured at load 12 on the shared test machine. 3 s still tells a bounded server from
# the 38 s freeze the issue found.
CHEAP_CEILING_S = 3.0


def slowest_cheap_request(app_url, done: threading.Event) -> float:
    """Another visitor's cheap requests (a link to the view), one after another until `done`: the
    slowest one's seconds. (Slider moves never reach the server: the page redraws them.)"""
    from gradio_client import Client

    other = Client(app_url, verbose=False)
    worst = 0.0
    while not done.is_set():
        t = time.monotonic()
        call(other, "/sampling_link", "The capital of France is", "Raw text", *SETTINGS, "None", 0)
        worst = max(worst, time.monotonic() - t)
        time.sleep(0.05)
    return worst


def asking_beside_a_cheap_request(app_url, prompt: str, grammar: Grammar | None, n: int):
    """Asking vs enforcing through the API while another visitor makes cheap requests: (the table, its
    message, the slowest cheap request, seconds)."""
    from concurrent.futures import ThreadPoolExecutor

    from gradio_client import Client

    c = Client(app_url, verbose=False)
    call(c, "/run_prompt", prompt, "Chat message", 0)
    if grammar is not None:
        kind = {"json_schema": "JSON Schema", "regex": "Regular expression"}[grammar.kind]
        assert "Constraint on" in message(call(c, "/apply_grammar", kind, grammar.source))
    done = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        probe = pool.submit(slowest_cheap_request, app_url, done)
        t = time.monotonic()
        out = call(c, "/asking", n, *SETTINGS)
        table, msg = out["asking"], message(out)
        seconds = time.monotonic() - t
        done.set()
        return table, msg, probe.result(), seconds


@pytest.mark.browser
def test_page_catastrophic_pattern_under_asking_is_bounded(app_url):
    grammar = schema_with(CATASTROPHIC)
    prompt = f"Repeat this JSON Schema exactly: {grammar.source}"
    table, msg, worst, seconds = asking_beside_a_cheap_request(app_url, prompt, grammar, 1)
    assert "Error" not in msg and seconds < enforcing.REQUEST_TIME_S + enforcing.TIME_LIMIT_S
    assert worst < CHEAP_CEILING_S


@pytest.mark.browser
def test_page_unparsable_pattern_gets_no_bare_error(app_url):
    grammar = schema_with(UNPARSABLE)
    table, msg, worst, seconds = asking_beside_a_cheap_request(app_url, "Write a JSON object.", grammar, 1)
    assert "⚠" not in msg and "Error" not in msg
    assert worst < CHEAP_CEILING_S


@pytest.mark.browser
def test_page_long_prompt_under_asking_is_capped(app_url):
    prompt = "The weather in Berlin is rainy today. " * 900
    table, msg, worst, seconds = asking_beside_a_cheap_request(app_url, prompt, None, 2)
    assert seconds < enforcing.REQUEST_TIME_S + enforcing.TIME_LIMIT_S
    assert worst < CHEAP_CEILING_S


@pytest.mark.browser
def test_page_upload_with_2000_tool_calls_is_refused(app_url, tmp_path):
    from gradio_client import Client, handle_file

    path = tmp_path / "many-calls.json"
    path.write_text(json.dumps(upload(2_000)), encoding="utf-8")
    c = Client(app_url, verbose=False)
    t = time.monotonic()
    out = c.predict(handle_file(str(path)), False, api_name="/on_load")
    assert any("2,000 tool calls; the limit is 8" in str(o) for o in out)
    assert time.monotonic() - t < 10
