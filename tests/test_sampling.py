"""agent/sampling.py: the lecture's Part I numbers, properties, transformers as the oracle."""

from __future__ import annotations

import doctest
import itertools
import math
import re

import numpy as np
import pytest

from agent.sampling import (
    STAGES,
    SamplingConfig,
    draw,
    greedy,
    new_u,
    parse_numbers,
    sample_many,
    softmax,
    trace,
)

LECTURE_PROBS = "0.4, 0.3, 0.25, 0.03, 0.02"  # Part I, "Truncated Sampling"


def lecture_logits() -> np.ndarray:
    return parse_numbers(LECTURE_PROBS, "probs")


def random_logits(seed: int, size: int = 1000, scale: float = 3.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(size) * scale).astype(np.float32)


def random_configs(rng: np.random.Generator, n: int) -> list[SamplingConfig]:
    return [
        SamplingConfig(
            temperature=float(rng.choice([0.0, 0.2, 0.7, 1.0, 1.6])),
            top_k=int(rng.choice([0, 1, 3, 40, 5000])),
            top_p=float(rng.choice([1.0, 0.3, 0.9, 0.95])),
            min_p=float(rng.choice([0.0, 0.05, 0.3])),
        )
        for _ in range(n)
    ]


# --- the lecture's worked example, verbatim -------------------------------------------------


def test_lecture_top_k_2_keeps_04_03_renormalised_to_057_043():
    t = trace(lecture_logits(), SamplingConfig(top_k=2))
    assert np.round(t.probs, 2).tolist() == [0.57, 0.43, 0.0, 0.0, 0.0]
    assert t.kept_count["top_k"] == 2


def test_lecture_top_p_09_keeps_three_tokens_with_cumulative_095():
    t = trace(lecture_logits(), SamplingConfig(top_p=0.9))
    assert t.kept_count["top_p"] == 3
    assert np.flatnonzero(t.probs).tolist() == [0, 1, 2]
    assert round(float(t.cumulative[2]), 2) == 0.95
    assert round(float(t.cumulative[1]), 2) == 0.7  # "two tokens reach only 0.7"


def test_top_p_keeps_the_token_that_crosses_p():
    # 0.4 + 0.3 reaches p = 0.7 exactly (up to float32 rounding): the third token is not needed.
    assert trace(lecture_logits(), SamplingConfig(top_p=0.7)).kept_count["top_p"] == 2
    assert trace(lecture_logits(), SamplingConfig(top_p=0.71)).kept_count["top_p"] == 3
    assert trace(lecture_logits(), SamplingConfig(top_p=0.96)).kept_count["top_p"] == 4


def test_top_p_nucleus_grows_on_a_flatter_distribution():
    sizes = [trace(random_logits(4), SamplingConfig(temperature=t, top_p=0.9)).kept_count["top_p"] for t in (0.5, 1, 2)]
    assert sizes[0] < sizes[1] < sizes[2]


def test_softmax_is_positive_and_sums_to_one():
    p = softmax(np.array([2.0, 1.0, 0.1, -50.0]))
    assert (p > 0).all() and math.isclose(p.sum(), 1.0)
    assert softmax(np.array([0.0, 0.0])).tolist() == [0.5, 0.5]


def test_softmax_gives_minus_inf_zero_and_rejects_nan():
    assert softmax(np.array([1.0, -np.inf])).tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="NaN"):
        softmax(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="no finite logit"):
        softmax(np.array([-np.inf, -np.inf]))


# --- temperature ---------------------------------------------------------------------------


def test_temperature_zero_is_argmax_with_no_draw():
    logits = random_logits(0)
    for u in (None, 0.0, 0.5, 0.999):
        t = trace(logits, SamplingConfig(temperature=0.0), u=u)
        assert t.greedy and t.u is None
        assert t.token == int(np.argmax(logits))
        assert t.probs[t.token] == 1.0 and t.probs.sum() == 1.0
        assert t.entropy_bits == 0.0 and t.effective_tokens == 1.0


