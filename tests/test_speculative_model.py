"""Speculative decoding on the real bundled model: the verify pass and the early-exit draft agree
with plain forward passes, greedy speculative output is plain greedy output token for token for
every draft kind, and the rule keeps the model's own next-token distribution."""

from __future__ import annotations

import numpy as np
import pytest

from agent.llm import speculative
from agent.sampling import SamplingConfig
from tests.test_speculative import N, tv, tv_bound

pytestmark = pytest.mark.model

PROMPTS = (
    "The capital of France is",
    "Berlin is the capital of Germany. Paris is the capital of France. Berlin is the capital of",
    '<tool_call>{"name": "get_weather", "arguments": {"city": "',
    "def add(a, b):\n    return",
    "One, two, three, four,",
)


def test_tail_logits_equal_fresh_forward_passes(lm):
    ids = lm.encode(PROMPTS[1])
    tail = lm.tail_logits(ids, 4)
    for i in range(4):
        fresh = lm.full_forward_logits(ids[:len(ids) - 3 + i])
        np.testing.assert_allclose(tail[i], fresh, atol=1e-3)


def test_early_exit_with_every_layer_is_the_model(lm):
    ids = lm.encode(PROMPTS[0])
    lm.next_token_logits(ids[:-2])  # a cached prefix the draft reads
    np.testing.assert_allclose(lm.early_exit_logits(ids, lm.num_layers), lm.full_forward_logits(ids), atol=1e-3)


def plain_greedy(lm, ids, n):
    out = []
    for _ in range(n):
        out.append(int(np.argmax(lm.next_token_logits(list(ids) + out))))
    return out


@pytest.mark.parametrize("kind", ["early exit", "prompt lookup"])
def test_greedy_speculative_equals_plain_greedy_on_five_prompts(lm, kind):
    config = SamplingConfig(temperature=0)
    for text in PROMPTS:
        ids = lm.encode(text)
        draft = (speculative.ModelDraft("early exit", lambda i: lm.early_exit_logits(i, 24)) if kind == "early exit"
                 else speculative.PromptLookupDraft(lm.vocab_size))
        expected = plain_greedy(lm, ids, 8)
        out, _, stats = speculative.run(ids, draft, lm.tail_logits, 3, config, np.random.default_rng(0), 8)
        assert out == expected, text
        assert stats.accepted + stats.resampled + stats.bonus == stats.emitted


def test_rule_keeps_the_models_next_token_distribution(lm):
    """20,000 first tokens through the rule (early-exit draft, L = 16) against 20,000 direct draws
    from the model's p, bucketed into the top 7 tokens + the rest (K = 8): TV under the bound
    derived in tests/test_speculative.py."""
    ids = lm.encode(PROMPTS[0])
    config = SamplingConfig(temperature=1.0)
    p = speculative.distribution(lm.next_token_logits(ids), config)
    q = speculative.distribution(lm.early_exit_logits(ids, 16), config)
    p_next = np.array([p, p])  # the bonus position is never reached by the first token's rule
    top = np.argsort(-p)[:7]
    bucket = np.full(len(p), 7)
    bucket[top] = np.arange(7)
    rng = np.random.default_rng(11)
    by_rule = np.zeros(8)
    for _ in range(N):
        x = speculative.draw_from(q, rng.random())
        r = speculative.verify(p_next, q[None, :], [x], greedy=False, rng=rng)
        by_rule[bucket[r.emitted[0]]] += 1
    direct = np.bincount(bucket[np.random.default_rng(12).choice(len(p), size=N, p=p)], minlength=8)
    assert tv(by_rule / N, direct / N) < tv_bound(8)
    assert tv(p, q) > 0.2  # the draft is poor: the rule, not the draft, keeps p
