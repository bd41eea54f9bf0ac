"""Speculative decoding's rejection rule (agent.llm.speculative) on fixed distributions.

The distribution test. n = 20,000 draws of the first emitted token by the rule, n more directly
from p, both bucketed into K outcomes. For an empirical distribution ê of n draws from π,
E[TV(ê, π)] = ½ Σ E|ê_i − π_i| ≤ ½ Σ √(π_i / n) ≤ ½ √(K / n) (Cauchy–Schwarz), and changing one
draw moves TV by at most 1/n, so McDiarmid gives P(TV ≥ E + t) ≤ exp(−2 n t²). If the rule is
right both samples come from p, and by the triangle inequality
    TV(ê_rule, ê_direct) ≤ √(K / n) + 2t   with probability ≥ 1 − 2 exp(−2 n t²).
With K = 6, n = 20,000 and δ = 1e-6 (t = √(ln(2/δ) / 2n) ≈ 0.019) the bound is ≈ 0.056. The
test has power: p and q below are 0.45 apart in TV, and emitting the draft's token unchecked
lands far outside the bound (asserted too).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from agent.llm import speculative
from agent.sampling import SamplingConfig

N = 20_000
DELTA = 1e-6


def tv_bound(k: int, n: int = N, delta: float = DELTA) -> float:
    t = math.sqrt(math.log(2 / delta) / (2 * n))
    return math.sqrt(k / n) + 2 * t


def tv(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(a - b).sum())


P = np.array([0.50, 0.20, 0.15, 0.10, 0.05, 0.0])
Q = np.array([0.05, 0.10, 0.15, 0.20, 0.30, 0.20])


def first_tokens_by_rule(p: np.ndarray, q: np.ndarray, n: int, seed: int, check: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(p))
    for _ in range(n):
        x = speculative.draw_from(q, rng.random())
        if check:
            r = speculative.verify(np.array([p, p]), np.array([q]), [x], greedy=False, rng=rng)
            counts[r.emitted[0]] += 1
        else:
            counts[x] += 1
    return counts / n


def test_rule_keeps_the_target_distribution_on_fixed_p_and_q():
    assert tv(P, Q) > 0.4
    by_rule = first_tokens_by_rule(P, Q, N, seed=1)
    direct = np.random.default_rng(2).multinomial(N, P) / N
    assert tv(by_rule, direct) < tv_bound(len(P))


def test_the_distribution_test_has_power_against_an_unchecked_draft():
    unchecked = first_tokens_by_rule(P, Q, N, seed=1, check=False)
    direct = np.random.default_rng(2).multinomial(N, P) / N
    assert tv(unchecked, direct) > 3 * tv_bound(len(P))


def test_a_token_the_target_forbids_is_never_emitted():
    by_rule = first_tokens_by_rule(P, Q, 5_000, seed=3)
    assert by_rule[5] == 0.0  # p = 0 there, q = 0.2


def test_residual_is_normalised_positive_part_of_p_minus_q():
    r = speculative.residual(P, Q)
    expected = np.maximum(P - Q, 0) / np.maximum(P - Q, 0).sum()
    np.testing.assert_allclose(r, expected)
    assert r.sum() == pytest.approx(1.0)


def test_equal_p_and_q_accept_every_drafted_token():
    rng = np.random.default_rng(0)
    for _ in range(200):
        x = speculative.draw_from(P, rng.random())
        r = speculative.verify(np.array([P, P]), np.array([P]), [x], greedy=False, rng=rng)
        assert r.positions[0].accepted


def test_greedy_keeps_drafted_tokens_up_to_the_first_mismatch_with_the_argmax():
    p_rows = np.eye(4)[[2, 1, 3, 0]]  # target argmax: 2, 1, 3, then bonus 0
    q_rows = np.full((3, 4), 0.25)
    r = speculative.verify(p_rows, q_rows, [2, 1, 0], greedy=True, rng=np.random.default_rng(0))
    assert [p.accepted for p in r.positions] == [True, True, False]
    assert r.emitted == (2, 1, 3) and r.bonus is None
    r = speculative.verify(p_rows, q_rows, [2, 1, 3], greedy=True, rng=np.random.default_rng(0))
    assert r.emitted == (2, 1, 3, 0) and r.bonus == 0


def test_expected_tokens_per_pass_matches_the_geometric_sum():
    for alpha in (0.0, 0.3, 0.8):
        for gamma in (1, 2, 4, 8):
            assert speculative.expected_tokens_per_pass(alpha, gamma) == pytest.approx(
                sum(alpha ** i for i in range(gamma + 1)))


def toy_target(vocab: int = 16):
    """A deterministic language model over 16 tokens: the logits are a fixed function of the last
    two ids. It stands in for nothing the app shows — it is the oracle for the bookkeeping."""
    table = np.random.default_rng(7).normal(size=(vocab, vocab, vocab)) * 2.0
    calls = {"n": 0}

    def next_logits(ids):
        a, b = ([0, 0] + list(ids))[-2:]
        return table[a, b].astype(np.float32)

    def target_logits(ids, n):
        calls["n"] += 1
        ids = list(ids)
        return np.array([next_logits(ids[:len(ids) - n + 1 + i]) for i in range(n)])

    return next_logits, target_logits, calls


def plain(next_logits, ids, n, config, rng):
    out = []
    for _ in range(n):
        probs = speculative.distribution(next_logits(list(ids) + out), config)
        out.append(int(np.argmax(probs)) if config.greedy else speculative.draw_from(probs, rng.random()))
    return out


@pytest.mark.parametrize("gamma", [1, 2, 4, 8])
def test_greedy_speculative_output_equals_plain_greedy(gamma):
    next_logits, target_logits, _ = toy_target()
    noisy = lambda ids: next_logits(ids) + np.random.default_rng(len(ids)).normal(size=16) * 3  # noqa: E731
    draft = speculative.ModelDraft("noisy", noisy)
    config = SamplingConfig(temperature=0)
    out, _, _ = speculative.run([1, 2, 3], draft, target_logits, gamma, config,
                                np.random.default_rng(0), 40)
    assert out == plain(next_logits, [1, 2, 3], 40, config, None)


def test_bookkeeping_accepted_plus_resampled_plus_bonus_is_emitted_and_passes_are_rounds():
    next_logits, target_logits, calls = toy_target()
    noisy = lambda ids: next_logits(ids) * 0.5  # noqa: E731
    out, rounds, stats = speculative.run([1, 2], speculative.ModelDraft("flat", noisy), target_logits, 4,
                                         SamplingConfig(temperature=1.0), np.random.default_rng(5), 200)
    assert stats.accepted + stats.resampled + stats.bonus == stats.emitted == sum(len(r.emitted) for r in rounds)
    assert stats.rounds == len(rounds) == calls["n"]
    assert len(out) == 200 and stats.emitted >= 200
    assert 0 < stats.alpha < 1


def test_prompt_lookup_copies_what_followed_the_last_ngram_and_q_is_one_hot():
    draft = speculative.PromptLookupDraft(vocab_size=10)
    drafted, q, steps = draft.propose([5, 6, 7, 8, 9, 5, 6], 3, SamplingConfig(), np.random.default_rng(0))
    assert drafted == [7, 8, 9] and steps == 0
    assert (q.sum(axis=1) == 1).all() and q[0, 7] == 1


def test_prompt_lookup_without_a_match_makes_a_plain_step():
    _, target_logits, calls = toy_target()
    draft = speculative.PromptLookupDraft(vocab_size=16)
    r, _ = speculative.one_round([1, 2, 3], draft, target_logits, 4, SamplingConfig(temperature=0),
                                 np.random.default_rng(0))
    assert r.positions == () and r.bonus is not None and calls["n"] == 1


def test_gamma_out_of_range_is_refused():
    _, target_logits, _ = toy_target()
    with pytest.raises(ValueError, match="γ must be a whole number between 1 and 8"):
        speculative.one_round([1], speculative.PromptLookupDraft(16), target_logits, 9,
                              SamplingConfig(), np.random.default_rng(0))


def test_advance_is_a_value_and_the_same_settings_give_the_same_round():
    next_logits, target_logits, _ = toy_target()
    draft = speculative.ModelDraft("half", lambda ids: next_logits(ids) * 0.5)
    config = SamplingConfig(temperature=1.0)
    d0 = speculative.Decoding((1, 2), seed=3)
    d1 = speculative.advance(d0, draft, target_logits, 4, config)
    again = speculative.advance(d0, draft, target_logits, 4, config)
    assert d0.out == () and d1.out == again.out and len(d1.out) >= 1
    assert len(d1.how) == len(d1.out) and d1.stats.rounds == 1
    view = d1.rounds[-1]
    assert view.positions and all(len(p.top_p) <= 5 for p in view.positions)


def test_advance_stops_at_end_of_sequence_and_at_the_limit():
    next_logits, target_logits, _ = toy_target()
    draft = speculative.ModelDraft("same", next_logits)  # q = p: every drafted token accepted
    config = SamplingConfig(temperature=0)
    d = speculative.advance(speculative.Decoding((1, 2)), draft, target_logits, 8, config, limit=3)
    assert len(d.out) == 3 and not d.ended
    first = d.out[0]
    d = speculative.advance(speculative.Decoding((1, 2)), draft, target_logits, 8, config, eos=frozenset({first}))
    assert d.out == () and d.ended
