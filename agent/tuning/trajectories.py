"""Trajectories without an annotator (lecture, "In-Context Learning vs. Post-Training for ReAct").

One training example is a trajectory: the instruction, then the turns of thought, action and
observation, then the answer. Here an `Oracle` — a Backend that writes each assistant turn by rule
from the task and the observations it has seen — runs through the REAL loop (agent.loop) with the
REAL tools (agent.tools), so every observation is what the tools return. Each run is kept twice:
with a "Thought: …" line before every call, and without it (the lecture's ablation: the same runs,
the thought removed).

    task = Task("weather", "weather/0", ("Berlin",), "What's the weather in Berlin?", seed=1)
    record = oracle_run(task, thoughts=True)      # replies, observations, answer
    text, spans = render_run(record, tokenizer)    # the string the ReAct tab sends + trained spans

What it knows: the task kinds (agent.tuning.task_bank), the oracle's rules, the runs as JSONL records, a
run replayed through the loop, its rendering as ONE sequence (the prompt of the last call + the
final reply) with the character spans of the assistant turns that carry the loss (each turn's
reply + <|im_end|>), and the judge of an answer.

What it does not know: tokens, torch, training, or Gradio.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from agent import loop
from agent.backends import BackendReply, OnToken, ScriptedBackend
from agent.formats import Fmt, Mode
from agent.messages import AssistantMessage, ResultKind, ToolCall, ToolResultMessage, UserMessage
from agent.settings import Settings
from agent.stops import END_OF_TURN
from agent.template import Prompt, call_text, render_prompt
from agent.tools import TOOLS, Article, Tool, library_world, weather_world

DATA_DIR = Path(__file__).resolve().parents[2] / "assets" / "trajectories"
MODE, FMT = Mode.REACT, Fmt.NATIVE  # the ReAct tab's ReAct mode with native tool calls
SETTINGS = Settings()  # no exemplars, no constrained decoding, T = 0


@dataclass(frozen=True)
class Task:
    """One question: its kind, the phrasing template and entities it was made from, and a seed
    that picks the oracle's wording (thoughts, answers) deterministically."""

    kind: str
    template: str  # e.g. "weather/3": kind/index of the phrasing
    entities: tuple[str, ...]
    question: str
    seed: int = 0
    facts: dict = field(default_factory=dict, compare=False)  # what the rules need (an expression, a bad call)


@dataclass(frozen=True)
class Seen:
    """One observation the oracle has seen: the call and its result."""

    name: str
    arguments: dict
    content: str
    kind: ResultKind


@dataclass(frozen=True)
class Turn:
    """What the oracle writes in one assistant turn: a thought, calls (name, arguments), or the answer."""

    thought: str = ""
    calls: tuple[tuple[str, dict], ...] = ()
    answer: str = ""
    trained: bool = True  # False for the deliberate bad call of a repair run: in the context, not in the loss


def reply_text(turn: Turn, thoughts: bool) -> str:
    """The turn as the model writes it in the native format: "Thought: …", then one
    <tool_call> per line (agent.template renders an AssistantMessage the same way), or the answer."""
    if turn.answer:
        return turn.answer
    calls = [call_text(ToolCall("", name, json.dumps(args, ensure_ascii=False)), FMT) for name, args in turn.calls]
    return "\n".join(([f"Thought: {turn.thought}"] if thoughts and turn.thought else []) + calls)


def observations(prompt: Prompt) -> tuple[Seen, ...]:
    """The calls since the user's question and their results, in order."""
    calls: dict[str, ToolCall] = {}
    seen: list[Seen] = []
    for m in prompt.messages:
        if isinstance(m, UserMessage):
            calls, seen = {}, []
        elif isinstance(m, AssistantMessage):
            calls.update({c.id: c for c in m.tool_calls})
        elif isinstance(m, ToolResultMessage) and m.tool_call_id in calls:
            c = calls[m.tool_call_id]
            seen.append(Seen(c.name, json.loads(c.arguments), m.content, m.kind))
    return tuple(seen)


@dataclass(frozen=True)
class Oracle:
    """A Backend that writes each turn by rule (agent.tuning.task_bank.next_turn) from the task and the
    observations in its prompt; the loop executes its calls with the real tools."""

    task: Task
    thoughts: bool = True
    name: str = "oracle"
    tokenizer: object | None = None
    context_window: int | None = None

    def complete(self, prompt: Prompt, settings: Settings, on_token: OnToken | None = None) -> BackendReply:
        from agent.tuning.task_bank import next_turn

        return BackendReply(reply_text(next_turn(self.task, observations(prompt)), self.thoughts))


