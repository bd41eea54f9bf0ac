"""Class load: a lecture hall on one server. Sampling-tab sessions and ReAct-tab sessions at once,
through the same named endpoints the page uses (gradio_client, one Client per session = one
browser session with its own gr.State), each checking that what it gets back is its own work.

    .venv/bin/python bench/bench_load.py                      # 20 + 5 sessions, ~2-4 min on 2 shared cores
    .venv/bin/python bench/bench_load.py --sessions 10 --react-sessions 3 --presses 12

Slider moves are not measured: since issue #11 Temperature, Top-k, Top-p, Min-p, Bars shown and
Axis have no server listener (viz/js/sampling.js recomputes the trace in the page), so a slider
move costs the server nothing. The script confirms the server has no `/redraw` endpoint and says
so; the page's repaint time is bench/bench_sampling_ui.py's.

1. `python app.py` on a free 127.0.0.1 port (bench/_common.start_app, $REACT_LAB_CACHE from the
   environment), until GET /gradio_api/info answers.
2. Alone: one Sampling session and then one ReAct session, each by itself on the server (after an
   untimed warm-up), every request timed.
3. Load, all sessions in threads at once:
   - Sampling session i: /run_prompt("Session i: The capital of <country> is", "Raw text", seed i),
     then PRESSES presses of /sample, /greedy or /back (drawn from its own random.Random(i)) with
     varying temperature, top-k, top-p, min-p. Its checks, after every answer: the prompt string
     is its own prompt; the continuation view names its own session only; the position's step
     ("seed:draws:tokens") has its own seed and the token count it expects; Sample/Greedy grow the
     continuation by one token (the previous text is a prefix); Back returns exactly the text and
     the logits (within 1e-4: batched passes are equal to solo ones only within float tolerance)
     it had at that length. A failed check is a leak.
   - ReAct session: Reset (the scripted replay of the Berlin trace), then Next until the run
     stops; each Next must move its own recorded state by exactly one (else a leak), the stop view
     must show "It's 12°C and rainy in Berlin.", and one Next past the end must leave it there.
4. Report: per-endpoint latency alone and under load (p50 / p95 / max, client side: queue +
   listener + transfer), errors (an exception, a timeout, or an error message in a view) and leaks
   with their text, the server's CPU seconds per phase and per request (/proc/PID/stat of the app
   process), the load generator's own CPU apart (getrusage of this process: the clients' threads
   share the same 2 cores), the server's peak resident memory (VmHWM) and RSS, wall times.

Bounded: every request has a timeout, the load phase a deadline, and the whole script stops itself
after HARD_LIMIT_S; the server's process group is always killed at the end. Loopback only.
Figures only: nothing here asserts on a timing; a shared 2-core machine makes every timing noisy.
"""

from __future__ import annotations

import argparse
import base64
import html
import os
import random
import re
import resource
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    cpu_seconds,
    free_port,
    header,
    median,
    ms,
    p95,
    print_table,
    secs,
    start_app,
    status_kib,
    stop_app,
)

from app import QUEUE_SIZE  # noqa: E402 — app.py imports nothing heavy at module level

READY_TIMEOUT_S = 240
REQUEST_TIMEOUT_S = 90  # one request, queueing included
LOAD_DEADLINE_S = 240  # the load phase; sessions still running then are reported unfinished
HARD_LIMIT_S = 480  # the whole script
COUNTRIES = ("France", "Japan", "Italy", "Spain", "Canada", "Egypt", "Kenya", "Peru", "Chile",
             "Norway", "Poland", "Greece", "Turkey", "India", "China", "Brazil", "Mexico",
             "Sweden", "Austria", "Portugal")
FINAL_ANSWER = "It's 12°C and rainy in Berlin."
MARKER = re.compile(r"Session (\d+):")
CHAR = {"text": re.compile(r'data-text="([^"]*)"'), "tokens": re.compile(r'data-tokens="(\d+)"')}
ENDED = "The continuation has ended"  # a sampled end-of-sequence: correct, not an error
LOGITS_TOLERANCE = 1e-4
# The API's outputs of a Sampling position change (viz/sampling_tab.POSITION_OUTPUTS less the State).
CHART, MSG, CONTINUATION, PROMPT_STRING = range(4)
# The API's outputs of a ReAct stepping event (viz/react_tab.Parts.stepped less the State).
STOP_VIEW, REACT_MSG, SCRUB = 5, 6, 7
SLIDER_NOTE = (
    "Slider moves (Temperature, Top-k, Top-p, Min-p, Bars shown, Axis) are not measured: since "
    "issue #11 they have no server listener — viz/js/sampling.js recomputes the trace in the page "
    "— so they cost the server nothing, for any number of students."
)


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


