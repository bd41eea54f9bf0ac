"""Speculative-decoding views as HTML: the continuation coloured by how each token was made, the
per-position view of the last rounds (`spec-rounds`) and the figures (`spec-stats`).

Pure functions of values from agent.llm.speculative (a Decoding, its RoundViews, its Stats): they
format numbers and lay out rows; they never compute a probability.
"""

from __future__ import annotations

from viz.render import esc, token_html

HOW_LABELS = {"accepted": "accepted draft", "resampled": "resampled at a rejection", "bonus": "bonus from p"}
CSS = """
.spec-text { font-family: ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap; line-height: 1.7;
  padding: 0.5em; border: 1px solid rgba(127,127,127,0.3); border-radius: 6px; }
.spec-prompt { opacity: 0.55; }
.spec-accepted { background: rgba(5, 150, 105, 0.25); border-radius: 3px; }
.spec-resampled { background: rgba(217, 119, 6, 0.35); border-radius: 3px; }
.spec-bonus { background: rgba(37, 99, 235, 0.25); border-radius: 3px; }
.spec-legend { font-size: 0.8em; margin-top: 0.3em; display: flex; gap: 1em; }
.spec-legend span { padding: 0 0.4em; }
.spec-round { border: 1px solid rgba(127,127,127,0.35); border-radius: 8px; padding: 0.4em 0.7em;
  margin-bottom: 0.6em; }
.spec-round h4 { margin: 0 0 0.3em 0; }
.spec-pos { border-left: 5px solid #059669; padding: 0.2em 0.6em; margin: 0.35em 0; }
.spec-pos.bad { border-left-color: #d97706; }
.spec-pos-head { font-size: 0.9em; }
.spec-pq { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
.spec-dist { display: grid; gap: 1px; font-size: 0.85em; }
.spec-row { display: grid; grid-template-columns: minmax(6em, 1fr) 2fr 4.5em; gap: 0.4em; align-items: center; }
.spec-bar { height: 0.9em; background: rgba(127,127,127,0.12); border-radius: 3px; position: relative; }
.spec-bar span { position: absolute; left: 0; top: 0; bottom: 0; background: #2563eb; border-radius: 3px; }
.spec-residual { margin-top: 0.3em; }
.spec-residual .spec-bar span { background: #d97706; }
.spec-stats-table th { text-align: left; padding-right: 1em; font-weight: 600; }
.spec-stats-table caption { text-align: left; font-weight: 700; }
.spec-note, .spec-empty { font-size: 0.85em; opacity: 0.85; margin-top: 0.4em; }
.tok { white-space: pre; font-weight: 600; }
.spec-end { font-size: 0.8em; font-style: italic; opacity: 0.8; margin-left: 0.5em; }
.spec-intro { font-size: 0.9em; margin: 0 0 0.4em 0; }
.spec-intro summary { cursor: pointer; }
.spec-intro p { margin: 0.3em 0; }
"""
ENDED = ("⏹ end of sequence: the model ended the text here, so fewer tokens were emitted than "
         "Tokens to run asked for")
PAPERS = ("Leviathan et al. 2023: 2.3–3.4× (T5-XXL drafted by T5-small); "
          "Chen et al. 2023: 2–2.5× (Chinchilla 70B)")


def intro(n_layers: int, layers: int) -> str:
    """What the tab does and what γ, L, p and q are, in one line, with why the default draft is slower
    than the papers' drafts in the details beneath it."""
    return (
        '<details class="spec-intro" id="spec-intro"><summary><b>Speculative decoding</b>: a cheap '
        "draft with distribution <b>q</b> proposes <b>γ</b> tokens; the target model, distribution "
        "<b>p</b>, scores them in one forward pass and keeps each drafted x with probability "
        "min(1, p(x)/q(x)), so the text is distributed as the target alone would write it. <b>L</b>: "
        "the early-exit draft's layers. <u>Why is it slower here than the papers' 2–3×?</u></summary>"
        f"<p><b>L = {layers} of {n_layers}</b>: the default draft is this same model stopped after its "
        f"first {layers} layers (its early exit), so one draft step costs about {layers} / {n_layers} "
        "of a target pass: a round of γ draft steps plus one target pass costs more than the tokens it "
        "saves, and the measured speedup stays below 1× (about 0.3–0.4× measured here). The papers' 2–3× come from "
        "a draft many times smaller than its target (T5-small for T5-XXL) with a high acceptance "
        "rate α. Lower L makes drafting cheaper but α smaller; Prompt lookup drafts for free by "
        "copying n-grams from the prompt.</p>"
        "<p>The default prompt is a pattern (a list of capitals) that the model goes on with, its own "
        "facts right or wrong: repeated structure is where a draft is right most often, and where Prompt "
        "lookup finds its n-grams. Speculative decoding changes only the speed, so the target's mistakes "
        "stay. Type any prompt to see α fall on text the draft cannot guess.</p>"
        "<p>At Temperature 0 both models take their argmax: a draft is kept while it equals the "
        "target's argmax, and at the first mismatch the target's argmax is emitted instead.</p></details>")


def _pct(p: float) -> str:
    return "0%" if p <= 0 else f"{100 * p:.1f}%" if p >= 0.001 else f"{100 * p:.2g}%"


def _tok(token_strings, token_id: int | None) -> str:
    if token_id is None:
        return "—"
    return f'<code class="tok">{token_html(token_strings[token_id])}</code>'


