"""Sampling-tab benchmarks now that a slider move runs in the page: what a move costs the server
(nothing, the aim), how fast the page repaints, what a position costs on the wire, and a bounded
class of simulated students.

    .venv/bin/python bench/bench_sampling_ui.py                  # ~2-4 min on 2 cores
    .venv/bin/python bench/bench_sampling_ui.py --moves 60 --students 30 --rounds 12

1. Bytes: one position as the server sends it (viz/position.py: float32 logits, mask bits, u,
   grammar state) without and with a constraint, and the token display strings (sent once per
   page load as a static file; raw and gzip sizes).
2. One page (`python app.py` on a free loopback port, headless Chromium 1920x1080): `--moves`
   slider moves with the keyboard (Temperature, Top-p, Top-k, Min-p in turn). The page times, with
   performance.now(), the keydown to the end of the repaint (the chart host's data-paints
   attribute changes after chart, readout, curve and constraint readout are written) and to the
   next animation frame. Goals: median <= 16 ms, p95 <= 33 ms. Server CPU per move is read from
   /proc of the app process over all moves (goal <= 1 ms; the aim is zero requests, counted with
   Playwright's request events). Then Sample presses: click -> new chart painted.
3. `--students` simulated students, each a page in one Chromium, moving sliders and pressing Sample
   in turn for `--rounds` rounds: repaint p95 of the moves and Sample -> new chart, with the
   server's CPU and the load generator's (Chromium's processes) reported apart.
Figures only: nothing asserts on a timing; a shared 2-core machine makes every timing noisy.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import free_port, header, median, ms, p95, print_table, start_app, stop_app  # noqa: E402

from agent.constraints import PRESETS  # noqa: E402
from agent.llm import continuation as cont  # noqa: E402
from viz import position  # noqa: E402

PROMPT = "The capital of France is"
CHROMIUM = os.environ.get("REACT_LAB_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-renderer-backgrounding", "--disable-background-timer-throttling"]
SLIDERS = [("Temperature", "ArrowRight"), ("Top-p", "ArrowLeft"), ("Top-k", "ArrowRight"), ("Min-p", "ArrowRight")]
# Times every repaint in the page: keydown on a slider -> data-paints changes -> the next frame.
PROBE = """() => {
  window.__moves = [];
  let t0 = null;
  document.addEventListener('keydown', (e) => { if (e.target.type === 'range') t0 = performance.now(); }, true);
  const host = document.querySelector('#next-token-chart .rl-chart-host');
  new MutationObserver(() => {
    if (t0 === null) return;
    const start = t0, painted = performance.now(); t0 = null;
    requestAnimationFrame(() => window.__moves.push([painted - start, performance.now() - start]));
  }).observe(host, {attributes: true, attributeFilter: ['data-paints']});
}"""


def cpu_s(pids) -> float:
    """User + system CPU seconds of the given processes (from /proc/PID/stat)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def chromium_pids() -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if "chromium" in (d / "comm").read_text() or "chrome" in (d / "comm").read_text():
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


def bytes_rows(lm) -> list[list[object]]:
    c = cont.start(lm, PROMPT, False, seed=0)
    plain = json.dumps(position.position(c, lm.vocab_size)).encode()
    masked = json.dumps(position.position(cont.with_grammar(lm, c, PRESETS["JSON tool call"]), lm.vocab_size)).encode()
    with tempfile.TemporaryDirectory() as d:
        tokens = position.token_asset(lm.token_strings, lm.special_ids, d).read_bytes()
    return [["one position, no constraint", f"{len(plain):,}", f"{len(gzip.compress(plain)):,}"],
            ["one position, JSON tool call mask", f"{len(masked):,}", f"{len(gzip.compress(masked)):,}"],
            ["token display strings (once per page load)", f"{len(tokens):,}", f"{len(gzip.compress(tokens)):,}"]]


def open_page(browser, url):
    page = browser.new_page(viewport={"width": 1920, "height": 1080})
    page.goto(url)
    page.locator("#next-token-chart .tok-row").first.wait_for(timeout=120_000)
    page.wait_for_timeout(1000)
    page.evaluate(PROBE)
    return page


def sample_once(page) -> float:
    """Click Sample; seconds until the chart is painted for the new position."""
    before = page.locator("#next-token-chart .rl-chart-host").get_attribute("data-paints")
    start = time.perf_counter()
    page.locator("#btn-sample").click()
    page.wait_for_function("(b) => document.querySelector('#next-token-chart .rl-chart-host').dataset.paints !== b",
                           arg=before, timeout=60_000)
    return time.perf_counter() - start


