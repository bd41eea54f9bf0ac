"""The page's sampling math (viz/js/sampling.js) equals agent.sampling.trace, run in real Chromium.

Over 300+ configurations — ties at the top-k boundary, T = 0 and T = 100, top-p landing exactly on
a cumulative value (the lecture's 0.4 + 0.3 = 0.7), min-p, masks allowing 1 and 49,151 tokens,
-inf logits, the real model's logits over its whole vocabulary — both give identical kept sets,
probabilities within 1e-6 and the same drawn token for the same u.
"""

from __future__ import annotations

import base64
import itertools
from pathlib import Path

import numpy as np
import pytest

from agent import sampling
from agent.llm import continuation as cont

pytestmark = [pytest.mark.browser, pytest.mark.model]
JS = Path(__file__).resolve().parent.parent / "viz" / "js" / "sampling.js"
VIEW_JS = JS.with_name("sampling_view.js")
TOL = 1e-6

RUN = """([logits, mask, configs]) => {
  const b64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0)).buffer;
  const out64 = (a) => { const b = new Uint8Array(new Float32Array(a).buffer); let s = '';
    for (let i = 0; i < b.length; i += 8192) s += String.fromCharCode.apply(null, b.subarray(i, i + 8192));
    return btoa(s); };
  const z = new Float32Array(b64(logits));
  const m = mask === null ? null : new Uint8Array(b64(mask));
  const memo = {};  // the page keeps one per position: the first config sorts, the others reuse
  return configs.map(([t, k, p, mp, u]) => {
    const S = window.ReactLabSampling;
    const tr = S.trace(z, S.samplingConfig(t, k, p, mp), m, u, memo);
    const rb = new Uint8Array(tr.removedBy.buffer); let s = '';
    for (let i = 0; i < rb.length; i += 8192) s += String.fromCharCode.apply(null, rb.subarray(i, i + 8192));
    return {token: tr.token, u: tr.u, keptCount: tr.keptCount, keptMass: tr.keptMass,
            entropy: tr.entropyBits, tokenProb: tr.tokenProb, removedBy: btoa(s),
            probs: out64(tr.probs), probsT: out64(tr.probsTemperature), probsMasked: out64(tr.probsMasked),
            probsModel: out64(tr.probsModel), cumulative: out64(tr.cumulative)};
  });
}"""


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()


def _f32(s: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(s), dtype=np.float32).astype(np.float64)


@pytest.fixture(scope="module")
def js_page(browser):
    context = browser.new_context()
    page = context.new_page()
    page.set_content("<html><body></body></html>")
    page.add_script_tag(path=str(JS))
    page.add_script_tag(path=str(VIEW_JS))
    yield page
    context.close()


@pytest.fixture(scope="module")
def model_logits(lm):
    return cont.start(lm, "The capital of France is", False, seed=0).logits


def _check(js_page, logits, mask, configs):
    """Run every config in the page and in agent.sampling; compare kept sets, numbers, token."""
    z = np.asarray(logits, dtype=np.float32)
    mask_b64 = None if mask is None else _b64(mask.astype(np.uint8))
    got = js_page.evaluate(RUN, [_b64(z), mask_b64, [list(c) for c in configs]])
    for (t, k, p, mp, u), page in zip(configs, got, strict=True):
        want = sampling.trace(z, sampling.SamplingConfig(t, k, p, mp), mask=mask, u=u)
        where = f"T={t} k={k} p={p} min_p={mp} u={u} V={z.size}"
        removed = np.frombuffer(base64.b64decode(page["removedBy"]), dtype=np.int8)
        assert np.array_equal(removed, want.removed_by), f"kept sets differ at {where}"
        assert page["keptCount"] == want.kept_count, where
        assert page["token"] == want.token, f"drawn token differs at {where}"
        for name, ours in (("probs", want.probs), ("probsT", want.probs_temperature),
                           ("probsMasked", want.probs_masked), ("probsModel", want.probs_model),
                           ("cumulative", want.cumulative)):
            assert np.abs(_f32(page[name]) - ours).max() <= TOL, f"{name} differs at {where}"
        for stage, mass in want.kept_mass.items():
            assert abs(page["keptMass"][stage] - mass) <= TOL, f"kept mass of {stage} at {where}"
        assert abs(page["entropy"] - want.entropy_bits) <= TOL, where
        assert abs(page["tokenProb"] - want.token_prob) <= TOL, where
    return got


def _configs(rng, n, temperatures=(0, 0.05, 0.5, 0.7, 1.0, 1.3, 3.0, 100.0)):
    """n configurations spread over every stage's range, each with its own u."""
    grid = list(itertools.product(temperatures, (0, 1, 2, 3, 5, 50, 200), (0.05, 0.5, 0.7, 0.9, 0.95, 1.0),
                                  (0.0, 0.01, 0.1, 0.5, 1.0)))
    picks = rng.choice(len(grid), size=n, replace=False)
    return [(*grid[i], float(rng.random())) for i in picks]


