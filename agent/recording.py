"""Recorded runs: a run saved as JSON, and loaded back as a ScriptedBackend that replays it.

The JSON format (one file per run in assets/runs/, UTF-8):

    {
      "format": "react-lab-run/1",
      "title": "The lecture's Berlin weather trace",       # shown in a run picker
      "description": "…",
      "user_input": "What's the weather in Berlin?",
      "mode": "react" | "act" | "cot",
      "fmt": "native" | "react",
      "settings": {"max_steps": 8, "max_new_tokens": 256, …},   # agent.backends.Settings
      "tools": ["get_weather", …],                          # names of the advertised tools
      "replies": [                                          # one per model call, in order
        {"text": "…raw reply text…",
         "tool_calls": [{"id": "…", "type": "function",     # present: structured calls from an
                         "function": {"name": "…", "arguments": "{…JSON string…}"}}],   # API;
                                                            # absent: `text` is parsed by `fmt`
         "thought": "…", "finish_reason": "stop", "usage": {…}}      # optional
      ],
      "history": [ OpenAI chat messages, with extras: "thought" on assistant turns,
                   "kind" (ok | validation_error | policy_refusal | tool_error) on tool turns,
                   "origin": "runtime" on the runtime's feedback turns ],
      "stop_reason": "final answer", "final_answer": "…",
      "usage": [{"prompt_tokens": …, "completion_tokens": …, "source": "…"}]   # informational
    }

An uploaded run is a visitor's file: run_from_dict refuses one beyond the bounds below (replies,
tool calls per reply and per run, characters per reply and in all, history messages), with a
message that names the bound, so replaying it costs bounded work however it was written (an upload
with 2,000 tool calls in one reply used to run for 520 s).

Replaying feeds `replies` to the same loop, which re-derives `history`; the recorded history is
what the replay must reproduce (the tests check it for every shipped run).

What it does not know: the UI; how the replies were produced.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from agent import loop
from agent.backends import BackendReply, ScriptedBackend, Settings
from agent.budget import Usage
from agent.formats import Fmt, Mode
from agent.loop import State, StopReason, new_state
from agent.messages import Message, SystemMessage, history_from_dicts, history_to_dicts
from agent.parsing import parse_reply
from agent.tools import ALL_TOOLS, RUN_PYTHON_TOOL, Tool
from agent.validation import DEFAULT_POLICY, Policy

FORMAT = "react-lab-run/1"
RUNS_DIR = Path(__file__).resolve().parent.parent / "assets" / "runs"
MAX_REPLIES = 100  # model calls in a run
MAX_CALLS_PER_REPLY = 8  # tool calls in one reply (structured or parsed from its text)
MAX_CALLS_PER_RUN = 64
MAX_CODE_CALLS_PER_RUN = 8  # run_python calls among them: each may take a sandbox slot for seconds
MAX_REPLY_CHARS = 16_000  # text of one reply
MAX_RUN_CHARS = 200_000  # text of all replies together
MAX_HISTORY_MESSAGES = 4 * MAX_REPLIES + MAX_CALLS_PER_RUN + 2


class RunTooLarge(ValueError):
    """A run beyond one of the bounds above; the message names the bound."""


@dataclass(frozen=True)
class RecordedRun:
    title: str
    description: str
    user_input: str
    mode: Mode
    fmt: Fmt
    settings: Settings
    tools: tuple[str, ...]
    replies: tuple[BackendReply, ...]
    history: tuple[Message, ...]
    stop_reason: StopReason | None
    final_answer: str | None
    usage: tuple[Usage, ...] = ()


def record_run(state: State, tools: tuple[Tool, ...], title: str = "", description: str = "") -> dict:
    """The final (or any) state of a run → the JSON-ready dict of the format above."""
    return {
        "format": FORMAT, "title": title, "description": description,
        "user_input": state.user_input, "mode": str(state.mode), "fmt": str(state.fmt),
        "settings": state.settings.to_dict(), "tools": [t.name for t in tools],
        "replies": [r.to_dict() for r in state.replies],
        "history": history_to_dicts(state.history, extras=True),
        "stop_reason": None if state.stop_reason is None else str(state.stop_reason),
        "final_answer": state.final_answer,
        "usage": [asdict(u) for u in state.usage],
    }


def save_run(run_dict: dict, path: Path | str) -> Path:
    path = Path(path)
    path.write_text(json.dumps(run_dict, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def run_from_dict(d: dict) -> RecordedRun:
    """A run from its JSON value; ValueError (RunTooLarge for a bound) for anything unusable."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        got = d.get("format") if isinstance(d, dict) else type(d).__name__
        raise ValueError(f"not a recorded run of format {FORMAT!r}: {got!r}")
    _check_sizes(d)
    run = RecordedRun(
        title=d.get("title", ""), description=d.get("description", ""), user_input=d["user_input"],
        mode=Mode(d["mode"]), fmt=Fmt(d["fmt"]), settings=Settings.from_dict(d.get("settings", {})),
        tools=tuple(d.get("tools", ())), replies=tuple(BackendReply.from_dict(r) for r in d["replies"]),
        history=history_from_dicts(d.get("history", ())),
        stop_reason=StopReason(d["stop_reason"]) if d.get("stop_reason") else None,
        final_answer=d.get("final_answer"), usage=tuple(Usage(**u) for u in d.get("usage", ())))
    _check_calls(run)
    return run


