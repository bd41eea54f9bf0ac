"""Hostile and broken input through the same endpoints the page uses (gradio_client on the real app).

Each case must give a clear message, keep the app serving, and leave the session's work intact;
another session must never notice. Gradio enforces a Textbox's max_length only in the browser, so
the server checks every bound itself. Outputs are read by name (viz.sampling.tab.POSITION_OUTPUTS),
never by position. Slider moves no longer reach the server at all (tests/test_sampling_browser.py).
"""

from __future__ import annotations

import base64
import html

import numpy as np
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from tests.page_api import SETTINGS, call, message

pytestmark = [pytest.mark.model, pytest.mark.browser]


@pytest.fixture
def client(app_url):
    c = Client(app_url, verbose=False)
    out = call(c, "/run_prompt", "The capital of France is", "Raw text", 0)
    assert message(out) == ""
    return c


def continuation_of(client) -> str:
    return call(client, "/reroll", *SETTINGS)["continuation"]  # any step returns the continuation view


def still_serving(client) -> dict:
    """The session still answers a step with a whole position and no error."""
    out = call(client, "/reroll", *SETTINGS)
    logits = np.frombuffer(base64.b64decode(out["chart"]["logits"]), dtype="<f4")
    assert logits.size == out["chart"]["vocab"] and message(out) == ""
    return out


PROMPTS = [
    ("empty", "", "The prompt is empty"),
    ("whitespace", " \n\t ", "The prompt is empty"),
    ("one megabyte", "a" * 1_000_000, "the limit is 100,000"),
]


@pytest.mark.parametrize("name, prompt, expected", PROMPTS, ids=[p[0] for p in PROMPTS])
def test_bad_prompts_get_a_message_and_keep_the_work(client, name, prompt, expected):
    call(client, "/greedy", *SETTINGS)  # some work: " Paris"
    before = continuation_of(client)
    out = call(client, "/run_prompt", prompt, "Raw text", 0)
    assert expected in message(out)
    assert continuation_of(client) == before
    still_serving(client)


# A lone surrogate cannot cross the wire (JSON encoders refuse it, a browser sends U+FFFD); the server's
# own cleaning of one is tested on agent.llm.continuation.clean_prompt in test_sampling_views.py.
ODD_PROMPTS = [
    ("control characters", "a\x00b\x01c\x07d\x1b[31m"),
    ("right-to-left and zero-width", "abc\u202edef\u200bghi"),
    ("html", '<script>alert(1)</script><img src=x onerror="alert(2)">'),
    ("js template", "${alert(1)} `x` {{y}}"),
    ("emoji and CJK", "猫は🐈です"),
]


@pytest.mark.parametrize("name, prompt", ODD_PROMPTS, ids=[p[0] for p in ODD_PROMPTS])
def test_unusual_text_is_continued_and_rendered_inert(client, name, prompt):
    out = call(client, "/run_prompt", prompt, "Raw text", 0)
    assert message(out) == ""
    for bad in ("<script", "<img", "${", "`", "{{", "\x00"):
        assert bad not in out["continuation"]
    assert message(call(client, "/greedy", *SETTINGS)) == ""
    still_serving(client)


BAD_SETTINGS = [
    ("fractional top-k", (1.0, 2.5, 1.0, 0.0), "whole number"),
    ("top-p zero", (1.0, 0, 0.0, 0.0), "Top-p"),
]


@pytest.mark.parametrize("name, settings, expected", BAD_SETTINGS, ids=[s[0] for s in BAD_SETTINGS])
def test_out_of_range_settings_sent_through_the_api(client, name, settings, expected):
    try:
        out = call(client, "/sample", *settings)
    except AppError as exc:  # Gradio's own server-side check of a slider's bounds
        assert "value" in str(exc).lower()
    else:
        assert expected in message(out)
    still_serving(client)


@pytest.mark.parametrize("endpoint", ["/sample", "/greedy", "/back"])
@pytest.mark.parametrize("value", [-1.0, 3.5, 1e308, "hot", None])
def test_slider_values_beyond_bounds_are_refused_by_the_server(client, endpoint, value):
    """The presses skip Gradio's input processing (issue 25), so the handler's own check refuses:
    a message naming the control and its bounds, and the position unchanged."""
    before = call(client, "/greedy", *SETTINGS)["chart"]["step"]
    out = call(client, endpoint, value, 0, 1.0, 0.0)
    assert "Temperature" in message(out) and ("0" in message(out) or "number" in message(out))
    chart = out["chart"] or {}
    assert chart.get("step", before) == before  # an update with no value: the chart stays as it was
    still_serving(client)


def test_the_redraw_endpoint_is_gone(client):
    """A slider move is the page's own work: no endpoint exists that a class could flood with redraws."""
    with pytest.raises(ValueError, match="redraw"):
        client.predict(*SETTINGS, 20, "Linear", api_name="/redraw")


GRAMMARS = [
    ("bad regex", "Regular expression", "(unclosed", "regex grammar"),
    ("bad json", "JSON Schema", "{not json", "json_schema grammar"),
    ("bad schema", "JSON Schema", '{"type": "nonsense"}', "json_schema grammar"),
    ("lark syntax", "Lark CFG", "start: (", "lark grammar"),
    ("html in grammar", "Regular expression", "<script>alert(1)</script>(", "regex grammar"),
    ("unknown kind", "Brainfuck", "+", None),
]