def test_the_lecture_top_p_example_keeps_two_tokens_in_the_page(js_page):
    logits = np.log(np.array([0.4, 0.3, 0.25, 0.03, 0.02], dtype=np.float32))
    got = _check(js_page, logits, None, [(1.0, 0, 0.7, 0.0, 0.5), (1.0, 0, 0.71, 0.0, 0.99),
                                         (1.0, 2, 1.0, 0.0, 0.2), (0.0, 0, 1.0, 0.0, None)])
    assert got[0]["keptCount"]["top_p"] == 2 and got[1]["keptCount"]["top_p"] == 3


def test_ties_at_the_top_k_boundary_keep_the_lower_ids(js_page):
    logits = np.array([2.0, 1.0, 1.0, 1.0, 0.0, 1.0], dtype=np.float32)
    rng = np.random.default_rng(1)
    configs = [(t, k, 1.0, 0.0, float(rng.random())) for t in (0.5, 1.0, 3.0) for k in (1, 2, 3, 4)]
    _check(js_page, logits, None, configs)


def test_small_vocabularies_with_ties_and_minus_inf(js_page):
    rng = np.random.default_rng(2)
    for case in range(12):
        size = int(rng.choice([5, 17, 64, 300, 2000]))
        logits = np.round(rng.normal(0, 3, size), 1 if case % 2 else 6).astype(np.float32)  # rounding: ties
        if case % 3 == 0:
            logits[rng.choice(size, size // 3, replace=False)] = -np.inf
            logits[0] = 0.5  # at least one finite
        mask = None if case % 4 < 2 else rng.random(size) < 0.4
        if mask is not None:
            mask[int(np.argmax(logits))] = True
        _check(js_page, logits, mask, _configs(rng, 20))


def test_the_real_model_over_its_whole_vocabulary(js_page, model_logits):
    _check(js_page, model_logits, None, _configs(np.random.default_rng(3), 16))


def test_a_mask_allowing_one_token(js_page, model_logits):
    mask = np.zeros(model_logits.size, dtype=bool)
    mask[1234] = True
    _check(js_page, model_logits, mask, _configs(np.random.default_rng(4), 8))


def test_a_mask_allowing_all_but_the_model_favourite(js_page, model_logits):
    mask = np.ones(model_logits.size, dtype=bool)
    mask[int(np.argmax(model_logits))] = False  # 49,151 allowed
    _check(js_page, model_logits, mask, _configs(np.random.default_rng(5), 12))


def test_minus_inf_logits_over_the_whole_vocabulary(js_page, model_logits):
    logits = model_logits.copy()
    rng = np.random.default_rng(6)
    logits[rng.choice(logits.size, 20_000, replace=False)] = -np.inf
    logits[int(np.argmax(model_logits))] = -np.inf
    mask = rng.random(logits.size) < 0.5
    mask[int(np.nanargmax(np.where(np.isfinite(logits), logits, -1e30)))] = True
    _check(js_page, logits, None, _configs(np.random.default_rng(7), 10))
    _check(js_page, logits, mask, _configs(np.random.default_rng(8), 10))


def test_token_text_in_the_page_chart_is_shown_as_text_and_never_runs(js_page):
    html = js_page.evaluate("""() => {
      const names = ['<img src=x onerror="window.__pwned=1">', '${window.__pwned2=1}', '`'];
      const t = trace(new Float32Array([0, 0, 0]), samplingConfig(), null, 0.5);
      t.position = Int32Array.from([0, 1, 2]);
      const top = topN(t, 3, Int32Array.from([0, 1, 2]));
      const out = distributionChart(top, (i) => names[i], new Set(), {masked: false, topP: 1, logAxis: false,
                                    greedy: false, chartId: 'x'}) + readout(t, (i) => names[i], 0);
      document.body.innerHTML = out;
      return out;
    }""")
    assert "<img" not in html and "${" not in html and "`" not in html
    js_page.wait_for_timeout(100)
    assert js_page.evaluate("() => [window.__pwned, window.__pwned2]") == [None, None]
    assert '&#60;img src=x' in html


def test_on_an_engine_the_chart_draws_one_outside_bar_and_the_readout_the_note(js_page):
    """A position with the engine's note (agent.llm.engine): the trace over its K tokens, the
    mass it did not send as one bar, the note as text."""
    html = js_page.evaluate("""() => {
      const z = new Float32Array([Math.log(0.5), -Infinity, Math.log(0.25), -Infinity, -Infinity]);
      const t = trace(z, samplingConfig(), null, 0.5);
      t.position = Int32Array.from([0, 2, 1, 3, 4]);
      const engine = {k: 2, outside: 0.25, server: 'gpu', note: '<b>approximate</b>'};
      const top = topN(t, 2, Int32Array.from([0, 2, 1, 3, 4]), engine.k);
      return distributionChart(top, (i) => `tok${i}`, new Set(), {masked: false, topP: 1, logAxis: false,
                               greedy: false, chartId: 'x', engine, vocab: 5}) +
             readout(t, (i) => `tok${i}`, 0, engine);
    }""")
    assert "engine's top 2, renormalised" in html and "outside the top 2: 3 tokens" in html
    assert "25.00%" in html and "not in the trace" in html and "66.67%" in html  # 0.5 / 0.75
    assert "all other" not in html and "&#60;b&#62;approximate" in html
