"""Hostile and broken input through the same endpoints the page uses (gradio_client on the real app).

Each case must give a clear message, keep the app serving, and leave the session's work intact;
another session must never notice. Gradio enforces a Textbox's max_length only in the browser, so
the server checks every bound itself.
"""

from __future__ import annotations

import html

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

pytestmark = [pytest.mark.model, pytest.mark.browser]
SLIDERS = (1.0, 0, 1.0, 0.0, 20, "Linear")  # temperature, top-k, top-p, min-p, bars, axis
MSG = 3  # index of the message in the outputs of run_prompt / sample / redraw …


@pytest.fixture
def client(app_url):
    c = Client(app_url, verbose=False)
    out = c.predict("The capital of France is", "Raw text", 0, *SLIDERS, api_name="/run_prompt")
    assert out[MSG] == ""
    return c


def continuation_of(client) -> str:
    out = client.predict(*SLIDERS, api_name="/reroll")  # any step returns the continuation view
    return out[4]


def still_serving(client) -> None:
    """The session still answers a slider move with a full chart and no error."""
    out = client.predict(*SLIDERS, api_name="/redraw")
    assert 'class="ntc' in out[0] and out[3] == ""


PROMPTS = [
    ("empty", "", "The prompt is empty"),
    ("whitespace", " \n\t ", "The prompt is empty"),
    ("one megabyte", "a" * 1_000_000, "the limit is 100,000"),
]


@pytest.mark.parametrize("name, prompt, message", PROMPTS, ids=[p[0] for p in PROMPTS])
def test_bad_prompts_get_a_message_and_keep_the_work(client, name, prompt, message):
    client.predict(*SLIDERS, api_name="/greedy")  # some work: " Paris"
    before = continuation_of(client)
    out = client.predict(prompt, "Raw text", 0, *SLIDERS, api_name="/run_prompt")
    assert message in out[MSG]
    assert continuation_of(client) == before
    still_serving(client)


# A lone surrogate cannot cross the wire (JSON encoders refuse it, a browser sends U+FFFD); the server's
# own cleaning of one is tested on agent.continuation.clean_prompt in test_sampling_views.py.
ODD_PROMPTS = [
    ("control characters", "a\x00b\x01c\x07d\x1b[31m"),
    ("right-to-left and zero-width", "abc\u202edef\u200bghi"),
    ("html", '<script>alert(1)</script><img src=x onerror="alert(2)">'),
    ("js template", "${alert(1)} `x` {{y}}"),
    ("emoji and CJK", "猫は🐈です"),
]


@pytest.mark.parametrize("name, prompt", ODD_PROMPTS, ids=[p[0] for p in ODD_PROMPTS])
def test_unusual_text_is_continued_and_rendered_inert(client, name, prompt):
    out = client.predict(prompt, "Raw text", 0, *SLIDERS, api_name="/run_prompt")
    assert out[MSG] == ""
    for view in out[:5]:
        for bad in ("<script", "<img", "${", "`", "{{", "\x00"):
            assert bad not in view
    out = client.predict(*SLIDERS, api_name="/greedy")
    assert out[MSG] == ""
    still_serving(client)


SETTINGS = [
    ("fractional top-k", (1.0, 2.5, 1.0, 0.0, 20, "Linear"), "whole number"),
    ("unknown axis", (1.0, 0, 1.0, 0.0, 20, "Sideways"), None),
]


