"""Sampling-tab views the server draws as HTML: the continuation, the Sample ×N histogram, asking
vs enforcing, and messages.

The next-token chart, the stage readout, the cumulative curve with u and the constraint readout
are drawn in the page by viz/js/sampling_view.js (one renderer; a slider move never reaches the
server). Pure functions of values computed in agent/: they format numbers and lay out bars; they
never compute a probability. HTML because one update costs ≈0.5 ms in the browser against
≈166 ms for a matplotlib figure (DESIGN.md).
"""

from __future__ import annotations

import math

from viz.render import esc, token_html

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
        f'<div class="ctext"><span class="cprompt">{esc(shown)}</span>{spans}{end}</div></div>'
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
            + (f'<div class="why cut">⚠ {esc(o.cut)}</div>' if o.cut else "")
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
