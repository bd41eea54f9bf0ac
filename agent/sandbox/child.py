"""The child side of the code sandbox: confine this process, then interpret the code (agent.sandbox).

Runs only in a process forked for one call, never in the server. In order, `main`:
  1. moves into the throw-away directory, empties the environment (no tokens to read) and closes
     every inherited descriptor but its result pipe,
  2. leaves the network: a new network namespace (unshare; as root, or through a user namespace
     where the kernel allows one) — best effort, recorded in the result's "layers",
  3. sets OS limits: RLIMIT_CPU (CPU seconds), RLIMIT_AS (address space), RLIMIT_FSIZE (file size),
     RLIMIT_NPROC = 0 (no new processes for a non-root user), RLIMIT_CORE = 0; marks itself
     not dumpable; where the server runs as root, becomes the unprivileged user `nobody`,
  4. loads an allow-list seccomp filter (libseccomp via pyseccomp): ALLOWED_SYSCALLS — memory,
     the descriptors it holds, its own signals, time, random bytes, exit — and EPERM for every
     other call: no open (no file, no /proc of the server), no socket, no fork or exec, no signal,
     pidfd or prlimit against another process, no extended attributes. Everything the code may
     import was imported before (agent.sandbox.zygote), so the code needs no file. Fails closed:
     without the filter no code runs,
  5. interprets the code with smolagents' LocalPythonExecutor machinery (an AST interpreter: no
     `open`, `eval`, `exec`, `__import__`, dunder, frame or code attributes; imports only from
     ALLOWED_IMPORTS, passed as a tuple), with the lab's specific tools (agent.tools) as functions,
  6. writes one JSON message {"output", "error", "layers"} to its supervisor (agent.sandbox.zygote).

The interpreter is the inner layer; the boundary is the filter: code that escapes the interpreter
(a frame route, a bug in smolagents) holds a Python process that can only compute and write to
its result pipe.

What it does not know: the wall clock (its supervisor kills it; its own alarm is the backstop),
the loop, the model.
It never imports torch, transformers or Gradio (agent.tools imports only the standard library).
"""

from __future__ import annotations

import _string
import ast
import ctypes
import errno
import functools
import json
import math
import os
import resource
import signal
import string
import types
import typing

from smolagents import local_python_executor as lpe

try:  # imported with the module (in the fork server): a confined child can open no library
    import pyseccomp
except Exception:  # noqa: BLE001 — libseccomp missing: confine() then refuses to run code
    pyseccomp = None

from agent import tools

ALLOWED_IMPORTS = ("math", "statistics", "itertools", "collections", "functools", "random", "re",
                   "json", "datetime", "string", "fractions", "decimal")
CODE_FUNCTIONS = {f.__name__: f for f in (tools.get_weather, tools.calculator, tools.search, tools.lookup)}
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
PR_SET_DUMPABLE = 4
NOBODY = 65534  # the unprivileged user a child runs as, where the server runs as root
# The system calls an interpreted call may make once confined, and nothing else (deny by default):
# memory, reading and writing the descriptors it already holds, signals to itself, time, random
# bytes, exit. No open (so no file and no /proc), no socket, no process or signal to another
# process, no limits of another process, no extended attributes.
ALLOWED_SYSCALLS = (
    "read", "readv", "pread64", "write", "writev", "close", "fstat", "lseek",
    "mmap", "munmap", "mprotect", "mremap", "madvise", "brk",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall",
    "futex", "sched_yield", "getpid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getrusage",
    "clock_gettime", "clock_getres", "gettimeofday", "time", "clock_nanosleep", "nanosleep",
    "getrandom", "exit", "exit_group",
)
AT_EMPTY_PATH = 0x1000  # fstat(fd) is newfstatat(fd, "", …, AT_EMPTY_PATH) in glibc; nothing else is
# Attributes that reach an interpreter frame (and through it the interpreter's own globals and
# its import list) or compiled code: refused by name, whatever the object.
FORBIDDEN_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "cr_origin",
    "ag_frame", "ag_code", "ag_await", "f_locals", "f_back", "f_globals", "f_builtins", "f_code",
    "f_trace", "tb_frame", "tb_next",
})


