"""Sampling-tab redraw benchmarks: what one slider move costs on the server, and how long the page
takes from the slider's input event to the chart showing new numbers.

    .venv/bin/python bench/bench_sampling_ui.py                 # ~3-5 min on 2 cores
    .venv/bin/python bench/bench_sampling_ui.py --runs 300 --moves 60 --no-browser

1. Server: viz.sampling_tab.views (trace + top-N + HTML) on the real model's logits for
   "The capital of France is" over the full vocabulary, N = 20 bars, for a few settings; and its
   parts alone: agent.sampling.trace, agent.topn.top_n, and the HTML (chart, readout, curve and
   constraint readout for an already computed trace). Goal: views ≤ 10 ms median.
2. Browser: `python app.py` on a free loopback port, headless Chromium at 1920×1080. A slider is
   moved with the keyboard (ArrowLeft/Right on the focused slider, as a person's drag steps it),
   and the page itself times, with performance.now(), the input event to the first mutation that
   changes the text of `#next-token-chart .ntc` (not the chart's wrapper: Gradio's status tracker
   sits inside it and changes within a few ms, DESIGN.md "Live charts"), and to the next animation
   frame after it. Each repaint is awaited before the next move. Goal: median ≤ 60 ms, p95 ≤ 150 ms.
   Where the time goes, from Resource Timing: input → the /queue/join request leaves the browser,
   input → the /queue/data reply stream ends; and the main thread's long tasks (> 50 ms).
   A rapid drag (20 key presses without waiting) then checks that the chart settles on the numbers
   agent.sampling.trace gives at the slider's final position.
   Two passes, each on a fresh app and browser context: the app as is, and with
   GRADIO_RUN_HISTORY=False (Gradio 6.31 records every event's inputs and outputs in the browser's
   localStorage by default, which showed up as `setItem` in a profile of slider moves).
Figures only: nothing here asserts on a timing; a shared 2-core machine makes every timing noisy.

What it does not know: model speed (bench_model.py), grammar cost (bench_constraints.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import free_port, header, median, ms, p95, print_table, start_app, stop_app  # noqa: E402

from agent import continuation as cont  # noqa: E402
from agent import sampling, topn  # noqa: E402
from agent.constraints import PRESETS  # noqa: E402
from viz import charts, sampling_tab  # noqa: E402

PROMPT = "The capital of France is"
N_BARS = 20
READY_TIMEOUT_S = 180
REPAINT_TIMEOUT_MS = 5_000
SETTLE_QUIET_MS = 1_500  # a drag has settled when the chart text stayed the same this long
WARMUP_MOVES = 4  # per slider, not counted: the first requests of a fresh server are slower
DRAG_MOVES = 20


@dataclass(frozen=True)
class Setting:
    label: str
    config: sampling.SamplingConfig
    grammar: str | None = None


SETTINGS = (
    Setting("T = 1", sampling.SamplingConfig()),
    Setting("T = 0.7, top-k 50, top-p 0.9", sampling.SamplingConfig(temperature=0.7, top_k=50, top_p=0.9)),
    Setting("T = 0 (greedy)", sampling.SamplingConfig(temperature=0)),
    Setting("T = 1, JSON tool call mask", sampling.SamplingConfig(), "JSON tool call"),
)


def timed(fn: Callable[[], object], runs: int, warmup: int = 10) -> list[float]:
    """Seconds per call of fn(), after a few calls that are not counted."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def html_only(lm, c: cont.Continuation, trace, top) -> tuple[str, str, str]:
    """The rendering half of sampling_tab.views for an already computed trace and top-N."""
    chart = charts.distribution_chart(
        top, lm.token_strings, masked=c.mask is not None, top_p=trace.config.top_p,
        log_axis=False, greedy=trace.greedy, special_ids=lm.special_ids,
    )
    read = charts.readout(trace, lm.token_strings, truncated=c.truncated) + charts.cumulative_curve(
        top, None if trace.greedy else trace.u
    )
    return chart, read, charts.constraint_readout(c, trace, lm)


