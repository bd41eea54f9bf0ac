"""Sampling-tab views as HTML: the next-token chart, the stage readout, the draw on the cumulative
curve, the continuation and the Sample ×N histogram.

Pure functions of values computed in agent/ (a SamplingTrace, its TopN rows, a Continuation):
they format numbers and lay out bars; they never compute a probability. HTML because one update
costs ≈0.5 ms in the browser against ≈166 ms for a matplotlib figure (DESIGN.md).
"""

from __future__ import annotations

import math

from viz.render import esc, token_html

STAGE_LABELS = {
    "mask": "grammar mask",
    "temperature": "temperature",
    "top_k": "top-k",
    "top_p": "top-p",
    "min_p": "min-p",
}
LOG_FLOOR = 1e-6  # the log axis starts at 10⁻⁶


def pct(p: float) -> str:
    """A probability as a percentage a class can read: 77.25%, 0.031%, 2.1e-05%, 0%."""
    if p <= 0:
        return "0%"
    if p >= 0.001:
        return f"{100 * p:.2f}%"
    if p >= 1e-6:
        return f"{100 * p:.4f}%"
    return f"{100 * p:.1e}%"


def bar_width(p: float, scale_max: float, log_axis: bool) -> float:
    """Bar length in percent of its cell on a linear (relative to scale_max) or log axis."""
    if p <= 0:
        return 0.0
    if log_axis:
        floor = math.log10(LOG_FLOOR)
        return max(0.0, min(100.0, 100 * (math.log10(max(p, LOG_FLOOR)) - floor) / -floor))
    return max(0.0, min(100.0, 100 * p / scale_max)) if scale_max > 0 else 0.0


def _bar(p: float, kind: str, scale_max: float, log_axis: bool) -> str:
    width = bar_width(p, scale_max, log_axis)
    return (
        f'<span class="cell bar-cell {kind}"><span class="bar {kind}" style="width:{width:.2f}%"></span>'
        f'<span class="bar-num">{pct(p)}</span></span>'
    )


def distribution_chart(
    top, token_strings, *, masked: bool, top_p: float, log_axis: bool, greedy: bool,
    special_ids=frozenset(), chart_id: str = "next-token-chart",
) -> str:
    """The top-N bars: token, the model's P, P′ under the mask (if any), the final P, cumulative.

    Removed tokens are greyed and labelled with the stage that removed them; tokens the grammar
    forbids are struck through; the token u would draw is outlined. One last row holds all other
    tokens so the bars sum to 1.
    """
    scale_max = top.max_p
    head = (
        '<div class="ntc-row ntc-head"><span class="cell rank">#</span><span class="cell tok">token</span>'
        '<span class="cell bar-cell">P — model (T = 1)</span>'
        + ('<span class="cell bar-cell">P′ — masked</span>' if masked else "")
        + f'<span class="cell bar-cell">{"final (greedy: argmax)" if greedy else "final — drawn from"}</span>'
        f'<span class="cell cum">cumulative · top-p = {top_p:g}</span>'
        '<span class="cell stage">removed by</span></div>'
    )
    rows = []
    for r in top.rows:
        classes = ["ntc-row", "tok-row"]
        if r.removed_by:
            classes.append("removed")
        if r.removed_by == "mask":
            classes.append("forbidden")
        if r.chosen:
            classes.append("chosen")
        text = token_strings[r.token]
        special = ' special' if r.token in special_ids else ""
        cum = "" if r.removed_by in ("mask", "temperature", "top_k") else (
            f'<span class="cumbar" style="width:{100 * min(r.cumulative, 1):.2f}%"></span>'
        )
        rows.append(
            f'<div class="{" ".join(classes)}" data-token-id="{r.token}" role="button" tabindex="0" '
            f'title="token id {r.token} · rank {r.rank} by the model · click to append it">'
            f'<span class="cell rank">{r.rank}</span>'
            f'<span class="cell tok mono{special}">{token_html(text)}</span>'
            + _bar(r.p_model, "model", scale_max, log_axis)
            + (_bar(r.p_masked, "masked", scale_max, log_axis) if masked else "")
            + _bar(r.p_final, "final", scale_max, log_axis)
            + f'<span class="cell cum" style="--p:{100 * top_p:.2f}%">{cum}'
            f'<span class="pline"></span></span>'
            f'<span class="cell stage">{esc(STAGE_LABELS.get(r.removed_by, ""))}'
            f'{"<b> ← drawn</b>" if r.chosen else ""}</span></div>'
        )
    other = (
        f'<div class="ntc-row other"><span class="cell rank"></span>'
        f'<span class="cell tok">all other {top.other_count:,} tokens</span>'
        + _bar(top.other_model, "model", 1.0 if not log_axis else scale_max, log_axis)
        + ('<span class="cell bar-cell"></span>' if masked else "")
        + _bar(top.other_final, "final", 1.0 if not log_axis else scale_max, log_axis)
        + '<span class="cell cum"></span><span class="cell stage"></span></div>'
    )
    axis = "log axis (10⁻⁶ … 1)" if log_axis else f"linear axis (longest bar = {pct(scale_max)})"
    return (
        f'<div class="ntc{" masked" if masked else ""}" data-chart="{esc(chart_id)}">'
        + head + "".join(rows) + other
        + f'<div class="ntc-foot">{axis} · click a token to append it</div></div>'
    )


