"""Class load: a lecture hall on one server. Twenty Sampling-tab sessions and five ReAct-tab
sessions at once, through the same named endpoints the page uses (gradio_client, one Client per
session = one browser session with its own gr.State), each checking that what it gets back is its
own work.

    .venv/bin/python bench/bench_load.py                 # ~2-5 min on 2 shared cores
    .venv/bin/python bench/bench_load.py --sessions 4 --react-sessions 2 --moves 10   # a smoke run

1. `python app.py` on a free 127.0.0.1 port, in its own process group ($REACT_LAB_CACHE from the
   environment), until GET /gradio_api/info answers.
2. Baseline: one session alone, /run_prompt, then 30 slider moves (/redraw), each timed.
3. Load, all sessions in threads at once:
   - Sampling session i: /run_prompt with its own prompt ("Session i: The capital of <country>
     is"), 30 slider moves (/redraw with varying temperature, top-k, top-p, min-p, axis), 5 steps
     (/sample and /greedy alternating). Its checks: the prompt string and the continuation view
     name its own session only; the continuation grows by one of its own tokens per step (the
     previous text is a prefix); a redraw at the run's settings reproduces the run's chart, and
     after the steps a redraw reproduces the last step's chart. A failed check is a leak.
   - ReAct session: Reset (scripted replay of the Berlin trace), then Next until the run stops
     (even sessions) or Run to end (odd ones); each Next must move its own recorded state by
     exactly one (else a leak), and the stop view must show "It's 12°C and rainy in Berlin.".
4. Report: redraw latency alone and under load (p50 / p95 / max), the other endpoints under load,
   errors (an exception, a timeout, or an error message in the view) with their text, leaks, the
   server's peak resident memory (VmHWM) and RSS after, wall times.

Bounded: every request has a timeout, the load phase a deadline, and the whole script stops itself
after HARD_LIMIT_S; the server's process group is always killed at the end. Loopback only.
Figures only: nothing here asserts on a timing; a shared 2-core machine makes every timing noisy.
"""

from __future__ import annotations

import argparse
import html
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import free_port, header, median, ms, p95, print_table, secs, status_kib, stop_app  # noqa: E402

from app import QUEUE_SIZE  # noqa: E402 — app.py imports nothing heavy at module level

READY_TIMEOUT_S = 240
REQUEST_TIMEOUT_S = 90  # one request, queueing included
LOAD_DEADLINE_S = 360  # the load phase; sessions still running then are reported unfinished
HARD_LIMIT_S = 600  # the whole script
S0 = (1.0, 0, 1.0, 0.0, 20, "Linear")  # temperature, top-k, top-p, min-p, bars, axis
SAMPLE_SLIDERS = (0.8, 40, 0.95, 0.0, 20, "Linear")
COUNTRIES = ("France", "Japan", "Italy", "Spain", "Canada", "Egypt", "Kenya", "Peru", "Chile",
             "Norway", "Poland", "Greece", "Turkey", "India", "China", "Brazil", "Mexico",
             "Sweden", "Austria", "Portugal")
FINAL_ANSWER = "It's 12°C and rainy in Berlin."
MARKER = re.compile(r"Session (\d+):")
CHAR = {"text": re.compile(r'data-text="([^"]*)"'), "tokens": re.compile(r'data-tokens="(\d+)"')}
ENDED = "The continuation has ended"  # a sampled end-of-sequence: correct, not an error


@dataclass
class Tally:
    """What one session saw: latencies per endpoint, errors and leaks as sentences."""

    name: str
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    done: bool = False
    final_answer: bool = False


class RequestFailed(Exception):
    pass


def new_client(url: str):
    """One gradio_client Client: one browser session with its own gr.State; every HTTP call
    bounded by REQUEST_TIMEOUT_S."""
    from gradio_client import Client

    return Client(url, verbose=False, httpx_kwargs={"timeout": REQUEST_TIMEOUT_S},
                  download_files=False, analytics_enabled=False)


