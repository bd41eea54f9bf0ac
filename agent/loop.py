"""Prompt-ToolLoop (lecture, "The Execution Loop") as a pure state machine a UI can step through.

    state = new_state("What's the weather in Berlin?", mode="act")
    while not state.done:
        state = step(state, backend, TOOLS)      # one phase of the pseudo-code per call

What it knows: the lecture's nine lines. Each `step` executes ONE phase and returns a new frozen
State that records the lines it just executed: line 1 (append the user input); a model call =
lines 2–5 (the step counter, LLM(context), append, and "no tool calls → return its text"); one
tool call = lines 6–8 (validate, check policy, execute, append its result with the call's id);
line 9 when the step cap is reached. States are never mutated: the prompt is always rebuilt from
system + history, so a UI keeps the list of states and goes back by index.

Beyond the pseudo-code, a run also stops when finish[answer] was called (the ReAct paper's
explicit exit), when the rendered prompt plus the reserved reply tokens would exceed the context
budget (checked before each model call), when the reply is unparsable twice in a row (once is
fed back to the model as an "ERROR: …" observation), when the same call with the same arguments
comes a third time in a row (the second comes back as an "ERROR: …" observation: the lecture's
repetition check), or when the backend fails.

What the context holds besides the history (lecture, Part IV: history + tool schemas + retrieved
documents + long-term memory): `new_state` fixes the blocks re-sent with the system turn of every
call — few-shot exemplars (agent.context.exemplars), the BM25 passages for the question
(agent.context.retrieval), the session's memory (agent.context.memory) — never in the history. Before line 3,
when the prompt passes settings.compact_at × budget, one phase compacts the history instead of
calling the model (agent.context.compaction): the older turns become one summary message.

What it does not know: how a model, a template or a tool works inside; Gradio.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import StrEnum

from agent.backends import Backend, BackendError, BackendReply, OnToken, ScriptDiverged, ScriptedBackend, Settings
from agent.budget import Breakdown, Usage, breakdown, count_tokens, prompt_tokens
from agent.context import compaction
from agent.context.exemplars import exemplar_block
from agent.context.memory import REMEMBER_TOOL, Memory, memory_block
from agent.context.retrieval import documents_block
from agent.formats import Fmt, Mode
from agent.messages import (
    AssistantMessage,
    Message,
    Origin,
    ResultKind,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agent.parsing import ParsedReply, parse_reply, split_thought
from agent.template import Block, Prompt, system_prompt
from agent.tools import FINISH, Tool
from agent.validation import DEFAULT_POLICY, Policy, check_policy, validate_call

PSEUDO_CODE_TITLE = "Prompt-ToolLoop(user_input)"
PSEUDO_CODE: tuple[str, ...] = (  # PSEUDO_CODE[n - 1] is line n
    "context.append(user_input)",
    "for step = 1 … MAX_STEPS do",
    "    response ← LLM(context)",
    "    context.append(response)",
    "    if response.tool_calls = ∅ then return response.text    // a text-only turn IS the answer",
    "    for each call ∈ response.tool_calls do",
    '        try result ← execute(call) catch e: result ← "ERROR: " + message(e)',
    "        context.append(tool_result(call.id, result))    // the result carries the id of its call",
    'return "stopped: step budget exhausted"',
)
LINE_APPEND_USER = 1
LINE_FOR_STEP = 2
LINE_CALL_LLM = 3
LINE_APPEND_RESPONSE = 4
LINE_RETURN_TEXT = 5
LINE_FOR_CALL = 6
LINE_EXECUTE = 7
LINE_APPEND_RESULT = 8
LINE_STEP_BUDGET = 9
LINE_COMPACT = LINE_CALL_LLM  # compaction runs just before LLM(context), as its own phase
PSEUDO_CODE_NOTES = {LINE_COMPACT: "before the call: past Compact at, older turns → one summary message"}

DEFAULT_SETTINGS = Settings()
NO_MEMORY = Memory()
DEFAULT_CONTEXT_WINDOW = 8192  # when neither the settings nor the backend name one
STEP_BUDGET_TEXT = "stopped: step budget exhausted"


class StopReason(StrEnum):
    FINAL_ANSWER = "final answer"  # a text-only turn (line 5)
    TOKEN_LIMIT = "token limit"  # a text-only turn that the reply-token limit cut (finish_reason "length")
    TOKEN_LIMIT_SERVER = "token limit (server)"  # the same, in a server's own finish_reason
    FINISH = "finish"  # finish[answer] was called
    STEP_BUDGET = "step budget exhausted"  # line 9
    CONTEXT_FULL = "context window full"
    NO_PARSABLE_OUTPUT = "no parsable output twice in a row"
    BACKEND_ERROR = "backend error"
    RECORDING_DIVERGED = "the recording cannot follow"  # a replay's tool result differs from the recording's
    REPETITION = "same tool call three times in a row"


class Phase(StrEnum):
    START = "start"  # next: line 1
    CALL_MODEL = "call model"  # next: lines 2–5
    EXECUTE = "execute"  # next: lines 6–8 for pending[0]
    DONE = "done"


@dataclass(frozen=True)
class State:
    """Everything the loop knows after one phase; every view of the UI is a function of it."""

    history: tuple[Message, ...]
    user_input: str
    mode: Mode = Mode.REACT
    fmt: Fmt = Fmt.NATIVE
    settings: Settings = DEFAULT_SETTINGS
    phase: Phase = Phase.START
    step: int = 0  # the pseudo-code's step: model calls begun
    pending: tuple[ToolCall, ...] = ()  # calls of the last response not yet executed
    lines: tuple[int, ...] = ()  # pseudo-code lines the last phase executed, in order
    stop_reason: StopReason | None = None
    final_answer: str | None = None
    usage: tuple[Usage, ...] = ()  # one per model call
    replies: tuple[BackendReply, ...] = ()  # the backend's raw replies (what a recording keeps)
    next_call_number: int = 1  # tool-call ids run call_1, call_2, … through the run
    parse_failures: int = 0  # unparsable replies in a row
    finished: str | None = None  # the answer of a finish call in the current turn
    note: str = ""  # what the last phase did, in words
    blocks: tuple[Block, ...] = ()  # exemplars, documents, memory: re-sent with every call
    compactions: int = 0  # how many times the history was compacted
    composition: tuple[dict[str, int], ...] = ()  # one per model call: its prompt's tokens by category

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    @property
    def line(self) -> int:
        """The pseudo-code line executed last (0 before line 1)."""
        return self.lines[-1] if self.lines else 0


def new_state(user_input: str, mode: Mode | str = Mode.REACT, fmt: Fmt | str = Fmt.NATIVE,
              settings: Settings = DEFAULT_SETTINGS, system: str | None = None,
              memory: Memory = NO_MEMORY) -> State:
    """The state before line 1: history = (system prompt,), the prefix c0 of the lecture, and the
    blocks every call re-sends: exemplars, the documents retrieved for user_input, the memory."""
    mode, fmt = Mode(mode), Fmt(fmt)
    settings.check()
    history = (SystemMessage(system if system is not None else system_prompt(mode, fmt)),)
    blocks = (Block("exemplars", exemplar_block(settings.few_shot, mode, fmt)),
              Block("documents", documents_block(user_input, settings.retrieve_k) if settings.retrieve else ""),
              Block("memory", memory_block(memory)))
    return State(history, user_input, mode, fmt, settings, blocks=tuple(b for b in blocks if b.text),
                 note="ready: the context holds the system prompt")


def advertised(state: State, tools: tuple[Tool, ...]) -> tuple[Tool, ...]:
    """The tools of this run: none in CoT mode (the open-loop case); `remember` with memory on."""
    if state.mode == Mode.COT:
        return ()
    return tuple(tools) + ((REMEMBER_TOOL,) if state.settings.memory and REMEMBER_TOOL not in tools else ())


def build_prompt(state: State, tools: tuple[Tool, ...]) -> Prompt:
    """What the next model call sees, rebuilt from system + history + blocks every time."""
    fmt = Fmt.NATIVE if state.mode == Mode.COT else state.fmt
    return Prompt(state.history, advertised(state, tools), fmt, state.blocks)


def context_budget(state: State, backend: Backend) -> int:
    return budget_of(state.settings.context_budget, backend.context_window)


def budget_of(budget: int | None, window: int | None) -> int:
    """The tokens a call may use: the run's budget, never past the backend's known window.

    >>> budget_of(8192, 4096), budget_of(None, 4096), budget_of(2048, None), budget_of(None, None)
    (4096, 4096, 2048, 8192)
    """
    known = [n for n in (budget, window) if n]
    return min(known) if known else DEFAULT_CONTEXT_WINDOW


def step(state: State, backend: Backend, tools: tuple[Tool, ...], policy: Policy = DEFAULT_POLICY,
         on_token: OnToken | None = None) -> State:
    """Execute one phase of Prompt-ToolLoop and return the new state (a done state is returned as is).
    The lecture's nine lines, one branch each:"""
    if state.done:
        return state
    if state.phase == Phase.START:  # line 1: context.append(user_input)
        return replace(state, history=state.history + (UserMessage(state.user_input),),
                       phase=Phase.CALL_MODEL, lines=(LINE_APPEND_USER,), note="appended the user input")
    if state.phase == Phase.EXECUTE:  # lines 6–8: for each call: execute, append tool_result(call.id, …)
        return _execute_next(state, advertised(state, tools), policy)
    if state.step >= state.settings.max_steps:  # line 2 ran out → line 9
        return _stop(state, StopReason.STEP_BUDGET, STEP_BUDGET_TEXT, (LINE_FOR_STEP, LINE_STEP_BUDGET))
    prompt = build_prompt(state, tools)
    counts = _count(state, prompt, backend)
    if _should_compact(state, counts):  # before line 3: older turns → one summary message
        return _compact(state, backend)
    if counts.over:  # before line 3: the prompt and the reserved reply no longer fit
        text = (f"stopped: context window full ({counts.prompt_tokens} prompt + {counts.reserved} "
                f"reserved > {counts.budget} tokens)")
        return _stop(state, StopReason.CONTEXT_FULL, text, (LINE_FOR_STEP, LINE_CALL_LLM), note=text)
    state = replace(state, step=state.step + 1)  # line 2: step = 1 … MAX_STEPS
    try:  # line 3: response ← LLM(context)
        reply = backend.complete(prompt, state.settings, on_token)
    except ScriptDiverged as e:
        return _stop(state, StopReason.RECORDING_DIVERGED, f"stopped: the recording cannot follow: {e}",
                     (LINE_FOR_STEP, LINE_CALL_LLM), note=f"the recording cannot follow: {e}")
    except BackendError as e:
        return _stop(state, StopReason.BACKEND_ERROR, f"stopped: backend error: {e}",
                     (LINE_FOR_STEP, LINE_CALL_LLM), note=f"backend error: {e}")
    state = replace(state, usage=state.usage + (_usage(reply, counts.prompt_tokens, backend),),
                    replies=state.replies + (reply,), composition=state.composition + (_prompt_counts(counts),))
    return _append_response(state, reply, interpret(reply, state, prompt.tools))  # lines 4–5


