"""The code tool's boundary (issue 21): what a call can do once it has escaped the interpreter.

The interpreter (smolagents' AST walker) is only the inner layer: a frame route once widened its
import list and read the Space's secrets. These tests skip the interpreter entirely: a real
process runs agent.sandbox.child.confine() and then tries, with raw system calls, every move the
red team made against a dummy process the test owns (its environment holds a fake token). Each
must fail with EPERM, the dummy must live on unchanged, and a loopback listener must see no
connection. On the main before issue 21 (a deny-list filter, same user) the reads of /proc, the
pidfd signal, rt_sigqueueinfo, prlimit64, pidfd_getfd and fsetxattr all succeeded.

Then the same through the real code tool: a fake token in the server's environment is never
printed by any hostile case, and the server keeps serving.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time

import pytest

from agent import sandbox
from agent.sandbox import run_code

FAKE_TOKEN = "hf_FAKEtoken4issue21xyz"
ROOT = str(sandbox.ROOT)
X86_64 = {"kill": 62, "rt_sigqueueinfo": 129, "fsetxattr": 190, "prlimit64": 302,
          "pidfd_send_signal": 424, "pidfd_open": 434, "pidfd_getfd": 438}

ESCAPED = """
import ctypes, json, os, socket, sys
from agent.sandbox import child as sandbox_child
libc = ctypes.CDLL(None, use_errno=True)
dummy, port, workdir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
layers = sandbox_child.confine({"workdir": workdir, "cpu_s": 2, "memory_mb": 64, "wall_s": 10})
out = {"layers": layers}
N = %(numbers)s

def read(path):
    fd = os.open(path, os.O_RDONLY)
    return os.read(fd, 65536).decode(errors="replace")

def syscall(name, *args):
    result = libc.syscall(N[name], *args)
    if result == -1:
        raise OSError(ctypes.get_errno(), name)
    return result

def connect():
    s = socket.socket()
    s.connect(("127.0.0.1", port))

limits = (ctypes.c_ulong * 2)(0, 0)
siginfo = (ctypes.c_byte * 128)()
CASES = {
    "read /proc/<pid>/environ": lambda: read(f"/proc/{dummy}/environ"),
    "read /proc/<pid>/mem": lambda: read(f"/proc/{dummy}/mem"),
    "read /proc/<parent>/environ": lambda: read(f"/proc/{os.getppid()}/environ"),
    "read the app's files": lambda: read(os.path.join(%(root)r, "app.py")),
    "read /etc/passwd": lambda: read("/etc/passwd"),
    "list a folder": lambda: os.listdir("/"),
    "write a file": lambda: os.open(os.path.join(workdir, "owned"), os.O_WRONLY | os.O_CREAT),
    "kill": lambda: syscall("kill", dummy, 9),
    "pidfd_open + pidfd_send_signal":
        lambda: syscall("pidfd_send_signal", syscall("pidfd_open", dummy, 0), 9, 0, 0),
    "pidfd_send_signal on any descriptor": lambda: syscall("pidfd_send_signal", 3, 9, 0, 0),
    "rt_sigqueueinfo": lambda: syscall("rt_sigqueueinfo", dummy, 9, siginfo),
    "prlimit64 on another process": lambda: syscall("prlimit64", dummy, 7, limits, 0),
    "pidfd_getfd": lambda: syscall("pidfd_getfd", 3, 0, 0),
    "fsetxattr": lambda: syscall("fsetxattr", 1, b"user.owned", b"x", 1, 0),
    "network (loopback)": connect,
    "a new process": lambda: os.fork(),
    "a program": lambda: os.execv("/bin/true", ["true"]),
}
for name, attempt in CASES.items():
    try:
        out[name] = ["allowed", str(attempt())[:200]]
    except OSError as e:
        out[name] = ["refused", e.errno]