def call(client, tally: Tally, api_name: str, *args, all_outputs: bool = False, label: str = ""):
    """One request with a timeout; its latency goes into the tally under label (else api_name).
    An exception is recorded as an error and re-raised as RequestFailed. all_outputs: every yield
    of a generator listener."""
    t0 = time.perf_counter()
    try:
        job = client.submit(*args, api_name=api_name)
        result = job.result(timeout=REQUEST_TIMEOUT_S)
        outputs = job.outputs() if all_outputs else None
    except Exception as exc:  # noqa: BLE001 — any failure of a request is a finding to report
        tally.errors.append(f"{api_name}: {exc.__class__.__name__}: {exc}")
        raise RequestFailed(api_name) from None
    tally.latencies.setdefault(label or api_name, []).append(time.perf_counter() - t0)
    return (result, outputs) if all_outputs else result


def shown_message(tally: Tally, api_name: str, msg) -> bool:
    """An error message in the view counts as an error; True if there was one."""
    text = html.unescape(re.sub(r"<[^>]+>", "", msg)).strip() if isinstance(msg, str) else ""
    if text and ENDED not in text:
        tally.errors.append(f"{api_name}: message in the view: {text}")
    return bool(text)


def markers(text: str) -> set[int]:
    """Session numbers named in a view.

    >>> sorted(markers('<span>Session 3: The capital … Session 12: x</span>'))
    [3, 12]
    """
    return {int(m) for m in MARKER.findall(html.unescape(text or ""))}


def continuation_of(view: str) -> tuple[str, int]:
    """(data-text, data-tokens) of the continuation view.

    >>> continuation_of('<div class="continuation" data-text=" Paris" data-tokens="1">')
    (' Paris', 1)
    """
    text, tokens = CHAR["text"].search(view or ""), CHAR["tokens"].search(view or "")
    return html.unescape(text.group(1)) if text else "", int(tokens.group(1)) if tokens else -1