def readout(trace, token_strings, *, truncated: int = 0) -> str:
    """Kept tokens and kept mass after each stage, entropy, effective number of tokens, the draw."""
    stage_rows = "".join(
        f'<tr><td>{esc(STAGE_LABELS[s])}</td><td class="num">{trace.kept_count[s]:,}</td>'
        f'<td class="num">{pct(trace.kept_mass[s])}</td></tr>'
        for s in trace.kept_count
    )
    token = token_html(token_strings[trace.token])
    draw = (
        f"greedy (T = 0): argmax <b class='mono'>{token}</b>, no softmax, no draw"
        if trace.greedy
        else f"u = <b>{trace.u:.4f}</b> → <b class='mono'>{token}</b> with p = {pct(trace.token_prob)}"
    )
    note = (
        f'<div class="note">The prompt was cut: {truncated:,} tokens dropped from the left.</div>'
        if truncated else ""
    )
    return (
        '<div class="readout"><table><thead><tr><th>stage</th><th>kept tokens</th>'
        f"<th>kept mass</th></tr></thead><tbody>{stage_rows}</tbody></table>"
        f'<div class="facts"><span>entropy <b>{trace.entropy_bits:.3f} bits</b></span>'
        f'<span>effective tokens <b>{trace.effective_tokens:,.2f}</b></span></div>'
        f'<div class="draw">{draw}</div>{note}</div>'
    )


def cumulative_curve(top, u: float | None, width: int = 420, height: int = 220) -> str:
    """The final distribution's cumulative curve over the shown rows, with the draw u on it.

    Sampling by inverse CDF: the drawn token is the first whose cumulative probability exceeds u.
    """
    rows = [r for r in top.rows if r.p_final > 0]
    if not rows:
        return ""
    n = len(rows)
    step = (width - 50) / n
    pts, acc = [(40.0, height - 20.0)], 0.0
    marks = []
    for i, r in enumerate(rows):
        acc += r.p_final
        y = height - 20 - (height - 40) * min(acc, 1.0)
        x0, x1 = 40 + i * step, 40 + (i + 1) * step
        pts += [(x0, pts[-1][1]), (x0, y), (x1, y)]
        if r.chosen:
            marks.append(f'<circle cx="{(x0 + x1) / 2:.1f}" cy="{y:.1f}" r="6" class="umark"/>')
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
    uline = ""
    if u is not None:
        uy = height - 20 - (height - 40) * u
        uline = (
            f'<line x1="40" x2="{width - 10}" y1="{uy:.1f}" y2="{uy:.1f}" class="uline"/>'
            f'<text x="{width - 12}" y="{uy - 6:.1f}" text-anchor="end" class="ulabel">u = {u:.3f}</text>'
        )
    return (
        f'<svg class="cumcurve" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="cumulative probability of the final distribution with the draw u">'
        f'<line x1="40" x2="40" y1="20" y2="{height - 20}" class="axis"/>'
        f'<line x1="40" x2="{width - 10}" y1="{height - 20}" y2="{height - 20}" class="axis"/>'
        f'<text x="34" y="26" text-anchor="end" class="tick">1</text>'
        f'<text x="34" y="{height - 20}" text-anchor="end" class="tick">0</text>'
        f'<text x="{width / 2:.0f}" y="{height - 3}" text-anchor="middle" class="tick">'
        f"tokens, most probable first</text>"
        f'<polyline points="{path}" class="curve"/>{uline}{"".join(marks)}</svg>'
    )


def continuation_view(prompt_text: str, pieces, probs, *, finished: bool, max_prompt_chars: int = 400) -> str:
    """The prompt (grey) and each chosen token coloured by the probability it had when chosen."""
    shown = prompt_text if len(prompt_text) <= max_prompt_chars else "…" + prompt_text[-max_prompt_chars:]
    spans = "".join(
        f'<span class="ctok" style="--a:{0.15 + 0.85 * max(0.0, min(1.0, p)):.3f}" '
        f'title="p = {pct(p)} when chosen">{esc(piece)}</span>'
        for piece, p in zip(pieces, probs, strict=True)
    )
    end = '<span class="cend">⟨end of sequence⟩</span>' if finished else '<span class="caret">▍</span>'
    text = "".join(pieces)
    return (
        f'<div class="continuation" data-text="{esc(text)}" data-tokens="{len(pieces)}">'
        f'<span class="cprompt">{esc(shown)}</span>{spans}{end}</div>'
        '<div class="legend">colour = probability the token had when chosen: '
        '<span class="ctok" style="--a:0.2">low</span> <span class="ctok" style="--a:1">high</span></div>'
    )