@pytest.mark.parametrize("name, sliders, message", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_out_of_range_settings_sent_through_the_api(client, name, sliders, message):
    try:
        out = client.predict(*sliders, api_name="/redraw")
    except AppError as exc:  # Gradio's own server-side check of a slider's bounds or a radio's choices
        assert "value" in str(exc).lower() or "choice" in str(exc).lower()
    else:
        assert message in out[MSG]
    still_serving(client)


@pytest.mark.parametrize("value", [-1.0, 3.5, 1e308])
def test_slider_values_beyond_bounds_are_refused_by_the_server(client, value):
    with pytest.raises(AppError):
        client.predict(value, 0, 1.0, 0.0, 20, "Linear", api_name="/redraw")
    still_serving(client)


GRAMMARS = [
    ("bad regex", "Regular expression", "(unclosed", "regex grammar"),
    ("bad json", "JSON Schema", "{not json", "json_schema grammar"),
    ("bad schema", "JSON Schema", '{"type": "nonsense"}', "json_schema grammar"),
    ("lark syntax", "Lark CFG", "start: (", "lark grammar"),
    ("html in grammar", "Regular expression", "<script>alert(1)</script>(", "regex grammar"),
    ("unknown kind", "Brainfuck", "+", None),
]


@pytest.mark.parametrize("name, kind, source, message", GRAMMARS, ids=[g[0] for g in GRAMMARS])
def test_malformed_grammars_show_the_library_message_and_keep_the_previous_one(client, name, kind, source, message):
    ok = client.predict("yes / no / maybe", *SLIDERS, api_name="/constraint")
    assert "yes / no / maybe" in ok[2]  # the constraint readout
    try:
        out = client.predict(kind, source, *SLIDERS, api_name="/apply_grammar")
    except AppError:
        assert message is None  # a radio value outside its choices: Gradio refuses it
    else:
        assert message in out[MSG] and "previous grammar stays" in out[MSG]
        assert "<script" not in out[MSG]
    out = client.predict(*SLIDERS, api_name="/redraw")
    assert "yes / no / maybe" in out[2]  # the previous valid grammar is still on
    still_serving(client)


NUMBERS = [
    ("empty", "", "at least one number"),
    ("not a number", "0.5, banana", "'banana' is not a number"),
    ("negative", "0.5, -0.1", "negative"),
    ("all zero", "0, 0, 0", "all zero"),
    ("infinite", "1, inf", "not a finite number"),
    ("too many", ",".join(["1"] * 5000), "at most"),
    ("huge text", "1," * 50_000, "at most"),
]


@pytest.mark.parametrize("name, text, message", NUMBERS, ids=[n[0] for n in NUMBERS])
def test_bad_own_numbers(client, name, text, message):
    out = client.predict(text, "Probabilities", *SLIDERS, api_name="/own_numbers")
    assert message in html.unescape(out[2])
    still_serving(client)


COUNTS = [
    ("/sample_n", 10**9, "N draws must lie in"),
    ("/sample_n", -3, "N draws must lie in"),
    ("/asking", 10_000, "N must lie in"),
    ("/seed", -5, "seed must lie in"),
    ("/pick", "not-a-token", "invalid literal"),
    ("/pick", "999999999:1", "outside the vocabulary"),
]


@pytest.mark.parametrize("endpoint, value, message", COUNTS, ids=[f"{c[0]} {c[1]}" for c in COUNTS])
def test_bad_counts_and_ids(client, endpoint, value, message):
    """Either Gradio's server-side bound check of the Number refuses it, or our own check does."""
    try:
        out = client.predict(value, *SLIDERS, api_name=endpoint)
    except AppError as exc:
        assert "than maximum value" in str(exc) or "than minimum value" in str(exc)
    else:
        msg = out[1] if endpoint in ("/sample_n", "/asking") else out[MSG]
        assert message in html.unescape(msg)
    still_serving(client)


def test_sessions_never_see_each_other(app_url):
    a, b = Client(app_url, verbose=False), Client(app_url, verbose=False)
    a.predict("The capital of France is", "Raw text", 0, *SLIDERS, api_name="/run_prompt")
    b.predict("Once upon a time", "Raw text", 1, *SLIDERS, api_name="/run_prompt")
    a_out = a.predict(*SLIDERS, api_name="/greedy")
    b.predict("", "Raw text", 0, *SLIDERS, api_name="/run_prompt")  # b's bad input
    b_out = b.predict(*SLIDERS, api_name="/greedy")
    assert 'data-text=" Paris"' in a_out[4]
    assert "Once upon a time" in b_out[4] and "France" not in b_out[4]


def test_choosing_custom_opens_the_editor_and_keeps_the_view(client):
    out = client.predict("Custom…", *SLIDERS, api_name="/constraint")
    assert "Write a grammar below" in out[MSG] and 'class="ntc' in out[0]
    out = client.predict("Regular expression", "[0-9]{3}", *SLIDERS, api_name="/apply_grammar")
    assert "Constraint on: Custom" in out[MSG]
    assert "allowed tokens" in out[2]


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
