"""Startup benchmarks: how long `python app.py` takes until the page answers, and how much memory
the running app holds.

    .venv/bin/python bench/bench_startup.py              # 1 cold + 5 warm starts, ~2-4 min
    .venv/bin/python bench/bench_startup.py --cold 2 --warm 8

Cold start: $REACT_LAB_CACHE points at a fresh temporary folder, so the bundled GGUF is
dequantized and cached. Warm start: the same folder, now filled. Each start is timed from
launching the process until GET /gradio_api/info answers 200; every server is killed with its
whole process group. Memory is VmRSS/VmHWM from /proc, summed over the app and its children.
A last, separate run times the phases of one warm start inside a single process.
Figures only: nothing here asserts on a timing.

What it does not know: model speed (bench_model.py) and the page's behaviour (tests/).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, median, p95, print_table, process_tree, secs, status_kib  # noqa: E402

READY_TIMEOUT_S = 180
GOAL_WARM_S = 10
GOAL_RSS_GB = 1.5
PAGE_REQUESTS = 5


@dataclass(frozen=True)
class Start:
    """One launch of the app: seconds until the API answered, memory in bytes (0 if it failed)."""

    kind: str  # "cold" or "warm"
    seconds: float
    ready: bool
    rss_ready: int
    rss_after_requests: int
    hwm_after_requests: int
    processes: int
    note: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 5.0) -> int:
    """HTTP status of GET url, 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return 0


def app_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ, REACT_LAB_CACHE=str(cache), GRADIO_ANALYTICS_ENABLED="False")
    env.pop("REACT_LAB_MODEL", None)  # the bundled model, as a first-time user gets it
    return env


def memory(pid: int) -> tuple[int, int, int]:
    """(VmRSS, VmHWM, number of processes) in bytes, summed over pid and its children."""
    tree = process_tree(pid)
    rss = sum(status_kib(p, "VmRSS") for p in tree)
    hwm = sum(status_kib(p, "VmHWM") for p in tree)
    return rss * 1024, hwm * 1024, len(tree)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the whole process group, then SIGKILL whatever is left after 10 s."""
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_ready(proc: subprocess.Popen, base: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if get(base + "/gradio_api/info", timeout=2) == 200:
            return True
        time.sleep(0.1)
    return False


def launch(kind: str, cache: Path, logs: Path) -> Start:
    """Start app.py, time it until the API answers, measure memory, kill it."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(logs / f"{kind}-{port}.log", "w")
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=app_env(cache), stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stop() kills the server and its children
    )
    try:
        ready = wait_ready(proc, base, start + READY_TIMEOUT_S)
        seconds = time.monotonic() - start
        if not ready:
            why = f"exited with {proc.returncode}" if proc.poll() is not None else "timed out"
            log.flush()
            last = (Path(log.name).read_text().strip().splitlines() or [""])[-1][:200]
            return Start(kind, seconds, False, 0, 0, 0, 0, f"{why}: {last}")
        rss_ready, _, _ = memory(proc.pid)
        statuses = [get(base + "/") for _ in range(PAGE_REQUESTS)]
        rss, hwm, count = memory(proc.pid)
        note = "" if set(statuses) == {200} else f"page answered {statuses}"
        return Start(kind, seconds, True, rss_ready, rss, hwm, count, note)
    finally:
        stop(proc)
        log.close()


PHASES = r"""
import json, os, sys, time
t = {"interpreter": time.time() - float(os.environ["BENCH_T0"])}
def mark(name, since=[time.perf_counter()]):
    now = time.perf_counter(); t[name] = now - since[0]; since[0] = now
import torch; mark("import torch")
import gradio; mark("import gradio")
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
import transformers.models.llama.modeling_llama; mark("import transformers (Auto classes, Llama)")
import app; from agent.llm.model import load_model
lm = load_model(log=lambda m: None); mark("load_model (cache check, tokenizer, weights, vocab)")
demo = app.build_demo(lm); mark("build_demo")
demo.queue(max_size=app.QUEUE_SIZE, default_concurrency_limit=4)
demo.launch(server_name="127.0.0.1", server_port=int(sys.argv[1]), prevent_thread_lock=True,
            quiet=True, **app.launch_kwargs()); mark("launch (server up)")
from agent.llm import model as m
folder = m._gguf_cache_dir(m.bundled_gguf()); since = time.perf_counter()
m.cache_is_valid(folder)
t["of which (timed again alone): cache_is_valid, SHA-256 of the cache"] = (
    time.perf_counter() - since)
since = time.perf_counter(); m.token_display_strings(lm.tokenizer, lm.vocab_size)
t["of which (timed again alone): token_display_strings"] = time.perf_counter() - since
print("PHASES " + json.dumps(t)); sys.stdout.flush(); demo.close()
"""