def server_rows(lm, runs: int) -> list[list[object]]:
    """One table row per setting: median and p95 of views() and of each of its parts."""
    rows = []
    for s in SETTINGS:
        c = cont.start(lm, PROMPT, False, seed=0, grammar=PRESETS[s.grammar] if s.grammar else None)
        t = sampling.trace(c.logits, s.config, mask=c.mask, u=c.u)
        top = topn.top_n(t, N_BARS)
        parts = [
            timed(lambda: sampling_tab.views(lm, c, s.config, N_BARS, False), runs),  # noqa: B023
            timed(lambda: sampling.trace(c.logits, s.config, mask=c.mask, u=c.u), runs),  # noqa: B023
            timed(lambda: topn.top_n(t, N_BARS), runs),  # noqa: B023
            timed(lambda: html_only(lm, c, t, top), runs),  # noqa: B023
        ]
        cells = [f"{ms(median(p))} / {ms(p95(p))}" for p in parts]
        goal = "yes" if median(parts[0]) <= 0.010 else "no"
        rows.append([s.label, f"{t.kept_count['min_p']:,}", *cells, goal])
    return rows


# ---- browser -------------------------------------------------------------------------------

# Installed once per page. Records every range-input `input` event and every mutation that changes
# the chart's text (time taken before reading innerText, so its layout is not counted), plus the
# animation frame after each such change (≈ when it is painted).
HARNESS_JS = """() => {
  if (window.__rl) return true;
  const B = window.__rl = {inputs: [], changes: [], frames: [], long: []};
  new PerformanceObserver(list => list.getEntries().forEach(e => B.long.push(e.duration)))
    .observe({type: 'longtask'});
  B.text = () => { const n = document.querySelector('#next-token-chart .ntc'); return n ? n.innerText : null; };
  B.last = B.text();
  document.addEventListener('input', e => {
    if (e.target && e.target.type === 'range') B.inputs.push(performance.now());
  }, true);
  new MutationObserver(() => {
    const t = performance.now();
    const now = B.text();
    if (now !== null && now !== B.last) {
      B.last = now;
      B.changes.push(t);
      requestAnimationFrame(() => B.frames.push(performance.now()));
    }
  }).observe(document.querySelector('#next-token-chart'),
             {subtree: true, childList: true, characterData: true});
  return B.last !== null;
}"""
SETTLED_JS = """([n, quiet]) => { const B = window.__rl, now = performance.now();
  const lastIn = B.inputs[B.inputs.length - 1] || 0, lastCh = B.changes[B.changes.length - 1] || 0;
  return B.inputs.length >= n && now - lastIn > quiet && now - lastCh > quiet; }"""
COUNTS_JS = "() => [window.__rl.inputs.length, window.__rl.changes.length, window.__rl.frames.length]"


@dataclass(frozen=True)
class Move:
    """One slider step, in ms after its input event (None: the page saw no such request)."""

    text_ms: float  # the chart's text changed
    frame_ms: float  # the animation frame after that change
    sent_ms: float | None  # the browser started the /queue/join request
    reply_ms: float | None  # the /queue/data reply stream ended


PHASES_JS = """([t]) => { const r = performance.getEntriesByType('resource');
  const join = r.find(e => e.name.includes('/queue/join') && e.startTime >= t);
  const data = r.find(e => e.name.includes('/queue/data') && e.startTime >= t);
  return [join ? join.startTime - t : null, data ? data.responseEnd - t : null]; }"""


def one_move(page, key: str) -> Move | None:
    """Press key on the focused slider, wait for the chart's text to change; None if it did not."""
    page.evaluate("() => performance.clearResourceTimings()")
    n_in, n_ch, _ = page.evaluate(COUNTS_JS)
    page.keyboard.press(key)
    try:
        page.wait_for_function(
            "([i, c]) => window.__rl.inputs.length > i && window.__rl.frames.length > c",
            arg=[n_in, n_ch], timeout=REPAINT_TIMEOUT_MS, polling="raf",
        )
    except Exception:  # noqa: BLE001 (playwright's TimeoutError): counted as a miss
        return None
    t_in, t_ch, t_fr = page.evaluate(
        "([i, c]) => [window.__rl.inputs[i], window.__rl.changes[c], window.__rl.frames[c]]", [n_in, n_ch]
    )
    page.wait_for_timeout(50)  # the reply stream closes after the update; let the page settle too
    sent, reply = page.evaluate(PHASES_JS, [t_in])
    return Move(t_ch - t_in, t_fr - t_in, sent, reply)