@pytest.mark.parametrize("name, kind, source, expected", GRAMMARS, ids=[g[0] for g in GRAMMARS])
def test_malformed_grammars_show_the_library_message_and_keep_the_previous_one(client, name, kind, source, expected):
    ok = call(client, "/constraint", "yes / no / maybe")
    assert ok["chart"]["constraint"]["name"] == "yes / no / maybe"  # the constraint readout's grammar
    try:
        out = call(client, "/apply_grammar", kind, source)
    except AppError:
        assert expected is None  # a radio value outside its choices: Gradio refuses it
    else:
        assert expected in message(out) and "previous grammar stays" in message(out)
        assert "<script" not in out["msg"]
    assert still_serving(client)["chart"]["constraint"]["name"] == "yes / no / maybe"  # still on


NUMBERS = [
    ("empty", "", "at least one number"),
    ("not a number", "0.5, banana", "'banana' is not a number"),
    ("negative", "0.5, -0.1", "negative"),
    ("all zero", "0, 0, 0", "all zero"),
    ("infinite", "1, inf", "not a finite number"),
    ("too many", ",".join(["1"] * 5000), "at most"),
    ("huge text", "1," * 50_000, "at most"),
]


@pytest.mark.parametrize("name, text, expected", NUMBERS, ids=[n[0] for n in NUMBERS])
def test_bad_own_numbers(client, name, text, expected):
    assert expected in message(call(client, "/own_numbers", text, "Probabilities"))
    still_serving(client)


COUNTS = [
    ("/sample_n", (10**9, *SETTINGS, 20), "N draws must lie in"),
    ("/sample_n", (-3, *SETTINGS, 20), "N draws must lie in"),
    ("/asking", (10_000, *SETTINGS), "N runs must lie in"),
    ("/seed", (-5,), "seed must lie in"),
    ("/pick", ("not-a-token", *SETTINGS), "invalid literal"),
    ("/pick", ("999999999:1", *SETTINGS), "outside the vocabulary"),
]


@pytest.mark.parametrize("endpoint, args, expected", COUNTS, ids=[f"{c[0]} {c[1][0]}" for c in COUNTS])
def test_bad_counts_and_ids(client, endpoint, args, expected):
    """Either Gradio's server-side bound check of the Number refuses it, or our own check does."""
    try:
        out = call(client, endpoint, *args)
    except AppError as exc:
        assert "than maximum value" in str(exc) or "than minimum value" in str(exc)
    else:
        assert expected in message(out)
    still_serving(client)


def test_sessions_never_see_each_other(app_url):
    a, b = Client(app_url, verbose=False), Client(app_url, verbose=False)
    call(a, "/run_prompt", "The capital of France is", "Raw text", 0)
    call(b, "/run_prompt", "Once upon a time", "Raw text", 1)
    a_out = call(a, "/greedy", *SETTINGS)
    call(b, "/run_prompt", "", "Raw text", 0)  # b's bad input
    b_out = call(b, "/greedy", *SETTINGS)
    assert 'data-text=" Paris"' in a_out["continuation"]
    assert "Once upon a time" in b_out["continuation"] and "France" not in b_out["continuation"]


def test_choosing_custom_opens_the_editor_and_keeps_the_view(client):
    out = call(client, "/constraint", "Custom…")
    assert "Write a grammar below" in message(out)
    out = call(client, "/apply_grammar", "Regular expression", "[0-9]{3}")
    assert "Constraint on: Custom" in message(out)
    assert out["chart"]["constraint"]["name"] == "Custom" and out["chart"]["mask"]


CONTEXT = [  # the ReAct tab's Context controls (issue 14), out of range through the API
    ("few-shot 7", {"Few-shot exemplars": 7}, "Few-shot exemplars"),
    ("few-shot text", {"Few-shot exemplars": "all"}, "Few-shot exemplars"),
    ("compact at 20 %", {"Compact the history": True, "Compact at (% of the budget)": 20}, "Compact at"),
    ("compact at 1e308", {"Compact the history": True, "Compact at (% of the budget)": 1e308}, "Compact at"),
    ("retrieve a string", {"Retrieved documents (RAG)": "yes"}, "on or off"),
    ("memory a number", {"Memory": 5}, "on or off"),
]


def _react_reset(client, by_label: dict):
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    inputs = [by_label.get(p["label"], p.get("parameter_default")) for p in api["/on_reset"]["parameters"]]
    return client.predict(*inputs, api_name="/on_reset")


def _message(out) -> str:
    return html.unescape(next((o for o in out if isinstance(o, str) and 'class="msg' in o), ""))


@pytest.mark.parametrize("name, by_label, message", CONTEXT, ids=[c[0] for c in CONTEXT])
def test_out_of_range_context_values_through_the_api(app_url, name, by_label, message):
    c = Client(app_url, verbose=False)
    try:
        out = _react_reset(c, by_label)
    except AppError as exc:  # Gradio's own check of a slider's bounds or a radio's choices
        assert "value" in str(exc).lower() or "choice" in str(exc).lower()
    else:
        assert message in _message(out)
    assert "New run" in _message(_react_reset(c, {}))  # the session still starts runs


@pytest.mark.parametrize("fact", ["", "x" * 100_000])
def test_a_bad_fact_through_the_api_is_not_pinned(app_url, fact):
    c = Client(app_url, verbose=False)
    out = c.predict(fact, api_name="/on_pin")
    assert "Not pinned" in _message(out)
    try:
        out = c.predict("1. a fact of someone else", api_name="/on_forget")
    except AppError as exc:  # Gradio's own check of the dropdown's choices (this session's facts)
        assert "choices" in str(exc)
    else:
        assert "Choose a fact" in _message(out)


def test_one_sessions_facts_never_reach_another(app_url):
    a, b = Client(app_url, verbose=False), Client(app_url, verbose=False)
    assert "Pinned" in _message(a.predict("The user's PIN is 4711.", api_name="/on_pin"))
    on = {"Memory": True}
    assert "4711" in "".join(o for o in _react_reset(a, on) if isinstance(o, str))
    assert "4711" not in "".join(o for o in _react_reset(b, on) if isinstance(o, str))