def test_greedy_is_top_k_1_and_the_limit_t_to_0():
    for seed in range(5):
        logits = random_logits(seed)
        logits[np.argmax(logits)] += 1.0  # a clear winner: 1 nat ahead
        greedy = trace(logits, SamplingConfig(temperature=0.0))
        top_1 = trace(logits, SamplingConfig(top_k=1), u=0.7)
        cold = trace(logits, SamplingConfig(temperature=1e-3))
        assert greedy.token == top_1.token == cold.token == int(np.argmax(logits))
        np.testing.assert_array_equal(greedy.probs, top_1.probs)
        assert cold.probs_temperature[greedy.token] > 1 - 1e-12


def test_large_temperature_tends_to_uniform():
    logits = random_logits(1, size=500, scale=1.0)
    entropies = [trace(logits, SamplingConfig(temperature=t)).entropy_bits for t in (0.5, 1, 5, 100)]
    assert entropies == sorted(entropies)
    hot = trace(logits, SamplingConfig(temperature=100.0))
    assert hot.entropy_bits > math.log2(500) - 1e-3
    assert np.abs(hot.probs - 1 / 500).max() < 0.1 / 500


def test_temperature_one_is_the_model_distribution():
    logits = random_logits(2)
    t = trace(logits, SamplingConfig())
    np.testing.assert_array_equal(t.probs_temperature, t.probs_model)
    np.testing.assert_allclose(t.probs, softmax(logits), rtol=1e-12)


def test_temperature_divides_the_logits():
    t = trace(np.array([2.0, 1.0, 0.0]), SamplingConfig(temperature=0.5))
    np.testing.assert_allclose(t.scaled_logits, [4.0, 2.0, 0.0])
    np.testing.assert_allclose(t.probs_temperature, softmax(np.array([4.0, 2.0, 0.0])))


# --- top-k, top-p, min-p, survival ---------------------------------------------------------


def test_top_k_keeps_exactly_k_and_breaks_ties_by_lower_token_id():
    t = trace(np.array([1.0, 3.0, 2.0, 2.0, 2.0, 0.0]), SamplingConfig(top_k=2))
    assert np.flatnonzero(t.probs).tolist() == [1, 2]
    assert t.removed_by.tolist() == [3, 0, 0, 3, 3, 3]  # 3 = 1 + STAGES.index("top_k")


def test_top_k_above_the_vocabulary_is_off():
    off = trace(lecture_logits(), SamplingConfig())
    big = trace(lecture_logits(), SamplingConfig(top_k=10))
    assert big.kept_count["top_k"] == 5
    np.testing.assert_array_equal(big.probs, off.probs)


def test_at_least_one_token_survives_tiny_top_p_and_min_p_one():
    for config in (SamplingConfig(top_p=1e-12), SamplingConfig(min_p=1.0)):
        for seed in range(3):
            t = trace(random_logits(seed), config, u=0.99)
            assert t.kept_count["min_p"] == 1
            assert t.token == int(np.argmax(t.logits)) and t.token_prob == 1.0


def test_min_p_removes_tokens_below_min_p_times_the_top_probability():
    t = trace(lecture_logits(), SamplingConfig(min_p=0.1))  # threshold 0.04
    assert np.flatnonzero(t.probs).tolist() == [0, 1, 2]
    assert t.removed_by.tolist() == [0, 0, 0, 5, 5]


# --- constrained decoding: the mask --------------------------------------------------------


def test_mask_gives_p_prime_of_the_lecture():
    for seed in range(5):
        rng = np.random.default_rng(seed)
        logits, allowed = random_logits(seed, 300), rng.random(300) < 0.2
        t = trace(logits, SamplingConfig(), mask=allowed)
        p = t.probs_model
        expected = np.where(allowed, p, 0.0) / p[allowed].sum()  # 1[i in A] P_i / sum_A P_j
        np.testing.assert_allclose(t.probs_masked, expected, rtol=1e-12, atol=1e-300)
        assert (t.probs_masked[~allowed] == 0).all() and math.isclose(t.probs_masked.sum(), 1)
        assert math.isclose(t.kept_mass["mask"], p[allowed].sum(), rel_tol=1e-12)
        assert (t.removed_by[~allowed] == 1).all() and t.kept_count["mask"] == allowed.sum()


def test_without_a_mask_probs_masked_is_probs_model():
    t = trace(random_logits(3), SamplingConfig(temperature=0.8))
    np.testing.assert_array_equal(t.probs_masked, t.probs_model)
    assert t.kept_mass["mask"] == 1.0