def slider_moves(seed: int, n: int) -> list[tuple]:
    """n slider settings; the first, the middle and the last are S0 (the run's own settings).

    >>> moves = slider_moves(1, 30); len(moves), moves[0] == moves[15] == moves[29] == S0
    (30, True)
    """
    rng = random.Random(seed)

    def move() -> tuple:
        temperature = 0.0 if rng.random() < 0.15 else round(rng.randint(1, 60) * 0.05, 2)
        top_k = 0 if rng.random() < 0.4 else rng.randint(1, 200)
        top_p = 1.0 if rng.random() < 0.4 else round(rng.uniform(0.05, 1.0), 2)
        min_p = 0.0 if rng.random() < 0.6 else round(rng.uniform(0.0, 0.3), 2)
        return temperature, top_k, top_p, min_p, 20, rng.choice(["Linear", "Log"])

    moves = [move() for _ in range(n)]
    for k in {0, n // 2, n - 1}:
        moves[k] = S0
    return moves


def check_own(tally: Tally, i: int, where: str, view: str) -> None:
    found = markers(view)
    if found != {i}:
        tally.leaks.append(f"{where}: the view names sessions {sorted(found)}, expected [{i}]")


def sampling_session(url: str, i: int, moves: int, steps: int, tally: Tally) -> None:
    """Run prompt, slider moves, steps; every answer checked against the session's own work."""
    client = new_client(url)
    try:
        prompt = f"Session {i}: The capital of {COUNTRIES[i % len(COUNTRIES)]} is"
        out = call(client, tally, "/run_prompt", prompt, "Raw text", i, *S0)
        shown_message(tally, "/run_prompt", out[3])
        check_own(tally, i, "/run_prompt prompt string", out[5])
        check_own(tally, i, "/run_prompt continuation", out[4])
        prompt_string, chart0 = out[5], out[0]
        for k, sliders in enumerate(slider_moves(i, moves)):
            try:
                r = call(client, tally, "/redraw", *sliders)
            except RequestFailed:
                continue
            shown_message(tally, "/redraw", r[3])
            if sliders == S0 and r[0] != chart0:
                tally.leaks.append(f"/redraw move {k} at the run's settings: not the run's chart")
        run_steps(client, tally, i, steps, prompt_string)
        tally.done = True
    except RequestFailed:
        pass
    finally:
        client.close()


def run_steps(client, tally: Tally, i: int, steps: int, prompt_string: str) -> None:
    """Sample and Greedy in turn; the continuation must grow by one own token each time."""
    before, sliders, out = "", S0, None
    for k in range(1, steps + 1):
        api, sliders = ("/sample", SAMPLE_SLIDERS) if k % 2 else ("/greedy", S0)
        out = call(client, tally, api, *sliders)
        if shown_message(tally, api, out[3]) and ENDED in out[3]:
            return  # an end-of-sequence was drawn: nothing more to append
        text, tokens = continuation_of(out[4])
        check_own(tally, i, f"{api} step {k} continuation", out[4])
        if out[5] != prompt_string:
            tally.leaks.append(f"{api} step {k}: the prompt string is not the session's own")
        if tokens != k or not text.startswith(before):
            tally.leaks.append(f"{api} step {k}: {tokens} tokens {text!r} after {before!r}")
        before = text
    if out is not None:  # the chart after the last step, drawn again from the session's state
        r = call(client, tally, "/redraw", *sliders, label="/redraw (check after the steps)")
        if r[0] != out[0]:
            tally.leaks.append("/redraw after the steps: not the last step's chart")


def react_session(url: str, i: int, defaults: list, tally: Tally) -> None:
    """Reset to the scripted Berlin replay, then Next until it stops (even i) or Run to end."""
    client = new_client(url)
    try:
        out = call(client, tally, "/on_reset", *defaults)
        note = html.unescape(str(out[6]))
        if "New run" not in note or "Berlin" not in note:
            tally.errors.append(f"/on_reset: unexpected message {out[6]!r}")
        if scrub_value(out[7]) != 0:
            tally.leaks.append(f"/on_reset: recorded state {scrub_value(out[7])}, expected 0")
        views = react_next(client, tally) if i % 2 == 0 else react_run(client, tally)
        tally.final_answer = any(isinstance(v, str) and FINAL_ANSWER in html.unescape(v)
                                 for v in views)
        if not tally.final_answer:
            tally.errors.append(f"ReAct: the final answer {FINAL_ANSWER!r} was not shown")
        tally.done = True
    except RequestFailed:
        pass
    finally:
        client.close()


def scrub_value(update) -> int:
    return int(update.get("value", -1)) if isinstance(update, dict) else -1


def react_next(client, tally: Tally, limit: int = 30) -> list:
    """Next until the stop view says final answer; each Next moves the state by exactly one."""
    index, stop_views = 0, []
    for _ in range(limit):
        out = call(client, tally, "/on_next", False)
        stop_views.append(out[5])
        if scrub_value(out[7]) != index + 1:
            tally.leaks.append(f"/on_next from state {index}: now at {scrub_value(out[7])}")
        index = scrub_value(out[7])
        if isinstance(out[5], str) and 'data-stop="' in out[5] and 'data-stop=""' not in out[5]:
            break
    out = call(client, tally, "/on_next", False)  # past the end: a notice, the state stays
    if "has stopped" not in html.unescape(str(out[6])) or scrub_value(out[7]) != index:
        tally.errors.append(f"/on_next after the stop: {str(out[6])[:120]!r}, state "
                            f"{scrub_value(out[7])} (expected {index})")
    return stop_views


def react_run(client, tally: Tally) -> list:
    """Run to end: the stop views of every streamed update."""
    _, outputs = call(client, tally, "/on_run", False, all_outputs=True)
    values = [scrub_value(o[7]) for o in outputs if len(o) > 7]
    if values != sorted(values) or not values:
        tally.leaks.append(f"/on_run: recorded states went {values}")
    return [o[5] for o in outputs if len(o) > 5]


def start_server(port: int, log: Path) -> subprocess.Popen:
    """`python app.py` in its own process group; $REACT_LAB_CACHE passes through the environment."""
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False")
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port)], cwd=ROOT,
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_ready(proc: subprocess.Popen, url: str) -> bool:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "gradio_api/info", timeout=3):
                return True
        except OSError:
            time.sleep(0.5)
    return False


