"""Token accounting of the context by category, against the context window ("The Context Budget").

What it knows: the rendered prompt string and its spans (agent.template.render) are tokenized ONCE
with the model's tokenizer; each token is charged to the span its first character came from
(the tokenizer's offsets mapping), so the categories — system prompt, tool schemas, few-shot
exemplars, retrieved documents, memory, user, assistant thoughts, tool calls, tool results,
assistant text, compaction's summary, template overhead — add up exactly to the prompt's token
count. What remains of the budget is split into the tokens reserved for the
reply and the free rest. `growth` turns the input tokens of each model call into the running
total: the model is stateless, so every call re-sends everything and the total grows roughly
quadratically with the number of turns.

What it does not know: the model, the loop, or how the numbers are drawn.
Without a tokenizer (a scripted or remote backend) counts are estimates: ⌈characters / 4⌉.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from agent.template import CATEGORIES, Prompt, Rendered, render

RESERVED, FREE = "reserved", "free"
BUDGET_CATEGORIES = CATEGORIES + (RESERVED, FREE)
LABELS = {"system": "system prompt", "tools": "tool schemas", "exemplars": "few-shot exemplars",
          "documents": "retrieved documents", "memory": "memory", "user": "user",
          "thought": "assistant thoughts", "tool_call": "tool calls", "tool_result": "tool results",
          "assistant_text": "assistant text", "summary": "summary", "template": "template overhead",
          RESERVED: "reserved for the reply", FREE: "free"}
CHARS_PER_TOKEN = 4  # the estimate used when no tokenizer is available


@dataclass(frozen=True)
class Usage:
    """Tokens of one model call. source: "tokenizer" (counted here), "estimate", "server", "model"."""

    prompt_tokens: int
    completion_tokens: int
    source: str = "tokenizer"


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def count_tokens(text: str, tokenizer=None) -> int:
    """Exact with a tokenizer (no special tokens added: the template wrote its own), else estimated."""
    if tokenizer is None:
        return estimate_tokens(text)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def prompt_tokens(prompt: Prompt, tokenizer=None) -> int:
    """Tokens of the rendered prompt: what a model call costs before it writes a single token."""
    return count_tokens(render(prompt, tokenizer).text, tokenizer)


@dataclass(frozen=True)
class Breakdown:
    """The prompt's tokens per category, plus reserved and free, against `budget`."""

    counts: dict[str, int]  # every name in BUDGET_CATEGORIES
    prompt_tokens: int
    reserved: int
    budget: int
    token_categories: tuple[str, ...] = field(repr=False)  # one per prompt token
    per_message: dict[int, int] = field(repr=False)  # message index → tokens (template overhead included)
    exact: bool = True
    offsets: tuple[tuple[int, int], ...] = field(default=(), repr=False)  # each token's [start, end)

    @property
    def over(self) -> bool:
        """The lecture's stop condition: rendered prompt + reserved reply tokens > budget."""
        return self.prompt_tokens + self.reserved > self.budget


def token_categories(rendered: Rendered, offsets: list[tuple[int, int]]) -> list[tuple[str, int]]:
    """(category, message) of each token: that of the span holding the token's first character."""
    starts = [s.start for s in rendered.spans]
    out = []
    for start, _ in offsets:
        i = max(bisect.bisect_right(starts, start) - 1, 0)
        out.append((rendered.spans[i].category, rendered.spans[i].message))
    return out


def breakdown(prompt: Prompt, tokenizer, budget: int, reserved: int) -> Breakdown:
    """Tokenize the rendered prompt once and charge every token to a category, so the prompt
    categories sum to exactly len(tokenizer(render(prompt, tokenizer).text).input_ids)."""
    rendered = render(prompt, tokenizer)
    offsets: tuple[tuple[int, int], ...] = ()
    if tokenizer is None:
        labels = [(s.category, s.message) for s in rendered.spans
                  for _ in range(estimate_tokens(rendered.text[s.start:s.end]))]
    else:
        enc = tokenizer(rendered.text, add_special_tokens=False, return_offsets_mapping=True)
        offsets = tuple((int(a), int(b)) for a, b in enc["offset_mapping"])
        labels = token_categories(rendered, list(offsets))
    counts = {c: 0 for c in BUDGET_CATEGORIES}
    per_message: dict[int, int] = {}
    for category, message in labels:
        counts[category] += 1
        per_message[message] = per_message.get(message, 0) + 1
    counts[RESERVED] = reserved
    counts[FREE] = max(budget - len(labels) - reserved, 0)
    return Breakdown(counts, len(labels), reserved, budget, tuple(c for c, _ in labels), per_message,
                     exact=tokenizer is not None, offsets=offsets)


def tools_unrendered(usage: Usage | None, composition: dict[str, int] | None) -> bool:
    """Whether a server's own prompt count leaves the tool schemas out: it counted fewer tokens than
    the rendered prompt less half its tools block (that block alone is hundreds of tokens; two chat
    templates, or an estimate, differ by far less). Only a server's count can say so.

    >>> tools_unrendered(Usage(87, 5, "server"), {"system": 60, "tools": 420, "user": 18})
    True
    >>> tools_unrendered(Usage(495, 5, "server"), {"system": 60, "tools": 420, "user": 18})
    False
    """
    if usage is None or usage.source != "server" or not composition:
        return False
    tools = composition.get("tools", 0)
    return tools >= 50 and usage.prompt_tokens < sum(composition.values()) - tools / 2


@dataclass(frozen=True)
class GrowthPoint:
    call: int  # 1, 2, … : the model call
    input_tokens: int  # the whole context, re-sent
    total: int  # input tokens summed over the calls so far


def shares(composition: tuple[dict[str, int], ...] | list[dict[str, int]]) -> tuple[dict[str, float], ...]:
    """Each model call's prompt tokens by category (State.composition) as shares of that prompt.

    >>> shares([{"system": 30, "user": 10}])
    ({'system': 0.75, 'user': 0.25},)
    """
    return tuple({c: n / (sum(counts.values()) or 1) for c, n in counts.items()} for counts in composition)


def growth(usage: tuple[Usage, ...] | list[Usage]) -> tuple[GrowthPoint, ...]:
    """Input tokens per model call and their running total.

    >>> [p.total for p in growth([Usage(100, 5), Usage(130, 5), Usage(160, 5)])]
    [100, 230, 390]
    """
    points, total = [], 0
    for i, u in enumerate(usage, 1):
        total += u.prompt_tokens
        points.append(GrowthPoint(i, u.prompt_tokens, total))
    return tuple(points)
