// ReAct Lab: the lecture's Part I sampling math, in the page.
//
// Mirrors agent/sampling.py stage by stage under the same names, so that a slider move
// recomputes the trace without a request to the server:
//
//     mask -> temperature -> top_k -> top_p -> min_p -> renormalise -> draw with u
//
// over the *whole* vocabulary. agent/sampling.py stays the reference: tests/test_sampling_js.py
// runs this file in Chromium against agent.sampling.trace (kept sets identical, probabilities
// within 1e-6, the same drawn token for the same u). Plain JavaScript, no DOM, no bundler:
// rendering lives in viz/js/sampling_view.js. Probabilities are float64 like numpy's; the
// logits are float32, as the model gives them (scaled logits are rounded to float32 as
// `masked / np.float32(T)` is).

const STAGES = ["mask", "temperature", "top_k", "top_p", "min_p"]; // the lecture's order
const TOP_P_SLACK = 1e-6; // sampling.TOP_P_SLACK: 0.4 + 0.3 from float32 logits still reaches 0.7

// sampling.SamplingConfig, without the checks: the page's sliders are bounded already.
function samplingConfig(temperature = 1.0, top_k = 0, top_p = 1.0, min_p = 0.0) {
  return {temperature: +temperature, top_k: Math.trunc(+top_k), top_p: +top_p, min_p: +min_p};
}

// sampling._descending_order: token ids by descending float32 value, ties by lower id.
// One numeric sort of exact float64 keys (sortable float32 bits << idBits | id), no comparator.
const _f32 = new Float32Array(1);
const _u32 = new Uint32Array(_f32.buffer);
function descendingOrder(x) {
  const n = x.length;
  let idBits = 1;
  while ((1 << idBits) < n) idBits += 1;
  if (idBits > 21) return Int32Array.from(x.keys()).sort((a, b) => (x[b] - x[a]) || (a - b));
  const scale = 2 ** idBits;
  const keys = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    _f32[0] = x[i] + 0; // + 0 folds -0 into 0
    const bits = _u32[0];
    const ascending = bits & 0x80000000 ? (~bits >>> 0) : (bits | 0x80000000) >>> 0;
    keys[i] = (0xFFFFFFFF - ascending) * scale + i;
  }
  keys.sort();
  const order = new Int32Array(n);
  for (let r = 0; r < n; r++) order[r] = keys[r] % scale;
  return order;
}

// sampling._softmax: softmax(z / T) in float64 over the allowed entries (others 0); top = their max.
function _softmax(z, temperature, top, allowed) {
  const n = z.length;
  const e = new Float64Array(n);
  let total = 0;
  for (let i = 0; i < n; i++) {
    if (allowed && !allowed[i]) continue;
    let d = z[i] - top;
    if (allowed && d > 0) d = 0;
    if (temperature !== 1.0) d /= temperature;
    const v = Math.exp(d);
    e[i] = v;
    total += v;
  }
  for (let i = 0; i < n; i++) e[i] /= total;
  return e;
}

// temperature: the mask and temperature stages (sampling._before_truncation). What does not
// depend on T (the order, P, P') is kept in `memo` when one is given: a slider move on the same
// position then costs one tempered softmax, not a sort of the whole vocabulary.
function temperature(z, allowed, config, memo = null) {
  if (!memo || !memo.order) {
    const only = allowed.every((a) => a) ? null : allowed;
    const masked = only ? Float32Array.from(z, (v, i) => (only[i] ? v : -Infinity)) : z;
    const order = descendingOrder(masked);
    let zmax = -Infinity;
    for (let i = 0; i < z.length; i++) if (z[i] > zmax) zmax = z[i];
    const probsModel = _softmax(z, 1.0, zmax, null);
    const top = masked[order[0]];
    const probsMasked = only ? _softmax(z, 1.0, top, only) : probsModel;
    memo = Object.assign(memo || {}, {only, masked, order, probsModel, top, probsMasked});
  }
  const {only, masked, order, probsModel, top, probsMasked} = memo;
  if (config.temperature === 0) {
    return {order, probsModel, probsMasked, scaled: masked, probsTemperature: _scatter([1], order)};
  }
  if (config.temperature === 1.0) {
    return {order, probsModel, probsMasked, scaled: masked, probsTemperature: probsMasked};
  }
  const t = Math.fround(config.temperature);
  const scaled = Float32Array.from(masked, (v) => v / t);
  return {order, probsModel, probsMasked, scaled,
          probsTemperature: _softmax(z, config.temperature, top, only)};
}

// sampling._keep: the first n of p, renormalised; p itself when n covers it.
function _keep(p, n) {
  if (n >= p.length) return p;
  let total = 0;
  for (let i = 0; i < n; i++) total += p[i];
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = p[i] / total;
  return out;
}

function _cumsum(p) {
  const out = new Float64Array(p.length);
  let acc = 0;
  for (let i = 0; i < p.length; i++) { acc += p[i]; out[i] = acc; }
  return out;
}

// top_k: exactly k tokens (ties at place k: `order` already put the lower id first). 0 = off.
function top_k(sortedProbs, k) {
  return _keep(sortedProbs, k || sortedProbs.length);
}

// top_p: the smallest prefix whose cumulative probability reaches p (the crossing token stays).
function top_p(afterK, cumulativeK, p) {
  let n = cumulativeK.length;
  if (p < 1.0) n = _searchsorted(cumulativeK, p - TOP_P_SLACK, false) + 1;
  return _keep(afterK, n);
}

