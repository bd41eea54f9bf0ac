"""The code tool's sandbox against hostile code, and the CodeAct task through the real executor.

Every case runs in a real child process (agent.sandbox); nothing here is mocked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from agent import sandbox
from agent.codeact import ANSWER, CODE_STEM, SPECIFIC_STEM, compare, comparison_table
from agent.loop import StopReason
from agent.messages import ToolCall, ToolResultMessage
from agent.recording import load_run, replay, shipped_runs
from agent.sandbox import Limits, run_code
from agent.tools import (
    CODE_TOOLS,
    PARSING_VS_POLICY,
    RUN_PYTHON_TOOL,
    TOOLS,
    ToolError,
    run_python,
    tool_sets,
)
from agent.validation import CHECK_SCHEMA, validate_call

TIGHT = Limits(wall_s=3.0, cpu_s=1, memory_mb=128, output_chars=2000)
SLACK_S = 3.0  # a fork, the kill and the report, on a loaded machine
LIMIT = r"(CPU time limit|wall-clock limit|memory limit|MemoryError|Maximum number|max number of operations)"
REFUSED_IMPORT = r"Import (of|from) \S+ is not allowed"
FORBIDDEN = r"Forbidden (function evaluation|access to (dunder attribute|module|function))"
FORMAT_FIELD = r"Forbidden access to attribute in a format field"
FRAME = r"Forbidden access to frame or code attribute"
ASYNC = r"AsyncFunctionDef is not supported"



@pytest.fixture(autouse=True, scope="module")
def warm_fork_server():
    """The fork server starts once (about a second of CPU); the limits below are per call."""
    assert run_code("1").output == "1"


HOSTILE = [  # (name, code, the error it must end with)
    ("endless while loop", "while True:\n    pass", LIMIT),
    ("endless for loop", "for i in range(10**12):\n    pass", LIMIT),
    ("endless loop that allocates", "x = []\nwhile True:\n    x.append('a' * 10000)", LIMIT),
    ("itertools.count to a list", "import itertools\nlist(itertools.count())", LIMIT),
    ("huge list", "x = [0] * 10**10", LIMIT),
    ("huge string", "x = 'a' * 10**10", LIMIT),
    ("nested huge lists", "x = [list(range(10**6)) for _ in range(10**4)]", LIMIT),
    ("huge int 10**10**10", "10**10**10", LIMIT),
    ("huge int by shifting", "x = 1 << (1 << 40)", LIMIT),
    ("catastrophic regex", "import re\nre.match('(a+)+$', 'a' * 40 + 'b')", LIMIT),
    ("100 MB in one print under 128 MiB", "print('x' * 10**8)", LIMIT),
    ("deep recursion", "def f(n):\n    return f(n + 1)\nf(0)", r"RecursionError|recursion"),
    ("deeply nested source", "(" * 1990 + ")" * 1990, r"parsing failed|nested|RecursionError|MemoryError"),
    ("fork bomb through os", "import os\nwhile True:\n    os.fork()", REFUSED_IMPORT),
    ("fork through multiprocessing", "import multiprocessing", REFUSED_IMPORT),
    ("shell through subprocess", "import subprocess\nsubprocess.run(['id'])", REFUSED_IMPORT),
    ("os.system through from-import", "from os import system\nsystem('id')", REFUSED_IMPORT),
    ("ctypes", "import ctypes\nctypes.CDLL(None).fork()", REFUSED_IMPORT),
    ("importlib", "import importlib\nimportlib.import_module('os')", REFUSED_IMPORT),
    ("sys", "import sys\nsys.modules['os']", REFUSED_IMPORT),
    ("builtins module", "import builtins\nbuiltins.open('/etc/passwd')", REFUSED_IMPORT),
    ("socket", "import socket\nsocket.create_connection(('example.com', 80))", REFUSED_IMPORT),
    ("urllib", "import urllib.request\nurllib.request.urlopen('http://example.com')", REFUSED_IMPORT),
    ("signal (to cancel the alarm)", "import signal\nsignal.alarm(0)", REFUSED_IMPORT),
    ("pathlib write", "from pathlib import Path\nPath('/tmp/owned').write_text('x')", REFUSED_IMPORT),
    ("read /etc/passwd", "open('/etc/passwd').read()", FORBIDDEN),
    ("read the app's own files", "open('app.py').read()", FORBIDDEN),
    ("write outside the temp dir", "open('/tmp/owned', 'w').write('x')", FORBIDDEN),
    ("__import__", "__import__('os').system('id')", FORBIDDEN),
    ("eval", "eval('1 + 1')", FORBIDDEN),
    ("exec", "exec('import os')", FORBIDDEN),
    ("compile", "compile('1', 'f', 'eval')", FORBIDDEN),
    ("globals", "globals()", FORBIDDEN),
    ("getattr on a dunder", "getattr(get_weather, '__globals__')", FORBIDDEN),
    ("introspection through __mro__", "().__class__.__mro__[1].__subclasses__()", FORBIDDEN),
    ("function globals", "get_weather.__globals__['os']", FORBIDDEN),
    ("a lambda's code", "(lambda: 0).__code__", FORBIDDEN),
    ("a module hidden in an allowed module", "import random\nrandom._os.system('id')", FORBIDDEN),
    ("sys hidden in collections", "import collections\ncollections._sys.modules", FORBIDDEN),
    ("a submodule of an allowed module", "import json\njson.decoder", FORBIDDEN),
    ("__builtins__", "__builtins__['open']('/etc/passwd')", r"not defined|Forbidden|no attribute"),
    ("SystemExit", "raise SystemExit(3)", r"SystemExit"),
    # red team: string.Formatter.get_field does getattr out of the interpreter's sight
    ("os.open through string.Formatter.get_field",
     "import string, random\nF = string.Formatter()\n"
     "o = F.get_field('0.__init__.__globals__[_os].open', [random.Random], {})[0]\n"
     "r = F.get_field('0.__init__.__globals__[_os].read', [random.Random], {})[0]\nr(o('/etc/passwd', 0), 99)",
     FORMAT_FIELD),
    ("a private attribute through get_field", "import string, random\n"
     "string.Formatter().get_field('0._os.getcwd', [random], {})[0]()", FORMAT_FIELD),
    ("a module reached through get_field", "import string, statistics\n"
     "string.Formatter().get_field('0.sys.modules', [statistics], {})[0]['os']", FORBIDDEN),
    ("a Formatter subclass that keeps the raw field", "import string, random\nbox = []\n"
     "class F(string.Formatter):\n    def format_field(self, value, spec):\n        box.append(value)\n"
     "        return ''\nF().format('{0.__init__.__globals__[_os].getcwd}', random.Random)\nbox[0]()",
     FORMAT_FIELD),
    # red team: update_wrapper with its own names and a keeping __setattr__ read any dunder
    ("__globals__ through functools.update_wrapper", "import functools, random\nbox = []\n"
     "class W:\n    def __setattr__(self, name, value):\n        box.append(value)\n"
     "functools.update_wrapper(W(), random.Random, assigned=('__init__',), updated=())\n"
     "functools.update_wrapper(W(), box[0], assigned=('__globals__',), updated=())\n"
     "list(map(getattr, map(box[1].get, ['_os']), ['open']))[0]('/etc/passwd', 0)", r"Forbidden: update_wrapper"),
    # red team: a string annotation is an eval in typing.get_type_hints (singledispatch.register)
    ("eval through setattr __annotations__ and singledispatch", "import functools\n"
     "def base(x):\n    return 0\ndef f(x):\n    return 1\n"
     "setattr(f, '__annotations__', {'x': \"open('/etc/passwd').read()\"})\n"
     "functools.singledispatch(base).register(f)", FORBIDDEN),
    ("eval through an assigned __annotations__", "import functools\n"
     "def base(x):\n    return 0\ndef f(x):\n    return 1\n"
     "f.__annotations__ = {'x': \"open('/etc/passwd').read()\"}\n"
     "functools.singledispatch(base).register(f)", r"string annotations are not evaluated"),
    ("eval through a class's annotations copied by update_wrapper", "import functools\n"
     "def base(x):\n    return 0\nclass A:\n    x: \"open('/etc/passwd').read()\"\n"
     "def f(x):\n    return 1\nfunctools.update_wrapper(f, A)\nfunctools.singledispatch(base).register(f)",
     r"string annotations are not evaluated"),
    # red team: str.format walks a dunder path in C; the AttributeError it raises carried `obj`
    ("os.open through str.format and AttributeError.obj", "import random\ndef grab(path):\n"
     "    try:\n        ('{0.' + path + '.no_such}').format(random.Random)\n"
     "    except AttributeError as e:\n        return e.obj\n"
     "grab('__init__.__globals__[_os].read')(grab('__init__.__globals__[_os].open')('/etc/passwd', 0), 99)",
     r"'NoneType' object is not callable|" + FORMAT_FIELD),  # refused before the walk since issue 21
    # issue 21: the interpreter's own frame, reached from a generator, coroutine or traceback
    ("import list widened through a generator's frame",
     'g = (x for x in [1])\ng.gi_frame.f_locals["authorized_imports"].append("*")\nimport os\n'
     'os.read(os.open("/proc/self/environ", os.O_RDONLY), 4096)', FRAME),
    ("loader.get_data up the f_back chain", "g = (x for x in [1])\nf = g.gi_frame\n"
     "while f.f_back is not None:\n    f = f.f_back\nf.f_globals['mod_spec'].loader.get_data('/etc/passwd')", FRAME),
    ("a generator's frame through getattr", "g = (x for x in [1])\ngetattr(getattr(g, 'gi_frame'), 'f_back')", FRAME),
    ("a frame through hasattr", "hasattr((x for x in [1]), 'gi_frame')", FRAME),
    ("a frame through setattr", "setattr((x for x in [1]), 'gi_frame', None)", FRAME),
    ("a generator's code object", "(x for x in [1]).gi_code.co_consts", FRAME),
    ("a coroutine's frame", "async def c():\n    return 1\nc().cr_frame.f_globals", ASYNC),
    ("an async generator's frame", "async def a():\n    yield 1\na().ag_frame.f_back", ASYNC),
    ("a traceback's frame", "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    t = e.__traceback__\nt.tb_frame",
     FORBIDDEN),
    ("a frame through str.format", "'{0.gi_frame.f_back}'.format((x for x in [1]))", FRAME),
    ("a frame through a nested format spec", "'{0:{1.gi_frame.f_lineno}}'.format(1, (x for x in [1]))", FRAME),
    ("a frame through format_map", "'{g.gi_frame}'.format_map({'g': (x for x in [1])})", FRAME),
    ("a frame through string.Formatter", "import string\n"
     "string.Formatter().get_field('0.gi_frame.f_globals', [(x for x in [1])], {})", FORMAT_FIELD),
    ("os.getcwd through format_map and AttributeError.obj", "import random\ntry:\n"
     "    '{r.__init__.__globals__[_os].getcwd.no_such}'.format_map({'r': random.Random})\n"
     "except AttributeError as e:\n    leaked = e.obj\nleaked()", r"'NoneType' object is not callable|" + FORMAT_FIELD),
]


@pytest.mark.parametrize(("name", "code", "error"), HOSTILE, ids=[c[0] for c in HOSTILE])
def test_hostile_code_ends_within_its_limit_with_a_clear_error(name, code, error):
    start = time.monotonic()
    result = run_code(code, TIGHT)
    elapsed = time.monotonic() - start
    assert not result.ok, f"{name}: ran to {result.output[:200]!r}"
    assert re.search(error, result.error), f"{name}: {result.error[:300]}"
    assert elapsed < TIGHT.wall_s + SLACK_S, f"{name}: took {elapsed:.1f} s"


def test_the_table_has_at_least_thirty_cases():
    assert len(HOSTILE) >= 30


def test_wall_clock_limit_kills_a_process_with_cpu_to_spare():
    start = time.monotonic()
    result = run_code("while True:\n    pass", Limits(wall_s=1.0, cpu_s=30))
    assert "wall-clock limit exceeded (1 s)" in result.error
    assert time.monotonic() - start < 1.0 + SLACK_S


def test_a_hundred_megabytes_of_output_come_back_truncated():
    result = run_code("for i in range(100):\n    print('x' * 10**6)\n'done'", TIGHT)
    assert result.ok and "output truncated: " in result.output and result.output.endswith("'done'")
    assert len(result.output) < 3 * TIGHT.output_chars


def test_format_fields_without_underscores_still_work():
    code = "import string\nstring.Formatter().format('{0} {1[a]} {2.real}', 1, {'a': 2}, 3)"
    assert run_code(code, TIGHT).output == "'1 2 3'"


def test_the_hardened_helpers_still_do_their_ordinary_work():
    code = ("import functools\ndef a(x):\n    return x\n@functools.wraps(a)\ndef b(x):\n    return a(x) + 1\n"
            "class A:\n    pass\nobj = A()\nsetattr(obj, 'y', 2)\nb(obj.y)")
    assert run_code(code, TIGHT).output == "3"


def test_control_characters_in_the_output_come_back_inert():
    """Terminal escapes, NUL and bidi overrides are shown as escapes, never passed on to act."""
    result = run_code("print(chr(27) + '[31mred' + chr(0) + ' <b>${x}</b> `y` ' + chr(0x202e) + 'ok')", TIGHT)
    assert result.output == "\\x1b[31mred\\x00 <b>${x}</b> `y` \\u202eok\n"
    assert "\x00" not in run_code("raise ValueError(chr(0))", TIGHT).error


def test_a_killed_fork_server_is_replaced_on_the_next_call():
    sandbox._zygote.process.kill()
    sandbox._zygote.process.wait()
    assert run_code("6 * 7").output == "42"


def test_a_stopped_fork_server_is_replaced_after_one_lost_call():
    import signal

    run_code("1")
    stuck = sandbox._zygote.process
    os.kill(stuck.pid, signal.SIGSTOP)
    try:
        lost = run_code("1", Limits(wall_s=0.5, cpu_s=1))
        assert "sent no result within" in lost.error
        assert run_code("6 * 7").output == "42"
        assert sandbox._zygote.process is not stuck and stuck.poll() is not None
    finally:
        if stuck.poll() is None:
            stuck.kill()
            stuck.wait()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _children() -> set[int]:
    with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
        return {int(pid) for pid in f.read().split()}


def test_calls_leak_no_file_descriptor_zombie_or_temp_directory(tmp_path, monkeypatch):
    run_code("1")
    fds, children = _open_fds(), _children()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # this test's own: parallel workers use /tmp too
    for code in ("1", "while True:\n    pass", "x = 'a' * 10**10", "1 / 0"):
        run_code(code, Limits(wall_s=1.0, cpu_s=1, memory_mb=64))
    assert _open_fds() == fds
    assert _children() == children  # the fork server only: the kernel reaps what it forks
    assert not [n for n in os.listdir(tmp_path) if n.startswith("react-lab-sandbox-")]


def test_a_long_value_is_cut():
    result = run_code("list(range(10**5))", TIGHT)
    assert result.ok and len(result.output) < 3 * TIGHT.output_chars and "characters)" in result.output


def test_code_over_the_length_limit_is_refused_without_a_process():
    result = run_code("1 + " * 2000 + "1")
    assert result.error == f"the code has {len('1 + ' * 2000) + 1} characters; the limit is {sandbox.MAX_CODE_CHARS}"
    assert result.elapsed_s == 0.0


def test_observation_is_the_printed_output_then_the_last_expression():
    result = run_code("x = 6 * 7\nprint('x is', x)\nx + 1")
    assert result.output == "x is 42\n43"
    assert run_code("x = 1").output == ""  # an assignment is not an expression: nothing to show


def test_printed_output_survives_an_error():
    result = run_code("print('before')\n1 / 0")
    assert "ZeroDivisionError" in result.error and result.output == "before\n"


def test_the_lab_tools_are_plain_functions_in_the_code():
    result = run_code("[get_weather(c) for c in ['Berlin', 'Madrid', 'Rome']]")
    assert result.output == "['12°C, rainy', '24°C, sunny', '21°C, sunny']"
    assert run_code("calculator('345 / 2.5')").output == "'138'"
    assert "ToolError" in run_code("get_weather('Atlantis')").error


def test_the_child_leaves_no_file_behind_and_sees_an_empty_environment(tmp_path, monkeypatch):
    """Its work folder in a temporary folder of this test's own: /tmp is shared with the other test
    workers (-n 4), whose sandboxes come and go there meanwhile."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    os.environ["REACT_LAB_SECRET_FOR_TEST"] = "s3cret"
    try:
        result = run_code("import json\njson.dumps([1])")
    finally:
        del os.environ["REACT_LAB_SECRET_FOR_TEST"]
    assert result.ok
    assert not list(tmp_path.iterdir())