def run(state: State, backend: Backend, tools: tuple[Tool, ...], max_phases: int = 200,
        policy: Policy = DEFAULT_POLICY, on_token: OnToken | None = None) -> tuple[State, ...]:
    """Step until the run stops or max_phases phases ran; every state, the given one first."""
    states = [state]
    while not states[-1].done and len(states) <= max_phases:
        states.append(step(states[-1], backend, tools, policy, on_token))
    return tuple(states)


def _stop(state: State, reason: StopReason, answer: str, lines: tuple[int, ...], **changes) -> State:
    return replace(state, phase=Phase.DONE, stop_reason=reason, final_answer=answer, lines=lines,
                   pending=(), note=changes.pop("note", f"stopped: {reason}"), **changes)


# --- the budget and compaction (before line 3) ---------------------------------------------------

def _count(state: State, prompt: Prompt, backend: Backend) -> Breakdown:
    """The prompt's tokens by category; without a tokenizer the total is the whole-string estimate."""
    counts = breakdown(prompt, backend.tokenizer, context_budget(state, backend), state.settings.max_new_tokens)
    if counts.exact:
        return counts
    return replace(counts, prompt_tokens=prompt_tokens(prompt, None))


def _prompt_counts(counts: Breakdown) -> dict[str, int]:
    return {c: n for c, n in counts.counts.items() if c not in ("reserved", "free")}