def one_page(browser, url, app_pid: int, moves: int) -> list[list[object]]:
    page = open_page(browser, url)
    sent = []
    page.on("request", lambda r: sent.append(r.url))
    idle0, wall0 = cpu_s([app_pid]), time.perf_counter()
    time.sleep(5)  # the app's CPU while nobody does anything (Gradio's own threads)
    idle_rate = (cpu_s([app_pid]) - idle0) / (time.perf_counter() - wall0)
    cpu0, wall0 = cpu_s([app_pid]), time.perf_counter()
    for i in range(moves):
        label, key = SLIDERS[i % len(SLIDERS)]
        slider = page.get_by_role("slider", name=label)
        slider.focus()
        n = len(page.evaluate("() => window.__moves"))
        slider.press(key)
        page.wait_for_function(f"() => window.__moves.length > {n}", timeout=10_000)
    wall = time.perf_counter() - wall0
    total = cpu_s([app_pid]) - cpu0
    server = max(0.0, total - idle_rate * wall) / moves
    requests = len(sent)
    times = page.evaluate("() => window.__moves")
    painted, framed = [t[0] / 1000 for t in times], [t[1] / 1000 for t in times]
    samples = [sample_once(page) for _ in range(10)]
    page.close()
    return [
        [f"slider move -> repaint written ({len(times)} moves)", ms(median(painted)), ms(p95(painted)), "≤ 16 / 33 ms"],
        ["slider move -> next frame", ms(median(framed)), ms(p95(framed)), ""],
        ["server CPU per slider move, above idle", ms(server), "",
         f"≤ 1 ms; requests sent during the moves: {requests}; app CPU {total:.2f} s in {wall:.1f} s, "
         f"idle {1000 * idle_rate:.0f} ms/s"],
        ["Sample press -> new chart painted (10 presses)", ms(median(samples)), ms(p95(samples)), ""],
    ]


def students(browser, url, app_pid: int, n: int, rounds: int) -> list[list[object]]:
    pages = [open_page(browser, url) for _ in range(n)]
    steps = []
    browser_pids = chromium_pids()
    app0, gen0, wall0 = cpu_s([app_pid]), cpu_s(browser_pids), time.perf_counter()
    for r in range(rounds):
        for i, page in enumerate(pages):
            if (r + i) % 6 == 5:  # every sixth turn a student samples
                steps.append(sample_once(page))
            else:
                label, key = SLIDERS[(r + i) % len(SLIDERS)]
                page.get_by_role("slider", name=label).press(key)
    wall = time.perf_counter() - wall0
    app_cpu, gen_cpu = cpu_s([app_pid]) - app0, cpu_s(browser_pids) - gen0
    time.sleep(1)
    repaints = [t[0] / 1000 for p in pages for t in p.evaluate("() => window.__moves")]
    for p in pages:
        p.close()
    moves = n * rounds - len(steps)
    return [
        [f"{n} students, {moves} slider moves: repaint", ms(median(repaints)), ms(p95(repaints)), ""],
        [f"{n} students, {len(steps)} Sample presses: -> new chart", ms(median(steps)), ms(p95(steps)), ""],
        ["server CPU over the run (app process)", f"{app_cpu:.2f} s", f"{100 * app_cpu / wall:.0f}% of one core",
         f"{1000 * app_cpu / max(1, len(steps)):.0f} ms per Sample"],
        ["load generator CPU (Chromium, all pages)", f"{gen_cpu:.2f} s", f"{100 * gen_cpu / wall:.0f}% of one core",
         f"wall {wall:.1f} s"],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=60)
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from agent.llm.model import load_model

    header("Sampling tab in the page: slider moves, positions, a class")
    lm = load_model()
    print_table("Bytes on the wire", ["what", "bytes (JSON)", "gzip"], bytes_rows(lm))
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        app = start_app(port, Path(d) / "app.log")
        try:
            url = f"http://127.0.0.1:{port}/"
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
                cols = ["measure", "median", "p95", "goal / note"]
                print_table("One page", cols, one_page(browser, url, app.pid, args.moves))
                print_table(f"{args.students} simulated students", cols,
                            students(browser, url, app.pid, args.students, args.rounds))
                browser.close()
        finally:
            stop_app(app)
    return 0


if __name__ == "__main__":
    sys.exit(main())
