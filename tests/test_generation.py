"""Autoregressive generation and Asking vs enforcing, on the real bundled model."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from agent import enforcing, sampling
from agent.constraints import PRESETS, Grammar
from agent.llm import generation

pytestmark = pytest.mark.model
GREEDY = sampling.SamplingConfig(temperature=0)


def chat_ids(lm, text):
    return lm.encode(lm.apply_chat_template([{"role": "user", "content": text}]))


def test_greedy_generation_continues_with_paris(lm):
    g = generation.generate(lm, lm.encode("The capital of France is"), GREEDY, np.random.default_rng(0),
                            max_new_tokens=3)
    assert g.text.startswith(" Paris") and g.stop_reason == generation.STOP_LENGTH and len(g.ids) == 3


def test_a_stop_sequence_ends_the_turn_and_is_cut(lm):
    g = generation.generate(lm, lm.encode("The capital of France is"), GREEDY, np.random.default_rng(0),
                            max_new_tokens=20, stop=[" Paris"])
    assert g.stop_reason == generation.STOP_SEQUENCE and " Paris" not in g.text


def test_a_choice_grammar_forces_one_option_then_ends(lm):
    g = generation.generate(lm, chat_ids(lm, "Is the sky blue?"), sampling.SamplingConfig(),
                            np.random.default_rng(1), grammar=PRESETS["yes / no / maybe"], max_new_tokens=10)
    assert g.text in ("yes", "no", "maybe") and g.stop_reason == generation.STOP_GRAMMAR


def test_same_seed_same_output(lm):
    run = lambda: generation.generate(lm, lm.encode("Once upon a time"), sampling.SamplingConfig(),
                                      np.random.default_rng([3, 0]), max_new_tokens=8).ids
    assert run() == run()


def test_time_limit_and_cancel_stop_generation(lm):
    ids = lm.encode("Hello")
    assert generation.generate(lm, ids, GREEDY, np.random.default_rng(0), time_limit=-1).stop_reason == \
        generation.STOP_DEADLINE
    assert generation.generate(lm, ids, GREEDY, np.random.default_rng(0), cancelled=lambda: True).stop_reason == \
        generation.STOP_CANCELLED


def test_a_set_cancel_event_stops_generation_before_its_next_token(lm):
    import threading

    cancel = threading.Event()
    g = generation.generate(lm, lm.encode("Hello"), GREEDY, np.random.default_rng(0), max_new_tokens=50,
                            cancel=cancel, on_token=lambda t, text: len(text) > 5 and cancel.set())
    assert g.stop_reason == generation.STOP_CANCELLED and 0 < len(g.ids) < 50


def test_enforced_json_tool_call_always_validates(lm, monkeypatch):
    # the property is validity, not speed: a loaded machine must not cut a run at the time budget
    monkeypatch.setattr(enforcing, "REQUEST_TIME_S", 600.0)
    monkeypatch.setattr(enforcing, "TIME_LIMIT_S", 300.0)
    grammar = PRESETS["JSON tool call"]
    *_, comp = enforcing.compare(lm, "What's the weather in Berlin?", grammar,
                                 sampling.SamplingConfig(temperature=0.7), seed=0, n=2, max_new_tokens=40)
    assert comp.enforced_valid == 2
    for o in comp.enforced:
        jsonschema.validate(json.loads(o.text), json.loads(grammar.source))


def test_check_tells_parse_and_schema_failures_apart(lm):
    grammar = PRESETS["JSON tool call"]
    ok = '{"name": "get_weather", "arguments": {"city": "Berlin"}}'
    assert enforcing.check(lm, grammar, tuple(lm.encode(ok)), ok).valid
    wrong = '{"name": "get_weather", "arguments": {"town": "Berlin"}}'
    o = enforcing.check(lm, grammar, tuple(lm.encode(wrong)), wrong)
    assert o.parses and not o.valid and o.error.startswith("schema")
    broken = '{"name": "get_weather",'
    o = enforcing.check(lm, grammar, tuple(lm.encode(broken)), broken)
    assert not o.parses and o.error.startswith("not JSON")
    choice = Grammar("choice", "yes\nno", "yn")
    assert enforcing.check(lm, choice, tuple(lm.encode("yes")), "yes").valid
    assert not enforcing.check(lm, choice, tuple(lm.encode("yes!")), "yes!").valid
