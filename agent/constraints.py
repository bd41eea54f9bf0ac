"""Constrained decoding (lecture, Part I "Constrained Decoding"): a grammar → the set A(s_t).

What it does: compiles a grammar — a list of choices, a regular expression, a JSON Schema or a
Lark context-free grammar — with llguidance, and follows one continuation token by token. At
each step t the parser state s_t gives the allowed set A(s_t) ⊆ V as a boolean mask over the
whole vocabulary; `masked_probs` is the lecture's P' = 1[i ∈ A(s_t)] P / Σ_{j ∈ A(s_t)} P_j.
Each chosen token is checked against the mask *before* the parser consumes it (a refused
token in llguidance leaves its matcher in a permanent error state), and Back is a rollback.
Where the grammar forces text, A(s_t) holds only the token the tokenizer itself would write
for it: at the start of a tool call `{"` is allowed and `{` alone is not, although the
parser could go on from `{`.

What it does not know: logits, temperature, top-k/top-p (agent/sampling.py applies the mask
first, then the rest), chat messages, or the UI. It touches the model only through its
tokenizer, to build llguidance's token table once per model (`tokenizer_info`).

>>> c = constraint_for(PRESETS["yes / no / maybe"], lm, lm.encode("may"))
>>> c.state().forced_text, c.is_accepting()
('be', False)
"""

from __future__ import annotations

import json
import operator
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import llguidance
import llguidance.hf
import llguidance.numpy
import numpy as np

from agent.tools import TOOLS

GRAMMAR_KINDS: tuple[str, ...] = ("choice", "regex", "json_schema", "lark")
# JSON as json.dumps writes it: one fixed separator style instead of free whitespace, so a
# small model cannot drift into newlines and indentation, and the forced text is longer
# (after `{` the bytes `"name": "` are forced).
JSON_FORMAT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
MATCHERS_PER_MODEL = 32  # compiled, untouched matchers kept per model (each is copied in ~1 µs)


class GrammarError(ValueError):
    """The grammar does not compile; the message is llguidance's own, after the grammar kind."""


class ConstraintViolation(ValueError):
    """A token outside A(s_t) was offered; the constraint is unchanged."""

    def __init__(self, message: str, token_id: int, step: int):
        super().__init__(message)
        self.token_id = token_id
        self.step = step


@dataclass(frozen=True)
class Grammar:
    """A grammar as the UI holds it.

    kind: "choice" (one option per line, taken verbatim: " Paris" and "Paris" are different
    tokens), "regex", "json_schema" (JSON text) or "lark" (llguidance's Lark dialect).
    """

    kind: str
    source: str
    name: str = ""  # preset name shown in the UI


@dataclass(frozen=True)
class ConstraintState:
    """A summary of the parser state s_t after `n_tokens` tokens."""

    grammar_name: str
    n_tokens: int  # tokens consumed, an end-of-sequence token included
    text: str  # the generated text inside the grammar (end-of-sequence left out)
    accepting: bool  # the text so far is a complete sentence of the grammar
    stopped: bool  # nothing may follow but end-of-sequence
    ended: bool  # an end-of-sequence token was consumed
    n_allowed: int  # |A(s_t)|
    forced_bytes: bytes  # bytes every valid continuation starts with (llguidance's ff bytes)
    forced_text: str
    error: str  # llguidance's error text; "" while the matcher is healthy


# --- compiling ------------------------------------------------------------------------------


def _choice_lark(source: str) -> str:
    """'yes\\nno' → 'start: "yes" | "no"' (JSON string syntax is valid Lark string syntax)."""
    options = [line.removesuffix("\r") for line in source.split("\n")]
    options = list(dict.fromkeys(o for o in options if o))  # drop empty lines and repeats
    if not options:
        raise GrammarError("choice grammar: no options; write one option per line")
    return "start: " + " | ".join(json.dumps(o, ensure_ascii=False) for o in options)


def _convert(kind: str, source: str) -> str:
    if kind == "choice":
        return llguidance.LLMatcher.grammar_from_lark(_choice_lark(source))
    if kind == "regex":
        return llguidance.LLMatcher.grammar_from_regex(source)
    if kind == "json_schema":
        return llguidance.LLMatcher.grammar_from_json_schema(source, defaults=JSON_FORMAT)
    if kind == "lark":
        return llguidance.LLMatcher.grammar_from_lark(source)
    raise GrammarError(f"unknown grammar kind {kind!r}; choose one of {', '.join(GRAMMAR_KINDS)}")