def test_mask_steers_greedy_and_sampling_to_allowed_tokens():
    logits = np.array([5.0, 1.0, 2.0, 0.5], dtype=np.float32)
    allowed = np.array([False, True, True, False])
    assert trace(logits, SamplingConfig(temperature=0), mask=allowed).token == 2
    for u in np.linspace(0, 0.999, 50):
        assert allowed[trace(logits, SamplingConfig(), mask=allowed, u=float(u)).token]


def test_empty_mask_is_unsatisfiable():
    with pytest.raises(ValueError, match=r"unsatisfiable.*A\(s_t\) is empty"):
        trace(lecture_logits(), SamplingConfig(), mask=np.zeros(5, dtype=bool))
    logits = np.array([0.0, -np.inf, 1.0], dtype=np.float32)
    with pytest.raises(ValueError, match="unsatisfiable"):
        trace(logits, SamplingConfig(), mask=np.array([False, True, False]))


def test_mask_must_be_bool_of_vocabulary_shape():
    with pytest.raises(ValueError, match="mask must be a bool array"):
        trace(lecture_logits(), SamplingConfig(), mask=np.ones(5, dtype=int))  # not token ids
    with pytest.raises(ValueError, match="mask must be a bool array"):
        trace(lecture_logits(), SamplingConfig(), mask=np.ones(4, dtype=bool))


def test_mask_far_below_a_forbidden_token_neither_overflows_nor_underflows():
    logits = np.array([3e38, 0.0, -1.0, -2000.0], dtype=np.float32)
    allowed = np.array([False, True, True, True])
    for temperature in (1e-3, 1.0, 100.0):
        t = trace(logits, SamplingConfig(temperature=temperature), mask=allowed, u=0.5)
        assert np.isfinite(t.probs).all() and math.isclose(t.probs.sum(), 1.0)
        assert t.probs_masked[1] > t.probs_masked[2] > 0
    assert trace(logits, SamplingConfig(temperature=0), mask=allowed).token == 1


# --- stage bookkeeping ---------------------------------------------------------------------


def stage_inputs(t) -> dict[str, np.ndarray]:
    return {
        "mask": t.probs_model,
        "temperature": t.probs_masked,
        "top_k": t.probs_temperature,
        "top_p": t.probs_top_k,
        "min_p": t.probs_top_p,
    }


def stage_outputs(t) -> dict[str, np.ndarray]:
    return {
        "mask": t.probs_masked,
        "temperature": t.probs_temperature,
        "top_k": t.probs_top_k,
        "top_p": t.probs_top_p,
        "min_p": t.probs,
    }


def test_removed_by_kept_count_and_kept_mass_agree():
    rng = np.random.default_rng(10)
    for seed, config in enumerate(random_configs(rng, 60)):
        mask = rng.random(1000) < 0.6 if seed % 2 else None
        t = trace(random_logits(seed), config, mask=mask)
        counts = [t.kept_count[s] for s in STAGES]
        assert counts == sorted(counts, reverse=True) and counts[-1] >= 1
        for i, stage in enumerate(STAGES):
            alive = (t.removed_by == 0) | (t.removed_by > i + 1)
            assert alive.sum() == t.kept_count[stage]
            kept = stage_inputs(t)[stage][alive].sum()
            assert math.isclose(t.kept_mass[stage], kept, rel_tol=1e-9), stage
            out = stage_outputs(t)[stage]
            assert (out[~alive] == 0).all() and math.isclose(out.sum(), 1.0, rel_tol=1e-12)
        assert (t.probs[t.removed_by > 0] == 0).all()


def test_each_stage_renormalises_what_it_keeps():
    rng = np.random.default_rng(11)
    for seed, config in enumerate(random_configs(rng, 40)):
        t = trace(random_logits(seed), config)
        for i, stage in enumerate(STAGES[2:], start=2):  # the truncations
            alive = (t.removed_by == 0) | (t.removed_by > i + 1)
            expected = np.where(alive, stage_inputs(t)[stage], 0) / t.kept_mass[stage]
            np.testing.assert_allclose(stage_outputs(t)[stage], expected, rtol=1e-12)