CONFINED_PROBE = """
import json, os, socket, sys
from agent.sandbox import child as sandbox_child
layers = sandbox_child.confine({"workdir": sys.argv[1], "cpu_s": 2, "memory_mb": 64, "wall_s": 5})
out = {"layers": layers, "env": dict(os.environ)}
def attempt(name, f):
    try:
        f(); out[name] = "allowed"
    except OSError as e:
        out[name] = e.errno
    except MemoryError:
        out[name] = "MemoryError"
attempt("socket", lambda: socket.socket())
attempt("fork", lambda: os.fork())
attempt("write", lambda: open("/tmp/react-lab-owned", "w"))
attempt("write_here", lambda: open("here.txt", "w"))
attempt("allocate", lambda: bytearray(512 * 2**20))
print(json.dumps(out))
"""


def test_os_layers_hold_even_for_code_that_escaped_the_interpreter(tmp_path):
    """Second line of defence: raw Python after confine() — no interpreter in the way."""
    root = str(sandbox.ROOT)
    done = subprocess.run([sys.executable, "-c", CONFINED_PROBE, str(tmp_path)], capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": root}, cwd=tmp_path)
    out = json.loads(done.stdout)
    assert out["allocate"] == "MemoryError"  # RLIMIT_AS
    assert set(out["env"]) == {"HOME", "TMPDIR"}
    if not any(layer.startswith("seccomp") for layer in out["layers"]):
        pytest.skip(f"libseccomp is not available here; layers: {out['layers']}")
    assert out["socket"] == out["fork"] == out["write"] == out["write_here"] == 1  # EPERM
    assert not os.path.exists("/tmp/react-lab-owned")


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_the_server_keeps_serving_while_hostile_code_runs():
    """A memory bomb and a CPU burner run beside a cheap call: the cheap call stays fast, the
    server process's memory stays where it was."""
    rss_before = _rss_kib()
    hostile = [threading.Thread(target=run_code, args=(code, TIGHT))
               for code in ("x = 'a' * 10**10", "while True:\n    pass")]
    for t in hostile:
        t.start()
    time.sleep(0.2)
    start = time.monotonic()
    cheap = run_code("sum(range(10))")
    cheap_s = time.monotonic() - start
    for t in hostile:
        t.join()
    assert cheap.output == "45"
    assert cheap_s < TIGHT.wall_s + SLACK_S + 2 * TIGHT.wall_s  # at worst it waited for one slot
    assert _rss_kib() - rss_before < 20 * 1024


# --- the tool ------------------------------------------------------------------------------------

def test_run_python_schema_bounds_the_code_like_the_sandbox():
    assert RUN_PYTHON_TOOL.parameters["properties"]["code"]["maxLength"] == sandbox.MAX_CODE_CHARS
    assert RUN_PYTHON_TOOL.single_parameter == "code"


def test_parsing_checks_only_that_the_code_is_a_string():
    """Parsing vs policy: the schema refuses a number, but any string passes — only the sandbox
    restrains what it does."""
    bad = validate_call(ToolCall("call_1", "run_python", '{"code": 42}'), CODE_TOOLS)
    assert bad.check == CHECK_SCHEMA
    assert validate_call(ToolCall("call_1", "run_python", '{"code": "import os"}'), CODE_TOOLS).ok
    assert "only argument is a string" in PARSING_VS_POLICY and "sandbox" in RUN_PYTHON_TOOL.description


def test_a_deployment_switches_the_code_tool_off(monkeypatch):
    monkeypatch.setenv(sandbox.ENV_SWITCH, "off")
    with pytest.raises(ToolError, match="switched off"):
        run_python("1 + 1")
    assert tool_sets() == {"specific tools": TOOLS}
    monkeypatch.setenv(sandbox.ENV_SWITCH, "on")
    assert set(tool_sets()) == {"specific tools", "code tool"}


# --- the CodeAct task through the real loop, tools and sandbox ------------------------------------

def test_code_tool_task_gets_the_right_answer_through_the_real_executor():
    recorded = load_run(shipped_runs()[CODE_STEM])
    assert "code tool" in recorded.title
    final = replay(recorded)[-1]
    assert (final.stop_reason, final.final_answer) == (StopReason.FINAL_ANSWER, ANSWER)
    results = [m for m in final.history if isinstance(m, ToolResultMessage)]
    assert [r.content for r in results] == ["[12, 24, 21]\n19.0"]


def test_specific_tools_task_gets_the_same_answer_in_more_model_calls():
    recorded = load_run(shipped_runs()[SPECIFIC_STEM])
    assert "specific tools" in recorded.title
    final = replay(recorded)[-1]
    assert (final.stop_reason, final.final_answer) == (StopReason.FINAL_ANSWER, ANSWER)
    results = [m.content for m in final.history if isinstance(m, ToolResultMessage)]
    assert results == ["12°C, rainy", "24°C, sunny", "21°C, sunny", "19"]


def test_compare_counts_model_calls_tokens_and_budget(tok):
    specific, code = compare(load_run(shipped_runs()[SPECIFIC_STEM]), load_run(shipped_runs()[CODE_STEM]), tok)
    assert (specific.model_calls, specific.tool_calls) == (5, 4)
    assert (code.model_calls, code.tool_calls) == (2, 1)
    assert code.prompt_tokens < specific.prompt_tokens and code.total_tokens < specific.total_tokens
    assert specific.exact and code.exact and specific.final_answer == code.final_answer == ANSWER
    assert specific.budget == code.budget
    table = comparison_table(specific, code)
    assert table[0] == ("model calls", "5", "2") and table[1] == ("tool calls", "4", "1")
    assert all("≈" not in what for what, _, _ in table)  # counted with the model's tokenizer


def test_doctests_of_the_code_tool_modules():
    import doctest

    from agent import codeact, tools

    for module in (sandbox, codeact, tools):
        assert doctest.testmod(module).failed == 0, module.__name__