print(json.dumps(out))
"""
CASES = ("read /proc/<pid>/environ", "read /proc/<pid>/mem", "read /proc/<parent>/environ",
         "read the app's files", "read /etc/passwd", "list a folder", "write a file", "kill",
         "pidfd_open + pidfd_send_signal", "pidfd_send_signal on any descriptor", "rt_sigqueueinfo",
         "prlimit64 on another process", "pidfd_getfd", "fsetxattr", "network (loopback)", "a new process",
         "a program")


@pytest.fixture(scope="module")
def escaped(tmp_path_factory):
    """One confined process that tried every case: (its report, the dummy, the listener's count)."""
    if platform.machine() != "x86_64":
        pytest.skip("the raw system-call numbers below are x86_64's")
    workdir = tmp_path_factory.mktemp("escaped")
    os.chmod(workdir, 0o777)  # the confined process may run as nobody
    dummy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                             env={"HF_TOKEN": FAKE_TOKEN, "PATH": "/usr/bin:/bin"})
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    code = ESCAPED % {"numbers": repr(X86_64), "root": ROOT}
    time.sleep(0.2)
    with open(f"/proc/{dummy.pid}/limits") as f:
        limits_before = f.read()
    try:
        done = subprocess.run([sys.executable, "-c", code, str(dummy.pid), str(listener.getsockname()[1]),
                               str(workdir)], capture_output=True, text=True, timeout=60,
                              env={"PYTHONPATH": ROOT, "HF_TOKEN": FAKE_TOKEN}, cwd=workdir)
        assert done.returncode == 0, done.stderr[-2000:]
        connections = 0
        try:
            while listener.accept():
                connections += 1
        except BlockingIOError:
            pass
        with open(f"/proc/{dummy.pid}/limits") as f:
            unchanged = f.read() == limits_before
        yield json.loads(done.stdout), dummy, connections, unchanged, workdir
    finally:
        dummy.kill()
        dummy.wait()
        listener.close()


@pytest.mark.parametrize("case", CASES)
def test_an_escaped_call_is_refused_by_the_system_call_filter(escaped, case):
    report = escaped[0]
    assert report[case] == ["refused", 1], f"{case}: {report[case]}"  # EPERM


def test_the_dummy_process_lives_on_unchanged(escaped):
    _, dummy, connections, limits_unchanged, workdir = escaped
    assert dummy.poll() is None
    assert connections == 0
    assert limits_unchanged
    assert not (workdir / "owned").exists()


def test_the_filter_is_an_allow_list_and_named_in_the_layers(escaped):
    layers = escaped[0]["layers"]
    assert any(layer.startswith("seccomp allow-list") for layer in layers)
    assert "empty environment, no inherited files" in layers


def test_no_hostile_case_prints_the_servers_secret(monkeypatch):
    """A fake token in the server's environment; a fresh fork server; every escape route the red
    team used, through the real code tool: the token is in no output or error."""
    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    sandbox._zygote.restart()
    routes = [
        'g = (x for x in [1])\ng.gi_frame.f_locals["authorized_imports"].append("*")\nimport os\n'
        'print(os.read(os.open("/proc/%d/environ" % os.getppid(), os.O_RDONLY), 65536))',
        "g = (x for x in [1])\nf = g.gi_frame\nwhile f.f_back is not None:\n    f = f.f_back\n"
        "print(f.f_globals['mod_spec'].loader.get_data('/proc/self/environ'))",
        "print(getattr(getattr((x for x in [1]), 'gi_frame'), 'f_globals'))",
        "print('{0.gi_frame.f_globals}'.format((x for x in [1])))",
        "import os\nprint(os.environ)",
        "print(get_weather.__globals__)",
        "import random\nprint('{0.__init__.__globals__[_os].environ}'.format(random.Random))",
    ]
    try:
        for code in routes:
            result = run_code(code)
            assert FAKE_TOKEN not in result.output + str(result.error), code
            assert not result.ok, code
    finally:
        monkeypatch.delenv("HF_TOKEN")
        sandbox._zygote.restart()


def test_the_server_process_is_marked_not_dumpable():
    probe = ("import ctypes; from agent.sandbox import protect_server_process; protect_server_process(); "
             "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))")  # PR_GET_DUMPABLE
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": ROOT})
    assert done.stdout.strip() == "0", done.stderr[-1000:]


def test_a_session_runs_one_code_call_at_a_time(monkeypatch):
    """Two calls of one session at once: the second is refused at once, with a message; another
    session's call runs beside them."""
    from agent.llm import batching

    session = {"now": ("test", "a")}
    monkeypatch.setattr(batching, "_resolver", lambda: session["now"])
    results = {}

    def call(name, code):
        results[name] = run_code(code)

    slow = threading.Thread(target=call, args=("slow", "x = sum(range(6 * 10**7))\n1"))
    slow.start()
    time.sleep(0.5)
    call("second", "2")
    session["now"] = ("test", "b")
    call("other", "3")
    slow.join()
    assert results["slow"].output == "1"
    assert "already runs" in results["second"].error
    assert results["other"].output == "3"


def test_a_killed_call_leaves_the_server_serving():
    """The wall clock kills a sleeper; the next call is served at once."""
    start = time.monotonic()
    assert "wall-clock" in run_code("while True:\n    pass", sandbox.Limits(wall_s=1.0)).error
    assert run_code("6 * 7").output == "42"
    assert time.monotonic() - start < 15