def _grammar_error(grammar: Grammar, message: str) -> GrammarError:
    return GrammarError(f"{grammar.kind} grammar: {message.strip()}")


@lru_cache(maxsize=256)
def grammar_text(grammar: Grammar) -> str:
    """The llguidance grammar string, not yet validated (µs; the matcher validates it anyway)."""
    try:
        return _convert(grammar.kind, grammar.source)
    except GrammarError:
        raise
    except ValueError as exc:  # grammar_from_json_schema: bad JSON, or not an object
        raise _grammar_error(grammar, str(exc)) from exc


def compile_grammar(grammar: Grammar) -> str:
    """The validated llguidance grammar string; GrammarError carries llguidance's message.

    Needs no model: a UI can check a grammar as it is typed (1–5 ms).
    >>> compile_grammar(Grammar("regex", "("))
    Traceback (most recent call last):
    GrammarError: regex grammar: at 1(8): invalid regex "(" (in regex): ... unclosed group ...
    """
    text = grammar_text(grammar)
    error = llguidance.LLMatcher.validate_grammar(text)
    if error:
        raise _grammar_error(grammar, error)
    return text


# --- per model: the token table and compiled matchers (shared by all sessions) ----------------

_LOCK = threading.RLock()
_TOKENIZERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MATCHERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def tokenizer_info(lm) -> llguidance.LLTokenizer:
    """llguidance's token table for a model, built once (~1 s) and shared; thread-safe.

    Its end-of-sequence token is the tokenizer's own (SmolLM2-Instruct: <|im_end|> = 2, the
    end of a chat-template turn) when that is one of lm.eos_token_ids.
    """
    with _LOCK:
        info = _TOKENIZERS.get(lm)
        if info is None:
            eos = lm.tokenizer.eos_token_id
            if eos not in lm.eos_token_ids and lm.eos_token_ids:
                eos = min(lm.eos_token_ids)
            info = llguidance.hf.from_tokenizer(lm.tokenizer, n_vocab=lm.vocab_size, eos_token=eos)
            _TOKENIZERS[lm] = info
        return info


def _fresh_matcher(grammar: Grammar, lm) -> llguidance.LLMatcher:
    """A matcher at s_0: a copy (~1 µs) of the cached compiled one (compiling: 0.5–7 ms)."""
    text = grammar_text(grammar)
    tokenizer = tokenizer_info(lm)
    with _LOCK:
        cache = _MATCHERS.setdefault(lm, OrderedDict())
        matcher = cache.get(grammar)
        if matcher is None:
            matcher = llguidance.LLMatcher(tokenizer, text, log_level=0)
            if matcher.is_error():
                raise _grammar_error(grammar, matcher.get_error())
            cache[grammar] = matcher
            while len(cache) > MATCHERS_PER_MODEL:
                cache.popitem(last=False)
        cache.move_to_end(grammar)
        return matcher.deep_copy()