def test_entropy_of_uniform_over_n_is_log2_n():
    for n in (1, 2, 5, 1000):
        t = trace(np.zeros(n, dtype=np.float32), SamplingConfig())
        assert math.isclose(t.entropy_bits, math.log2(n), abs_tol=1e-12)
        assert math.isclose(t.effective_tokens, n, rel_tol=1e-12)
    allowed = np.arange(100) < 8
    t = trace(np.zeros(100), SamplingConfig(), mask=allowed)
    assert math.isclose(t.effective_tokens, 8, rel_tol=1e-12)


def test_effective_tokens_is_exp_of_entropy_in_nats():
    t = trace(lecture_logits(), SamplingConfig(temperature=0.8))
    nats = -sum(p * math.log(p) for p in t.probs if p > 0)
    assert math.isclose(t.effective_tokens, math.exp(nats), rel_tol=1e-9)
    assert math.isclose(t.effective_tokens, 2**t.entropy_bits)


def test_order_is_descending_scaled_logit_ties_by_lower_id():
    rng = np.random.default_rng(12)
    logits = np.round(rng.standard_normal(5000), 1).astype(np.float32)  # many ties
    logits[::97] = -np.inf
    logits[5] = -0.0
    logits[6] = 0.0
    allowed = rng.random(5000) < 0.5
    t = trace(logits, SamplingConfig(temperature=0.7), mask=allowed)
    np.testing.assert_array_equal(t.order, np.argsort(-t.scaled_logits, kind="stable"))
    for stage_probs in stage_outputs(t).values():
        assert (np.diff(stage_probs[t.order]) <= 0).all()


def test_minus_zero_ties_with_zero_and_loses_to_the_lower_id():
    t = trace(np.array([1.0, 0.0, -0.0, 0.0], dtype=np.float32), SamplingConfig(top_k=3))
    assert t.order.tolist() == [0, 1, 2, 3] and t.removed_by.tolist() == [0, 0, 0, 3]


def test_cumulative_is_the_top_k_curve_along_order():
    t = trace(random_logits(13), SamplingConfig(temperature=0.9, top_k=40, top_p=0.8))
    np.testing.assert_allclose(t.cumulative, np.cumsum(t.probs_top_k[t.order]), rtol=1e-12)
    n = t.kept_count["top_p"]
    assert t.cumulative[n - 1] >= 0.8 - 1e-6 and (n == 1 or t.cumulative[n - 2] < 0.8)


def test_trace_is_read_only_and_owns_its_logits():
    logits = random_logits(14)
    t = trace(logits, SamplingConfig())
    logits[:] = 0  # the caller's array changes; the trace does not
    assert t.logits.std() > 1
    with pytest.raises(ValueError, match="read-only"):
        t.probs[0] = 1.0


def test_bad_logits_are_rejected_with_their_position():
    with pytest.raises(ValueError, match=r"logits\[1\]"):
        trace(np.array([0.0, np.nan]), SamplingConfig())
    with pytest.raises(ValueError, match="1-D"):
        trace(np.zeros((2, 3)), SamplingConfig())
    with pytest.raises(ValueError, match="all -inf"):
        trace(np.full(3, -np.inf), SamplingConfig())


# --- the draw ------------------------------------------------------------------------------


def test_draw_is_the_inverse_cdf_along_order():
    probs, order = np.array([0.1, 0.6, 0.3]), np.array([1, 2, 0])  # cumulative 0.6, 0.9, 1.0
    assert [draw(probs, order, u) for u in (0.0, 0.59, 0.6, 0.89, 0.9, 0.999)] == [1, 1, 2, 2, 0, 0]


def test_draw_skips_zero_probability_tokens():
    probs, order = np.array([0.5, 0.0, 0.5]), np.arange(3)
    assert draw(probs, order, 0.5) == 2
    nearly = np.array([0.3, 0.3, 0.3999999999, 0.0])  # rounding leaves the sum under 1
    assert draw(nearly, np.arange(4), 0.99999999999) == 2


def test_u_near_zero_draws_the_top_token():
    for seed in range(5):
        t = trace(random_logits(seed), SamplingConfig(temperature=1.3, top_p=0.95), u=1e-12)
        assert t.token == t.order[0] == int(np.argmax(t.probs))


def test_trace_token_is_draw_of_its_final_probs():
    rng = np.random.default_rng(15)
    for seed, config in enumerate(random_configs(rng, 40)):
        t = trace(random_logits(seed), config, u=new_u(rng))
        if not t.greedy:
            assert t.token == draw(t.probs, t.order, t.u)
            assert t.token_prob == t.probs[t.token] > 0