def _should_compact(state: State, counts: Breakdown) -> bool:
    at = state.settings.compact_at
    return (at is not None and counts.prompt_tokens > at * counts.budget
            and compaction.choose_cut(state.history) is not None)


def _compact(state: State, backend: Backend) -> State:
    """Replace the older turns by a summary: the backend's model writes it, or, under scripted
    replay (or when the model fails), the deterministic rule."""
    cut = compaction.choose_cut(state.history)
    segment, summary, who = state.history[cut[0]:cut[1]], None, "the rule"
    if not isinstance(backend, ScriptedBackend):
        settings = replace(state.settings, max_new_tokens=96, constrained=False, temperature=0.0)
        try:
            summary, who = backend.complete(compaction.summarize_prompt(segment), settings).text, "the model"
        except BackendError:
            summary = None
    history = compaction.compact(state.history, cut, summary)
    return replace(state, history=history, compactions=state.compactions + 1, lines=(LINE_COMPACT,),
                   note=f"compacted: {len(segment)} older messages → one summary (written by {who})")


def _usage(reply: BackendReply, counted: int, backend: Backend) -> Usage:
    """The server's or the model's own count when it has one, else ours."""
    if reply.usage is not None and reply.usage.source in ("server", "model"):
        return reply.usage
    source = "tokenizer" if backend.tokenizer is not None else "estimate"
    return Usage(counted, count_tokens(reply.text, backend.tokenizer), source)


