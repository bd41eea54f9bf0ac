// ReAct Lab: the Sampling tab's live views, drawn in the page.
//
// One renderer for the next-token chart, the stage readout (kept tokens and mass per stage,
// entropy, effective tokens, the draw), the cumulative curve with u and the constraint readout.
// It chooses which rows a chart shows and draws them as HTML, with the
// same class names (viz/theme.py styles them). Every number comes from `trace` in
// viz/js/sampling.js; this file formats and lays out, and never computes a probability itself.
//
// The server sends a position once (viz/position.py); the sliders (Temperature, Top-k, Top-p,
// Min-p, Bars shown, Axis) are read from the page and never reach the server. Their element ids
// and defaults come from the server's registry (agent/controls.py) as the chart's `controls` prop:
// {temperature: {id, default}, top_k: …, top_p: …, min_p: …, n_bars: …, axis: …}.
//
// On an inference engine (app.py --engine) a position holds only the K tokens the server sent (the
// other logits are -inf) and the engine's note: the chart adds one "outside the top K" bar and the
// readout the note.

const STAGE_LABELS = {mask: "grammar mask", temperature: "temperature", top_k: "top-k", top_p: "top-p",
                      min_p: "min-p"};
const LOG_FLOOR = 1e-6; // the log axis starts at 10^-6

