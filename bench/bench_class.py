"""Benchmark: a lecture hall on one server (issue 25), with a lean load generator.

    .venv/bin/python bench/bench_class.py                      # 60 students, ~4 minutes
    .venv/bin/python bench/bench_class.py --students 20 40 60  # how many the two cores hold
    .venv/bin/python bench/bench_class.py --students --py-spy /tmp/pyspy  # profile the Greedy phase only
    .venv/bin/python bench/bench_class.py --greedy --students 2 --spec 1  # a smoke of the Speculative path
    .venv/bin/python bench/bench_class.py --students --floor   # the Greedy phases, and on the model layer alone
    .venv/bin/python bench/bench_class.py --students --greedy --replies 1 8  # local ReAct replies at once
    .venv/bin/python bench/bench_class.py --students --greedy --replies 1 8 --floor --no-prefill  # … and alone

Each phase starts `python app.py` once (loopback) and then runs N students at once, each a thread
that behaves like a person in a lecture, with a think time of 2–5 s between actions:
  - Sampling students (all but the ReAct and Speculative ones): Run a prompt of their own
    ("Student i: The capital of <country> is", raw text, seed i), then Sample / Greedy / Back
    presses. Slider moves cost the server nothing (viz/js/sampling.js redraws in the page), so
    they are not sent. Each answer is checked: the position's "seed:draws:tokens" has the
    student's own seed and exactly one token more (Sample, Greedy) or one fewer (Back) than
    before, so a press that did nothing is an error, not a fast figure.
  - 10 ReAct students: a typed question on the Local model (default Local weights), Reset, then
    Next until the run stops; every Next must move the recorded state by exactly one.
  - 2 Speculative students: Run the speculative decoding of their own prompt; the stats must say
    tokens were emitted.

The load generator is lean: raw HTTP on http.client — POST /gradio_api/queue/join, then the SSE
stream of /gradio_api/queue/data until the event's process_completed — and it never decodes a
payload (the checks are regular expressions over the raw completed line). Its own CPU
(getrusage) is reported apart from the server's (/proc/PID/stat of the app process).

Reported per phase: per-action latency (median, p95, max; client side: queue + listener +
transfer), errors (an exception, a timeout, a failed event, a check that failed), leaks (another
session's seed or prompt in an answer), server CPU seconds, the server's peak memory (VmHWM),
the load generator's CPU. Figures only, never asserts. Bounded: every request has a timeout,
each phase a deadline, the server is always stopped. Loopback only.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    cpu_seconds,
    free_port,
    header,
    median,
    model_process,
    ms,
    p95,
    print_table,
    start_app,
    stop_app,
    tree_kib,
)

from agent.llm.batching import PASS_LOG_ENV  # noqa: E402

REQUEST_TIMEOUT_S = 120
THINK_S = (2.0, 5.0)
PRESSES = 12  # Sample / Greedy / Back presses per Sampling student
REACT_STUDENTS, SPEC_STUDENTS = 10, 2
PHASE_DEADLINE_S = 300
REACT_NEXT_LIMIT = 14
COUNTRIES = ("France", "Japan", "Italy", "Spain", "Canada", "Egypt", "Kenya", "Peru", "Chile", "Norway",
             "Poland", "Greece", "Turkey", "India", "China", "Brazil", "Mexico", "Sweden", "Austria", "Portugal")
QUESTIONS = ("What's the weather in Lisbon?", "Is it warmer in Paris or in Rome?", "What is 17 * 23?",
             "Who wrote Norwegian Wood?", "What's the weather in Prague?")
STEP = re.compile(rb'"step":\s*"(\d+):(\d+):(\d+)"')
STATE = re.compile(rb"Recorded state (\d+) of (\d+)")
STOP = re.compile(rb'data-stop=\\"([^"\\]+)\\"')
EMITTED = re.compile(rb"emitted</[^>]+>\s*<[^>]+>(\d+) =")
COMPLETION = re.compile(rb"completion_tokens ([\d,]+)")  # the budget view: what the model counted on a call
ENDED = b"The continuation has ended"


class Page:
    """The app's /config: each endpoint's fn_index and inputs, each component's default and label."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        config = json.loads(request(host, port, "GET", "/config")[1])
        self.components = {c["id"]: c for c in config["components"]}
        self.endpoints = {d["api_name"]: d for d in config["dependencies"] if d.get("api_name")}

    def data(self, api_name: str, **by_label) -> tuple[int, list]:
        """(fn_index, the input values): each input's default, a State as None, `by_label` overrides."""
        dep = self.endpoints[api_name]
        values = []
        for cid in dep["inputs"]:
            c = self.components[cid]
            props = c.get("props", {})
            label = props.get("label")
            value = None if c.get("type") == "state" else props.get("value")
            values.append(by_label.get(label, value))
        return dep["id"], values


