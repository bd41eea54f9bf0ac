"""The Local weights (issue 24) in the model layer and both tabs: the shipped adapters load beside
the base weights, change the logits, keep their cached prefixes apart, share batched passes with
base rows, and an unknown choice gets a clear message. Real model, real adapters (assets/adapters).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from agent.backends import LocalBackend
from agent.llm import continuation as cont
from agent.llm.weights import WEIGHTS, available

pytestmark = pytest.mark.model
TUNED, NO_THOUGHTS = WEIGHTS[1], WEIGHTS[2]
PROMPT = "<|im_start|>user\nWhat's the weather in Lisbon?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module", autouse=True)
def _adapters_shipped():
    if available() != WEIGHTS:
        pytest.fail(f"the adapters are not in assets/adapters (found {available()}): run `make tune`")


def test_the_bundled_model_offers_the_three_weights(lm):
    assert lm.weights_choices == WEIGHTS == ("base", "trajectory-tuned", "trajectory-tuned without thoughts")


def test_tuned_weights_change_the_logits_and_base_stays_the_base(lm):
    ids = lm.encode(PROMPT)
    base = lm.next_token_logits(ids, session="w1")
    tuned = lm.next_token_logits(ids, session="w1", weights=TUNED)  # same session, same ids: no stale hit
    other = lm.next_token_logits(ids, session="w1", weights=NO_THOUGHTS)
    assert np.abs(base - tuned).max() > 0.5 and np.abs(tuned - other).max() > 1e-3
    assert np.allclose(lm.next_token_logits(ids, session="w2"), base, atol=1e-4)


def test_base_weights_equal_a_model_loaded_without_adapters(lm):
    from agent.llm.model import load_model

    plain = load_model(adapters=False, log=lambda m: None)
    assert plain.weights_choices == ("base",)
    ids = plain.encode("The capital of France is")
    assert np.allclose(lm.next_token_logits(ids, session="w3"), plain.next_token_logits(ids), atol=1e-4)


def test_rows_on_different_weights_share_a_pass_and_match_their_solo_logits(lm):
    ids = lm.encode(PROMPT)
    solo = {w: lm.next_token_logits(ids, session=("solo", w), weights=w) for w in WEIGHTS}
    out, start = {}, threading.Barrier(3)

    def call(w):
        start.wait()
        out[w] = lm.next_token_logits(ids, session=("mixed", w), weights=w)

    rows_before, steps_before = lm.batcher.stats.rows, lm.batcher.stats.steps
    threads = [threading.Thread(target=call, args=(w,)) for w in WEIGHTS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for w in WEIGHTS:
        assert np.allclose(out[w], solo[w], atol=1e-3), w
    rows, steps = lm.batcher.stats.rows - rows_before, lm.batcher.stats.steps - steps_before
    assert rows > steps  # some pass carried more than one row: the three weights were batched together


def test_an_unknown_weights_name_gets_a_clear_message(lm):
    with pytest.raises(ValueError, match="Unknown Local weights 'tuned'.*base, trajectory-tuned"):
        lm.next_token_logits(lm.encode("Hi"), weights="tuned")
    with pytest.raises(ValueError, match="Unknown Local weights"):
        LocalBackend(lm, weights="../../etc/passwd")
    with pytest.raises(ValueError, match="Unknown Local weights"):
        cont.start(lm, "Hi", False, 0, weights="nope")


def test_the_sampling_continuation_keeps_its_weights(lm):
    c = cont.start(lm, "What's the weather in Lisbon?", True, 0, weights=TUNED)
    greedy = int(np.argmax(c.logits))
    nxt = cont.append(lm, c, greedy, 1.0, consume_u=False)
    assert nxt.weights == TUNED
    assert np.allclose(nxt.logits, lm.next_token_logits(c.prompt_ids + (greedy,), weights=TUNED), atol=1e-4)


def test_the_tuned_model_calls_the_weather_tool_for_an_unseen_city(lm):
    """T = 0, native tool calls, no exemplars: the first reply is a get_weather call for Lisbon."""
    from agent import loop
    from agent.formats import Fmt, Mode
    from agent.settings import Settings
    from agent.tools import TOOLS

    state = loop.new_state("What's the weather in Lisbon right now?", Mode.REACT, Fmt.NATIVE,
                           Settings(max_new_tokens=96))
    backend = LocalBackend(lm, weights=TUNED, session="w-loop")
    while not state.done and state.step < 1:
        state = loop.step(state, backend, TOOLS)
    calls = [c for m in state.history for c in getattr(m, "tool_calls", ()) or ()]
    assert calls and calls[0].name == "get_weather" and "Lisbon" in calls[0].arguments


@pytest.mark.browser
def test_weights_through_the_sampling_api_switch_or_get_a_clear_message(app_url):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    from tests.page_api import call, message

    client = Client(app_url, verbose=False)
    with pytest.raises(AppError, match="tuned is not in the list of choices.*trajectory-tuned"):
        call(client, "/weights", "tuned")  # Gradio's own check of the dropdown, before ours
    assert "Weights: trajectory-tuned." in message(call(client, "/weights", TUNED))


def test_a_pass_on_tuned_weights_leaves_nothing_for_the_next_pass_on_base(lm):
    ids = lm.encode(PROMPT)
    tuned = lm.next_token_logits(ids, session="after-1", weights=TUNED)  # the layers stay on TUNED after it
    base = lm.next_token_logits(ids, session="after-2")
    assert np.allclose(lm.full_forward_logits(ids), base, atol=1e-4)
    assert np.allclose(lm.full_forward_logits(ids, weights=TUNED), tuned, atol=1e-4)
    assert np.allclose(lm.next_token_logits(ids, session="after-3"), base, atol=1e-4)
