"""The child side of the code sandbox: confine this process, then interpret the code (agent.sandbox).

Runs only in a process forked for one call, never in the server. In order, `main`:
  1. moves into the throw-away directory and empties the environment (no tokens to read),
  2. leaves the network: a new network namespace (unshare; as root, or through a user namespace
     where the kernel allows one) — best effort, recorded in the result's "layers",
  3. sets OS limits: RLIMIT_CPU (CPU seconds), RLIMIT_AS (address space), RLIMIT_FSIZE (file size),
     RLIMIT_NPROC = 0 (no new processes for a non-root user), RLIMIT_CORE = 0,
  4. loads a seccomp filter (libseccomp via pyseccomp, where the library loads) that refuses with
     EPERM: sockets, new processes and programs (fork, clone, execve), signals to other processes,
     namespaces, ptrace, io_uring, and every file-system write (open for writing, create, unlink,
     rename, mkdir, …) — the throw-away directory is then the working directory and nothing more,
  5. interprets the code with smolagents' LocalPythonExecutor machinery (an AST interpreter: no
     `open`, `eval`, `exec`, `__import__` or dunder attributes; imports only from ALLOWED_IMPORTS),
     with the lab's specific tools (agent.tools) as plain functions,
  6. writes one JSON message {"output", "error", "layers"} to its supervisor (agent.sandbox_zygote).

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

from agent import tools

ALLOWED_IMPORTS = ("math", "statistics", "itertools", "collections", "functools", "random", "re",
                   "json", "datetime", "string", "fractions", "decimal")
CODE_FUNCTIONS = {f.__name__: f for f in (tools.get_weather, tools.calculator, tools.search, tools.lookup)}
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
DENIED_SYSCALLS = (
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto", "sendmsg",
    "fork", "vfork", "clone", "clone3", "execve", "execveat", "kill", "tkill", "tgkill", "ptrace",
    "process_vm_readv", "process_vm_writev", "unshare", "setns", "mount", "umount2", "chroot",
    "pivot_root", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "keyctl", "add_key",
    "request_key", "creat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir",
    "mkdirat", "rmdir", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat",
    "chown", "fchown", "lchown", "fchownat", "truncate", "mknod", "mknodat", "setxattr", "lsetxattr",
    # openat2 passes its flags in a struct that seccomp cannot read: refused whole
    "openat2", "open_by_handle_at", "utime", "utimes", "utimensat", "futimesat",
)
WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)


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
    layers = confine(limits)
    try:
        output, error = interpret(code, limits["output_chars"])
    except MemoryError:
        output, error = "", f"memory limit exceeded ({limits['memory_mb']} MiB)"
    except BaseException as e:  # noqa: BLE001 — whatever the code raised is reported, not raised
        output, error = "", f"{e.__class__.__name__}: {e}"[: limits["output_chars"]]
    out.write(json.dumps({"output": output, "error": error, "layers": layers}).encode())
    out.flush()


def confine(limits: dict) -> list[str]:
    """Steps 1–4 of the module docstring; the names of the layers that took effect."""
    os.chdir(limits["workdir"])
    os.environ.clear()
    os.environ.update(HOME=limits["workdir"], TMPDIR=limits["workdir"])
    layers = ["separate process", "throw-away working directory"]
    if _leave_network():
        layers.append("own network namespace (no network)")
    _set_rlimits(limits)
    signal.alarm(math.ceil(limits["wall_s"]))  # SIGALRM ends this process at the wall clock
    layers.append("rlimits (CPU, memory, file size, processes), alarm")
    if _load_seccomp():
        layers.append("seccomp")
    return layers + ["AST interpreter with an import allow-list"]


def _leave_network() -> bool:
    """A fresh network namespace has only a loopback that is down: no route anywhere."""
    libc = ctypes.CDLL(None, use_errno=True)
    return any(libc.unshare(flags) == 0 for flags in (CLONE_NEWNET, CLONE_NEWUSER | CLONE_NEWNET))


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
    """Refuse the DENIED_SYSCALLS and opens for writing; False where libseccomp is unavailable."""
    try:
        import pyseccomp as sc

        f = sc.SyscallFilter(sc.ALLOW)
        for name in DENIED_SYSCALLS:
            _deny(f, sc, name)
        for flag in WRITE_FLAGS:
            _deny(f, sc, "open", sc.Arg(1, sc.MASKED_EQ, flag, flag))
            _deny(f, sc, "openat", sc.Arg(2, sc.MASKED_EQ, flag, flag))
        f.load()
        return True
    except Exception:  # noqa: BLE001 — no libseccomp (or no permission): the other layers remain
        return False


def _deny(f, sc, name: str, *arguments) -> None:
    try:
        f.add_rule(sc.ERRNO(errno.EPERM), name, *arguments)
    except (RuntimeError, ValueError, OSError):
        pass  # a system call this architecture does not have (aarch64 has no open, fork, …)


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
        if is_attribute and str(key).startswith("_"):
            raise lpe.InterpreterError(f"Forbidden access to attribute in a format field: {key}")
        value = getattr(value, key) if is_attribute else value[key]
        lpe.check_safer_result(value, STATIC_TOOLS, list(ALLOWED_IMPORTS))
    return value, first


def nodunder_setattr(obj, name, value):
    """setattr, but never a dunder: `setattr(f, '__annotations__', {'x': "__import__('os')"})`
    would otherwise feed a string to typing's eval (functools.singledispatch's register)."""
    if isinstance(name, str) and name.startswith("__") and name.endswith("__"):
        raise lpe.InterpreterError(f"Forbidden access to dunder attribute: {name}")
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


def scrubbing_evaluate_ast(*args, **kwargs):
    """smolagents' evaluate_ast, but an AttributeError leaves without its `obj`: str.format walks
    dunder paths in C, and `'{0.__init__.__globals__[_os].open.x}'.format(random.Random)` raised
    one whose `obj` was os.open, caught with `except AttributeError as e: e.obj`."""
    try:
        return _evaluate_ast(*args, **kwargs)
    except AttributeError as e:
        e.obj = None
        raise


STATIC_TOOLS = {**lpe.BASE_PYTHON_TOOLS, "setattr": nodunder_setattr, **CODE_FUNCTIONS}


def harden() -> None:
    """Close the standard library's own getattr/eval paths, in this process only."""
    string.Formatter.get_field = guarded_get_field
    functools.update_wrapper = guarded_update_wrapper
    typing.get_type_hints = guarded_get_type_hints
    lpe.evaluate_ast = scrubbing_evaluate_ast


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
                                            authorized_imports=list(ALLOWED_IMPORTS),
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

