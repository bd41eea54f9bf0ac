"""Asking for a format vs enforcing it (the lecture, "Constrained Decoding"): the same prompt, N
times at the same sampling settings, once without the grammar's mask and once with it.

"A prompt changes probabilities; a mask removes tokens." Without the mask, every malformed
continuation keeps a probability above zero and the small model often writes one; with it, a
malformed continuation has probability zero and cannot be drawn.

An output counts as valid when the grammar accepts all of it (checked by llguidance on the output's
own tokens); for a JSON Schema it must also parse with json.loads and validate against the schema.

A visitor's schema never reaches Python's `re`: a backtracking engine takes exponential time on a
pattern like "^(.+.+)+!$" while holding the interpreter lock (it froze every visitor for 38 s), and
cannot parse some patterns llguidance accepts (\\p{L}). A schema without regular expressions is
validated by jsonschema (its messages name the failing property; no remote $ref is fetched); one
with "pattern" or "patternProperties" is decided by llguidance alone — linear-time regexes, the same
engine that built the mask — on the value written as the grammar writes JSON, so there key order
and number spelling must follow the schema as the enforced column's do.

Every request is bounded as a whole: the prompt is cut to the Sampling tab's cap
(agent.llm.continuation.MAX_PROMPT_TOKENS), and all outputs of both columns share one budget of
REQUEST_TOKENS new tokens and REQUEST_TIME_S seconds; when it is spent, the comparison ends early
with a note saying so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from agent import sampling
from agent.constraints import JSON_FORMAT, Grammar, accepts
from agent.llm import generation
from agent.llm.continuation import cap_prompt
from agent.parameters import number

MAX_RUNS = 50
ASKING_SESSIONS = 4  # comparisons running at once, one per session (the batcher shares their passes)
MAX_NEW_TOKENS = 48
TIME_LIMIT_S = 30.0  # per output: a wall-clock limit on each generation
REQUEST_TOKENS = 1_200  # new tokens of one whole comparison, both columns together
REQUEST_TIME_S = 60.0  # seconds of one whole comparison
REGEX_KEYWORDS = frozenset({"pattern", "patternProperties"})


@dataclass(frozen=True)
class Outcome:
    text: str
    parses: bool  # JSON: json.loads succeeds; other grammars: the grammar accepts the text
    valid: bool  # JSON: validates against the schema; other grammars: same as parses
    error: str  # why it fails, "" when valid
    stop_reason: str
    limit: int = 0  # the new-token limit this output ran under

    @property
    def cut(self) -> str:
        """Why the output ended before the model ended it ("" when the model or the grammar did).

        >>> Outcome('{"city": "Ber', False, False, "not JSON", generation.STOP_LENGTH, 48).cut[:32]
        'cut at the 48-token limit (max n'
        """
        if self.stop_reason == generation.STOP_LENGTH:
            return (f"cut at the {self.limit}-token limit (max new tokens), not ended by the model: the "
                    "mask keeps every token legal, but it cannot make the output finish within the limit")
        if self.stop_reason == generation.STOP_DEADLINE:
            return f"cut by the {TIME_LIMIT_S:.0f} s time limit, not ended by the model"
        return ""


@dataclass(frozen=True)
class Comparison:
    n: int
    asked: tuple[Outcome, ...]  # without the mask
    enforced: tuple[Outcome, ...]  # with the mask
    seconds: float
    note: str = ""  # why it ended before n runs ("" while running or when all n ran)
    prompt_truncated: int = 0  # prompt tokens cut from the left (the prompt cap)

    @property
    def asked_valid(self) -> int:
        return sum(o.valid for o in self.asked)

    @property
    def enforced_valid(self) -> int:
        return sum(o.valid for o in self.enforced)


def instruction(prompt: str, grammar: Grammar) -> str:
    """The request that asks for the format in words (the asking column sends only this)."""
    if grammar.kind == "json_schema":
        return f"{prompt}\n\nAnswer only in JSON that matches this JSON Schema:\n{grammar.source}"
    if grammar.kind == "choice":
        options = ", ".join(o for o in grammar.source.split("\n") if o)
        return f"{prompt}\n\nAnswer with exactly one of: {options}"
    return f"{prompt}\n\nAnswer only with text that matches this grammar:\n{grammar.source}"


def check(lm, grammar: Grammar, ids: tuple[int, ...], text: str) -> Outcome:
    """Does the grammar accept the whole output? For JSON, does it parse and validate?"""
    accepted = accepts(grammar, lm, ids)
    why = "" if accepted else "the grammar does not accept this text"
    if grammar.kind != "json_schema":
        return Outcome(text, accepted, accepted, why, "")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return Outcome(text, False, False, f"not JSON: {exc}", "")
    schema = json.loads(grammar.source)  # it compiled under llguidance, so it is JSON
    problem = _llguidance_problem(lm, grammar, value) if _has_regex(schema) else _schema_problem(value, schema)
    return Outcome(text, True, not problem, problem and f"schema: {problem}", "")


def _has_regex(schema) -> bool:
    """Does a regular expression appear anywhere in the schema (as a keyword Python would run)?

    >>> _has_regex({"properties": {"id": {"type": "string", "pattern": "^a+$"}}}), _has_regex({})
    (True, False)
    """
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if REGEX_KEYWORDS & node.keys():
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _llguidance_problem(lm, grammar: Grammar, value) -> str:
    """"" when llguidance's grammar accepts the value as the grammar writes JSON, else why not."""
    canonical = json.dumps(value, ensure_ascii=False, separators=(JSON_FORMAT["item_separator"],
                                                                   JSON_FORMAT["key_separator"]))
    if accepts(grammar, lm, lm.encode(canonical)):
        return ""
    return (f"{_clip(canonical)} does not match the schema (its patterns are checked by llguidance, "
            "so keys must come in the schema's order)")