// min_p: drop tokens below min_p x the top probability (sorted descending: a prefix stays).
function min_p(afterP, m) {
  const floor = m * afterP[0];
  let n = 0;
  for (let i = 0; i < afterP.length; i++) if (afterP[i] >= floor) n += 1;
  return _keep(afterP, n);
}

// np.searchsorted: side "left" = first i with a[i] >= v; "right" = first i with a[i] > v.
function _searchsorted(a, v, right) {
  let lo = 0, hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (right ? a[mid] <= v : a[mid] < v) lo = mid + 1; else hi = mid;
  }
  return lo;
}

function _headMass(sortedProbs, kept) {
  if (kept === sortedProbs.length) return 1.0;
  let total = 0;
  for (let i = 0; i < kept; i++) total += sortedProbs[i];
  return total;
}

function _scatter(values, order) {
  const out = new Float64Array(order.length);
  for (let r = 0; r < values.length; r++) out[order[r]] = values[r];
  return out;
}

function _pad(cumulative, size) {
  if (cumulative.length === size) return cumulative;
  const out = new Float64Array(size).fill(cumulative[cumulative.length - 1]);
  out.set(cumulative);
  return out;
}

function _entropyBits(p) {
  let total = 0;
  for (let i = 0; i < p.length && p[i] > 0; i++) total += Math.log2(p[i]) * p[i];
  return -total + 0.0;
}

function _removedBy(order, counts) {
  const removedBy = new Int8Array(order.length);
  let previous = order.length;
  counts.forEach((count, stage) => {
    for (let r = count; r < previous; r++) removedBy[order[r]] = stage + 1;
    previous = count;
  });
  return removedBy;
}

// sampling._inverse_cdf: rank of the first token whose cumulative probability exceeds u.
function _inverseCdf(sortedProbs, cumulative, u) {
  const cum = cumulative || _cumsum(sortedProbs);
  let rank = _searchsorted(cum, u, true);
  if (rank >= cum.length) {
    rank = 0;
    for (let i = 0; i < sortedProbs.length; i++) if (sortedProbs[i] > 0) rank = i;
  }
  return rank;
}

// draw: inverse CDF along `order` (sampling.draw).
function draw(probs, order, u) {
  const sorted = Float64Array.from(order, (i) => probs[i]);
  return order[_inverseCdf(sorted, null, u)];
}

// trace: mask -> temperature -> top_k -> top_p -> min_p -> draw, every stage kept
// (sampling.trace). z: Float32Array logits; mask: null or a 0/1 array (1 = in A(s_t));
// u: the session's uniform draw, or null (nothing drawn: token = argmax).
// memo: an object kept per position (same z and mask) to skip the sort on the next call.
function trace(z, config, mask = null, u = null, memo = null) {
  const n = z.length;
  const allowed = new Uint8Array(n);
  let nAllowed = 0;
  for (let i = 0; i < n; i++) {
    allowed[i] = z[i] > -Infinity && (!mask || mask[i]) ? 1 : 0;
    nAllowed += allowed[i];
  }
  if (nAllowed === 0) throw new Error("no token can be sampled: A(s_t) is empty or every logit is -inf");
  const greedy = config.temperature === 0;
  if (greedy) u = null;
  const {order, probsModel, probsMasked, scaled, probsTemperature} = temperature(z, allowed, config, memo);
  const alive = greedy ? 1 : nAllowed;
  const sortedTemperature = Float64Array.from(order.subarray(0, alive), (i) => probsTemperature[i]);
  const afterK = top_k(sortedTemperature, config.top_k);
  const cumulativeK = _cumsum(afterK);
  const afterP = top_p(afterK, cumulativeK, config.top_p);
  const final = min_p(afterP, config.min_p);
  const counts = [nAllowed, alive, afterK.length, afterP.length, final.length];
  let maskMass = 1.0;
  if (nAllowed !== n) { maskMass = 0; for (let i = 0; i < n; i++) if (allowed[i]) maskMass += probsModel[i]; }
  const keptMass = [
    maskMass,
    greedy ? probsMasked[order[0]] : 1.0,
    _headMass(sortedTemperature, afterK.length),
    _headMass(afterK, afterP.length),
    _headMass(afterP, final.length),
  ];
  const probsTopK = afterK === sortedTemperature ? probsTemperature : _scatter(afterK, order);
  const probsTopP = afterP === afterK ? probsTopK : _scatter(afterP, order);
  const probs = final === afterP ? probsTopP : _scatter(final, order);
  let token = order[0];
  if (u !== null && u !== undefined) token = order[_inverseCdf(final, final === afterK ? cumulativeK : null, u)];
  const entropyBits = _entropyBits(final);
  const keptCount = {}, keptMassBy = {};
  STAGES.forEach((s, i) => { keptCount[s] = counts[i]; keptMassBy[s] = keptMass[i]; });
  return {
    config, logits: z, scaledLogits: scaled, probsModel, probsMasked, probsTemperature,
    probsTopK, probsTopP, probs, removedBy: _removedBy(order, counts), order,
    cumulative: _pad(cumulativeK, n), keptCount, keptMass: keptMassBy, entropyBits,
    effectiveTokens: 2 ** entropyBits, u: greedy ? null : u, token, tokenProb: probs[token], greedy,
  };
}

if (typeof window !== "undefined") {
  window.ReactLabSampling = {STAGES, samplingConfig, trace, temperature, top_k, top_p, min_p, draw,
                             descendingOrder};
}
