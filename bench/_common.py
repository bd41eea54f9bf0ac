"""Small helpers shared by the benchmarks: percentiles, millisecond formatting, a line describing
the machine, and a Markdown table printer.

What it does not know: what is being measured. Benchmarks print figures; they never assert on a
timing, because a shared 2-core machine makes every timing noisy.
"""

from __future__ import annotations

import datetime
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0 ≤ q ≤ 100), linear between the two nearest ranks (numpy's default).

    >>> percentile([1, 2, 3, 4], 50)
    2.5
    >>> percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], 95)
    10.5
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must lie in [0, 100], got {q}")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    """The middle value.

    >>> median([3, 1, 2])
    2.0
    """
    return percentile(values, 50)


def p95(values: Sequence[float]) -> float:
    return percentile(values, 95)


def ms(seconds: float) -> str:
    """Seconds → a millisecond figure with sensible precision.

    >>> ms(0.06712), ms(0.0004), ms(1.5)
    ('67.1 ms', '0.40 ms', '1500 ms')
    """
    value = seconds * 1000
    if value >= 1000:
        return f"{value:.0f} ms"
    return f"{value:.1f} ms" if value >= 10 else f"{value:.2f} ms"


def secs(seconds: float) -> str:
    """Seconds with two decimals.

    >>> secs(7.256)
    '7.26 s'
    """
    return f"{seconds:.2f} s"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> str:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 2**20:.1f} GiB RAM"
    except OSError:
        pass
    return "RAM unknown"


def _load_average() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load unknown"
    return f"load average {one:.2f} / {five:.2f} (1 / 5 min)"


def machine_line() -> str:
    """One line naming the date and the machine, printed at the top of every benchmark.

    The load average is there because another process on the same cores skews every figure.
    """
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return (
        f"{now} · {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}) · {_cpu_model()} · "
        f"{_ram_gib()} · Python {platform.python_version()} · {_load_average()}"
    )


def header(title: str) -> None:
    """Print the benchmark's title and the machine line."""
    print(f"# {title}\n")
    print(machine_line())
    print()


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub Markdown table of the given cells (pipes in a cell are escaped).

    >>> print(markdown_table(["dtype", "median"], [["float32", "67.1 ms"]]))
    | dtype | median |
    |---|---|
    | float32 | 67.1 ms |
    """
    def cell(value: object) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    print(f"## {title}\n")
    print(markdown_table(columns, rows))
    print()


# --- the app as a subprocess, for the benchmarks that time it from outside ----------------------

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(port: int, log: Path, extra_env: dict[str, str] | None = None,
              ready_timeout_s: float = 240.0) -> subprocess.Popen:
    """`python app.py` on 127.0.0.1:port in its own process group, once /gradio_api/info answers.

    $REACT_LAB_CACHE passes through the environment. Raises RuntimeError with the end of the log
    when the app exits or does not answer in time (and stops it).
    """
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", **(extra_env or {}))
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/gradio_api/info", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.2)
    code = proc.poll()
    stop_app(proc)
    tail = log.read_text(errors="replace")[-2000:]
    why = f"exited with code {code}" if code is not None else f"did not answer within {ready_timeout_s:.0f} s"
    raise RuntimeError(f"the app {why}; the end of its log:\n{tail}")


def stop_app(proc: subprocess.Popen) -> None:
    """SIGTERM the app's process group, then SIGKILL whatever is left after 10 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def status_kib(pid: int, key: str) -> int:
    """A figure of /proc/PID/status in KiB (VmHWM: peak resident set; VmRSS: now); 0 if gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants, found through /proc/*/stat parent ids."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += parents.get(p, [])
    return tree


def model_process(pid: int) -> int | None:
    """The pid of the app's model process (app.py --model-process on), else None."""
    for p in process_tree(pid)[1:]:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if b"agent.llm.process" in f.read():
                    return p
        except OSError:
            continue
    return None


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the server has used so far: the process and its live descendants
    (the model's process with --model-process on, the code tool's), all their threads, plus the
    children it has reaped (/proc/PID/stat); 0.0 if it is gone. The difference of two readings is
    its CPU over that interval."""
    total = 0.0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if p == pid else 0)
        except (OSError, IndexError, ValueError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def tree_kib(pid: int, key: str) -> int:
    """status_kib summed over the process and its descendants (VmHWM: the sum of each one's peak)."""
    return sum(status_kib(p, key) for p in process_tree(pid))