def unpack_bitmask(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    """llguidance's packed mask (int32 words, bit i of word w = token 32w + i) → (V,) bool.

    >>> unpack_bitmask(np.array([5], dtype=np.int32), 4).tolist()
    [True, False, True, False]
    """
    words = np.ascontiguousarray(bitmask, dtype="<i4").reshape(-1)  # little-endian words
    bits = np.unpackbits(words.view(np.uint8), bitorder="little", count=vocab_size)
    return bits.view(np.bool_)


# --- following one continuation --------------------------------------------------------------


class Constraint:
    """Follows a continuation under a grammar: the lecture's parser state s_t and A(s_t).

    Used by one session at a time. An end-of-sequence token is recorded here and not fed to
    llguidance: in a stopped matcher llguidance does not count it as a token, so rollback(1)
    would undo the token before it.
    """

    def __init__(self, grammar: Grammar, lm):
        self.grammar = grammar
        self.vocab_size = int(lm.vocab_size)
        self._lm = lm
        self._tokenizer = tokenizer_info(lm)
        self.eos_token_ids = frozenset(self._tokenizer.eos_tokens)  # allowed once complete
        self._matcher = _fresh_matcher(grammar, lm)
        self._consumed: list[int] = []
        self._fed: list[bool] = []  # per consumed token: did llguidance's matcher see it?
        self._bitmask = llguidance.numpy.allocate_token_bitmask(1, self.vocab_size)
        self._mask: np.ndarray | None = None  # A(s_t), cached until the next consume/rollback
        self.tokens_fed = 0  # tokens this constraint's matchers were given: the parser's work

    def copy(self) -> Constraint:
        """An independent constraint in the same state (llguidance's deep_copy: µs, no re-parse)."""
        new = object.__new__(Constraint)
        new.__dict__.update(self.__dict__)
        new._matcher = self._matcher.deep_copy()
        new._consumed, new._fed = list(self._consumed), list(self._fed)
        new._bitmask = llguidance.numpy.allocate_token_bitmask(1, self.vocab_size)
        return new

    def __deepcopy__(self, memo) -> Constraint:
        return self.copy()

    def allowed_mask(self) -> np.ndarray:
        """(V,) read-only bool array, True = token in A(s_t)."""
        if self._mask is None:
            if self._ended():  # after end-of-sequence, as llguidance: only end-of-sequence
                mask = np.zeros(self.vocab_size, dtype=bool)
                mask[list(self.eos_token_ids)] = True
            else:
                llguidance.numpy.fill_next_token_bitmask(self._matcher, self._bitmask)
                mask = unpack_bitmask(self._bitmask, self.vocab_size)
            mask.flags.writeable = False
            self._mask = mask
        return self._mask

    def allows(self, token_id: int) -> bool:
        token_id = operator.index(token_id)
        return 0 <= token_id < self.vocab_size and bool(self.allowed_mask()[token_id])

    def consume(self, token_id: int) -> None:
        """Append one token after checking it is in A(s_t); else raise ConstraintViolation."""
        token_id = operator.index(token_id)
        if not self.allows(token_id):
            raise self._violation(token_id, "is not in A(s_t)")
        feed = not (token_id in self.eos_token_ids and self._matcher.is_accepting())
        self.tokens_fed += feed
        if feed and not self._matcher.consume_token(token_id):
            # the mask allowed it but the parser refused: rebuild, so the promise "unchanged" holds
            reason = self._matcher.get_error().splitlines()[0]
            self._rebuild()
            raise self._violation(token_id, f"was refused by the parser ({reason})")
        self._consumed.append(token_id)
        self._fed.append(feed)
        self._mask = None

    def rollback(self, n: int = 1) -> None:
        """Undo the last n consumed tokens (Back); the mask is then identical to before."""
        n = operator.index(n)
        if not 0 <= n <= len(self._consumed):
            raise ValueError(f"cannot roll back {n} tokens: {len(self._consumed)} consumed")
        if n == 0:
            return
        fed = sum(self._fed[-n:])
        del self._consumed[-n:], self._fed[-n:]
        self._mask = None
        if fed and not self._matcher.rollback(fed):
            self._rebuild()

    def consumed(self) -> tuple[int, ...]:
        return tuple(self._consumed)

    def is_accepting(self) -> bool:
        """The text so far is a complete sentence of the grammar: end-of-sequence is allowed."""
        return bool(self._matcher.is_accepting())

    def is_stopped(self) -> bool:
        """Complete and closed: only end-of-sequence is allowed (or it was already consumed)."""
        return self._ended() or bool(self._matcher.is_stopped())

    def state(self) -> ConstraintState:
        stopped = self.is_stopped()
        forced = b"" if stopped else bytes(self._matcher.compute_ff_bytes())
        return ConstraintState(
            grammar_name=self.grammar.name,
            n_tokens=len(self._consumed),
            text=self._tokenizer.decode_str(self._fed_tokens()),
            accepting=self.is_accepting(),
            stopped=stopped,
            ended=self._ended(),
            n_allowed=int(np.count_nonzero(self.allowed_mask())),
            forced_bytes=forced,
            forced_text=forced.decode("utf-8", errors="replace"),
            error=self._matcher.get_error(),
        )

    def _ended(self) -> bool:
        return bool(self._fed) and not self._fed[-1]

    def _rebuild(self) -> None:
        self._matcher = _fresh_matcher(self.grammar, self._lm)
        fed = self._fed_tokens()
        self.tokens_fed += len(fed)
        if fed and not self._matcher.consume_tokens(fed):
            raise RuntimeError(f"llguidance refused its own tokens: {self._matcher.get_error()}")
        self._mask = None

    def _fed_tokens(self) -> list[int]:
        return [t for t, f in zip(self._consumed, self._fed, strict=True) if f]

    def _violation(self, token_id: int, why: str) -> ConstraintViolation:
        strings = getattr(self._lm, "token_strings", None)
        shown = strings[token_id] if strings is not None and 0 <= token_id < len(strings) else "?"
        step = len(self._consumed)
        name = self.grammar.name or self.grammar.kind
        n_allowed = int(np.count_nonzero(self.allowed_mask()))
        message = (
            f"step {step}: token {token_id} {shown!r} {why} "
            f"(grammar {name!r}, {n_allowed} tokens allowed)"
        )
        return ConstraintViolation(message, token_id, step)


def constraint_for(grammar: Grammar, lm, token_ids: Sequence[int] = (),
                   start: Constraint | None = None) -> Constraint:
    """A constraint that has consumed token_ids; raises ConstraintViolation at the first
    token the grammar refuses, GrammarError if the grammar does not compile.

    With `start` (a constraint under the same grammar, left unchanged), the new one is a copy of
    it rolled back to the common prefix and advanced by the rest: a click costs one token of
    parsing, not the whole continuation's (a Lark grammar re-parsed from scratch grows to seconds).
    >>> constraint_for(PRESETS["yes / no / maybe"], lm, lm.encode("yes")).is_stopped()
    True
    """
    ids = [operator.index(t) for t in token_ids]
    if start is not None and start.grammar == grammar and start.vocab_size == int(lm.vocab_size):
        done = start.consumed()
        common = next((i for i, (a, b) in enumerate(zip(done, ids, strict=False)) if a != b), min(len(done), len(ids)))
        constraint = start.copy()
        constraint.rollback(len(done) - common)
        ids = ids[common:]
    else:
        constraint = Constraint(grammar, lm)
    for token_id in ids:
        constraint.consume(token_id)
    return constraint


def accepts(grammar: Grammar, lm, token_ids: Sequence[int]) -> bool:
    """Does the grammar accept the whole output, however it was tokenized? (end-of-sequence
    tokens at the end are ignored.) For checking text generated *without* the mask: A(s_t)
    admits only the tokenizer's own tokens for forced text, the parser admits any split, so
    constraint_for refuses `{` `"` … where this accepts it.

    >>> accepts(PRESETS["yes / no / maybe"], lm, [lm.encode(c)[0] for c in "yes"])
    True
    """
    ids = [operator.index(t) for t in token_ids]
    while ids and ids[-1] in lm.eos_token_ids:
        ids.pop()
    matcher = _fresh_matcher(grammar, lm)
    if matcher.validate_tokens(ids) != len(ids):  # check first: a refused consume breaks it
        return False
    return matcher.consume_tokens(ids) and bool(matcher.is_accepting())


def masked_probs(probs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The lecture's P'_i = 1[i ∈ A] P_i / Σ_{j ∈ A} P_j, in float64.

    >>> masked_probs(np.array([0.5, 0.3, 0.2]), np.array([True, False, True])).round(3).tolist()
    [0.714, 0.0, 0.286]
    """
    p = np.asarray(probs, dtype=np.float64)
    allowed = np.asarray(mask)
    if allowed.dtype != np.bool_ or allowed.shape != p.shape:
        got = f"{allowed.dtype} {allowed.shape}"
        raise ValueError(f"mask must be a bool array of shape {p.shape}, got {got}")
    if not allowed.any():
        raise ValueError("mask is unsatisfiable: the grammar allows no token (A(s_t) is empty)")
    kept = np.where(allowed, p, 0.0)
    total = kept.sum()
    if not total > 0:
        raise ValueError("mask is unsatisfiable: every allowed token has probability 0")
    return kept / total


def masked_logits(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Logits with -inf outside A(s_t): softmax of these is P', their argmax greedy-under-grammar.

    >>> masked_logits(np.array([2.0, 5.0, 1.0]), np.array([True, False, True])).tolist()
    [2.0, -inf, 1.0]
    """
    z = np.asarray(logits)
    allowed = np.asarray(mask, dtype=bool)
    if allowed.shape != z.shape:
        raise ValueError(f"mask must have shape {z.shape}, got {allowed.shape}")
    if not allowed.any():
        raise ValueError("mask is unsatisfiable: the grammar allows no token (A(s_t) is empty)")
    return np.where(allowed, z, -np.inf).astype(z.dtype, copy=False)


# --- tool calls and presets ------------------------------------------------------------------


# The ReAct tab's tools, read from agent/tools.py: one source for both tabs.
PRESET_TOOLS: tuple[dict, ...] = tuple(tool.schema() for tool in TOOLS)


def tool_call_schema(tools: Sequence[dict]) -> dict:
    """JSON Schema of a call to one of the tools: anyOf of whole {"name", "arguments"} objects.

    Whole objects, each with additionalProperties false: then `name` fixes which `arguments`
    may follow (a top-level additionalProperties beside oneOf made `name` unsatisfiable).
    >>> tool_call_schema(PRESET_TOOLS[:1])["anyOf"][0]["properties"]["name"]
    {'const': 'get_weather'}
    """
    if not tools:
        raise ValueError("a tool call needs at least one tool")
    calls = []
    for tool in tools:
        function = tool["function"]
        arguments = dict(function.get("parameters") or {"type": "object", "properties": {}})
        arguments.setdefault("additionalProperties", False)  # no invented argument names
        calls.append(
            {
                "type": "object",
                "properties": {"name": {"const": function["name"]}, "arguments": arguments},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": calls}


def tool_call_grammar(tools: Sequence[dict], name: str = "JSON tool call") -> Grammar:
    """A JSON Schema grammar: {"name": ..., "arguments": {...}} for one of `tools`."""
    return Grammar("json_schema", json.dumps(tool_call_schema(tools), indent=2), name)


def react_format_grammar(tools: Sequence[dict], name: str = "ReAct format") -> Grammar:
    """Lark: `Thought: …⏎Action: {tool call}` | `Thought: …⏎Final Answer: …` | `Final Answer: …`.

    The tool call is the JSON Schema of `tool_call_schema`, embedded with %json.
    """
    schema = json.dumps({"x-guidance": JSON_FORMAT, **tool_call_schema(tools)})
    lark = "\n".join(
        [
            'start: "Thought: " LINE "\\n" step | final',
            'step: "Action: " call | final',
            'final: "Final Answer: " LINE',
            f"call: %json {schema}",
            "LINE: /[^\\n]+/",
        ]
    )
    return Grammar("lark", lark + "\n", name)


ARITHMETIC = r"""start: expr
expr: term (("+" | "-") term)*
term: factor (("*" | "/") factor)*
factor: NUMBER | "(" expr ")" | "-" factor
NUMBER: /[0-9]+(\.[0-9]+)?/
%ignore " "
"""

PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "city": {"type": "string"},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def _presets() -> dict[str, Grammar]:
    grammars = [
        Grammar("choice", "yes\nno\nmaybe", "yes / no / maybe"),
        # [0-9], not \d: in llguidance's (Rust) regex \d also matches Arabic-Indic and other digits
        Grammar("regex", r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])", "Date (YYYY-MM-DD)"),
        Grammar("regex", r"[a-z0-9._%+-]+@[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}", "E-mail address"),
        Grammar("lark", ARITHMETIC, "Arithmetic expression"),
        Grammar("json_schema", json.dumps(PERSON_SCHEMA, indent=2), "Person (JSON Schema)"),
        tool_call_grammar(PRESET_TOOLS),
        react_format_grammar(PRESET_TOOLS),
    ]
    return {g.name: g for g in grammars}


PRESETS: dict[str, Grammar] = _presets()  # ordered: the UI's dropdown values

# One valid output per preset (tests, the bench, and a hint in the UI).
PRESET_EXAMPLES: dict[str, str] = {
    "yes / no / maybe": "maybe",
    "Date (YYYY-MM-DD)": "2024-02-29",
    "E-mail address": "ada.lovelace@example.org",
    "Arithmetic expression": "(2 + 3) * 4.5",
    "Person (JSON Schema)": '{"name": "Ada Lovelace", "age": 36, "city": "London"}',
    "JSON tool call": '{"name": "get_weather", "arguments": {"city": "Berlin"}}',
    "ReAct format": "Thought: I need the weather.\nAction: "
    '{"name": "get_weather", "arguments": {"city": "Berlin"}}',
}