def _medians(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{median(known):.0f}" if known else "–"


def repaint_row(page, label: str, plan: list[str]) -> list[object]:
    """Move one slider along `plan` (keys), one repaint at a time; a table row of the figures."""
    page.get_by_role("slider", name=label).focus()
    moves: list[Move] = []
    missed, long_before = 0, 0
    for i, key in enumerate(plan):
        if i == WARMUP_MOVES:
            long_before = page.evaluate("() => window.__rl.long.length")
        got = one_move(page, key)
        if i >= WARMUP_MOVES:
            missed += got is None
            moves += [got] if got is not None else []
    long_ms = page.evaluate("([n]) => window.__rl.long.slice(n)", [long_before])
    long_cell = f"{len(long_ms)} / {sum(long_ms):.0f} ms"
    if not moves:
        return [label, 0, missed, "–", "–", "–", "–", "–", long_cell, "–"]
    text_ms = [m.text_ms for m in moves]
    frame_ms = [m.frame_ms for m in moves]
    ok = "yes" if median(text_ms) <= 60 and p95(text_ms) <= 150 else "no"
    phases = f"{_medians([m.sent_ms for m in moves])} / {_medians([m.reply_ms for m in moves])} ms"
    return [
        label, len(text_ms), missed, f"{median(text_ms):.1f} ms", f"{p95(text_ms):.1f} ms",
        f"{max(text_ms):.1f} ms", f"{median(frame_ms):.1f} ms / {p95(frame_ms):.1f} ms", phases,
        long_cell, ok,
    ]


def slider_config(page) -> sampling.SamplingConfig:
    """The sampling settings the page's sliders show now."""
    value = {name: float(page.get_by_role("slider", name=name).input_value())
             for name in ("Temperature", "Top-k", "Top-p", "Min-p")}
    return sampling.SamplingConfig(
        temperature=value["Temperature"], top_k=int(value["Top-k"]), top_p=value["Top-p"], min_p=value["Min-p"]
    )


def chart_finals(page) -> dict[int, str]:
    """token id → the final column's text, for every row the chart shows."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#next-token-chart .tok-row')].map(
             r => [r.dataset.tokenId, r.querySelector('.bar-cell.final .bar-num').innerText]))"""
    )


def rapid_drag_row(page, logits, label: str, key: str) -> list[object]:
    """20 presses without waiting; once the chart is quiet, compare it with the trace there."""
    page.get_by_role("slider", name=label).focus()
    n_in, n_ch, _ = page.evaluate(COUNTS_JS)
    start = time.perf_counter()
    for _ in range(DRAG_MOVES):
        page.keyboard.press(key)
    drag_s = time.perf_counter() - start
    try:
        page.wait_for_function(
            SETTLED_JS, arg=[n_in + DRAG_MOVES, SETTLE_QUIET_MS], timeout=30_000, polling=100
        )
        settled = ""
    except Exception:  # noqa: BLE001 (playwright's TimeoutError): reported, then compared anyway
        settled = " (not quiet after 30 s)"
    inputs, changes = page.evaluate("([i, c]) => [window.__rl.inputs.slice(i), window.__rl.changes.slice(c)]",
                                    [n_in, n_ch])
    config = slider_config(page)
    t = sampling.trace(logits, config)
    got = chart_finals(page)
    want = {int(i): charts.pct(float(t.probs[int(i)])) for i in got}
    differing = sum(got[i] != want[int(i)] for i in got)
    same_rows = {int(i) for i in got} == {r.token for r in topn.top_n(t, N_BARS).rows}
    verdict = "yes" if differing == 0 and same_rows and len(got) == N_BARS else (
        f"NO ({differing} numbers differ, rows {'same' if same_rows else 'differ'})"
    )
    last = f"{changes[-1] - inputs[-1]:.0f} ms" if changes else "–"
    return [
        f"{label} {key} ×{DRAG_MOVES}", f"{drag_s * 1000:.0f} ms", len(inputs), len(changes), last,
        f"T={config.temperature:g} k={config.top_k} p={config.top_p:g}",
        verdict + settled,
    ]


PASSES = {  # the app as it ships, and with Gradio's browser-side run history switched off
    "as is": {},
    "GRADIO_RUN_HISTORY=False": {"GRADIO_RUN_HISTORY": "False"},
}