def interpret(reply: BackendReply, state: State, tools: tuple[Tool, ...]) -> ParsedReply:
    """A reply → message fields. Text is parsed by the output format; structured calls are taken
    as they are. Either way the runtime numbers the calls call_1, call_2, … through the run."""
    n = state.next_call_number
    if reply.tool_calls is None:
        fmt = Fmt.NATIVE if state.mode == Mode.COT else state.fmt
        return parse_reply(reply.text, fmt, tools, n)
    thought, text = split_thought(reply.text)
    calls = tuple(replace(c, id=f"call_{n + i}") for i, c in enumerate(reply.tool_calls))
    if not calls and not text:
        return ParsedReply(thought=reply.thought or thought, error="the reply is empty")
    return ParsedReply(reply.thought or thought, text, calls)


def _append_response(state: State, reply: BackendReply, parsed: ParsedReply) -> State:
    """Line 4 (append), line 5 (no tool calls → return its text); a parse failure is fed back once."""
    lines = (LINE_FOR_STEP, LINE_CALL_LLM, LINE_APPEND_RESPONSE, LINE_RETURN_TEXT)
    cut = reply.finish_reason == "length"
    if parsed.error and cut:  # a call the limit cut off is no malformed call: say which it was
        parsed = replace(parsed, error=f"{parsed.error} — the reply-token limit cut the reply "
                                       f"({state.settings.max_new_tokens} tokens)")
    if parsed.error:
        message = AssistantMessage(text=reply.text, thought=parsed.thought)
        state = replace(state, history=state.history + (message,), parse_failures=state.parse_failures + 1)
        if state.parse_failures >= 2:
            return _stop(state, StopReason.NO_PARSABLE_OUTPUT, f"stopped: {StopReason.NO_PARSABLE_OUTPUT}",
                         lines, note=f"unparsable again: {parsed.error}")
        feedback = UserMessage(f"ERROR: could not parse your reply: {parsed.error}", Origin.RUNTIME)
        return replace(state, history=state.history + (feedback,), lines=lines,
                       note=f"unparsable reply, fed back: {parsed.error}")
    message = AssistantMessage(parsed.text, parsed.thought, parsed.tool_calls)
    state = replace(state, history=state.history + (message,), parse_failures=0,
                    next_call_number=state.next_call_number + len(parsed.tool_calls))
    if not parsed.tool_calls and cut:  # the lecture's call-level stop reasons: length is not stop
        reason = StopReason.TOKEN_LIMIT_SERVER if reply.from_server else StopReason.TOKEN_LIMIT
        return _stop(state, reason, f"stopped: {reason}", lines,
                     note=f"the reply ran to its {state.settings.max_new_tokens}-token limit: cut, not an answer")
    if not parsed.tool_calls:
        return _stop(state, StopReason.FINAL_ANSWER, parsed.text, lines, note="a text-only turn: the answer")
    names = ", ".join(c.name for c in parsed.tool_calls)
    limit = (f" — the {state.settings.max_new_tokens}-token reply limit cut the reply: its last call may be "
             "incomplete" if cut else "")
    return replace(state, phase=Phase.EXECUTE, pending=parsed.tool_calls, lines=lines,
                   note=f"the model requested {len(parsed.tool_calls)} tool call(s): {names}{limit}")