def continuation(prompt_text: str, token_strings, out, how, ended: bool = False) -> str:
    """The prompt, then each emitted token coloured by how it was made, with a legend; `ended`: the
    model wrote its end-of-sequence token (so a Run emitted fewer than Tokens to run)."""
    spans = "".join(f'<span class="spec-{kind}" title="{esc(HOW_LABELS[kind])}">'
                    f"{token_html(token_strings[t])}</span>" for t, kind in zip(out, how, strict=True))
    legend = " ".join(f'<span class="spec-{k}">{esc(v)}</span>' for k, v in HOW_LABELS.items())
    end = f'<span class="spec-end">{esc(ENDED)}</span>' if ended else ""
    return (f'<div class="spec-text"><span class="spec-prompt">{esc(prompt_text)}</span>{spans}{end}</div>'
            f'<div class="spec-legend">{legend}</div>')


def _dist(token_strings, rows) -> str:
    bars = "".join(
        f'<div class="spec-row">{_tok(token_strings, i)}'
        f'<span class="spec-bar"><span style="width:{min(100.0, 100 * p):.1f}%"></span></span>'
        f"<span>{_pct(p)}</span></div>" for i, p in rows)
    return f'<div class="spec-dist">{bars or "—"}</div>'


def _position(i: int, pos, token_strings) -> str:
    verdict = "accepted ✓" if pos.accepted else "rejected ✗"
    test = ("T = 0: kept while it equals the target's argmax" if pos.u is None else
            f"u = {pos.u:.3f} {'<' if pos.accepted else '≥'} min(1, p/q) = {min(1.0, pos.ratio):.3f}")
    rule = ("at T = 0 the target's argmax (the residual is one-hot on it) →" if pos.u is None
            else "norm(max(0, p − q)) → drew")
    rejection = "" if pos.accepted else (
        f'<div class="spec-residual"><b>residual</b> {rule} {_tok(token_strings, pos.resampled)}'
        f"{_dist(token_strings, pos.top_residual) if pos.top_residual else ''}</div>")
    ratio = "∞" if pos.ratio == float("inf") else f"{pos.ratio:.3f}"
    return (
        f'<div class="spec-pos {"ok" if pos.accepted else "bad"}">'
        f'<div class="spec-pos-head">position {i}: drafted {_tok(token_strings, pos.drafted)} · '
        f"p(x) = {_pct(pos.p_x)} · q(x) = {_pct(pos.q_x)} · p/q = {ratio} · {esc(test)} · "
        f"<b>{verdict}</b></div>"
        f'<div class="spec-pq"><div><b>p</b> target{_dist(token_strings, pos.top_p)}</div>'
        f'<div><b>q</b> draft{_dist(token_strings, pos.top_q)}</div></div>{rejection}</div>')


def rounds(views, token_strings) -> str:
    """The last rounds, newest first: each drafted position with p, q, u, p/q and the verdict; the
    residual at the first rejection; the bonus token when every draft passed."""
    if not views:
        return ('<div class="spec-empty">Press <b>Draft and verify</b>: the draft proposes γ tokens, '
                "the target scores them all in one forward pass.</div>")
    blocks = []
    for n, v in reversed(list(enumerate(views, 1))):
        body = "".join(_position(i, p, token_strings) for i, p in enumerate(v.positions, 1))
        if v.bonus is not None:
            body += (f'<div class="spec-pos ok"><div class="spec-pos-head">all drafts passed: bonus token '
                     f"{_tok(token_strings, v.bonus)} drawn from p at position {len(v.positions) + 1}</div>"
                     f"{_dist(token_strings, v.top_bonus)}</div>")
        if not v.positions and v.bonus is not None:
            body = ('<div class="spec-note">No draft (prompt lookup found no earlier n-gram): a plain '
                    "target step.</div>") + body
        blocks.append(f'<section class="spec-round"><h4>Round {n}: γ = {v.gamma}, '
                      f"{v.draft_steps} draft steps, 1 target pass, {1000 * v.seconds:.0f} ms</h4>{body}</section>")
    return "".join(blocks)


def stats(s, gamma: int, expected: float, draft_name: str, ended: bool = False, target_note: str = "") -> str:
    """α, tokens per target pass, passes, draft steps, wall time and the measured speedup; `ended`:
    the emitted count stopped at the model's end of sequence, not at Tokens to run; `target_note`:
    what the target is where it is not the local model (an engine)."""
    speed = ("press <b>Run</b> to measure" if s.speedup is None else
             f"<b>{s.speedup:.2f}×</b> ({1000 * s.plain_seconds:.0f} ms plain vs {1000 * s.seconds:.0f} ms)")
    facts = (("acceptance rate α", f"{_pct(s.alpha)} ({s.accepted} of {s.drafted})"),
             ("tokens per target pass", f"{s.tokens_per_pass:.2f} (expected (1 − α^(γ+1))/(1 − α) = {expected:.2f})"),
             ("target passes", f"{s.rounds}"),
             ("draft steps", f"{s.draft_steps}"),
             ("emitted", f"{s.emitted} = {s.accepted} accepted + {s.resampled} resampled + {s.bonus} bonus"
                         + (f" — {esc(ENDED)}" if ended else "")),
             ("wall time", f"{1000 * s.seconds:.0f} ms"),
             ("speedup vs plain decoding", speed))
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in facts)
    return (f'<table class="spec-stats-table"><caption>{esc(draft_name)}, γ = {gamma}</caption>{rows}</table>'
            f'<div class="spec-note">Papers: {esc(PAPERS)}. The draft must be cheap <i>and</i> agree with '
            "the target: drafting pays only when α is high and a draft step costs far less than a target pass."
            "</div>" + (f'<div class="spec-note spec-target">{esc(target_note)}</div>' if target_note else ""))