def test_same_u_while_sliders_move_is_deterministic():
    logits, u = random_logits(16), new_u(np.random.default_rng(42))
    assert u == new_u(np.random.default_rng(42)) and 0 <= u < 1
    for config in random_configs(np.random.default_rng(17), 20):
        first, again = trace(logits, config, u=u), trace(logits, config, u=u)
        assert first.token == again.token and (first.u == u or first.greedy)
        np.testing.assert_array_equal(first.probs, again.probs)


def test_u_is_optional_and_checked():
    t = trace(lecture_logits(), SamplingConfig(), u=None)
    assert t.u is None and t.token == 0
    for bad in (1.0, -0.1, math.nan, "0.5"):
        with pytest.raises(ValueError, match=r"u must (be a number|be below 1|lie in 0 … 1)"):
            trace(lecture_logits(), SamplingConfig(), u=bad)


def test_draw_frequencies_follow_the_probabilities():
    t = trace(lecture_logits(), SamplingConfig(top_k=4))
    rng = np.random.default_rng(18)
    counts = np.bincount([draw(t.probs, t.order, new_u(rng)) for _ in range(20_000)], minlength=5)
    np.testing.assert_allclose(counts / 20_000, t.probs, atol=0.015)
    assert counts[4] == 0


def test_sample_many_counts_n_draws():
    probs = trace(lecture_logits(), SamplingConfig(top_p=0.9)).probs
    counts = sample_many(probs, 10_000, np.random.default_rng(19))
    assert counts.sum() == 10_000 and counts[3:].sum() == 0
    np.testing.assert_allclose(counts / 10_000, probs, atol=0.02)
    np.testing.assert_array_equal(counts, sample_many(probs, 10_000, np.random.default_rng(19)))
    with pytest.raises(ValueError, match="n must be"):
        sample_many(probs, -1, np.random.default_rng(0))


# --- the configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("temperature", -0.1),
        ("temperature", 101.0),
        ("temperature", math.nan),
        ("temperature", math.inf),
        ("temperature", "0.7"),
        ("top_k", -1),
        ("top_k", 2.5),
        ("top_k", True),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("top_p", math.nan),
        ("min_p", -0.1),
        ("min_p", 1.1),
    ],
)
def test_config_rejects_bad_values_naming_parameter_and_value(name, value):
    with pytest.raises(ValueError, match=name) as error:
        SamplingConfig(**{name: value})
    assert repr(value) in str(error.value) or str(float(value)) in str(error.value)


def test_config_accepts_edges_and_normalises_slider_numbers():
    config = SamplingConfig(temperature=0, top_k=40.0, top_p=1, min_p=1)
    assert (config.temperature, config.top_k, config.top_p, config.min_p) == (0.0, 40, 1.0, 1.0)
    assert type(config.top_k) is int and SamplingConfig(temperature=100).temperature == 100


# --- "Your own numbers" --------------------------------------------------------------------


def test_parse_numbers_probs_become_log_probs():
    logits = parse_numbers(LECTURE_PROBS, "probs")
    assert logits.dtype == np.float32
    np.testing.assert_allclose(softmax(logits), [0.4, 0.3, 0.25, 0.03, 0.02], rtol=1e-6)


def test_parse_numbers_normalises_probs_and_maps_zero_to_minus_inf():
    logits = parse_numbers("1 1 2 0", "probs")
    np.testing.assert_allclose(softmax(logits), [0.25, 0.25, 0.5, 0.0], rtol=1e-6)
    assert logits[3] == -np.inf
    np.testing.assert_allclose(softmax(parse_numbers("1e308, 1e308", "probs")), [0.5, 0.5])