class BoundedPrint(lpe.PrintContainer):
    """smolagents' print buffer, but it stops growing at LIMIT characters (100 MB of prints cost
    nothing beyond the limit) and says how much it dropped."""

    LIMIT = 4000

    def __init__(self):
        super().__init__()
        self.dropped = 0

    def __iadd__(self, other):
        text = str(other)
        room = max(self.LIMIT - len(self.value), 0)
        self.value += text[:room]
        self.dropped += max(len(text) - room, 0)
        return self

    append = __iadd__


def main(code: str, limits: dict, out) -> None:
    """Confine this process, interpret the code, write one JSON message to `out`."""
    try:
        layers = confine(limits, keep_fds=(out.fileno(),))
    except SandboxUnavailable as e:
        out.write(json.dumps({"output": "", "error": str(e), "layers": []}).encode())
        out.flush()
        return
    try:
        output, error = interpret(code, limits["output_chars"])
    except MemoryError:
        output, error = "", f"memory limit exceeded ({limits['memory_mb']} MiB)"
    except BaseException as e:  # noqa: BLE001 — whatever the code raised is reported, not raised
        output, error = "", f"{e.__class__.__name__}: {e}"[: limits["output_chars"]]
    out.write(json.dumps({"output": output, "error": error, "layers": layers}).encode())
    out.flush()


def confine(limits: dict, keep_fds: tuple[int, ...] = ()) -> list[str]:
    """Steps 1–5 of the module docstring; the names of the layers that took effect.

    Fails closed: where the system-call filter cannot be loaded, it raises SandboxUnavailable and
    no code is interpreted (the interpreter alone is no boundary)."""
    os.chdir(limits["workdir"])
    os.environ.clear()
    os.environ.update(HOME=limits["workdir"], TMPDIR=limits["workdir"])
    _close_inherited_fds(keep_fds)
    layers = ["separate process", "throw-away working directory", "empty environment, no inherited files"]
    if _leave_network():
        layers.append("own network namespace (no network)")
    _set_rlimits(limits)
    signal.alarm(math.ceil(limits["wall_s"]))  # SIGALRM ends this process at the wall clock
    layers.append("rlimits (CPU, memory, file size, processes), alarm")
    _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no other process of this user may read this one
    if _drop_to_nobody():
        layers.append("unprivileged user (nobody)")
    if not _load_seccomp():
        raise SandboxUnavailable("the sandbox's system-call filter (libseccomp) could not be loaded here, "
                                 "so the code tool refuses to run code")
    layers.append("seccomp allow-list (deny by default: no open, socket, signal or process call)")
    return layers + ["AST interpreter with an import allow-list and no frame attributes"]


class SandboxUnavailable(RuntimeError):
    """The OS boundary could not be set up: the code is not run."""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _close_inherited_fds(keep: tuple[int, ...]) -> None:
    """Every descriptor but 0–2 and `keep` closed: the child holds nothing of its parents'."""
    low = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def _leave_network() -> bool:
    """A fresh network namespace has only a loopback that is down: no route anywhere."""
    libc = _libc()
    return any(libc.unshare(flags) == 0 for flags in (CLONE_NEWNET, CLONE_NEWUSER | CLONE_NEWNET))


def _drop_to_nobody() -> bool:
    """Where the server runs as root, the child becomes `nobody` (no groups) for good; a server
    that runs as a plain user (a Space) cannot change users, and the filter alone holds there."""
    if os.geteuid() != 0:
        return False
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
    return True


def _set_rlimits(limits: dict) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = math.ceil(used.ru_utime + used.ru_stime) + limits["cpu_s"]  # start-up not charged to the code
    address_space = _address_space() + limits["memory_mb"] * 2**20
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead
    for which, value in ((resource.RLIMIT_CPU, (cpu, cpu + 1)),
                         (resource.RLIMIT_AS, (address_space, address_space)),
                         (resource.RLIMIT_FSIZE, (2**20, 2**20)),
                         (resource.RLIMIT_NPROC, (0, 0)), (resource.RLIMIT_CORE, (0, 0))):
        resource.setrlimit(which, value)