function esc(text) {
  return String(text).replace(/[&<>"'`$\\{}]/g, (c) => `&#${c.charCodeAt(0)};`);
}
function tokenHtml(display) { return esc(display).replace(/␠/g, '<span class="vs">␠</span>'); }
function thousands(n) { return Number(n).toLocaleString("en-US"); }
function fixed(x, digits) {
  return Number(x).toLocaleString("en-US", {minimumFractionDigits: digits, maximumFractionDigits: digits});
}

// charts.pct: 77.25%, 0.0310%, 2.1e-05%, 0%
function pct(p) {
  if (p <= 0) return "0%";
  if (p >= 0.001) return `${(100 * p).toFixed(2)}%`;
  if (p >= 1e-6) return `${(100 * p).toFixed(4)}%`;
  const [m, e] = (100 * p).toExponential(1).split("e");
  const sign = e[0] === "-" ? "-" : "+";
  return `${m}e${sign}${e.replace(/^[-+]/, "").padStart(2, "0")}%`;
}

function barWidth(p, scaleMax, logAxis) {
  if (p <= 0) return 0;
  if (logAxis) {
    const floor = Math.log10(LOG_FLOOR);
    return Math.max(0, Math.min(100, 100 * (Math.log10(Math.max(p, LOG_FLOOR)) - floor) / -floor));
  }
  return scaleMax > 0 ? Math.max(0, Math.min(100, 100 * p / scaleMax)) : 0;
}

function bar(p, kind, scaleMax, logAxis) {
  return `<span class="cell bar-cell ${kind}"><span class="bar ${kind}" style="width:${
    barWidth(p, scaleMax, logAxis).toFixed(2)}%"></span><span class="bar-num">${pct(p)}</span></span>`;
}

// top_n: the n tokens with the highest of P, P' and the final P (ties: lower id first). `support`:
// how many tokens the trace has (the vocabulary; on an engine the K tokens it sent).
function topN(t, n, modelRank, support = t.probsModel.length) {
  const V = t.probsModel.length;
  n = Math.max(1, Math.min(n, V));
  const ids = [], keys = [];
  for (let i = 0; i < V; i++) {
    const key = Math.max(t.probsModel[i], t.probsMasked[i], t.probs[i]);
    if (ids.length === n && key <= keys[n - 1]) continue; // ids ascend: an equal key loses the tie
    let j = ids.length === n ? n - 1 : ids.length;
    while (j > 0 && keys[j - 1] < key) { keys[j] = keys[j - 1]; ids[j] = ids[j - 1]; j -= 1; }
    keys[j] = key; ids[j] = i;
    if (ids.length > n) { ids.length = n; keys.length = n; }
  }
  const position = t.position;
  let shownModel = 0, shownFinal = 0, maxP = 0;
  const rows = ids.map((i) => {
    shownModel += t.probsModel[i]; shownFinal += t.probs[i];
    maxP = Math.max(maxP, t.probsModel[i], t.probsMasked[i], t.probs[i]);
    return {token: i, rank: modelRank[i] + 1, pModel: t.probsModel[i], pMasked: t.probsMasked[i],
            pFinal: t.probs[i], cumulative: t.cumulative[position[i]],
            removedBy: t.removedBy[i] ? STAGES[t.removedBy[i] - 1] : "", chosen: i === t.token};
  });
  return {rows, otherCount: support - ids.length, otherModel: Math.max(0, 1 - shownModel),
          otherFinal: Math.max(0, 1 - shownFinal), maxP};
}

function chartRow(r, name, special, masked, topP, scaleMax, logAxis) {
  const classes = ["ntc-row", "tok-row"];
  if (r.removedBy) classes.push("removed");
  if (r.removedBy === "mask") classes.push("forbidden");
  if (r.chosen) classes.push("chosen");
  const cum = ["mask", "temperature", "top_k"].includes(r.removedBy) ? ""
    : `<span class="cumbar" style="width:${(100 * Math.min(r.cumulative, 1)).toFixed(2)}%"></span>`;
  return `<div class="${classes.join(" ")}" data-token-id="${r.token}" role="button" tabindex="0" ` +
    `title="token id ${r.token} · rank ${r.rank} by the model · click to append it">` +
    `<span class="cell rank">${r.rank}</span>` +
    `<span class="cell tok mono${special ? " special" : ""}">${tokenHtml(name)}</span>` +
    bar(r.pModel, "model", scaleMax, logAxis) + (masked ? bar(r.pMasked, "masked", scaleMax, logAxis) : "") +
    bar(r.pFinal, "final", scaleMax, logAxis) +
    `<span class="cell cum" style="--p:${(100 * topP).toFixed(2)}%">${cum}<span class="pline"></span></span>` +
    `<span class="cell stage">${esc(STAGE_LABELS[r.removedBy] || "")}${r.chosen ? "<b> ← drawn</b>" : ""}</span></div>`;
}

// charts.distribution_chart: token, the model's P, P' under the mask, the final P, cumulative.
// engine: null, or the server's note on this position ({k, outside, server, note}: agent.llm.engine).
function distributionChart(top, names, special, {masked, topP, logAxis, greedy, chartId, pickable = true,
                                                 engine = null, vocab = 0}) {
  const scaleMax = top.maxP;
  const head = '<div class="ntc-row ntc-head"><span class="cell rank">#</span><span class="cell tok">token</span>' +
    `<span class="cell bar-cell">${engine ? `P — engine's top ${engine.k}, renormalised` : "P — model (T = 1)"}</span>` +
    (masked ? '<span class="cell bar-cell">P′ — masked</span>' : "") +
    `<span class="cell bar-cell">${greedy ? "final (greedy: argmax)" : "final — drawn from"}</span>` +
    `<span class="cell cum">cumulative · top-p = ${+topP.toFixed(6)}</span><span class="cell stage">removed by</span></div>`;
  const rows = top.rows.map((r) => chartRow(r, names(r.token), special.has(r.token), masked, topP, scaleMax, logAxis));
  const other = top.otherCount === 0 ? "" : '<div class="ntc-row other"><span class="cell rank"></span>' +
    `<span class="cell tok">${engine ? `other ${thousands(top.otherCount)} of the top ${engine.k}`
      : `all other ${thousands(top.otherCount)} tokens`}</span>` +
    bar(top.otherModel, "model", logAxis ? scaleMax : 1.0, logAxis) +
    (masked ? '<span class="cell bar-cell"></span>' : "") +
    bar(top.otherFinal, "final", logAxis ? scaleMax : 1.0, logAxis) +
    '<span class="cell cum"></span><span class="cell stage"></span></div>';
  const outside = engine ? outsideRow(engine, vocab, masked, logAxis, scaleMax) : "";
  const axis = logAxis ? "log axis (10⁻⁶ … 1)" : `linear axis (longest bar = ${pct(scaleMax)})`;
  return `<div class="ntc${masked ? " masked" : ""}" data-chart="${esc(chartId)}">${head}${rows.join("")}${other}${outside}` +
    `<div class="ntc-foot">${axis}${pickable ? " · click a token to append it" : ""}</div></div>`;
}

// On an engine: the tokens the server did not send, as one bar of the model's P (not in the trace).
function outsideRow(engine, vocab, masked, logAxis, scaleMax) {
  return '<div class="ntc-row other outside-top-k" title="not sent by the engine: not in the trace">' +
    '<span class="cell rank"></span>' +
    `<span class="cell tok">outside the top ${engine.k}: ${thousands(vocab - engine.k)} tokens, of the model's P</span>` +
    bar(engine.outside, "model", logAxis ? scaleMax : 1.0, logAxis) +
    (masked ? '<span class="cell bar-cell"></span>' : "") +
    '<span class="cell bar-cell">not in the trace</span><span class="cell cum"></span><span class="cell stage"></span></div>';
}

// charts.readout: kept tokens and mass per stage, entropy, effective tokens, the draw.
function readout(t, names, truncated, engine = null) {
  const stageRows = STAGES.map((s) => `<tr><td>${esc(STAGE_LABELS[s])}</td><td class="num">${
    thousands(t.keptCount[s])}</td><td class="num">${pct(t.keptMass[s])}</td></tr>`).join("");
  const token = tokenHtml(names(t.token));
  const draw = t.greedy ? `greedy (T = 0): argmax <b class='mono'>${token}</b>, no softmax, no draw`
    : `u = <b>${t.u.toFixed(4)}</b> → <b class='mono'>${token}</b> with p = ${pct(t.tokenProb)}`;
  const note = truncated
    ? `<div class="note">The prompt was cut: ${thousands(truncated)} tokens dropped from the left.</div>` : "";
  return '<div class="readout"><table><thead><tr><th>stage</th><th>kept tokens</th>' +
    `<th>kept mass</th></tr></thead><tbody>${stageRows}</tbody></table>` +
    `<div class="facts"><span>entropy <b>${t.entropyBits.toFixed(3)} bits</b></span>` +
    `<span>effective tokens <b>${fixed(t.effectiveTokens, 2)}</b></span></div>` +
    `<div class="draw">${draw}</div>${note}` +
    (engine ? `<div class="note engine-note">${esc(engine.note)}</div>` : "") + "</div>";
}

// charts.cumulative_curve: the final distribution's cumulative curve over the shown rows, with u.
function cumulativeCurve(top, u, width = 420, height = 220) {
  const rows = top.rows.filter((r) => r.pFinal > 0);
  if (!rows.length) return "";
  const step = (width - 50) / rows.length;
  const pts = [[40, height - 20]], marks = [];
  let acc = 0;
  rows.forEach((r, i) => {
    acc += r.pFinal;
    const y = height - 20 - (height - 40) * Math.min(acc, 1);
    const x0 = 40 + i * step, x1 = 40 + (i + 1) * step;
    pts.push([x0, pts[pts.length - 1][1]], [x0, y], [x1, y]);
    if (r.chosen) marks.push(`<circle cx="${((x0 + x1) / 2).toFixed(1)}" cy="${y.toFixed(1)}" r="6" class="umark"/>`);
  });
  const path = pts.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ");
  let uline = "";
  if (u !== null && u !== undefined) {
    const uy = height - 20 - (height - 40) * u;
    uline = `<line x1="40" x2="${width - 10}" y1="${uy.toFixed(1)}" y2="${uy.toFixed(1)}" class="uline"/>` +
      `<text x="${width - 12}" y="${(uy - 6).toFixed(1)}" text-anchor="end" class="ulabel">u = ${u.toFixed(3)}</text>`;
  }
  return `<svg class="cumcurve" viewBox="0 0 ${width} ${height}" role="img" ` +
    'aria-label="cumulative probability of the final distribution with the draw u">' +
    `<line x1="40" x2="40" y1="20" y2="${height - 20}" class="axis"/>` +
    `<line x1="40" x2="${width - 10}" y1="${height - 20}" y2="${height - 20}" class="axis"/>` +
    '<text x="34" y="26" text-anchor="end" class="tick">1</text>' +
    `<text x="34" y="${height - 20}" text-anchor="end" class="tick">0</text>` +
    `<text x="${(width / 2).toFixed(0)}" y="${height - 3}" text-anchor="middle" class="tick">tokens, most probable first</text>` +
    `<polyline points="${path}" class="curve"/>${uline}${marks.join("")}</svg>`;
}

// charts.constraint_readout: |A(s_t)| of |V|, the model's mass on forbidden tokens, the grammar's state.
function constraintReadout(t, grammar, vocab) {
  if (!grammar) {
    return `<div class="creadout off"><div><b>No constraint.</b> All ${thousands(vocab)} tokens are allowed; ` +
      "choose a grammar under <i>Constraint</i> to see its mask A(s<sub>t</sub>).</div></div>";
  }
  const forced = grammar.forced ? `<div>next must be <code class="mono">${esc(grammar.forced)}</code></div>` : "";
  const err = grammar.error ? `<div class="msg error">${esc(grammar.error)}</div>` : "";
  return `<div class="creadout"><div class="ctitle">Constraint: <b>${esc(grammar.name)}</b></div>` +
    `<div>allowed tokens |A(s<sub>t</sub>)| = <b>${thousands(t.keptCount.mask)}</b> of |V| = ${thousands(vocab)}</div>` +
    `<div>mass the model put on forbidden tokens: <b>${pct(Math.max(0, 1 - t.keptMass.mask))}</b></div>` +
    `<div>generated inside the grammar: <code class="mono">${esc(grammar.text) || "∅"}</code></div>` +
    `<div>state: ${grammar.status}</div>${forced}${err}</div>`;
}

// ---- the glue: a position from the server, the sliders from the page --------------------------

function decodePosition(value) {
  const bytes = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  const z = new Float32Array(bytes(value.logits).buffer); // little-endian, as viz/position.py packs it
  let mask = null;
  if (value.mask) {
    const bits = bytes(value.mask);
    mask = new Uint8Array(z.length);
    for (let i = 0; i < z.length; i++) mask[i] = (bits[i >> 3] >> (i & 7)) & 1;
  }
  return {z, mask, u: value.u, vocab: value.vocab, truncated: value.truncated || 0,
          constraint: value.constraint || null, numbered: value.names === "numbered", step: value.step,
          engine: value.engine || null};
}

// The token display strings: one static file per page load, shared by every chart on the page.
function loadTokens(url) {
  window.__reactLabTokens = window.__reactLabTokens || {};
  if (!window.__reactLabTokens[url]) {
    window.__reactLabTokens[url] = fetch(url, {cache: "force-cache"}).then((r) => r.json())
      .then((j) => ({strings: j.strings, special: new Set(j.special)}));
  }
  return window.__reactLabTokens[url];
}

// Temperature, Top-k, Top-p, Min-p, Bars shown and Axis as the page shows them now (`controls`:
// the registry's ids and defaults; a slider not on the page reads as its default).
function readControls(controls) {
  const range = (name) => {
    const c = controls[name];
    const el = document.querySelector(`#${c.id} input[type="range"]`);
    return el && el.value !== "" && Number.isFinite(+el.value) ? +el.value : c.default;
  };
  const axis = document.querySelector(`#${controls.axis.id} input:checked`);
  return {temperature: range("temperature"), top_k: range("top_k"), top_p: range("top_p"),
          min_p: range("min_p"), bars: range("n_bars"), log: !!axis && axis.value === "Log"};
}

function _modelRank(z) {
  const order = descendingOrder(z);
  const rank = new Int32Array(z.length);
  for (let r = 0; r < order.length; r++) rank[order[r]] = r;
  return rank;
}

// Everything a person reads for one position under the current controls.
function paintPosition(parts, view, controls, chartId) {
  const pos = view.pos;
  const config = samplingConfig(controls.temperature, controls.top_k, Math.max(controls.top_p, 1e-9),
                                controls.min_p);
  const t = trace(pos.z, config, pos.mask, pos.u, view.memo);
  if (!view.memo.position) {
    view.memo.position = new Int32Array(t.order.length);
    for (let r = 0; r < t.order.length; r++) view.memo.position[t.order[r]] = r;
    view.memo.modelRank = _modelRank(pos.z);
  }
  t.position = view.memo.position;
  const names = pos.numbered ? (i) => `#${i + 1}` : (i) => view.tokens.strings[i];
  const special = pos.numbered ? new Set() : view.tokens.special;
  const support = pos.engine ? pos.engine.k : pos.z.length;
  const top = topN(t, Math.min(controls.bars, support), view.memo.modelRank, support);
  parts.chart.innerHTML = distributionChart(top, names, special, {
    masked: pos.mask !== null, topP: config.top_p, logAxis: controls.log, greedy: t.greedy, chartId,
    pickable: view.pickable, engine: pos.engine, vocab: pos.vocab});
  parts.readout.innerHTML = readout(t, names, pos.truncated, pos.engine) + cumulativeCurve(top, t.greedy ? null : t.u);
  if (parts.constraint) parts.constraint.innerHTML = constraintReadout(t, pos.constraint, pos.vocab);
  return t;
}

// Clicking (or Enter on) a token row appends that token: the row's id goes into a hidden textbox
// whose input event reaches the server. A counter makes a repeated click on one row a new value.
function listenForPicks(element) {
  let clicks = 0;
  const pick = (row) => {
    const box = document.querySelector('#token-pick textarea, #token-pick input');
    if (!box || !row) return;
    clicks += 1;
    box.value = `${row.dataset.tokenId}:${clicks}`;
    box.dispatchEvent(new Event("input", {bubbles: true}));
  };
  element.addEventListener("click", (e) => pick(e.target.closest("[data-token-id]")));
  element.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" && e.key !== " ") return;
    const row = e.target.closest("[data-token-id]");
    if (row) { e.preventDefault(); pick(row); }
  });
}