def histogram_view(hist, token_strings) -> str:
    """Sample ×N: empirical frequency beside the predicted probability for each token."""
    if hist is None:
        return (
            '<div class="hist empty"><div>Press <b>Sample ×N</b> to draw N tokens '
            "from the final distribution.</div></div>"
        )
    rows = "".join(
        f'<div class="hrow"><span class="cell tok mono">{token_html(token_strings[t])}</span>'
        f'{_bar(pred, "final", 1.0, False)}{_bar(freq, "empirical", 1.0, False)}'
        f'<span class="cell num">{count:,}</span></div>'
        for t, count, freq, pred in hist.rows
    )
    other = (
        f'<div class="hrow other"><span class="cell tok">all other tokens</span>'
        f'{_bar(hist.other_predicted, "final", 1.0, False)}{_bar(hist.other_frequency, "empirical", 1.0, False)}'
        f'<span class="cell num">{hist.other_count:,}</span></div>'
    )
    return (
        f'<div class="hist"><div class="hrow hhead"><span class="cell tok">token</span>'
        f'<span class="cell bar-cell">predicted p</span><span class="cell bar-cell">drawn in {hist.n:,} samples'
        f'</span><span class="cell num">count</span></div>{rows}{other}</div>'
    )


def message(text: str, kind: str = "info") -> str:
    """A line in the page for errors and notices (never a crash, never a lost state)."""
    if not text:
        return ""
    icon = {"error": "⚠", "info": "ℹ"}.get(kind, "")
    return f'<div class="msg {esc(kind)}" role="status">{icon} {esc(text)}</div>'


def constraint_readout(c, trace, lm) -> str:
    """|A(s_t)| of |V|, the model's mass on forbidden tokens, and the grammar's state."""
    from agent.topn import mask_summary

    if c.grammar is None:
        return (
            '<div class="creadout off"><div><b>No constraint.</b> All '
            f"{lm.vocab_size:,} tokens are allowed; choose a grammar under <i>Constraint</i> to see "
            "its mask A(s<sub>t</sub>).</div></div>"
        )
    m = mask_summary(trace)
    s = c.grammar_state
    status = (
        "complete — only end-of-sequence may follow" if s.stopped
        else "complete, may continue" if s.accepting else "incomplete"
    )
    forced = (
        f'<div>next must be <code class="mono">{esc(s.forced_text)}</code></div>' if s.forced_text else ""
    )
    err = f'<div class="msg error">{esc(s.error)}</div>' if s.error else ""
    return (
        f'<div class="creadout"><div class="ctitle">Constraint: <b>{esc(s.grammar_name)}</b></div>'
        f'<div>allowed tokens |A(s<sub>t</sub>)| = <b>{m.allowed:,}</b> of |V| = {m.vocab:,}</div>'
        f"<div>mass the model put on forbidden tokens: <b>{pct(m.forbidden_mass)}</b></div>"
        f'<div>generated inside the grammar: <code class="mono">{esc(s.text) or "∅"}</code></div>'
        f"<div>state: {status}</div>{forced}{err}</div>"
    )


def comparison_view(comp, *, json_kind: bool, running: bool) -> str:
    """Asking vs enforcing: per column, how many outputs parse and validate, and the outputs."""
    if comp is None:
        return ""

    def column(title: str, outcomes, valid: int) -> str:
        parses = sum(o.parses for o in outcomes)
        items = "".join(
            f'<li class="{"ok" if o.valid else "bad"}"><span class="mark">{"✓" if o.valid else "✗"}</span>'
            f'<code class="mono">{esc(o.text) or "∅"}</code>'
            + (f'<div class="why">{esc(o.error)}</div>' if o.error else "")
            + "</li>"
            for o in outcomes
        )
        parse_word = "parse as JSON" if json_kind else "match the grammar"
        counts = (
            f"<b>{parses}</b> of {len(outcomes)} {parse_word}"
            + (f" · <b>{valid}</b> validate against the schema" if json_kind else "")
        )
        return f'<div class="avcol"><h4>{title}</h4><div class="avcount">{counts}</div><ol>{items}</ol></div>'

    status = f"running … {len(comp.asked) + len(comp.enforced)} of {2 * comp.n} outputs" if running else "done"
    return (
        f'<div class="asking" data-asked-valid="{comp.asked_valid}" data-enforced-valid="{comp.enforced_valid}">'
        f'<div class="avstatus">{status} · {comp.seconds:.1f} s</div><div class="avcols">'
        + column("Asking: the instruction only (no mask)", comp.asked, comp.asked_valid)
        + column("Enforcing: the same prompt with the mask", comp.enforced, comp.enforced_valid)
        + "</div></div>"
    )