def execute(call: ToolCall, tools: tuple[Tool, ...], policy: Policy = DEFAULT_POLICY) -> tuple[ResultKind, str]:
    """Line 7: the three checks, then policy, then the tool; every failure becomes a result."""
    verdict = validate_call(call, tools)
    if not verdict.ok:
        return ResultKind.VALIDATION_ERROR, verdict.message
    refusal = check_policy(call.name, verdict.arguments, policy)
    if refusal:
        return ResultKind.POLICY_REFUSAL, refusal
    try:
        return ResultKind.OK, str(verdict.tool.function(**verdict.arguments))
    except Exception as e:  # the lecture's catch e: any tool failure is an observation, not a crash
        return ResultKind.TOOL_ERROR, "ERROR: " + (str(e) or e.__class__.__name__)


def _execute_next(state: State, tools: tuple[Tool, ...], policy: Policy) -> State:
    """Lines 6–8 for the next pending call; after the turn's last call, back to line 2 (or stop
    when finish[answer] was called in this turn, or the same call came a third time in a row)."""
    call, rest = state.pending[0], state.pending[1:]
    repeats = repeated(state.history, call)
    kind, content = execute(call, tools, policy) if not repeats else (ResultKind.VALIDATION_ERROR, (
        f"ERROR: repeated call: {call.name} was just called with the same arguments; its result is "
        "above. Use it, or call something else."))
    result = ToolResultMessage(call.id, content, kind)
    finished = content if call.name == FINISH and kind == ResultKind.OK else state.finished
    lines = (LINE_FOR_CALL, LINE_EXECUTE, LINE_APPEND_RESULT)
    state = replace(state, history=state.history + (result,), pending=rest, finished=finished,
                    note=f"{call.name} ({call.id}) → {kind}" + (" (repeated call)" if repeats else ""))
    if repeats >= 2:
        return _stop(state, StopReason.REPETITION, f"stopped: {StopReason.REPETITION} ({call.name})", lines,
                     history=state.history + tuple(ToolResultMessage(c.id, "ERROR: not run: the run stopped",
                                                                     ResultKind.VALIDATION_ERROR) for c in rest))
    if rest:
        return replace(state, lines=lines)
    if finished is not None:
        return _stop(state, StopReason.FINISH, finished, lines, note="finish[answer] ends the run")
    return replace(state, phase=Phase.CALL_MODEL, lines=lines)


def _same(a: ToolCall, b: ToolCall) -> bool:
    """Same tool, same arguments (as JSON values when they parse: key order and spaces do not count)."""
    def value(arguments: str) -> object:
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return a.name == b.name and value(a.arguments) == value(b.arguments)


def repeated(history: tuple[Message, ...], call: ToolCall) -> int:
    """How many calls right before `call` (in the order they were made) are the same call.

    >>> c = lambda i: ToolCall(f"call_{i}", "search", '{"query": "Ulysses"}')
    >>> h = (AssistantMessage(tool_calls=(c(1),)), ToolResultMessage("call_1", "…"),
    ...      AssistantMessage(tool_calls=(c(2),)))
    >>> repeated(h, c(2)), repeated(h, c(1))
    (1, 0)
    """
    calls = [c for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls]
    before = calls[:next((i for i, c in enumerate(calls) if c.id == call.id), len(calls))]
    n = 0
    for previous in reversed(before):
        if not _same(previous, call):
            break
        n += 1
    return n