def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def baseline(url: str, moves: int) -> Tally:
    """The redraw latency with one session alone on the server (after one untimed warm-up)."""
    tally, client = Tally("baseline"), new_client(url)
    try:
        call(client, tally, "/run_prompt", "Baseline: The capital of France is", "Raw text", 0, *S0)
        call(client, Tally("warm-up"), "/redraw", *S0)
        for sliders in slider_moves(1000, moves):
            out = call(client, tally, "/redraw", *sliders)
            shown_message(tally, "/redraw", out[3])
        tally.done = True
    except RequestFailed:
        pass
    finally:
        client.close()
    return tally


def react_defaults(url: str) -> list:
    """The ReAct tab's controls as the page starts: Berlin, scripted replay (from the API info)."""
    client = new_client(url)
    try:
        api = client.view_api(return_format="dict", print_info=False)
    finally:
        client.close()
    params = api["named_endpoints"]["/on_reset"]["parameters"]
    return [p.get("parameter_default") for p in params]


def load(url: str, args, proc: subprocess.Popen) -> tuple[list[Tally], float, int]:
    """All sessions at once, in threads. Returns (tallies, seconds, peak RSS sampled, KiB)."""
    defaults = react_defaults(url)
    tallies, threads = [], []
    for i in range(args.sessions):
        tallies.append(Tally(f"sampling {i}"))
        threads.append(threading.Thread(target=sampling_session, daemon=True,
                                        args=(url, i, args.moves, args.steps, tallies[-1])))
    for i in range(args.react_sessions):
        tallies.append(Tally(f"react {i}"))
        threads.append(threading.Thread(target=react_session, daemon=True,
                                        args=(url, i, defaults, tallies[-1])))
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    deadline, peak = time.monotonic() + LOAD_DEADLINE_S, 0
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        peak = max(peak, status_kib(proc.pid, "VmRSS"))
        time.sleep(0.25)
    seconds = time.perf_counter() - t0
    for t, tally in zip(threads, tallies, strict=True):
        if t.is_alive():
            tally.errors.append(f"{tally.name}: still running after {LOAD_DEADLINE_S} s")
    return tallies, seconds, peak


def latency_row(label: str, values: list[float]) -> list[object]:
    if not values:
        return [label, 0, "–", "–", "–"]
    return [label, len(values), ms(median(values)), ms(p95(values)), ms(max(values))]


def merged(tallies: list[Tally], api_name: str) -> list[float]:
    return [x for t in tallies for x in list(t.latencies.get(api_name, []))]


