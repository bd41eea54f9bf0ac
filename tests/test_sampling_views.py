"""The Sampling tab's logic below the UI: top-N rows, the continuation value, and the HTML views."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from agent import sampling, topn
from agent.llm import continuation as cont
from viz import charts, position, render

LECTURE = np.log(np.array([0.4, 0.3, 0.25, 0.03, 0.02]))


def test_histogram_frequencies_sum_to_one():
    t = sampling.trace(LECTURE, sampling.SamplingConfig())
    counts = sampling.sample_many(t.probs, 1000, np.random.default_rng(0))
    h = topn.histogram(t, counts, rows=3)
    assert h.n == 1000
    assert sum(r[1] for r in h.rows) + h.other_count == 1000
    assert sum(r[2] for r in h.rows) + h.other_frequency == pytest.approx(1.0)


def test_escape_neutralises_html_and_js_template_syntax():
    out = render.esc('<script>alert(1)</script>${alert(2)}`x`{{y}}')
    for bad in ("<script", "${", "`", "{{"):
        assert bad not in out
    assert render.token_html("␠a<b>").startswith('<span class="vs">␠</span>a&lt;b&gt;')


def test_a_position_carries_float32_logits_and_the_mask_as_bits():
    logits = np.array([0.5, -np.inf, 1e-7, -3.25], dtype=np.float32)
    mask = np.array([True, False, True, True])
    c = cont.Continuation(prompt="p", chat=False, prompt_text="p", prompt_ids=(1,), truncated=0, ids=(),
                          chosen_probs=(), logits=logits, seed=0, draws=0, u=0.25, finished=False, mask=mask)
    sent = position.position(c, vocab_size=4)
    back = np.frombuffer(base64.b64decode(sent["logits"]), dtype="<f4")
    assert np.array_equal(back, logits)  # bit for bit, -inf included
    bits = np.unpackbits(np.frombuffer(base64.b64decode(sent["mask"]), dtype=np.uint8), bitorder="little")[:4]
    assert bits.astype(bool).tolist() == mask.tolist()
    assert sent["u"] == 0.25 and sent["constraint"] is None


def test_token_strings_are_written_once_under_their_content_hash(tmp_path):
    a = position.token_asset(["a", "␠b"], {1}, tmp_path)
    b = position.token_asset(["a", "␠b"], {1}, tmp_path)
    assert a == b and a.name.startswith("tokens-") and len(list(tmp_path.iterdir())) == 1
    assert json.loads(a.read_text(encoding="utf-8")) == {"strings": ["a", "␠b"], "special": [1]}


def test_bar_width_linear_and_log():
    assert charts.bar_width(0.5, 1.0, False) == 50
    assert charts.bar_width(1.0, 1.0, True) == 100
    assert charts.bar_width(1e-3, 1.0, True) == pytest.approx(50)
    assert charts.bar_width(0.0, 1.0, True) == 0


@pytest.mark.model
class TestContinuation:
    def test_same_seed_gives_the_same_draws_and_sliders_never_move_u(self, lm):
        a = cont.start(lm, "The capital of France is", False, seed=7)
        b = cont.start(lm, "The capital of France is", False, seed=7)
        assert a.u == b.u == cont.u_for(7, 0)
        for temperature in (0.5, 1.0, 2.0):  # a slider move: a new trace, the same u
            assert sampling.trace(a.logits, sampling.SamplingConfig(temperature=temperature), u=a.u).u == a.u
        assert cont.reroll(a).u != a.u and cont.reroll(a).draws == 1

    def test_append_and_back_follow_the_prefix_cache(self, lm):
        c = cont.start(lm, "The capital of France is", False, seed=0)
        paris = lm.encode(" Paris")[0]
        c2 = cont.append(lm, c, paris, 0.77, consume_u=True)
        assert c2.ids == (paris,) and c2.draws == 1 and c2.chosen_probs == (0.77,)
        assert np.abs(c2.logits - lm.full_forward_logits(c2.all_ids)).max() < 1e-4
        c3 = cont.back(lm, c2)
        assert c3.ids == () and np.abs(c3.logits - c.logits).max() < 1e-4

    def test_chat_mode_sends_the_chat_template_string(self, lm):
        c = cont.start(lm, "Hi", True, seed=0)
        assert c.prompt_text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        assert c.prompt_ids == tuple(lm.encode(c.prompt_text))

    def test_a_prompt_longer_than_the_limit_is_cut_from_the_left(self, lm):
        c = cont.start(lm, "word " * 2100 + "end", False, seed=0)
        assert c.truncated > 0
        assert len(c.prompt_ids) == min(lm.context_window - cont.RESERVED_FOR_CONTINUATION, cont.MAX_PROMPT_TOKENS)
        assert c.prompt_ids[-1] == lm.encode(" end")[-1]

    @pytest.mark.parametrize("bad", ["", "   \n\t ", "x" * (cont.MAX_PROMPT_CHARS + 1)])
    def test_bad_prompts_get_a_clear_message(self, lm, bad):
        with pytest.raises(cont.PromptError):
            cont.start(lm, bad, False, seed=0)

    def test_control_characters_and_lone_surrogates_are_cleaned(self, lm):
        c = cont.start(lm, "a\x00b\ud800c\x07", False, seed=0)
        assert "\x00" not in c.prompt and "\ud800" not in c.prompt

    def test_eos_ends_the_continuation(self, lm):
        c = cont.start(lm, "Hi", True, seed=0)
        eos = min(lm.eos_token_ids)
        done = cont.append(lm, c, eos, 0.5, consume_u=False)
        assert done.finished
        with pytest.raises(cont.PromptError):
            cont.append(lm, done, eos, 0.5, consume_u=False)


def test_an_output_cut_at_the_token_limit_says_so_next_to_it():
    from agent.enforcing import Comparison, Outcome
    from agent.llm.generation import STOP_EOS, STOP_LENGTH

    cut = Outcome('{"city": "Ber', False, False, "not JSON: Unterminated string", STOP_LENGTH, 48)
    ended = Outcome('{"city": "Berlin"}', True, True, "", STOP_EOS, 48)
    html = charts.comparison_view(Comparison(1, (ended,), (cut,), 1.0), json_kind=True, running=False)
    enforced = html.split("Enforcing:")[1]
    assert "cut at the 48-token limit" in enforced and "Unterminated string" in enforced
    assert "cut at" not in html.split("Enforcing:")[0]
