"""ReAct-tab benchmarks: what one Next costs on the server, and how long the page takes from the
click to the pseudo-code view showing the new state; plus one step of the local model.

    .venv/bin/python bench/bench_react_ui.py                # ~3-6 min on 2 cores
    .venv/bin/python bench/bench_react_ui.py --runs 12 --screenshot docs/react-tab.png

1. Server: viz.react.run.html_views (frame: render + tokenize + breakdown, then the six HTML
   views) for every state of the scripted Berlin run, with the model's tokenizer.
2. Browser: `python app.py` on a free loopback port, headless Chromium at 1920×1080, ReAct tab,
   Backend = Scripted replay, Task = Berlin. Per run: Reset, then Next four times (the lecture's
   trace: line 1, lines 2–5, lines 6–8, lines 2–5). The page itself times, with performance.now(),
   the click (dispatched in the page) to the first mutation that changes the text of
   `#react-pseudocode .rp`, and to the animation frame after it. The first run is warm-up.
   Goal: Next → updated views ≤ 150 ms median. Back (a recorded state, nothing recomputed) too.
3. Local model: Backend = Local model, Reply tokens 64, Reset, Next (line 1), then one timed Next
   that calls SmolLM2: click → first streamed token in the template view, and click → the new
   state's views (a report, no goal: ≈50–100 ms per token on this CPU).
Figures only: nothing here asserts on a timing; a shared 2-core machine makes every timing noisy.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import free_port, header, median, ms, p95, print_table, start_app, stop_app  # noqa: E402

from agent import loop  # noqa: E402
from viz.react import run as react_run  # noqa: E402

BERLIN = react_run.DEFAULT_TASK
NEXTS_PER_RUN = 4
CHANGE_TIMEOUT_MS = 10_000
LOCAL_TIMEOUT_MS = 240_000
READY_TIMEOUT_S = 180

# Installed once per page: clicks dispatched in the page with their time, and every mutation that
# changes the text of the pseudo-code view (time taken before reading innerText, so its layout is
# not counted), plus the animation frame after it.
HARNESS_JS = """() => {
  if (window.__rb) return true;
  const B = window.__rb = {clicks: [], changes: [], frames: [], tokens: []};
  B.text = () => {
    const n = document.querySelector('#react-pseudocode .rp');
    return n ? n.innerText : null;
  };
  B.last = B.text();
  new MutationObserver(() => {
    const t = performance.now();
    const now = B.text();
    if (now !== null && now !== B.last) {
      B.last = now; B.changes.push(t);
      requestAnimationFrame(() => B.frames.push(performance.now()));
    }
  }).observe(document.querySelector('#react-pseudocode'),
             {subtree: true, childList: true, characterData: true});
  new MutationObserver(() => {
    if (document.querySelector('#react-template .rt-caret')) B.tokens.push(performance.now());
  }).observe(document.querySelector('#react-template'),
             {subtree: true, childList: true, characterData: true});
  B.click = (id) => { B.clicks.push(performance.now()); document.getElementById(id).click(); };
  return B.last !== null;
}"""
COUNTS_JS = ("() => [window.__rb.clicks.length, window.__rb.changes.length, "
             "window.__rb.frames.length]")


def server_rows(lm, runs: int) -> list[list[object]]:
    """html_views for each state of the scripted Berlin run, median / p95 over `runs` calls."""
    c = react_run.checked(lm, react_run.Choices(BERLIN, mode="Act", constrained=False,
                                                budget=lm.context_window))
    s = react_run.start(c)
    states = loop.run(s.state, react_run.make_backend(s.backend, lm), s.tools)
    rows = []
    for i, state in enumerate(states):
        session = react_run.Session(states, i, s.tools, s.backend, s.title)
        for _ in range(5):
            react_run.html_views(session, lm, False)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            react_run.html_views(session, lm, False)
            times.append(time.perf_counter() - start)
        lines = ",".join(map(str, state.lines)) or "–"
        rows.append([i, lines, len(state.history), ms(median(times)), ms(p95(times))])
    return rows


def click_and_wait(page, element_id: str) -> tuple[float, float] | None:
    """Click in the page; (ms to the pseudo-code text change, ms to the frame after it)."""
    n_clicks, n_changes, _ = page.evaluate(COUNTS_JS)
    page.evaluate("(id) => window.__rb.click(id)", element_id)
    try:
        page.wait_for_function("([c]) => window.__rb.frames.length > c", arg=[n_changes],
                               timeout=CHANGE_TIMEOUT_MS, polling="raf")
    except Exception:  # noqa: BLE001 (playwright's TimeoutError): counted as a miss
        return None
    t_click, t_change, t_frame = page.evaluate(
        "([i, c]) => [window.__rb.clicks[i], window.__rb.changes[c], window.__rb.frames[c]]",
        [n_clicks, n_changes])
    return t_change - t_click, t_frame - t_click


def scripted_rows(page, runs: int) -> list[list[object]]:
    """Reset + Next ×4 per run (the first run is warm-up); then Back ×4 after the last run."""
    nexts, next_frames, backs, missed = [], [], [], 0
    for run in range(runs + 1):
        click_and_wait(page, "react-reset")
        page.wait_for_timeout(100)
        for _ in range(NEXTS_PER_RUN):
            got = click_and_wait(page, "react-next")
            page.wait_for_timeout(50)  # let the page finish the update before the next click
            if run == 0:
                continue
            if got is None:
                missed += 1
                continue
            nexts.append(got[0])
            next_frames.append(got[1])
    for _ in range(NEXTS_PER_RUN):
        got = click_and_wait(page, "react-back")
        page.wait_for_timeout(50)
        if got is not None:
            backs.append(got[0])

    def row(label, values, goal):
        if not values:
            return [label, 0, missed, "–", "–", "–", "–"]
        verdict = "yes" if median(values) <= goal else "no"
        return [label, len(values), missed, f"{median(values):.1f} ms", f"{p95(values):.1f} ms",
                f"{max(values):.1f} ms", verdict]

    return [row("Next (one phase computed)", nexts, 150),
            ["… to the next frame", len(next_frames), "", f"{median(next_frames):.1f} ms",
             f"{p95(next_frames):.1f} ms", f"{max(next_frames):.1f} ms", ""],
            row("Back (a recorded state)", backs, 150)]


def choose(page, label: str, option: str) -> None:
    page.get_by_role("combobox", name=label).click()
    page.get_by_role("option", name=option).click()


def local_row(page) -> list[object]:
    """One model call of the local model through the page: click → first token, → new state."""
    choose(page, "Backend", "Local model")
    page.get_by_text("Settings: MAX_STEPS").click()
    reply = page.get_by_role("slider", name="Reply tokens (reserved)")
    reply.focus()
    reply.press("Home")
    for _ in range(7):  # 8 → 64
        reply.press("ArrowRight")
    click_and_wait(page, "react-reset")
    click_and_wait(page, "react-next")  # line 1: no model call
    n_tokens = page.evaluate("() => window.__rb.tokens.length")
    n_clicks, _, _ = page.evaluate(COUNTS_JS)
    page.evaluate("() => window.__rb.click('react-next')")
    page.wait_for_function(
        "() => { const p = document.querySelector('#react-pseudocode .rp');"
        " return p && p.dataset.running === '0' && p.dataset.lines === '2,3,4,5'; }",
        timeout=LOCAL_TIMEOUT_MS, polling=100)
    t_click, t_first, t_done = page.evaluate(
        "([i, k]) => [window.__rb.clicks[i], window.__rb.tokens[k], performance.now()]",
        [n_clicks, n_tokens])
    usage = page.locator("#react-budget .rb-usage").inner_text()
    first = f"{(t_first - t_click) / 1000:.2f} s" if t_first else "– (no streamed update)"
    return ["SmolLM2-135M-Instruct, Act, native, T = 0, ≤ 64 reply tokens", first,
            f"{(t_done - t_click) / 1000:.2f} s",
            usage.replace("the model counted on this call: ", "")]


def screenshot(page, path: Path) -> None:
    """The lecture's Berlin trace at its end: four messages, the link, the stop, call 2's string."""
    choose(page, "Backend", "Scripted replay")
    choose(page, "Task", BERLIN)
    page.locator("#react-message").filter(has_text="New run").wait_for()
    page.get_by_role("button", name="Run to end").click()
    page.locator("#react-scrub").filter(has_text="Recorded state 4 of 4").wait_for()
    page.evaluate("() => { window.scrollTo(0, 0); document.activeElement.blur(); }")
    page.mouse.move(1900, 1070)  # no hover or focus style on a button in the picture
    page.wait_for_timeout(500)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))


def browser_tables(runs: int, shot: Path | None, local: bool) -> None:
    from playwright.sync_api import sync_playwright

    from tests.conftest import CHROMIUM, CHROMIUM_ARGS

    with tempfile.TemporaryDirectory(prefix="bench-react-ui-") as tmp:
        port = free_port()
        started = time.perf_counter()
        proc = start_app(port, Path(tmp) / "app.log")
        try:
            took = time.perf_counter() - started
            print(f"App (subprocess `python app.py`) answered after {took:.1f} s.\n")
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                             headless=True)
                try:
                    page = browser.new_page(viewport={"width": 1920, "height": 1080})
                    page.goto(f"http://127.0.0.1:{port}/")
                    page.get_by_role("tab", name="ReAct loop").click()
                    page.locator("#react-pseudocode .rp").wait_for(timeout=60_000)
                    page.evaluate(HARNESS_JS)
                    scripted = scripted_rows(page, runs)
                    local_rows = [local_row(page)] if local else []
                    if shot is not None:
                        page.reload()
                        page.get_by_role("tab", name="ReAct loop").click()
                        page.locator("#react-pseudocode .rp").wait_for()
                        screenshot(page, shot)
                finally:
                    browser.close()
        finally:
            stop_app(proc)
    print_table(
        f"Browser: click → pseudo-code text changed (headless Chromium 1920×1080, scripted "
        f"Berlin run, {runs} runs × {NEXTS_PER_RUN} Next after one warm-up run, one update "
        "awaited per click)",
        ["click", "clicks", "no change in 10 s", "median", "p95", "max", "median ≤ 150 ms"],
        scripted)
    if local_rows:
        print_table("Browser: one local-model step (Next on lines 2–5, streamed)",
                    ["model call", "click → first streamed token", "click → new state shown",
                     "tokens (model's count)"], local_rows)
    if shot is not None:
        print(f"Screenshot: {shot}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=8,
                        help="timed scripted runs of 4 Next each (≥ 8)")
    parser.add_argument("--server-runs", type=int, default=50, help="calls per server-side figure")
    parser.add_argument("--no-browser", action="store_true", help="server-side figures only")
    parser.add_argument("--no-local", action="store_true", help="skip the local-model step")
    parser.add_argument("--screenshot", type=Path, help="also save a 1920×1080 screenshot here")
    args = parser.parse_args(argv)
    from agent.llm.model import load_model

    lm = load_model(log=lambda m: print(m, file=sys.stderr))
    header("ReAct tab: Next → updated views, on the server and in the browser")
    print("The machine is shared (2 cores, other processes running): figures are noisy.\n")
    print_table(
        f"Server: all six views of one state (render + tokenize + breakdown + HTML), scripted "
        f"Berlin run, {lm.name} tokenizer, median / p95 over {args.server_runs} calls",
        ["state", "lines just run", "messages", "median", "p95"], server_rows(lm, args.server_runs))
    if not args.no_browser:
        browser_tables(args.runs, args.screenshot, not args.no_local)
    return 0


if __name__ == "__main__":
    sys.exit(main())