def request(host: str, port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def call(page: Page, session: str, api_name: str, **by_label) -> bytes:
    """One event through the queue, as the page sends it; the raw process_completed line.
    Raises RuntimeError on a refused join, a failed event or a stream that ends without it."""
    fn_index, data = page.data(api_name, **by_label)
    body = json.dumps({"data": data, "fn_index": fn_index, "session_hash": session,
                       "event_data": None, "trigger_id": None}).encode()
    status, raw = request(page.host, page.port, "POST", "/gradio_api/queue/join", body)
    if status != 200:
        raise RuntimeError(f"{api_name}: join answered HTTP {status}: {raw[:200]!r}")
    event = json.loads(raw)["event_id"].encode()
    conn = http.client.HTTPConnection(page.host, page.port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("GET", f"/gradio_api/queue/data?session_hash={session}")
        resp = conn.getresponse()
        while line := resp.readline():
            if b'"process_completed"' in line and event in line:
                if b'"success":true' not in line:
                    raise RuntimeError(f"{api_name}: the event failed: {line[:300]!r}")
                return line
        raise RuntimeError(f"{api_name}: the stream ended before the event completed")
    finally:
        conn.close()


@dataclass
class Tally:
    kind: str
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    actions: int = 0

    def timed(self, page: Page, session: str, api_name: str, **by_label) -> bytes | None:
        t0 = time.perf_counter()
        try:
            line = call(page, session, api_name, **by_label)
        except Exception as exc:  # noqa: BLE001 — every failure is a finding to report
            self.errors.append(f"{api_name}: {exc.__class__.__name__}: {str(exc)[:200]}")
            return None
        self.latencies.setdefault(api_name, []).append(time.perf_counter() - t0)
        self.actions += 1
        return line


def think(rng: random.Random, deadline: float) -> bool:
    time.sleep(rng.uniform(*THINK_S))
    return time.monotonic() < deadline


def sampling_student(page: Page, i: int, tally: Tally, deadline: float) -> None:
    """Run a prompt, then presses; each answer must be this student's position, one token on/back."""
    session, rng = uuid.uuid4().hex[:11], random.Random(i)
    line = tally.timed(page, session, "run_prompt", **{"Prompt": f"Student {i}: The capital of "
                                                         f"{COUNTRIES[i % len(COUNTRIES)]} is",
                                                         "Send the prompt as": "Raw text", "Seed": i})
    tokens = 0
    if line is None or not check(tally, line, i, 0, "run_prompt"):
        return
    for _ in range(PRESSES):
        if not think(rng, deadline):
            return
        action = "back" if tokens and rng.random() < 0.2 else rng.choice(("sample", "greedy"))
        line = tally.timed(page, session, action)
        if line is None:
            return
        if ENDED in line:  # a sampled end of sequence: nothing added, correct; go back next
            tokens_now = tokens
        else:
            tokens_now = tokens + (-1 if action == "back" else 1)
            if not check(tally, line, i, tokens_now, action):
                return
        tokens = tokens_now


def check(tally: Tally, line: bytes, seed: int, tokens: int, action: str) -> bool:
    m = STEP.search(line)
    if m is None:
        tally.errors.append(f"{action}: no position in the answer")
        return False
    got = (int(m.group(1)), int(m.group(3)))
    if got != (seed, tokens):
        (tally.leaks if got[0] != seed else tally.errors).append(
            f"{action}: position seed {got[0]} with {got[1]} tokens; expected seed {seed} with {tokens}")
        return False
    return True


def react_student(page: Page, i: int, tally: Tally, deadline: float) -> None:
    """A typed question on the Local model: Reset, then Next until the run stops."""
    session, rng = uuid.uuid4().hex[:11], random.Random(1000 + i)
    line = tally.timed(page, session, "on_reset", **{"Task": "Free text…", "Your task": QUESTIONS[i % len(QUESTIONS)],
                                                     "Backend": "Local model"})
    if line is None:
        return
    state = STATE.search(line)
    index = int(state.group(1)) if state else -1
    for _ in range(REACT_NEXT_LIMIT):
        if not think(rng, deadline):
            return
        line = tally.timed(page, session, "on_next")
        if line is None:
            return
        state = STATE.search(line)
        now = int(state.group(1)) if state else -1
        if now != index + 1:
            tally.errors.append(f"on_next from recorded state {index}: now {now}")
            return
        index = now
        if STOP.search(line):
            return


def spec_student(page: Page, i: int, tally: Tally, deadline: float) -> None:
    """Run speculative decoding twice with a think time between; the stats must show tokens emitted."""
    session, rng = uuid.uuid4().hex[:11], random.Random(2000 + i)
    for k in range(2):
        if not think(rng, deadline):
            return
        line = tally.timed(page, session, "spec_run", Prompt=f"Student {i} writes a short note about rivers {k}:")
        if line is None:
            return
        emitted = EMITTED.search(line)
        if not emitted or int(emitted.group(1)) < 1:
            tally.errors.append("spec_run: the stats show no emitted token")
            return


def phase(page: Page, pid: int, students: int, react: int | None = None, spec: int | None = None) -> dict:
    """N students at once; their tallies, server CPU and memory, the generator's CPU. ReAct and
    Speculative students: a third (at most 10) and a tenth (at most 2), unless given."""
    react = min(REACT_STUDENTS, students // 3) if react is None else react
    spec = min(SPEC_STUDENTS, students // 10) if spec is None else spec
    kinds = (["react"] * react + ["spec"] * spec)[:students]
    kinds += ["sampling"] * (students - len(kinds))
    deadline = time.monotonic() + PHASE_DEADLINE_S
    tallies = [Tally(k) for k in kinds]
    run = {"sampling": sampling_student, "react": react_student, "spec": spec_student}
    threads = [threading.Thread(target=run[k], args=(page, i, t, deadline), daemon=True)
               for i, (k, t) in enumerate(zip(kinds, tallies, strict=True))]
    child = model_process(pid)
    child0 = cpu_seconds(child) if child else 0.0
    cpu0, own0, t0 = cpu_seconds(pid), resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    for t in threads:
        t.start()
        time.sleep(min(0.15, 8.0 / max(1, students)))  # arrivals spread over a few seconds
    for t in threads:
        t.join(timeout=max(1.0, deadline + REQUEST_TIMEOUT_S - time.monotonic()))
    own1 = resource.getrusage(resource.RUSAGE_SELF)
    return {"students": students, "tallies": tallies, "t0": t0, "wall": time.monotonic() - t0,
            "server_cpu": cpu_seconds(pid) - cpu0, "model_cpu": cpu_seconds(child) - child0 if child else None,
            "generator_cpu": (own1.ru_utime + own1.ru_stime) - (own0.ru_utime + own0.ru_stime),
            "hwm_kib": tree_kib(pid, "VmHWM"), "unfinished": sum(t.is_alive() for t in threads)}


def greedy_cpu(page: Page, pid: int, students: int, presses: int = 24, spy: Path | None = None) -> dict:
    """Server CPU per Greedy press that added a token, with `students` pressing at once (issue 25's
    "1/3 of one student alone" goal). The prompts' runs are outside the measured window."""
    tallies = [Tally("greedy") for _ in range(students)]
    sessions = [uuid.uuid4().hex[:11] for _ in range(students)]
    for i, s in enumerate(sessions):
        prompt = f"Student {i}: a long story about the history of {COUNTRIES[i % len(COUNTRIES)]} begins with"
        call(page, s, "run_prompt", **{"Prompt": prompt, "Send the prompt as": "Raw text", "Seed": i})
    added = [0] * students  # presses that added a token: a no-op press is not timed as work

    def presser(i: int) -> None:
        for k in range(1, presses + 1):
            line = tallies[i].timed(page, sessions[i], "greedy")
            if line is None or ENDED in line or not check(tallies[i], line, i, k, "greedy"):
                return
            added[i] += 1

    threads = [threading.Thread(target=presser, args=(i,)) for i in range(students)]
    recorder = Spy(pid, spy) if spy is not None else None  # attached before the window: not in its CPU
    child = model_process(pid)
    cpu0, child0, t0 = cpu_seconds(pid), cpu_seconds(child) if child else 0.0, time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu, wall = cpu_seconds(pid) - cpu0, time.monotonic() - t0
    model_cpu = cpu_seconds(child) - child0 if child else None
    if recorder is not None:
        recorder.stop()
        recorder.report()
    latencies = [x for t in tallies for x in t.latencies.get("greedy", [])]
    return {"students": students, "tokens": sum(added), "cpu_per_token": cpu / max(1, sum(added)),
            "model_cpu_per_token": None if model_cpu is None else model_cpu / max(1, sum(added)),
            "wall": wall, "median": median(latencies) if latencies else float("nan"),
            "errors": [e for t in tallies for e in t.errors + t.leaks]}


def react_replies(page: Page, pid: int, students: int, spy: Path | None = None) -> dict:
    """Issue 25's "8 concurrent local ReAct replies ≥ 3× one reply's tokens per second, through
    the page": `students` sessions Reset with a typed question on the Local model, then all press
    Next at one moment until their first model call is shown (the budget view's completion_tokens:
    a press that made no model call adds nothing). Total reply tokens over the wall time."""
    sessions = [uuid.uuid4().hex[:11] for _ in range(students)]
    tallies = [Tally("replies") for _ in range(students)]
    for i, s in enumerate(sessions):
        call(page, s, "on_reset", **{"Task": "Free text…", "Your task": QUESTIONS[i % len(QUESTIONS)],
                                     "Backend": "Local model"})
    tokens = [0] * students
    together = threading.Barrier(students)

    def student(i: int) -> None:
        together.wait()
        for _ in range(4):  # the first model call is within the first few Next presses
            line = tallies[i].timed(page, sessions[i], "on_next")
            if line is None:
                return
            if (m := COMPLETION.search(line)) is not None:
                tokens[i] = int(m.group(1).replace(b",", b""))
                return
        tallies[i].errors.append("on_next: no model call in 4 presses")

    threads = [threading.Thread(target=student, args=(i,)) for i in range(students)]
    recorder = Spy(pid, spy) if spy is not None else None  # attached before the window
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    if recorder is not None:
        recorder.stop()
        recorder.report()
    return {"students": students, "tokens": sum(tokens), "wall": wall, "tok_s": sum(tokens) / wall,
            "server_cpu": cpu_seconds(pid) - cpu0, "replied": sum(1 for k in tokens if k > 0),
            "errors": [e for t in tallies for e in t.errors]}


def own_cpu() -> float:
    """This process's CPU seconds (user + system)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def floor_worker(students: list[int], presses: int) -> list[dict]:
    """model_floor's work, in its own process: each student a thread on the model layer, its own
    session, `presses` Greedy steps (the argmax appended, its next logits computed)."""
    from agent.llm.model import load_model

    lm = load_model(log=lambda *a: None)

    out = []
    for n in students:
        together, added = threading.Barrier(n + 1), []

        def student(i: int, n: int = n, together: threading.Barrier = together, added: list = added) -> None:
            ids = lm.encode(f"Student {i} of {n}: a long story about the history of Peru begins with")
            start, logits = len(ids), lm.next_token_logits(ids, session=f"floor-{n}-{i}")
            together.wait()
            for _ in range(presses):
                ids = ids + [int(logits.argmax())]
                logits = lm.next_token_logits(ids, session=f"floor-{n}-{i}")
            added.append(len(ids) - start)

        threads = [threading.Thread(target=student, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        together.wait()
        lm.batcher.stats.max_rows, passes, cpu0, t0 = 0, lm.batcher.stats.steps, own_cpu(), time.perf_counter()
        for t in threads:
            t.join()
        out.append({"students": n, "tokens": sum(added), "cpu": own_cpu() - cpu0, "wall": time.perf_counter() - t0,
                    "passes": lm.batcher.stats.steps - passes, "max_rows": lm.batcher.stats.max_rows})
    return out


def model_floor(students: list[int], presses: int) -> list[dict]:
    """The same Greedy presses on the model layer alone (agent.llm, no Gradio, no HTTP), in a process
    of its own so that its CPU is the model's: what batching itself saves on this CPU, the floor
    under the page's figure. Only the tokens each student's sequence really gained are counted."""
    return in_own_process("floor_worker", students, presses)


def replies_floor_worker(sessions: list[int]) -> list[dict]:
    """react_replies' work on the model layer alone, in its own process: N threads, each a session
    of its own on the default (tuned) weights, run a ReAct question's first model call through the
    app's loop and LocalBackend at one moment. The first, untimed call shares the system turn's KV,
    as the page's warm-up does. Counts only the completion tokens each call reported."""
    from agent.backends import LocalBackend
    from agent.llm.model import load_model
    from agent.loop import step
    from agent.tools import TOOLS
    from agent.tuning.trajectories import SETTINGS, start

    lm = load_model(log=lambda *a: None)

    def reply(key: str, question: str) -> int:
        backend = LocalBackend(lm, name="Local model", session=key, weights="trajectory-tuned")
        state = start(question, SETTINGS)
        while not state.replies and not state.done:
            state = step(state, backend, TOOLS)
        return state.usage[-1].completion_tokens if state.replies else 0

    reply("warm-up", QUESTIONS[0])
    out = []
    for n in sessions:
        tokens = [0] * n

        def student(i: int, n: int = n, tokens: list = tokens) -> None:
            tokens[i] = reply(f"floor-replies-{n}-{i}", QUESTIONS[i % len(QUESTIONS)])

        threads = [threading.Thread(target=student, args=(i,)) for i in range(n)]
        lm.batcher.stats.max_rows, passes, cpu0, t0 = 0, lm.batcher.stats.steps, own_cpu(), time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out.append({"sessions": n, "replied": sum(1 for k in tokens if k), "tokens": sum(tokens),
                    "cpu": own_cpu() - cpu0, "wall": time.perf_counter() - t0,
                    "passes": lm.batcher.stats.steps - passes, "max_rows": lm.batcher.stats.max_rows})
    return out


def in_own_process(function: str, *args) -> list[dict]:
    """bench_class.<function>(*args) in a process of its own, so that its CPU is the model's alone."""
    here = Path(__file__).resolve().parent
    code = ("import json, sys; sys.path[:0] = sys.argv[1:3]; import bench_class; "
            f"print(json.dumps(bench_class.{function}(*json.loads(sys.argv[3]))))")
    done = subprocess.run([sys.executable, "-c", code, str(here.parent), str(here), json.dumps(args)],
                          capture_output=True, text=True, timeout=1800, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def during_prefill(page: Page, repeats: int = 5) -> dict:
    """Cheap requests while another session's long prompt is prefilled: a Greedy press (a decode
    row) and a short Run prompt (a prefill row of its own), each timed; how long the long prompt
    took. Each Greedy must add its token, each short prompt must give its own position."""
    long_prompt = " ".join(f"Paragraph {k}: the river flows past the old mill and the bridge." for k in range(150))
    cheap, probe, longs = Tally("cheap"), uuid.uuid4().hex[:11], []
    call(page, probe, "run_prompt", **{"Prompt": "Probe: once upon a time", "Send the prompt as": "Raw text",
                                       "Seed": 7})
    tokens = 0
    for k in range(2 * repeats):
        other = Tally("long")
        t = threading.Thread(target=lambda o=other: o.timed(page, uuid.uuid4().hex[:11], "run_prompt", **{
            "Prompt": long_prompt[:7900], "Send the prompt as": "Raw text", "Seed": 1}))
        t.start()
        time.sleep(0.4)  # the long prefill is under way
        if k % 2 == 0:
            line = cheap.timed(page, probe, "greedy")
            if line is not None and ENDED not in line:
                tokens += 1
                check(cheap, line, 7, tokens, "greedy")
        else:
            line = cheap.timed(page, uuid.uuid4().hex[:11], "run_prompt", **{
                "Prompt": f"Short {k}: the capital of Italy is", "Send the prompt as": "Raw text", "Seed": 8})
            if line is not None:
                check(cheap, line, 8, 0, "short run_prompt")
        t.join()
        longs += other.latencies.get("run_prompt", [])
        cheap.errors += other.errors
    return {"greedy": cheap.latencies.get("greedy", []), "short": cheap.latencies.get("run_prompt", []),
            "long": longs, "errors": cheap.errors + cheap.leaks}


class Spy:
    """py-spy sampling the server's threads while they hold the GIL (``--gil``), as raw collapsed stacks:
    which Python code runs per event under the interpreter lock. ``pip install --target DIR py-spy``;
    the binary is looked up on PATH, then in /tmp/pyspy-inst/bin."""

    def __init__(self, pid: int, out: Path, gil: bool = True) -> None:
        binary = shutil.which("py-spy") or "/tmp/pyspy-inst/bin/py-spy"
        self.out = out
        args = [binary, "record", "--pid", str(pid), "--rate", "200", "--format", "raw", "--output", str(out),
                "--nonblocking", "--threads"] + (["--gil"] if gil else [])
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)  # attached

    def stop(self) -> None:
        self.proc.send_signal(2)  # SIGINT: py-spy writes its file and exits
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def report(self, top: int = 25) -> None:
        """Self and inclusive samples per function (file:function), the busiest first."""
        if not self.out.exists():
            print(f"py-spy wrote nothing: {self.proc.stderr.read().decode(errors='replace')[-500:]}")
            return
        own, total, samples = collections.Counter(), collections.Counter(), 0
        for line in self.out.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            n, samples = int(count), samples + int(count)
            frames = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1] + ")"
                      for f in stack.split(";")[1:] if f]
            if frames:
                own[frames[-1]] += n
                for f in set(frames):
                    total[f] += n
        print_table(f"py-spy, {samples} samples with the GIL held ({self.out}): self time",
                    ["function (file)", "self %", "inclusive %"],
                    [[f, f"{100 * c / samples:.1f}", f"{100 * total[f] / samples:.1f}"]
                     for f, c in own.most_common(top)])
        print_table("py-spy: inclusive time", ["function (file)", "inclusive %"],
                    [[f, f"{100 * c / samples:.1f}"] for f, c in total.most_common(top)])


def profile(page: Page) -> None:
    """Gradio's phases per event over the Greedy phase (/gradio_api/profiling/summary): what the
    server spends around the model step (preprocess, postprocess) against the step itself."""
    summary = json.loads(request(page.host, page.port, "GET", "/gradio_api/profiling/summary")[1])
    rows = [[phase, ms(v["p50"] / 1000), ms(v["p95"] / 1000), ms(v["mean"] / 1000)]
            for phase, v in summary.get("phases", {}).items()]
    print_table(f"Gradio's phases per event, {summary.get('count', 0)} events (GRADIO_PROFILING)",
                ["phase", "median", "p95", "mean"], rows)


def report(result: dict) -> None:
    tallies = result["tallies"]
    groups = {"Sample / Greedy / Back": ("sample", "greedy", "back"), "Run prompt": ("run_prompt",),
              "ReAct Reset": ("on_reset",), "ReAct Next": ("on_next",), "Speculative run": ("spec_run",)}
    rows = []
    for name, apis in groups.items():
        values = [x for t in tallies for a in apis for x in t.latencies.get(a, [])]
        if values:
            rows.append([name, len(values), ms(median(values)), ms(p95(values)), ms(max(values))])
    n = result["students"]
    print_table(f"{n} students ({sum(t.kind == 'react' for t in tallies)} ReAct on the Local model, "
                f"{sum(t.kind == 'spec' for t in tallies)} Speculative)", ["action", "n", "median", "p95", "max"], rows)
    errors = [e for t in tallies for e in t.errors]
    leaks = [e for t in tallies for e in t.leaks]
    actions = sum(t.actions for t in tallies)
    print(f"actions {actions}, errors {len(errors)}, leaks {len(leaks)}, unfinished students {result['unfinished']}, "
          f"wall {result['wall']:.0f} s")
    per_action = result["server_cpu"] / max(1, actions) * 1000
    of_which = "" if result.get("model_cpu") is None else f", of which the model's process {result['model_cpu']:.1f} s"
    print(f"server CPU {result['server_cpu']:.1f} s ({per_action:.0f} ms per action{of_which}), "
          f"peak memory {result['hwm_kib'] / 1024:.0f} MiB; load generator CPU {result['generator_cpu']:.1f} s")
    for e in (errors + leaks)[:8]:
        print("  ", e)


SHORT_PAST = 300  # a decode row with less cached past is a Sampling student's press (their prompts are short)


def passes_report(log: Path, t0: float, wall: float) -> None:
    """Where the model's time went during the phase, from the batcher's pass log ($REACT_LAB_PASS_LOG):
    how much of the wall the model's worker spent in passes, each kind of pass, and what a Sampling
    student's one-token row waited in the batcher before its pass (the rest of a press's latency is
    Gradio, the handler, the hop to the model's process and the transfer)."""
    if not log.exists():
        print(f"no pass log at {log}")
        return
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    lines = [x for x in lines if t0 <= x["t"] <= t0 + wall]
    if not lines:
        print("the pass log has no pass in the phase's window")
        return

    def kind(x: dict) -> str:
        if x["draft"] is not None:
            return "early-exit draft"
        return "decode (one token a row)" if all(n == 1 for _, n, _ in x["rows"]) else "prefill / verify"

    by_kind = collections.defaultdict(list)
    for x in lines:
        by_kind[kind(x)].append(x)
    rows = []
    for name in ("decode (one token a row)", "prefill / verify", "early-exit draft"):
        if some := by_kind[name]:
            seconds = [x["s"] for x in some]
            rows.append([name, len(some), sum(1 for x in some if x.get("cut")),
                         f"{sum(len(x['rows']) for x in some) / len(some):.1f}",
                         ms(median(seconds)), ms(p95(seconds)), f"{sum(seconds):.1f} s"])
    busy = sum(x["s"] for x in lines)
    print_table(f"The model's passes in the phase (pass log): busy {busy:.1f} s of {wall:.0f} s of wall "
                f"({100 * busy / wall:.0f} %); a chunk's own time, without the passes cut into it",
                ["pass", "n", "of which cut into a chunk", "rows / pass", "median", "p95", "total"], rows)
    one_token = [(past, w, x["s"]) for x in lines if x["draft"] is None for past, n, w in x["rows"] if n == 1]
    table = []
    for name, short in ((f"a Sampling press (past < {SHORT_PAST})", True),
                        (f"a long row: ReAct (past ≥ {SHORT_PAST})", False)):
        pairs = [(w, s) for past, w, s in one_token if (past < SHORT_PAST) == short]
        if pairs:
            waits, totals = [w for w, _ in pairs], [w + s for w, s in pairs]
            table.append([name, len(pairs), ms(median(waits)), ms(p95(waits)), ms(median(totals)), ms(p95(totals))])
    print_table("One-token rows in the model's process: waiting in the batcher, and waiting + their pass",
                ["row", "n", "wait median", "wait p95", "wait + pass median", "wait + pass p95"], table)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, nargs="*", default=[60],
                   help="students per phase (default 60; none: the Greedy phases only)")
    p.add_argument("--greedy", type=int, nargs="*", default=[1, 8],
                   help="also: server CPU per Greedy press with these many students pressing at once")
    p.add_argument("--profile", action="store_true",
                   help="GRADIO_PROFILING=1 for the Greedy phase: Gradio's own phases per event")
    p.add_argument("--py-spy", type=Path, default=None, metavar="PREFIX",
                   help="record the server with py-spy (--gil) during each Greedy phase into PREFIX-<n>.txt "
                        "and print the busiest functions (the CPU figures of that phase include py-spy's "
                        "pauses: take them from a run without it)")
    p.add_argument("--react", type=int, default=None, help="ReAct students per phase (default: a third, at most 10)")
    p.add_argument("--spec", type=int, default=None,
                   help="Speculative students per phase (default: a tenth, at most 2)")
    p.add_argument("--presses", type=int, default=24, help="Greedy presses per student in the Greedy phases")
    p.add_argument("--replies", type=int, nargs="*", default=[],
                   help="also: N ReAct sessions' first Local-model replies at once, total tokens per second "
                        "through the page (e.g. --replies 1 8)")
    p.add_argument("--no-prefill", action="store_true", help="skip the during-a-long-prefill phase")
    p.add_argument("--floor", action="store_true",
                   help="also the Greedy phases on the model layer alone, in a process of its own (after the app "
                        "stopped): the CPU batching itself saves, under the page's figure; with --replies, the "
                        "replies on the model layer alone too")
    args = p.parse_args(argv)
    header("A lecture hall on one server (bench/bench_class.py)")
    if args.greedy or args.replies:
        port = free_port()
        log = Path(tempfile.mkdtemp(prefix="class-")) / "app.log"
        proc = start_app(port, log, extra_env={"GRADIO_PROFILING": "1"} if args.profile else None)
        try:
            page = Page("127.0.0.1", port)
            rows = []
            for n in args.greedy:
                spy = Path(f"{args.py_spy}-{n}.txt") if args.py_spy else None
                r = greedy_cpu(page, proc.pid, n, args.presses, spy)
                model = "—" if r["model_cpu_per_token"] is None else ms(r["model_cpu_per_token"])
                rows.append([n, r["tokens"], ms(r["cpu_per_token"]), model, ms(r["median"]), f"{r['wall']:.1f} s",
                             len(r["errors"])])
                for e in r["errors"][:3]:
                    print("  ", e)
            if rows:
                print_table("Greedy presses back to back: server CPU per token added",
                            ["students", "tokens added", "server CPU / token", "of which the model's process",
                             "median latency", "wall", "errors"],
                            rows)
            if args.replies:
                rows, one = [], None
                react_replies(page, proc.pid, 1)  # warm-up: the shared system turn's KV (agent.backends), as in a class
                for n in args.replies:
                    spy = Path(f"{args.py_spy}-replies-{n}.txt") if args.py_spy else None
                    r = react_replies(page, proc.pid, n, spy)
                    one = r["tok_s"] if one is None else one
                    rows.append([n, r["replied"], r["tokens"], f"{r['wall']:.1f} s", f"{r['tok_s']:.1f}",
                                 f"{r['tok_s'] / one:.2f}×", f"{r['server_cpu']:.1f} s", len(r["errors"])])
                    for e in r["errors"][:3]:
                        print("  ", e)
                print_table("Local ReAct replies at once, through the page (the first model call of each run)",
                            ["sessions", "replied", "reply tokens", "wall", "tokens/s", "× the first row",
                             "server CPU", "errors"], rows)
            if args.profile:
                profile(page)
            if not args.no_prefill:
                r = during_prefill(page)
                print_table("Cheap requests while another session's ~2,000-token prompt is prefilled",
                            ["request", "n", "median", "max"],
                            [[name, len(r[key]), ms(median(r[key])), ms(max(r[key]))]
                             for name, key in (("Greedy (a decode row)", "greedy"),
                                               ("Run prompt, short (a prefill row)", "short"),
                                               ("Run prompt, long", "long")) if r[key]])
                for e in r["errors"][:3]:
                    print("  ", e)
        finally:
            stop_app(proc)
    if args.greedy and args.floor:  # after the app stopped: nothing else on the CPU
        floor = model_floor(args.greedy, args.presses)
        print_table("The same presses on the model layer alone (no Gradio, no HTTP; its own process)",
                    ["students", "tokens added", "CPU / token", "wall / press", "passes", "widest pass"],
                    [[f["students"], f["tokens"], ms(f["cpu"] / max(1, f["tokens"])),
                      ms(f["wall"] / args.presses), f["passes"], f"{f['max_rows']} rows"] for f in floor])
    if args.replies and args.floor:
        floor = in_own_process("replies_floor_worker", args.replies)
        one = floor[0]["tokens"] / floor[0]["wall"]
        print_table("The same first replies on the model layer alone (the app's loop and LocalBackend, no Gradio; "
                    "its own process)", ["sessions", "replied", "reply tokens", "wall", "tokens/s", "× the first row",
                                         "CPU", "passes", "widest pass"],
                    [[f["sessions"], f["replied"], f["tokens"], f"{f['wall']:.1f} s", f"{f['tokens'] / f['wall']:.1f}",
                      f"{f['tokens'] / f['wall'] / one:.2f}×", f"{f['cpu']:.1f} s", f["passes"],
                      f"{f['max_rows']} rows"] for f in floor])
    for n in args.students:
        port = free_port()
        log = Path(tempfile.mkdtemp(prefix="class-")) / "app.log"
        pass_log = log.with_name("passes.jsonl")
        proc = start_app(port, log, extra_env={PASS_LOG_ENV: str(pass_log)})
        try:
            page = Page("127.0.0.1", port)
            call(page, uuid.uuid4().hex[:11], "run_prompt", **{"Prompt": "Warm-up: the capital of France is",
                                                               "Send the prompt as": "Raw text"})
            result = phase(page, proc.pid, n, args.react, args.spec)
            report(result)
            passes_report(pass_log, result["t0"], result["wall"])
        finally:
            stop_app(proc)
            tracebacks = log.read_text(errors="replace").count("Traceback")
            print(f"server log: {tracebacks} tracebacks ({log})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