def tools_of(world: dict) -> tuple[Tool, ...]:
    """The real tools, in the run's own world when it has one (a training run's facts or record):
    get_weather on its own table of readings ("weather", task_bank.world), search and lookup over
    the encyclopedia plus its invented book and author ("library", task_bank.library). Held-in and
    held-out questions use the demo's tools."""
    tools = weather_world(world["weather"]) if world.get("weather") else TOOLS
    if world.get("library"):
        tools = library_world(tuple(Article(a["title"], a["text"]) for a in world["library"]), tools)
    return tools


def start(question: str, settings: Settings = SETTINGS) -> loop.State:
    """The state the ReAct tab starts a typed task from: ReAct mode, native tool calls."""
    return loop.new_state(question, MODE, FMT, settings)


def oracle_run(task: Task, thoughts: bool = True) -> dict:
    """Run the oracle through the real loop; the run as a JSONL record."""
    from agent.tuning.task_bank import next_turn

    tools = tools_of(task.facts)
    states = loop.run(start(task.question), Oracle(task, thoughts), tools)
    final = states[-1]
    if final.stop_reason != loop.StopReason.FINAL_ANSWER:
        raise RuntimeError(f"the oracle's run of {task.question!r} stopped: {final.stop_reason}")
    prompts = [loop.build_prompt(s, tools) for s in states if s.phase == loop.Phase.CALL_MODEL and not s.done]
    turns = [next_turn(task, observations(p)) for p in prompts[:len(final.replies)]]
    record = {"id": f"{task.template}:{'|'.join(task.entities)}:{task.seed}", "kind": task.kind,
              "template": task.template, "entities": list(task.entities), "question": task.question,
              "seed": task.seed, "thoughts": thoughts, "replies": [r.text for r in final.replies],
              "trained": [t.trained for t in turns],
              "observations": [m.content for m in final.history if isinstance(m, ToolResultMessage)],
              "calls": [{"name": c.name, "arguments": json.loads(c.arguments)}
                        for m in final.history if isinstance(m, AssistantMessage) for c in m.tool_calls],
              "answer": final.final_answer}
    for world in ("weather", "library"):  # the run's own world: replay() executes its calls in it again
        if task.facts.get(world):
            record[world] = task.facts[world]
    return record


@dataclass
class _Capture:
    """A scripted backend that keeps every prompt it was asked to complete."""

    inner: ScriptedBackend
    prompts: list = field(default_factory=list)
    name: str = "capture"
    tokenizer: object | None = None
    context_window: int | None = None

    def complete(self, prompt: Prompt, settings: Settings, on_token: OnToken | None = None) -> BackendReply:
        self.prompts.append(prompt)
        return self.inner.complete(prompt, settings, on_token)


def replay(record: dict) -> tuple[tuple[loop.State, ...], list[Prompt]]:
    """The record's replies replayed through the real loop and tools: (states, each call's prompt)."""
    backend = _Capture(ScriptedBackend(tuple(BackendReply(t) for t in record["replies"])))
    return loop.run(start(record["question"]), backend, tools_of(record)), backend.prompts


def render_run(record: dict, tokenizer) -> tuple[str, tuple[tuple[int, int], ...]]:
    """ONE sequence for the whole run — the prompt of the last call, the final reply, <|im_end|> —
    and the character spans [start, end) of the trained assistant turns, each reply + <|im_end|>.
    Raises ValueError when a turn's prompt is not a prefix of the sequence (then one sequence per
    run would train on a context the model never sees)."""
    _, prompts = replay(record)
    rendered = [render_prompt(tokenizer, p) for p in prompts]
    text = rendered[-1] + record["replies"][-1] + END_OF_TURN
    spans = []
    for prefix, reply, trained in zip(rendered, record["replies"], record["trained"], strict=True):
        target = reply + END_OF_TURN
        if not text.startswith(prefix) or text[len(prefix):len(prefix) + len(target)] != target:
            raise ValueError(f"the prompt of a turn of {record['id']} is not a prefix of the run's sequence")
        if trained:
            spans.append((len(prefix), len(prefix) + len(target)))
    return text, tuple(spans)


# --- the judge ------------------------------------------------------------------------------------

_HONEST = re.compile(r"\b(no data|not know|don't know|do not know|cannot|can't|unknown|no weather|"
                     r"not available|doesn't have|does not have|not in)\b", re.I)