def phases(cache: Path) -> dict[str, float]:
    """Seconds of each phase of one warm start, measured inside one process."""
    env = app_env(cache) | {"BENCH_T0": repr(time.time())}
    done = subprocess.run(
        [sys.executable, "-c", PHASES, str(free_port())], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=READY_TIMEOUT_S, start_new_session=True,
    )
    for line in done.stdout.splitlines():
        if line.startswith("PHASES "):
            return json.loads(line[len("PHASES "):])
    raise RuntimeError(f"phase run failed ({done.returncode}): {done.stderr[-800:]}")


def gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB"


def report(starts: list[Start]) -> None:
    rows = []
    for kind in ("cold", "warm"):
        ok = [s.seconds for s in starts if s.kind == kind and s.ready]
        runs = [s for s in starts if s.kind == kind]
        if not runs:
            continue
        goal = ("yes" if ok and median(ok) <= GOAL_WARM_S else "no") if kind == "warm" else "—"
        failed = len(runs) - len(ok)
        rows.append([kind, len(runs), secs(median(ok)) if ok else "—", secs(p95(ok)) if ok else "—",
                     secs(max(ok)) if ok else "—", goal, failed])
    print_table("Start until GET /gradio_api/info answers 200",
                ["start", "runs", "median", "p95", "max", f"≤ {GOAL_WARM_S} s", "failed"], rows)
    rows = [[i + 1, s.kind, secs(s.seconds), gb(s.rss_ready), gb(s.rss_after_requests),
             gb(s.hwm_after_requests), "yes" if s.hwm_after_requests <= GOAL_RSS_GB * 1e9 else "no",
             s.processes, s.note] for i, s in enumerate(starts)]
    print_table(
        f"Each start, and the app's memory (after it answers; after {PAGE_REQUESTS} GET /)",
        ["#", "start", "time", "VmRSS ready", "VmRSS after GETs", "VmHWM after GETs",
         f"HWM ≤ {GOAL_RSS_GB} GB", "processes", "note"],
        rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--cold", type=int, default=1, help="cold starts (~40-60 s each)")
    parser.add_argument("--warm", type=int, default=5, help="warm starts")
    args = parser.parse_args(argv)
    header("ReAct Lab · startup benchmark (bench/bench_startup.py)")
    print("Timings are wall-clock; other work on the same cores makes them noisy.\n")
    work = Path(tempfile.mkdtemp(prefix="react-lab-bench-"))
    try:
        starts = []
        for _ in range(args.cold):
            shutil.rmtree(work / "cache", ignore_errors=True)  # every cold start from nothing
            starts.append(launch("cold", work / "cache", work))
        if not args.cold:  # warm starts need a filled cache: fill it untimed
            launch("fill", work / "cache", work)
        starts += [launch("warm", work / "cache", work) for _ in range(args.warm)]
        report(starts)
        try:
            split = phases(work / "cache")
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"Phase-by-phase run failed: {exc}")
            return 1
        total = sum(v for k, v in split.items() if not k.startswith("of which"))
        print_table("One warm start, phase by phase (in one process)",
                    ["phase", "seconds", "share"],
                    [[k, f"{v:.2f}", f"{100 * v / total:.0f} %"] for k, v in split.items()
                     if not k.startswith("of which")]
                    + [["total", f"{total:.2f}", "100 %"]]
                    + [[k, f"{v:.2f}", f"{100 * v / total:.0f} %"] for k, v in split.items()
                       if k.startswith("of which")])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