def report(base: Tally, tallies: list[Tally], memory: dict[str, int], times: dict[str, float],
           args) -> tuple[int, int]:
    """Print the tables; returns (errors, leaks)."""
    sampling = [t for t in tallies if t.name.startswith("sampling")]
    react = [t for t in tallies if t.name.startswith("react")]
    columns = ["", "calls", "p50", "p95", "max"]
    print_table("Slider redraw (/redraw) latency, client side (queue + listener + transfer)",
                columns, [latency_row("alone (baseline, 1 session)", base.latencies.get("/redraw", [])),
                          latency_row(f"under load ({args.sessions} + {args.react_sessions} "
                                      "sessions)", merged(sampling, "/redraw"))])
    names = sorted({n for t in tallies for n in t.latencies} - {"/redraw"})
    print_table("Other endpoints under load", columns,
                [latency_row(n, merged(tallies, n)) for n in names])
    errors = [e for t in [base, *tallies] for e in list(t.errors)]
    leaks = [f"{t.name}: {x}" for t in tallies for x in list(t.leaks)]
    print_table("Correctness under load", ["check", "result", "goal"], [
        ["Sampling sessions finished", f"{sum(t.done for t in sampling)} / {len(sampling)}", "all"],
        ["ReAct sessions showing the final answer",
         f"{sum(t.final_answer for t in react)} / {len(react)}", "all"],
        ["errors (exception, timeout, or error message in a view)", len(errors), 0],
        ["cross-session leaks (a view or state not the session's own)", len(leaks), 0]])
    print_table("Server process memory (/proc/PID/status)", ["", "value"], [
        ["VmRSS after start-up and baseline", mib(memory["rss_before"])],
        ["VmHWM (peak resident) at the end of the load", mib(memory["hwm_after"])],
        ["highest VmRSS sampled during the load (every 0.25 s)", mib(memory["rss_peak"])],
        ["VmRSS after the load", mib(memory["rss_after"])]])
    print_table("Wall time", ["phase", "time"], [[k, secs(v)] for k, v in times.items()])
    for title, items in (("Errors", errors), ("Leaks", leaks)):
        if items:
            print(f"## {title} ({len(items)})\n")
            for item in items[:40]:
                print(f"- {item}")
            print(f"- … and {len(items) - 40} more\n" if len(items) > 40 else "")
    return len(errors), len(leaks)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20, help="Sampling sessions (default 20)")
    parser.add_argument("--react-sessions", type=int, default=5, help="ReAct sessions (default 5)")
    parser.add_argument("--moves", type=int, default=30, help="slider moves each (default 30)")
    parser.add_argument("--steps", type=int, default=5, help="sampling steps each (default 5)")
    args = parser.parse_args(argv)
    args.sessions = max(0, min(args.sessions, len(COUNTRIES) * 5))
    args.react_sessions = max(0, min(args.react_sessions, 20))
    args.moves, args.steps = max(3, min(args.moves, 200)), max(1, min(args.steps, 20))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    log = Path(tempfile.mkdtemp(prefix="bench-load-")) / "app.log"
    proc = start_server(port := free_port(), log)
    url = f"http://127.0.0.1:{port}/"

    def hard_stop() -> None:  # the last resort: nothing outlives HARD_LIMIT_S
        print(f"\nhard time limit of {HARD_LIMIT_S} s reached: server killed", flush=True)
        stop_app(proc)
        os._exit(124)

    watchdog = threading.Timer(HARD_LIMIT_S, hard_stop)
    watchdog.daemon = True
    watchdog.start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if not wait_ready(proc, url):
            print(f"the app did not answer within {READY_TIMEOUT_S} s; its log: {log}")
            return 2
        times = {"start until /gradio_api/info answers": time.perf_counter() - t_start}
        base = baseline(url, args.moves)
        memory = {"rss_before": status_kib(proc.pid, "VmRSS")}
        tallies, times["load phase (all sessions)"], memory["rss_peak"] = load(url, args, proc)
        memory["hwm_after"] = status_kib(proc.pid, "VmHWM")
        memory["rss_after"] = status_kib(proc.pid, "VmRSS")
        alive = proc.poll() is None
    finally:
        stop_app(proc)
    times["total"] = time.perf_counter() - t_start
    header(f"Class load: {args.sessions} Sampling + {args.react_sessions} ReAct sessions at once")
    print(f"Server: `python app.py` on {url} (queue {QUEUE_SIZE}, default concurrency 4), "
          f"{'still serving' if alive else 'DEAD'} at the end; log: {log}. REACT_LAB_CACHE="
          f"{os.environ.get('REACT_LAB_CACHE', '(unset)')}. The machine is shared with other "
          "work: every figure is noisy.\n")
    errors, leaks = report(base, tallies, memory, times, args)
    watchdog.cancel()
    return 0 if errors == leaks == 0 and alive else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # a request thread still hanging must not keep the script alive