def call(client, tally: Tally, api_name: str, *args):
    """One request with a timeout; its latency goes into the tally under api_name. An exception is
    recorded as an error and re-raised as RequestFailed."""
    t0 = time.perf_counter()
    try:
        result = client.submit(*args, api_name=api_name).result(timeout=REQUEST_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 — any failure of a request is a finding to report
        tally.errors.append(f"{api_name}: {exc.__class__.__name__}: {exc}")
        raise RequestFailed(api_name) from None
    tally.latencies.setdefault(api_name, []).append(time.perf_counter() - t0)
    return result


def message_text(msg) -> str:
    """The text of a message view.

    >>> message_text('<div class="msg error" role="status">⚠ The &quot;prompt&quot;</div>')
    '⚠ The "prompt"'
    """
    return html.unescape(re.sub(r"<[^>]+>", "", msg)).strip() if isinstance(msg, str) else ""


def shown_error(tally: Tally, api_name: str, msg) -> bool:
    """An error message in the view counts as an error (an ended continuation does not); True if
    there was any message."""
    text = message_text(msg)
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


def step_of(chart) -> tuple[int, int]:
    """(seed, tokens) of a position (viz/position.position's "seed:draws:tokens"); (-1, -1) if none.

    >>> step_of({"step": "7:2:5"}), step_of("<div>")
    ((7, 5), (-1, -1))
    """
    try:
        seed, _, tokens = str(chart["step"]).split(":")
        return int(seed), int(tokens)
    except (TypeError, KeyError, ValueError):
        return -1, -1


def logits_of(chart) -> np.ndarray | None:
    """The position's logits (base64 float32, viz/position.pack_logits), or None."""
    try:
        return np.frombuffer(base64.b64decode(chart["logits"]), dtype="<f4")
    except (TypeError, KeyError, ValueError):
        return None


def settings(rng: random.Random) -> tuple:
    """Temperature, top-k, top-p, min-p as a student might set them.

    >>> len(settings(random.Random(1)))
    4
    """
    temperature = 0.0 if rng.random() < 0.15 else round(rng.randint(1, 40) * 0.05, 2)
    top_k = 0 if rng.random() < 0.4 else rng.randint(1, 200)
    top_p = 1.0 if rng.random() < 0.4 else round(rng.uniform(0.05, 1.0), 2)
    min_p = 0.0 if rng.random() < 0.6 else round(rng.uniform(0.0, 0.3), 2)
    return temperature, top_k, top_p, min_p


def next_action(rng: random.Random, tokens: int, ended: bool) -> str:
    """Sample, Greedy or Back: Back after an end-of-sequence, never at the prompt.

    >>> next_action(random.Random(0), 3, True), next_action(random.Random(0), 0, False) != "back"
    ('back', True)
    """
    if ended:
        return "back"
    r = rng.random()
    return "sample" if r < 0.5 else "greedy" if r < 0.8 or tokens == 0 else "back"


@dataclass
class Own:
    """What a Sampling session knows it did: its number, prompt, and (text, logits) per length."""

    i: int
    prompt: str
    history: list[tuple[str, np.ndarray | None]] = field(default_factory=list)


def check_position(tally: Tally, own: Own, where: str, out) -> tuple[str, np.ndarray | None]:
    """The checks every position answer must pass; returns its (text, logits)."""
    tokens_expected = len(own.history) - 1
    if out[PROMPT_STRING] != own.prompt:
        tally.leaks.append(f"{where}: the prompt string is {out[PROMPT_STRING][:60]!r}, not its own")
    if markers(out[CONTINUATION]) != {own.i}:
        tally.leaks.append(f"{where}: the continuation names sessions {sorted(markers(out[CONTINUATION]))}")
    text, tokens = continuation_of(out[CONTINUATION])
    if step_of(out[CHART]) != (own.i, tokens_expected) or tokens != tokens_expected:
        tally.leaks.append(f"{where}: position {step_of(out[CHART])}, {tokens} tokens; expected "
                           f"seed {own.i} and {tokens_expected} tokens")
    return text, logits_of(out[CHART])


def same_logits(a, b) -> bool:
    return a is not None and b is not None and a.shape == b.shape and bool(
        np.nanmax(np.abs(np.where(np.isinf(a) & np.isinf(b), 0, a - b))) < LOGITS_TOLERANCE)


def press(client, tally: Tally, own: Own, rng: random.Random, k: int, ended: bool) -> bool:
    """One Sample, Greedy or Back press, checked; returns whether the continuation has ended."""
    action = next_action(rng, len(own.history) - 1, ended)
    out = call(client, tally, f"/{action}", *settings(rng))
    where = f"press {k} /{action}"
    if shown_error(tally, f"/{action}", out[MSG]):
        return ENDED in message_text(out[MSG])  # nothing changed: the next press goes Back
    if action == "back":
        own.history.pop()
        text, logits = check_position(tally, own, where, out)
        if text != own.history[-1][0] or not same_logits(logits, own.history[-1][1]):
            tally.leaks.append(f"{where}: back at {text!r}, not its own earlier position "
                               f"{own.history[-1][0]!r} with the same logits")
        return False
    before = own.history[-1][0]
    own.history.append(("", None))
    text, logits = check_position(tally, own, where, out)
    if not text.startswith(before):
        tally.leaks.append(f"{where}: text {text!r} does not extend its own {before!r}")
    own.history[-1] = (text, logits)
    return False


def sampling_session(url: str, i: int, presses: int, tally: Tally) -> None:
    """Run prompt, then Sample/Greedy/Back presses; every answer checked against its own work."""
    client = new_client(url)
    try:
        own = Own(i, f"Session {i}: The capital of {COUNTRIES[i % len(COUNTRIES)]} is")
        out = call(client, tally, "/run_prompt", own.prompt, "Raw text", i)
        shown_error(tally, "/run_prompt", out[MSG])
        own.history.append(("", None))
        own.history[0] = check_position(tally, own, "/run_prompt", out)
        rng, ended = random.Random(i), False
        for k in range(1, presses + 1):
            ended = press(client, tally, own, rng, k, ended)
        tally.done = True
    except RequestFailed:
        pass
    finally:
        client.close()


def scrub_value(update) -> int:
    return int(update.get("value", -1)) if isinstance(update, dict) else -1


def react_session(url: str, defaults: list, tally: Tally, limit: int = 30) -> None:
    """Reset to the scripted Berlin replay, then Next until it stops; each Next moves the state by
    exactly one, and one Next past the end leaves it there."""
    client = new_client(url)
    try:
        out = call(client, tally, "/on_reset", *defaults)
        note = message_text(out[REACT_MSG])
        if "New run" not in note or "Berlin" not in note:
            tally.errors.append(f"/on_reset: unexpected message {note[:120]!r}")
        index, stop_views = scrub_value(out[SCRUB]), []
        if index != 0:
            tally.leaks.append(f"/on_reset: recorded state {index}, expected 0")
        for _ in range(limit):
            out = call(client, tally, "/on_next", False)
            stop_views.append(out[STOP_VIEW])
            if scrub_value(out[SCRUB]) != index + 1:
                tally.leaks.append(f"/on_next from state {index}: now at {scrub_value(out[SCRUB])}")
            index = scrub_value(out[SCRUB])
            view = out[STOP_VIEW]
            if isinstance(view, str) and 'data-stop="' in view and 'data-stop=""' not in view:
                break
        tally.final_answer = any(isinstance(v, str) and FINAL_ANSWER in html.unescape(v) for v in stop_views)
        if not tally.final_answer:
            tally.errors.append(f"ReAct: the final answer {FINAL_ANSWER!r} was not shown")
        out = call(client, tally, "/on_next", False)  # past the end: a notice, the state stays
        if "has stopped" not in message_text(out[REACT_MSG]) or scrub_value(out[SCRUB]) != index:
            tally.errors.append(f"/on_next after the stop: {message_text(out[REACT_MSG])[:120]!r}, "
                                f"state {scrub_value(out[SCRUB])} (expected {index})")
        tally.done = True
    except RequestFailed:
        pass
    finally:
        client.close()


def api_facts(url: str) -> tuple[list, bool]:
    """(the ReAct tab's Reset inputs as the page starts — Berlin, scripted replay —, whether the
    server still has a /redraw endpoint), from the API info."""
    client = new_client(url)
    try:
        api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    finally:
        client.close()
    return [p.get("parameter_default") for p in api["/on_reset"]["parameters"]], "/redraw" in api


class Meter:
    """The server's CPU seconds (its /proc/PID/stat) and this process's own CPU (getrusage: the
    load generator's client threads) over one phase, with its wall time."""

    def __init__(self, pid: int):
        self.pid = pid
        self.t0, self.server0, self.own0 = time.perf_counter(), cpu_seconds(pid), self._own()
        self.wall = self.server = self.own = 0.0

    @staticmethod
    def _own() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def stop(self) -> Meter:
        self.wall = time.perf_counter() - self.t0
        self.server, self.own = cpu_seconds(self.pid) - self.server0, self._own() - self.own0
        return self


def alone(url: str, presses: int, defaults: list, pid: int) -> tuple[list[Tally], Meter]:
    """One Sampling session and then one ReAct session, each alone on the server, after an untimed
    warm-up of both."""
    sampling_session(url, 98, 3, Tally("warm-up"))
    react_session(url, defaults, Tally("warm-up"))
    meter = Meter(pid)
    tallies = [Tally("alone sampling"), Tally("alone react")]
    sampling_session(url, 99, presses, tallies[0])
    react_session(url, defaults, tallies[1])
    return tallies, meter.stop()


def load(url: str, args, defaults: list, pid: int) -> tuple[list[Tally], Meter, int]:
    """All sessions at once, in threads. Returns (tallies, meter, highest VmRSS sampled in KiB)."""
    tallies, threads = [], []
    for i in range(args.sessions):
        tallies.append(Tally(f"sampling {i}"))
        threads.append(threading.Thread(target=sampling_session, daemon=True,
                                        args=(url, i, args.presses, tallies[-1])))
    for i in range(args.react_sessions):
        tallies.append(Tally(f"react {i}"))
        threads.append(threading.Thread(target=react_session, daemon=True, args=(url, defaults, tallies[-1])))
    meter = Meter(pid)
    for t in threads:
        t.start()
    deadline, peak = time.monotonic() + LOAD_DEADLINE_S, 0
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        peak = max(peak, status_kib(pid, "VmRSS"))
        time.sleep(0.25)
    meter.stop()
    for t, tally in zip(threads, tallies, strict=True):
        if t.is_alive():
            tally.errors.append(f"{tally.name}: still running after {LOAD_DEADLINE_S} s")
    return tallies, meter, peak


def stats(values: list[float]) -> list[object]:
    if not values:
        return [0, "–", "–", "–"]
    return [len(values), ms(median(values)), ms(p95(values)), ms(max(values))]


def merged(tallies: list[Tally], api_name: str) -> list[float]:
    return [x for t in tallies for x in list(t.latencies.get(api_name, []))]


def calls(tallies: list[Tally]) -> int:
    return sum(len(v) for t in tallies for v in list(t.latencies.values()))


def cpu_rows(phases: dict[str, tuple[Meter, int]]) -> list[list[object]]:
    rows = []
    for name, (m, n) in phases.items():
        rows.append([name, secs(m.wall), n, f"{m.server:.1f} s ({m.server / max(m.wall, 1e-9):.0%} of a core)",
                     ms(m.server / n) if n else "–", f"{m.own:.1f} s ({m.own / max(m.wall, 1e-9):.0%} of a core)"])
    return rows


def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def report(base: list[Tally], tallies: list[Tally], meters: dict, memory: dict[str, int], args) -> tuple[int, int]:
    """Print the tables; returns (errors, leaks)."""
    sampling = [t for t in tallies if t.name.startswith("sampling")]
    react = [t for t in tallies if t.name.startswith("react")]
    names = sorted({n for t in [*base, *tallies] for n in t.latencies})
    print_table(f"Latency per endpoint, client side (queue + listener + transfer): alone vs under load "
                f"({args.sessions} Sampling + {args.react_sessions} ReAct sessions)",
                ["endpoint", "alone: calls", "p50", "p95", "max", "under load: calls", "p50", "p95", "max"],
                [[n, *stats(merged(base, n)), *stats(merged(tallies, n))] for n in names])
    print_table("CPU: the server (/proc/PID/stat of the app) and the load generator (this process) apart",
                ["phase", "wall", "requests", "server CPU", "server CPU per request", "load generator CPU"],
                cpu_rows(meters))
    errors = [e for t in [*base, *tallies] for e in list(t.errors)]
    leaks = [f"{t.name}: {x}" for t in [*base, *tallies] for x in list(t.leaks)]
    print_table("Correctness under load", ["check", "result", "goal"], [
        ["Sampling sessions finished", f"{sum(t.done for t in sampling)} / {len(sampling)}", "all"],
        ["ReAct sessions showing the final answer", f"{sum(t.final_answer for t in react)} / {len(react)}", "all"],
        ["errors (exception, timeout, or error message in a view)", len(errors), 0],
        ["cross-session leaks (a view, position or state not the session's own)", len(leaks), 0]])
    print_table("Server process memory (/proc/PID/status)", ["", "value"], [
        ["VmRSS after start-up and the alone phase", mib(memory["rss_before"])],
        ["highest VmRSS sampled during the load (every 0.25 s)", mib(memory["rss_peak"])],
        ["VmHWM (peak resident) at the end of the load", mib(memory["hwm_after"])],
        ["VmRSS after the load", mib(memory["rss_after"])]])
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
    parser.add_argument("--presses", type=int, default=12, help="Sample/Greedy/Back presses each (default 12)")
    args = parser.parse_args(argv)
    args.sessions = max(0, min(args.sessions, 64))
    args.react_sessions = max(0, min(args.react_sessions, 20))
    args.presses = max(1, min(args.presses, 60))
    return args


def measure(url: str, args, pid: int) -> tuple:
    defaults, has_redraw = api_facts(url)
    base, alone_meter = alone(url, args.presses, defaults, pid)
    memory = {"rss_before": status_kib(pid, "VmRSS")}
    tallies, load_meter, memory["rss_peak"] = load(url, args, defaults, pid)
    memory["hwm_after"], memory["rss_after"] = status_kib(pid, "VmHWM"), status_kib(pid, "VmRSS")
    meters = {"alone (1 Sampling, then 1 ReAct session)": (alone_meter, calls(base)),
              f"under load ({args.sessions} + {args.react_sessions} sessions)": (load_meter, calls(tallies))}
    return base, tallies, meters, memory, has_redraw


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    log = Path(tempfile.mkdtemp(prefix="bench-load-")) / "app.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    watchdog = threading.Timer(HARD_LIMIT_S, lambda: (print(f"\nhard limit of {HARD_LIMIT_S} s reached", flush=True),
                                                     os._exit(124)))
    watchdog.daemon = True
    watchdog.start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        proc = start_app(port, log, ready_timeout_s=READY_TIMEOUT_S)
    except RuntimeError as exc:
        print(exc)
        return 2
    watchdog.cancel()  # from here the server must die with us: a new watchdog stops it too
    watchdog = threading.Timer(HARD_LIMIT_S - (time.perf_counter() - t_start),
                               lambda: (print("\nhard time limit reached: server killed", flush=True),
                                        stop_app(proc), os._exit(124)))
    watchdog.daemon = True
    watchdog.start()
    started = time.perf_counter() - t_start
    try:
        base, tallies, meters, memory, has_redraw = measure(url, args, proc.pid)
        alive = proc.poll() is None
    finally:
        stop_app(proc)
    watchdog.cancel()
    header(f"Class load: {args.sessions} Sampling + {args.react_sessions} ReAct sessions at once")
    print(f"Server: `python app.py` on {url} (queue {QUEUE_SIZE}; model events batched, app.configure_queue), "
          f"{'still serving' if alive else 'DEAD'} at the end; started in {secs(started)}; log: {log}. "
          f"{args.presses} Sample/Greedy/Back presses per Sampling session. The machine is shared with other "
          "work: every figure is noisy.\n")
    print(SLIDER_NOTE + (" Confirmed: the server has no /redraw endpoint.\n" if not has_redraw
                         else " BUT the server still has a /redraw endpoint.\n"))
    errors, leaks = report(base, tallies, meters, memory, args)
    print(f"Total wall time: {secs(time.perf_counter() - t_start)}.")
    return 0 if errors == leaks == 0 and alive else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # a request thread still hanging must not keep the script alive