def _address_space() -> int:
    """This process's current virtual size in bytes (the interpreter itself, before the code)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _load_seccomp() -> bool:
    """Allow the ALLOWED_SYSCALLS and refuse every other call with EPERM; False where libseccomp
    is unavailable (the caller then refuses to run code)."""
    sc = pyseccomp
    if sc is None:
        return False
    try:
        f = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
        for name in ALLOWED_SYSCALLS:
            _allow(f, sc, name)
        _allow(f, sc, "newfstatat", sc.Arg(3, sc.MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH))
        f.load()
        return True
    except Exception:  # noqa: BLE001 — no libseccomp (or no permission): no code runs
        return False


def _allow(f, sc, name: str, *arguments) -> None:
    try:
        f.add_rule(sc.ALLOW, name, *arguments)
    except (RuntimeError, ValueError, OSError):
        pass  # a system call this architecture does not have (aarch64 has no fstat, time, …)


def forbidden_attribute(name: object) -> bool:
    """True for an attribute the code may not reach: a dunder, a frame or code-object field.

    >>> [forbidden_attribute(n) for n in ("gi_frame", "co_consts", "__class__", "real", "f_back")]
    [True, True, True, False, True]
    """
    return isinstance(name, str) and (name in FORBIDDEN_ATTRIBUTES or name.startswith("co_")
                                      or (name.startswith("__") and name.endswith("__")))


def _refuse_attribute(name: object) -> None:
    if forbidden_attribute(name):
        kind = "dunder attribute" if name.startswith("__") else "frame or code attribute"
        raise lpe.InterpreterError(f"Forbidden access to {kind}: {name}")


def guarded_getattr(obj, name, *default):
    """getattr, but never a frame, code or dunder attribute (the interpreter's `a.b` check covers
    only written attributes; getattr(g, "gi_frame") reached the interpreter's frame)."""
    _refuse_attribute(name)
    return getattr(obj, name, *default)


def guarded_hasattr(obj, name) -> bool:
    _refuse_attribute(name)
    return hasattr(obj, name)


def guarded_get_field(self, field_name: str, args, kwargs):
    """string.Formatter.get_field, but each step is checked as the interpreter checks `a.b`.

    The stock method does getattr/getitem in the standard library, out of the interpreter's
    sight: `Formatter().get_field('0.__init__.__globals__[_os].open', [random.Random], {})` handed
    `os.open` to the code (a read of any file). Here an attribute that starts with "_" is refused
    and every value on the path passes smolagents' own check (no unauthorised module, no eval…).
    """
    first, rest = _string.formatter_field_name_split(field_name)
    value = self.get_value(first, args, kwargs)
    for is_attribute, key in rest:
        if is_attribute and (str(key).startswith("_") or forbidden_attribute(key)):
            raise lpe.InterpreterError(f"Forbidden access to attribute in a format field: {key}")
        value = getattr(value, key) if is_attribute else value[key]
        lpe.check_safer_result(value, STATIC_TOOLS, ALLOWED_IMPORTS)
    return value, first


def _checked_format(method):
    """str.format / str.format_map, but no field may name a frame, code or private attribute:
    str.format walks `{0.gi_frame.f_globals}` or `{0.__init__.__globals__}` in C, out of the
    interpreter's sight."""
    text = getattr(method, "__self__", None)
    if not isinstance(text, str):
        return method

    def checked(*args, **kwargs):
        _check_format_fields(text)
        return method(*args, **kwargs)

    return checked


def _check_format_fields(text: str, depth: int = 0) -> None:
    for _, field, spec, _ in string.Formatter().parse(text):
        if field:
            _, rest = _string.formatter_field_name_split(field)
            for is_attribute, key in rest:
                if is_attribute and forbidden_attribute(key) and not str(key).startswith("__"):
                    _refuse_attribute(key)
                if is_attribute and str(key).startswith("_"):  # the rule of guarded_get_field
                    raise lpe.InterpreterError(f"Forbidden access to attribute in a format field: {key}")
        if spec and depth < 2:  # a nested field in the spec: "{0:{1.gi_frame}}"
            _check_format_fields(spec, depth + 1)


def nodunder_setattr(obj, name, value):
    """setattr, but never a dunder: `setattr(f, '__annotations__', {'x': "__import__('os')"})`
    would otherwise feed a string to typing's eval (functools.singledispatch's register)."""
    if isinstance(name, str) and name.startswith("__") and name.endswith("__"):
        raise lpe.InterpreterError(f"Forbidden access to dunder attribute: {name}")
    _refuse_attribute(name)
    setattr(obj, name, value)


_update_wrapper, _get_type_hints = functools.update_wrapper, typing.get_type_hints


def guarded_update_wrapper(wrapper, wrapped, assigned=functools.WRAPPER_ASSIGNMENTS,
                           updated=functools.WRAPPER_UPDATES):
    """functools.update_wrapper for functions with the standard attributes only: with its own
    `assigned` names and an object whose __setattr__ keeps the values, the stock one hands the
    code any dunder attribute (`__globals__`, `__subclasses__`, …)."""
    if (not set(assigned) <= set(functools.WRAPPER_ASSIGNMENTS) or not set(updated) <= set(functools.WRAPPER_UPDATES)
            or not isinstance(wrapper, types.FunctionType)):
        raise lpe.InterpreterError("Forbidden: update_wrapper only copies the standard attributes onto a function")
    return _update_wrapper(wrapper, wrapped, assigned, updated)


def guarded_get_type_hints(obj, *args, **kwargs):
    """typing.get_type_hints, but a string annotation is never evaluated (it would be an eval)."""
    annotations = getattr(obj, "__annotations__", None) or {}
    if any(isinstance(v, str) for v in dict(annotations).values()):
        raise lpe.InterpreterError("Forbidden: string annotations are not evaluated in the sandbox")
    return _get_type_hints(obj, *args, **kwargs)


_evaluate_ast = lpe.evaluate_ast


def scrubbing_evaluate_ast(expression, *args, **kwargs):
    """smolagents' evaluate_ast, but a frame or code attribute (`g.gi_frame`, `f.f_back`,
    `c.co_consts`) is refused before it is evaluated, and an AttributeError leaves without its
    `obj`: str.format walks dunder paths in C, and `'{0.__init__.__globals__[_os].open.x}'.format(
    random.Random)` raised one whose `obj` was os.open, caught with `except AttributeError as e: e.obj`."""
    if isinstance(expression, ast.Attribute):
        _refuse_attribute(expression.attr)
    try:
        return _evaluate_ast(expression, *args, **kwargs)
    except AttributeError as e:
        e.obj = None
        raise


def interpreter_getattr(obj, name, *default):
    """The getattr smolagents' interpreter itself uses for `a.b` and `a.b(…)`: never a frame or
    code attribute, and a string's format/format_map checks its fields first (dunders are left to
    the interpreter's own check)."""
    if forbidden_attribute(name) and not name.startswith("__"):
        _refuse_attribute(name)
    value = getattr(obj, name, *default)
    return _checked_format(value) if isinstance(obj, str) and name in ("format", "format_map") else value


STATIC_TOOLS = {**lpe.BASE_PYTHON_TOOLS, "setattr": nodunder_setattr, "getattr": guarded_getattr,
                "hasattr": guarded_hasattr, **CODE_FUNCTIONS}


def harden() -> None:
    """Close the standard library's own getattr/eval paths, in this process only."""
    string.Formatter.get_field = guarded_get_field
    functools.update_wrapper = guarded_update_wrapper
    typing.get_type_hints = guarded_get_type_hints
    lpe.evaluate_ast = scrubbing_evaluate_ast
    lpe.getattr = interpreter_getattr  # a module global: it shadows the builtin inside smolagents


def interpret(code: str, output_chars: int) -> tuple[str, str | None]:
    """What the code prints plus the value of its last expression; the error message, if any."""
    lpe.PrintContainer = BoundedPrint  # this process's own copy of smolagents, in this process only
    BoundedPrint.LIMIT = output_chars
    harden()
    state: dict = {"__name__": "__main__"}
    static = dict(STATIC_TOOLS)
    error, value = None, None
    try:
        value, _ = lpe.evaluate_python_code(code, static_tools=static, state=state,
                                            authorized_imports=ALLOWED_IMPORTS,  # a tuple: nothing can append
                                            max_print_outputs_length=output_chars, timeout_seconds=None)
    except lpe.InterpreterError as e:
        error = str(e)
    printed = state.get("_print_outputs", BoundedPrint())
    output = str(printed)
    if getattr(printed, "dropped", 0):
        output += f"\n… output truncated: {printed.dropped} more characters"
    if error is None and _ends_with_expression(code) and value is not None:
        output += _shown(value, output_chars)
    return output[:output_chars * 2], None if error is None else error[:output_chars]


def _ends_with_expression(code: str) -> bool:
    body = ast.parse(code).body
    return bool(body) and isinstance(body[-1], ast.Expr)


def _shown(value: object, output_chars: int) -> str:
    try:
        text = repr(value)
    except Exception as e:  # noqa: BLE001 — e.g. an int too long to convert to a string
        text = f"<value that cannot be shown: {e}>"
    return text if len(text) <= output_chars else text[:output_chars] + f"… ({len(text)} characters)"