def _check_sizes(d: dict) -> None:
    """Counts and lengths, checked before anything is parsed."""
    replies, history = d.get("replies"), d.get("history", ())
    if not isinstance(replies, list) or not isinstance(history, list):
        raise ValueError("'replies' and 'history' must be lists")
    if len(replies) > MAX_REPLIES:
        raise RunTooLarge(f"the run has {len(replies):,} replies; at most {MAX_REPLIES} can be replayed")
    if len(history) > MAX_HISTORY_MESSAGES:
        raise RunTooLarge(f"the run has {len(history):,} history messages; the limit is {MAX_HISTORY_MESSAGES}")
    texts = [r.get("text", "") if isinstance(r, dict) else "" for r in replies]
    longest = max((len(t) for t in texts if isinstance(t, str)), default=0)
    if longest > MAX_REPLY_CHARS:
        raise RunTooLarge(f"a reply has {longest:,} characters; the limit is {MAX_REPLY_CHARS:,}")
    total = sum(len(t) for t in texts if isinstance(t, str))
    if total > MAX_RUN_CHARS:
        raise RunTooLarge(f"the replies have {total:,} characters in all; the limit is {MAX_RUN_CHARS:,}")
    for r in replies:
        calls = r.get("tool_calls") if isinstance(r, dict) else None
        if isinstance(calls, list) and len(calls) > MAX_CALLS_PER_REPLY:
            raise RunTooLarge(f"a reply has {len(calls):,} tool calls; the limit is {MAX_CALLS_PER_REPLY}")


def _check_calls(run: RecordedRun) -> None:
    """Tool calls per reply and per run, counting those the loop would parse out of a reply's text."""
    total = code_calls = 0
    for reply in run.replies:
        calls = reply.tool_calls if reply.tool_calls is not None else parse_reply(
            reply.text, run.fmt, ALL_TOOLS).tool_calls
        if len(calls) > MAX_CALLS_PER_REPLY:
            raise RunTooLarge(f"a reply has {len(calls):,} tool calls; the limit is {MAX_CALLS_PER_REPLY}")
        total += len(calls)
        code_calls += sum(call.name == RUN_PYTHON_TOOL.name for call in calls)
    if total > MAX_CALLS_PER_RUN:
        raise RunTooLarge(f"the run has {total:,} tool calls; the limit is {MAX_CALLS_PER_RUN}")
    if code_calls > MAX_CODE_CALLS_PER_RUN:
        raise RunTooLarge(f"the run has {code_calls:,} run_python calls; the limit is {MAX_CODE_CALLS_PER_RUN}")


def load_run(path: Path | str) -> RecordedRun:
    return run_from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def shipped_runs(folder: Path = RUNS_DIR) -> dict[str, Path]:
    """The recorded runs in assets/runs, by file stem."""
    return {p.stem: p for p in sorted(folder.glob("*.json"))}


def tools_of(run: RecordedRun, tools: tuple[Tool, ...] = ALL_TOOLS) -> tuple[Tool, ...]:
    """The recorded tool names resolved against a tool set, in the recorded order."""
    by_name = {t.name: t for t in tools}
    missing = [n for n in run.tools if n not in by_name]
    if missing:
        raise ValueError(f"the run needs tools that are not available: {', '.join(missing)}")
    return tuple(by_name[n] for n in run.tools)


def start_state(run: RecordedRun, settings=None, memory=loop.NO_MEMORY) -> State:
    """The state before line 1 of a recorded run, with the system prompt it was recorded with
    (its replies were written for that prompt, even if the default prompt has changed since);
    `memory`: the facts of the browser session, re-sent with every call."""
    first = run.history[0] if run.history else None
    system = first.content if isinstance(first, SystemMessage) else None
    return new_state(run.user_input, run.mode, run.fmt, settings or run.settings, system=system,
                     memory=memory)


def replay_start(run: RecordedRun, tokenizer=None, context_window: int | None = None
                 ) -> tuple[State, ScriptedBackend]:
    """The state before line 1 and the backend that replays the recording."""
    backend = ScriptedBackend(run.replies, tokenizer=tokenizer, context_window=context_window)
    return start_state(run), backend


def replay(run: RecordedRun, tools: tuple[Tool, ...] = ALL_TOOLS, tokenizer=None,
           policy: Policy = DEFAULT_POLICY) -> tuple[State, ...]:
    """Every state of the replayed run (the policy is not recorded: the default applies)."""
    state, backend = replay_start(run, tokenizer)
    return loop.run(state, backend, tools_of(run, tools), policy=policy)