def move_plans(moves: int) -> dict[str, list[str]]:
    """Out and back per slider, so the chart's numbers change on every move."""
    half = moves // 2 + WARMUP_MOVES // 2
    return {
        "Temperature": ["ArrowRight"] * half + ["ArrowLeft"] * half,  # 1.0 → 1.0 + 0.05·half → 1.0
        "Top-p": ["ArrowLeft"] * half + ["ArrowRight"] * half,  # 1.00 → 1.00 − 0.01·half → 1.00
    }


def browser_pass(browser, logits, moves: int, env: dict[str, str]) -> tuple[float, list, list]:
    """(seconds until the app answered, repaint rows, rapid-drag rows) for one fresh app."""
    with tempfile.TemporaryDirectory(prefix="bench-sampling-ui-") as tmp:
        port = free_port()
        started = time.perf_counter()
        proc = start_app(port, Path(tmp) / "app.log", env)
        ready_s = time.perf_counter() - started
        try:
            page = browser.new_context(viewport={"width": 1920, "height": 1080}).new_page()
            try:
                page.goto(f"http://127.0.0.1:{port}/")
                page.locator("#next-token-chart .ntc").wait_for(timeout=60_000)
                if not page.evaluate(HARNESS_JS):
                    raise RuntimeError("no #next-token-chart .ntc text on the page")
                repaint = [repaint_row(page, label, plan) for label, plan in move_plans(moves).items()]
                drags = [
                    rapid_drag_row(page, logits, label, key)
                    for label, key in (("Temperature", "ArrowRight"), ("Temperature", "ArrowLeft"),
                                       ("Top-p", "ArrowLeft"), ("Top-p", "ArrowRight"))
                ]
            finally:
                page.context.close()
        finally:
            stop_app(proc)
    return ready_s, repaint, drags


def browser_tables(lm, moves: int, passes: dict[str, dict[str, str]]) -> None:
    from playwright.sync_api import sync_playwright

    from tests.conftest import CHROMIUM, CHROMIUM_ARGS

    logits = cont.start(lm, PROMPT, False, seed=0).logits
    repaint, drags, ready = [], [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for name, env in passes.items():
                ready_s, r, d = browser_pass(browser, logits, moves, env)
                ready.append(f"{name}: {ready_s:.1f} s")
                repaint += [[name, *row] for row in r]
                drags += [[name, *row] for row in d]
        finally:
            browser.close()
    print(f"App: a fresh `python app.py` subprocess per pass; answered after {'; '.join(ready)}.\n")
    print_table(
        f"Browser: slider move → chart text changed (headless Chromium 1920×1080, one repaint awaited "
        f"per move, {WARMUP_MOVES} warm-up moves per slider not counted)",
        ["app", "slider", "moves", "no change in 5 s", "median", "p95", "max",
         "to next frame (median / p95)", "request sent / reply ended (medians)", "long tasks (n / ms)",
         "goal ≤ 60 / ≤ 150 ms"],
        repaint,
    )
    print_table(
        f"Browser: rapid drag ({DRAG_MOVES} key presses without waiting), then quiet for "
        f"{SETTLE_QUIET_MS / 1000:g} s",
        ["app", "drag", "presses took", "input events", "chart repaints", "last input → last repaint",
         "final sliders", "chart = trace at final position"],
        drags,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="calls per server-side figure (≥ 200)")
    parser.add_argument("--moves", type=int, default=60, help="timed moves per slider (≥ 50)")
    parser.add_argument("--no-browser", action="store_true", help="server-side figures only")
    parser.add_argument("--as-is-only", action="store_true", help="skip the GRADIO_RUN_HISTORY=False pass")
    args = parser.parse_args(argv)
    from agent.model import load_model

    lm = load_model(log=lambda m: print(m, file=sys.stderr))
    header("Sampling tab: redraw cost on the server and in the browser")
    print("The machine is shared (2 cores, other processes running): figures are noisy.\n")
    print_table(
        f"Server: one redraw on the real logits for {PROMPT!r} (|V| = {lm.vocab_size:,}, "
        f"N = {N_BARS} bars), median / p95 over {args.runs} calls",
        ["setting", "tokens kept", "views() (goal ≤ 10 ms)", "trace", "top-N", "HTML", "views median ≤ 10 ms"],
        server_rows(lm, args.runs),
    )
    if not args.no_browser:
        browser_tables(lm, args.moves, {"as is": {}} if args.as_is_only else PASSES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
