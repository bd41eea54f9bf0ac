"""Asking for a format vs enforcing it (the lecture, "Constrained Decoding"): the same prompt, N
times at the same sampling settings, once without the grammar's mask and once with it.

"A prompt changes probabilities; a mask removes tokens." Without the mask, every malformed
continuation keeps a probability above zero and the small model often writes one; with it, a
malformed continuation has probability zero and cannot be drawn.

An output counts as valid when the grammar accepts all of it (checked by llguidance on the output's
own tokens); for a JSON Schema it must also parse with json.loads and validate with jsonschema.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from agent import generation, sampling
from agent.constraints import Grammar, accepts

MAX_RUNS = 50
MAX_NEW_TOKENS = 48
TIME_LIMIT_S = 30.0  # per output: a wall-clock limit on each generation


@dataclass(frozen=True)
class Outcome:
    text: str
    parses: bool  # JSON: json.loads succeeds; other grammars: the grammar accepts the text
    valid: bool  # JSON: validates against the schema; other grammars: same as parses
    error: str  # why it fails, "" when valid
    stop_reason: str


@dataclass(frozen=True)
class Comparison:
    n: int
    asked: tuple[Outcome, ...]  # without the mask
    enforced: tuple[Outcome, ...]  # with the mask
    seconds: float

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
    except ValueError as exc:
        return Outcome(text, False, False, f"not JSON: {exc}", "")
    import jsonschema

    try:
        jsonschema.validate(value, json.loads(grammar.source))
    except jsonschema.ValidationError as exc:
        return Outcome(text, True, False, f"schema: {exc.message}", "")
    return Outcome(text, True, True, "", "")


def compare(
    lm, prompt: str, grammar: Grammar, config: sampling.SamplingConfig, seed: int, n: int = 10,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> Iterator[Comparison]:
    """Run both columns, yielding the comparison after each output (for a live table).

    Run i of both columns uses the same seed (seed, i), so the two differ only by the mask.
    """
    if not 1 <= int(n) <= MAX_RUNS:
        raise ValueError(f"N must lie in 1 … {MAX_RUNS}, got {n}")
    ids = lm.encode(lm.apply_chat_template([{"role": "user", "content": instruction(prompt, grammar)}]))
    asked: list[Outcome] = []
    enforced: list[Outcome] = []
    start = time.monotonic()
    for i in range(int(n)):
        for column, mask_grammar in ((asked, None), (enforced, grammar)):
            g = generation.generate(
                lm, ids, config, np.random.default_rng([seed & 0xFFFFFFFF, i]), grammar=mask_grammar,
                max_new_tokens=max_new_tokens, time_limit=TIME_LIMIT_S,
            )
            o = check(lm, grammar, g.ids, g.text)
            column.append(Outcome(o.text, o.parses, o.valid, o.error, g.stop_reason))
            yield Comparison(int(n), tuple(asked), tuple(enforced), time.monotonic() - start)