// js_on_load of a chart component: draw the position in props.value now, again when the server
// sends a new one (watch), and on every control change in the page (no request).
function mountSampling(element, props, watch) {
  const view = {pos: null, memo: null, tokens: null, signature: "", frame: 0, pickable: !!props.pickable};
  const chartId = props.chart_id || "next-token-chart";
  const controls = props.controls;
  const controlIds = Object.values(controls).map((c) => c.id);
  const paint = () => {
    view.frame = 0;
    const parts = {chart: element.querySelector(".rl-chart-host"), readout: element.querySelector(".rl-readout-host"),
                   constraint: element.querySelector(".rl-creadout-host")};
    if (!view.pos || !parts.chart || (!view.pos.numbered && !view.tokens)) return;
    const now = readControls(controls);
    const signature = JSON.stringify(now) + view.pos.step;
    if (signature === view.signature && parts.chart.firstChild) return;
    try {
      paintPosition(parts, view, now, chartId);
      view.signature = signature;
      parts.chart.dataset.paints = String(+(parts.chart.dataset.paints || 0) + 1);
      parts.chart.dataset.config = JSON.stringify(now);
    } catch (err) {
      parts.chart.innerHTML = `<div class="msg error" role="status">⚠ ${esc(err.message)}</div>`;
    }
  };
  const schedule = () => { if (!view.frame) view.frame = requestAnimationFrame(paint); };
  const load = () => {
    const v = props.value;
    view.pos = v && typeof v === "object" && v.logits ? decodePosition(v) : null;
    view.memo = {};
    view.signature = "";
    const host = element.querySelector(".rl-chart-host");
    if (!view.pos && host) host.innerHTML = "";
    paint();
  };
  watch("value", load);
  if (props.tokens_url) loadTokens(props.tokens_url).then((tokens) => { view.tokens = tokens; view.signature = ""; paint(); });
  const onControl = (e) => { if (e.target.closest && controlIds.some((id) => e.target.closest(`#${id}`))) schedule(); };
  document.addEventListener("input", onControl, true);
  document.addEventListener("change", onControl, true);
  // Values the server sets (the tour, a deep link) change the sliders without an input event.
  const poll = setInterval(() => { if (!element.isConnected) clearInterval(poll); else schedule(); }, 250);
  if (props.pickable) listenForPicks(element);
  load();
}