def test_parse_numbers_logits_are_kept_as_typed():
    assert parse_numbers("2.5; -1\n3,", "logits").tolist() == [2.5, -1.0, 3.0]


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ("", "probs", "at least one number"),
        (" , ", "logits", "at least one number"),
        ("0.4, abc", "probs", "'abc' is not a number"),
        ("0.5, -0.1", "probs", "cannot be negative, got '-0.1'"),
        ("0, 0.0", "probs", "all zero"),
        ("0.5, nan", "probs", "'nan' is not a finite number"),
        ("1, inf", "logits", "'inf' is not a finite number"),
        ("1, 1e39", "logits", "'1e39' is too large"),
        (", ".join(["1"] * 1001), "logits", "at most 1000 numbers, got 1001"),
        ("1, 2", "percent", "kind must be"),
    ],
)
def test_parse_numbers_rejects_bad_input_with_a_clear_message(text, kind, message):
    with pytest.raises(ValueError, match=message):
        parse_numbers(text, kind)


def test_parse_numbers_accepts_a_thousand_numbers():
    assert parse_numbers(" ".join(["0.001"] * 1000), "probs").shape == (1000,)


def test_docstring_examples_hold():
    import agent.sampling

    assert doctest.testmod(agent.sampling).failed == 0


# --- transformers' warpers as the oracle ---------------------------------------------------


def transformers_warp(logits: np.ndarray, config: SamplingConfig, mask) -> tuple[np.ndarray, ...]:
    """(kept, probs) by transformers' warpers, in generate()'s order and on/off rules."""
    import torch
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    scores = torch.tensor(logits, dtype=torch.float64)[None, :]
    if mask is not None:
        scores = scores.masked_fill(~torch.tensor(mask)[None, :], -math.inf)
    warpers = []
    if config.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(config.temperature))
    if config.top_k:
        warpers.append(TopKLogitsWarper(config.top_k))
    if config.top_p < 1.0:
        warpers.append(TopPLogitsWarper(config.top_p))
    if config.min_p > 0:
        warpers.append(MinPLogitsWarper(config.min_p))
    input_ids = torch.zeros((1, 1), dtype=torch.long)
    for warper in warpers:
        scores = warper(input_ids, scores)
    return torch.isfinite(scores)[0].numpy(), torch.softmax(scores, dim=-1)[0].numpy()


def test_matches_transformers_logits_warpers_on_random_logits():
    pytest.importorskip("transformers")
    grid = itertools.product((0.3, 0.7, 1.0, 1.5), (0, 1, 5, 50, 2000), (1.0, 0.5, 0.9), (0, 0.1))
    configs = [SamplingConfig(t, k, p, m) for t, k, p, m in grid]
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        logits = random_logits(100 + seed, size=1000, scale=float(rng.uniform(1, 4)))
        mask = rng.random(1000) < 0.7 if seed == 2 else None
        for config in configs:
            t = trace(logits, config, mask=mask)
            kept, expected = transformers_warp(logits, config, mask)
            np.testing.assert_array_equal(t.removed_by == 0, kept, err_msg=str(config))
            np.testing.assert_allclose(t.probs, expected, atol=1e-6, err_msg=str(config))


def test_greedy_is_traces_temperature_zero_token_and_probability():
    """The Greedy press's shortcut (issue 25) gives what the whole trace gives at T = 0: ties to the
    lower id (-0.0 ties with 0.0), masks, -inf logits, and the same errors."""
    rng = np.random.default_rng(25)
    zero = SamplingConfig(temperature=0)
    cases = [np.array([0.0, -0.0, 0.0], dtype=np.float32), np.array([-0.0, 0.0], dtype=np.float32),
             np.array([1.0, 3.0, 3.0, -np.inf], dtype=np.float32)]
    for _ in range(200):
        z = rng.normal(size=int(rng.integers(1, 60))).astype(np.float32).round(1)  # rounding makes ties
        z[rng.random(z.size) < 0.1] = -np.inf
        if np.isfinite(z).any():
            cases.append(z)
    for z in cases:
        masks = [None] + [m for m in (rng.random(z.size) < 0.5 for _ in range(3)) if (m & np.isfinite(z)).any()]
        for mask in masks:
            t = trace(z, zero, mask=mask)
            assert greedy(z, mask) == (t.token, t.token_prob), (z, mask)
    for bad, mask in ((np.array([np.nan, 1.0]), None), (np.array([-np.inf, -np.inf]), None),
                      (np.array([1.0, 2.0]), np.array([False, False])), (np.array([1.0, 2.0]), np.array([1, 0]))):
        with pytest.raises(ValueError) as expected:
            trace(bad, zero, mask=mask)
        with pytest.raises(ValueError, match=re.escape(str(expected.value))):
            greedy(bad, mask)