def _schema_problem(value, schema: dict) -> str:
    """jsonschema's first message, or "" when valid; never fetches a remote $ref."""
    import jsonschema
    import referencing
    import referencing.exceptions

    try:
        validator = jsonschema.validators.validator_for(schema)(schema, registry=referencing.Registry())
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except (jsonschema.exceptions.SchemaError, jsonschema.exceptions.UnknownType, referencing.exceptions.Unresolvable,
            RecursionError, TypeError, ValueError, KeyError) as exc:
        return f"the schema cannot be checked here ({exc.__class__.__name__}: {_clip(str(exc))})"
    return "" if error is None else error.message


def _clip(text: str, n: int = 120) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def compare(
    lm, prompt: str, grammar: Grammar, config: sampling.SamplingConfig, seed: int, n: int = 10,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> Iterator[Comparison]:
    """Run both columns, yielding the comparison after each output (for a live table).

    Run i of both columns uses the same seed (seed, i), so the two differ only by the mask.
    """
    n = number(n, "N", 1, MAX_RUNS, integer=True, strings=False)  # 2.5 is refused, never run twice
    messages = [{"role": "user", "content": instruction(prompt, grammar)}]
    ids, truncated = cap_prompt(lm, lm.encode(lm.apply_chat_template(messages)), max_new_tokens)
    asked: list[Outcome] = []
    enforced: list[Outcome] = []
    start, tokens = time.monotonic(), 0
    for i in range(n):
        for column, mask_grammar in ((asked, None), (enforced, grammar)):
            spent = time.monotonic() - start
            if tokens >= REQUEST_TOKENS or spent >= REQUEST_TIME_S:
                note = (f"Stopped after {len(enforced)} of {n} runs: one comparison may write "
                        f"{REQUEST_TOKENS:,} tokens in {REQUEST_TIME_S:.0f} s.")
                yield Comparison(n, tuple(asked), tuple(enforced), spent, note, truncated)
                return
            limit = min(max_new_tokens, REQUEST_TOKENS - tokens)
            g = generation.generate(
                lm, ids, config, np.random.default_rng([seed & 0xFFFFFFFF, i]), grammar=mask_grammar,
                max_new_tokens=limit,
                time_limit=min(TIME_LIMIT_S, REQUEST_TIME_S - spent),
            )
            tokens += len(g.ids) + 1  # the end-of-sequence token is a model step too
            o = check(lm, grammar, g.ids, g.text)
            column.append(Outcome(o.text, o.parses, o.valid, o.error, g.stop_reason, limit))
            yield Comparison(n, tuple(asked), tuple(enforced), time.monotonic() - start, "", truncated)