MASKED = -100  # the label of a token that carries no loss (torch's cross-entropy ignore_index)


def encode_run(record: dict, tokenizer) -> tuple[list[int], list[int]]:
    """A run as training sees it: render_run's sequence as token ids, and a label per token — its id
    when the token starts inside a trained span (an assistant turn with its <|im_end|>), else MASKED."""
    text, spans = render_run(record, tokenizer)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    labels = [t if any(s <= a < e for s, e in spans) else MASKED
              for t, (a, _) in zip(ids, enc["offset_mapping"], strict=True)]
    return ids, labels

def _holds(text: str, s: str, in_words: bool = False) -> bool:
    """`s` in `text`, case-blind; a number only as a whole number ("1" is not in "14°C"), and with
    ``in_words`` also as its word ("3": "three"; a fact the model knows, not a tool's figure it
    must quote); "hello" also as any other greeting ("Hi! How can I help you?")."""
    if re.fullmatch(r"-?\d+(?:\.\d+)?", s):
        if in_words and s in _NUMBER_WORDS and re.search(rf"\b{_NUMBER_WORDS[s]}\b", text):
            return True
        return re.search(rf"(?<![\d.]){re.escape(s)}(?!\d|\.\d)", text) is not None
    if s.casefold() == "hello":
        return re.search(_GREETING, text) is not None
    return s.casefold() in text


_NUMBER_WORDS = {str(n): w for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())} | {"24": "twenty[- ]four", "60": "sixty"}  # the facts' numbers
_GREETING = r"\b(?:hello|hi|hey|greetings|good (?:morning|afternoon|evening|day))\b"


_SAME_AS = {"warmer": ("warmer", "hotter", "less cold"), "colder": ("colder", "cooler", "chillier", "less warm")}


def _names_the_lead(text: str, lead: dict) -> bool:
    """A comparison's answer names the right city: never "<other> is warmer", and either "<lead> is
    warmer" or the lead city named first ("Berlin is warmer: … in Rome" is wrong when Rome is)."""
    city, other = lead["city"].casefold(), lead["other"].casefold()
    words = _SAME_AS[lead["word"]]
    if any(f"{other} is {w}" in text for w in words):
        return False
    if any(f"{city} is {w}" in text for w in words):
        return True
    named = [(text.find(c), c) for c in (city, other) if c in text]
    return bool(named) and min(named)[1] == city


def judge_answer(expected: dict, answer: str | None) -> bool:
    """Whether the answer holds every required string (case-blind) and none of the forbidden ones;
    an unknown entity's answer must also say honestly that it is not known, and a comparison's
    answer must name the right city as warmer or colder (`lead`)."""
    text = (answer or "").casefold()
    if not all(_holds(text, s, in_words=expected.get("no_tool", False)) for s in expected.get("must_contain", ())):
        return False
    if any(_holds(text, s) for s in expected.get("must_not_contain", ())):
        return False
    if "lead" in expected and not _names_the_lead(text, expected["lead"]):
        return False
    return not expected.get("honest") or bool(_HONEST.search(text))


def _folded(arguments: str | dict) -> dict | None:
    """A call's arguments (a JSON text or a dict) with its strings case-folded; None if not an object."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    return {k: v.casefold() if isinstance(v, str) else v for k, v in arguments.items()} \
        if isinstance(arguments, dict) else None


def judge_run(expected: dict, final: loop.State) -> dict:
    """success through the tools: the right answer AND each needed tool called with a result
    (an unknown city: the tool's error reached the model; no tool needed: no call made)."""
    results = {m.tool_call_id: m for m in final.history if isinstance(m, ToolResultMessage)}
    calls = [c for m in final.history if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = final.stop_reason == loop.StopReason.FINAL_ANSWER and judge_answer(expected, final.final_answer)
    ok = {c.name for c in calls if c.id in results and results[c.id].kind == ResultKind.OK}
    reached = {c.name for c in calls if c.id in results and results[c.id].kind != ResultKind.VALIDATION_ERROR}
    needs = set(expected.get("needs", ()))
    used = needs <= (reached if expected.get("honest") else ok)
    if expected.get("honest"):  # the error must be about the place asked: "Zurica" is not Zurich
        made = [_folded(c.arguments) for c in calls]
        used = used and all(_folded(c["arguments"]) in made for c in expected.get("calls", ()))
    if expected.get("no_tool"):
        used = not calls
    return {"success": bool(answered and used), "answer_right": answered, "tools_used": used}


def read_jsonl(path: Path | str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path | str, rows: list[dict]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path

