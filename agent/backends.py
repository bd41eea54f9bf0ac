"""LLM backends: the `LLM(context)` of the loop's line 3, behind one protocol.

    complete(prompt, settings, on_token=None) -> BackendReply(text, tool_calls, usage, …)

What it knows: ways to answer one model call —
  ScriptedBackend  replays recorded replies (assets/runs/*.json, see agent.recording), so a
                   lecture demo is identical every time. Reply i answers the call that already
                   holds i assistant turns, so stepping back and forth replays the same reply.
  LocalBackend     the bundled model (agent.llm.model): the prompt rendered through its chat
                   template, then token by token by agent.llm.generation (agent.sampling, optionally
                   masked by a grammar from agent.constraints), streamed through on_token; it
                   stops at EOS / <|im_end|>, a stop sequence (agent.stops), max_new_tokens or a time limit.
                   With settings.constrained, the native format's whole assistant turn follows
                   agent.turn_grammar (a tool call first, later a call or the answer).
  (the third, an OpenAI-compatible server behind the outgoing-request guard, is agent.llm.remote.)
A BackendError (unreachable, timed out, malformed reply) becomes the loop's stop reason
"backend error".
A reply with tool_calls None is text that the loop parses (agent.parsing.parse_reply); a reply
with a tuple of tool_calls came structured from an API.

What it does not know: the loop, validation, or how tools run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from agent import stops
from agent.budget import Usage
from agent.messages import Origin, ToolCall, ToolResultMessage, UserMessage, model_turns
from agent.settings import Settings  # noqa: F401 (re-exported: `from agent.backends import Settings`)
from agent.stops import END_OF_TURN
from agent.template import COT_PROMPT, SYSTEM_PROMPTS, Fmt, Mode, Prompt, render_prompt, stop_sequences
from agent.turn_grammar import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, react_turn_grammar, turn_grammar

OnToken = Callable[[str], None]


class BackendError(Exception):
    """The backend could not answer (unreachable, timed out, HTTP error, malformed reply)."""


class ScriptDiverged(BackendError):
    """A recording's next reply was written after a different tool result than this run's (a call
    the visitor denied that the recording ran, or the other way round): it cannot follow."""


@dataclass(frozen=True)
class BackendReply:
    """One model call's answer: raw text, and structured tool calls when an API returned them."""

    text: str
    tool_calls: tuple[ToolCall, ...] | None = None  # None: parse `text` by the output format
    thought: str = ""
    usage: Usage | None = None
    finish_reason: str = "stop"  # stop | length | time | tool_calls
    from_server: bool = False  # finish_reason is a server's own word (agent.llm.remote)

    def to_dict(self) -> dict:
        d: dict = {"text": self.text, "finish_reason": self.finish_reason}
        if self.tool_calls is not None:
            d["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.thought:
            d["thought"] = self.thought
        if self.usage is not None:
            d["usage"] = asdict(self.usage)
        if self.from_server:
            d["from_server"] = True
        return d

    @staticmethod
    def from_dict(d: dict) -> BackendReply:
        calls = d.get("tool_calls")
        return BackendReply(
            text=d.get("text", ""),
            tool_calls=None if calls is None else tuple(ToolCall.from_dict(c) for c in calls),
            thought=d.get("thought", ""),
            usage=Usage(**d["usage"]) if d.get("usage") else None,
            finish_reason=d.get("finish_reason", "stop"), from_server=bool(d.get("from_server")))


class Backend(Protocol):
    name: str
    tokenizer: object | None  # for exact token counts; None → estimates
    context_window: int | None

    def complete(self, prompt: Prompt, settings: Settings, on_token: OnToken | None = None) -> BackendReply:
        ...


def _stream_words(text: str, on_token: OnToken | None) -> None:
    if on_token is None:
        return
    import re
    for piece in re.findall(r"\s*\S+|\s+$", text):
        on_token(piece)


@dataclass(frozen=True)
class ScriptedBackend:
    """Replays recorded replies: reply i answers the model call that already holds i assistant turns
    (counting those a compaction summary replaced)."""

    replies: tuple[BackendReply, ...]
    tokenizer: object | None = None
    context_window: int | None = None
    name: str = "scripted"
    recorded: tuple = ()  # the recording's history: where a tool result differs, the replay stops

    def complete(self, prompt: Prompt, settings: Settings, on_token: OnToken | None = None) -> BackendReply:
        i = model_turns(prompt.messages)
        if i >= len(self.replies):
            raise BackendError(f"the script has no reply #{i + 1}: it holds {len(self.replies)}")
        why = diverged(prompt.messages, self.recorded)
        if why:
            raise ScriptDiverged(why)
        reply = self.replies[i]
        _stream_words(reply.text, on_token)
        return reply


def diverged(history: Sequence, recorded: Sequence) -> str:
    """Why a recording's later replies cannot follow `history` ("" when they can): a tool result
    whose kind (ok, policy refusal, error …) differs from the recording's result for the same id.

    >>> ran, refused = ToolResultMessage("call_1", "15°C"), ToolResultMessage("call_1", "POLICY: …", "policy_refusal")
    >>> diverged([refused], [ran])[:74]
    'call_1 was recorded with the result ok, and here it is policy_refusal: the'
    >>> diverged([ran], [ran])
    ''
    """
    kinds = {m.tool_call_id: str(m.kind) for m in recorded if isinstance(m, ToolResultMessage)}
    for m in history:
        if isinstance(m, ToolResultMessage) and kinds.get(m.tool_call_id, str(m.kind)) != str(m.kind):
            return (f"{m.tool_call_id} was recorded with the result {kinds[m.tool_call_id]}, and here it is "
                    f"{m.kind}: the recording's next reply was written for the other result and cannot "
                    "follow this choice; a model backend reads it and answers on its own")
    return ""


# --- the local model -----------------------------------------------------------------------------

class LocalBackend:
    """The bundled model through agent.llm.model, token by token with agent.llm.generation / agent.sampling.

    Its replies share the model's forward passes with every other session (agent/llm/batching.py).
    ``cancel``: a threading.Event that stops the reply at its next token (the page's Stop sets it;
    so does ``model.stop(session)``). ``session``: whose KV cache the replies reuse — by default
    the session of the event that creates the backend, captured here because the reply may run in
    another thread, where the event is not known. ``weights``: "base" or a trajectory-tuned choice
    (agent.llm.weights) — the same loop, the same checks, other weights.
    """

    def __init__(self, model, name: str | None = None, cancel=None, session=None, weights: str = "base"):
        from agent.llm.batching import current_session

        self.model = model
        self.tokenizer = model.tokenizer
        self.context_window = int(model.context_window)
        self.weights = model.checked_weights(weights)
        self.name = name or f"local: {model.name}" + ("" if weights == "base" else f" ({weights})")
        self.cancel = cancel
        self.session = session if session is not None else current_session()

    def complete(self, prompt: Prompt, settings: Settings, on_token: OnToken | None = None) -> BackendReply:
        import numpy as np

        from agent.llm import generation
        from agent.sampling import SamplingConfig

        config = SamplingConfig(temperature=settings.temperature, top_k=settings.top_k,
                                top_p=settings.top_p, min_p=settings.min_p)
        prefix, closing, grammar = self._grammar(prompt, settings)
        ids = self.model.encode(render_prompt(self.tokenizer, prompt) + prefix)
        self._share_public_prefix(prompt, ids)
        stream = _Stream(stop_sequences(prompt.fmt) + (END_OF_TURN,), on_token, prefix)
        try:
            out = generation.generate(
                self.model, ids, config, np.random.default_rng([settings.seed, len(ids)]),  # same prompt, same draws
                grammar=grammar, max_new_tokens=settings.max_new_tokens, stop=stream.stops,
                time_limit=settings.timeout_s, on_token=lambda _id, text: stream.update(text),
                cancel=self.cancel, session=self.session, weights=self.weights)
        except (ValueError, RuntimeError) as e:  # a full context window, a refused token, batching.Busy
            raise BackendError(f"{e.__class__.__name__}: {e}") from e
        reason = _FINISH_REASONS.get(out.stop_reason, "stop")
        stream.update(out.text)
        text = stream.finish()
        if closing and reason == "stop" and _open_call(text):  # the grammar ended inside the call
            text += closing
            if on_token is not None:
                on_token(closing)
        return BackendReply(text, None, usage=Usage(len(ids), len(out.ids), "model"), finish_reason=reason)

    def _share_public_prefix(self, prompt: Prompt, ids: list[int]) -> None:
        """Every session's first call re-sends the same shipped system turn (the system prompt and
        the tool schemas: ~510 tokens of a ~600-token prompt). Its KV is cached once for every
        visitor (model.share_prefix), so a class's replies prefill only their own question. Only
        shipped content is shared (public_prompt), never what a visitor typed or remembered."""
        public = public_prompt(prompt)
        if public is None:
            return
        shared = self.model.encode(render_prompt(self.tokenizer, public))
        n = 0
        while n < min(len(shared), len(ids) - 1) and shared[n] == ids[n]:
            n += 1
        if n >= MIN_SHARED_PREFIX:
            self.model.share_prefix(ids[:n], weights=self.weights)

    @staticmethod
    def _grammar(prompt: Prompt, settings: Settings):
        """(forced prefix, closing text, Grammar or None) for this call. Native: `turn_grammar`,
        whose call ends with its JSON; the runtime writes the </tool_call> after it. React: the
        Thought / Action {json} / Final Answer format of agent.constraints, which parse_reply reads."""
        if not settings.constrained or not prompt.tools:
            return "", "", None
        required = not observed(prompt)
        if Fmt(prompt.fmt) == Fmt.REACT_TEXT:  # the Action: tool[argument] form its prompt teaches
            return "", "", react_turn_grammar(prompt.tools, call_required=required)
        return "", TOOL_CALL_CLOSE, turn_grammar(prompt.tools, call_required=required)


MIN_SHARED_PREFIX = 64  # tokens: a shorter common system turn is not worth a shared cache entry
_SHIPPED_SYSTEM = {text: key for key, text in SYSTEM_PROMPTS.items()} | {COT_PROMPT: (Mode.COT, Fmt.NATIVE)}


def public_prompt(prompt: Prompt) -> Prompt | None:
    """The system turn of `prompt` if every visitor can see it — the shipped system prompt, shipped
    tools and shipped exemplars; None if a visitor could have written any of it (a custom system
    prompt, an MCP server's tools). Documents (retrieved for the question) and memory are private:
    they are left out, so the shared part ends before them.

    >>> from agent.messages import SystemMessage, UserMessage
    >>> from agent.tools import TOOLS
    >>> p = Prompt((SystemMessage(SYSTEM_PROMPTS[(Mode.REACT, Fmt.NATIVE)]), UserMessage("hi")), TOOLS)
    >>> public_prompt(p).messages == p.messages[:1]
    True
    >>> public_prompt(Prompt((SystemMessage("my own rules"), UserMessage("hi")), TOOLS)) is None
    True
    """
    from agent.context.exemplars import EXEMPLARS, exemplar_block
    from agent.context.memory import REMEMBER_TOOL
    from agent.messages import SystemMessage
    from agent.tools import ALL_TOOLS

    if not prompt.messages or not isinstance(prompt.messages[0], SystemMessage):
        return None
    mode_fmt = _SHIPPED_SYSTEM.get(prompt.messages[0].content)
    if mode_fmt is None or any(t not in ALL_TOOLS + (REMEMBER_TOOL,) for t in prompt.tools):
        return None
    shipped = {exemplar_block(n, *mode_fmt) for n in range(1, len(EXEMPLARS) + 1)}
    blocks = []
    for b in prompt.blocks:
        if b.category != "exemplars" or b.text not in shipped:
            break  # what follows renders after a private block: not shared
        blocks.append(b)
    return Prompt(prompt.messages[:1], prompt.tools, prompt.fmt, tuple(blocks))


def observed(prompt: Prompt) -> bool:
    """Whether a tool result came back since the user's last message (the runtime's own "ERROR:
    could not parse" notes do not count as the user's): False for the first model call of a task.

    >>> from agent.messages import UserMessage, ToolResultMessage
    >>> observed(Prompt((UserMessage("q"),))), observed(Prompt((UserMessage("q"), ToolResultMessage("call_1", "12°C"))))
    (False, True)
    """
    for m in reversed(prompt.messages):
        if isinstance(m, ToolResultMessage):
            return True
        if isinstance(m, UserMessage) and m.origin == Origin.USER:
            return False
    return False


def _open_call(text: str) -> bool:
    return text.rfind(TOOL_CALL_OPEN) > text.rfind(TOOL_CALL_CLOSE)


# agent.llm.generation → OpenAI words
_FINISH_REASONS = {"max new tokens": "length", "time limit": "time", "cancelled": "cancelled"}


class _Stream:
    """Decoded text so far; emits new text through on_token, holding back what could still turn
    into a stop sequence (or an unfinished UTF-8 character), and cuts at the first stop."""

    def __init__(self, stops: Sequence[str], on_token: OnToken | None, prefix: str = ""):
        self.stops, self.on_token, self.prefix = tuple(stops), on_token, prefix
        self.text, self.sent = "", 0
        if prefix and on_token:
            on_token(prefix)

    def update(self, decoded: str) -> bool:
        """Take the whole decoded reply so far; True when it reached a stop sequence."""
        self.text, hit = stops.cut(decoded, self.stops)
        self._emit(len(self.text) if hit else len(self.text) - stops.held_back(self.text, self.stops))
        return hit

    def _emit(self, upto: int) -> None:
        if upto > self.sent and self.on_token:
            self.on_token(self.text[self.sent:upto])
        self.sent = max(self.sent, upto)

    def finish(self) -> str:
        self._emit(len(self.text))
        return self.prefix + self.text
