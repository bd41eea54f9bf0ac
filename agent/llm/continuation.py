"""One Sampling-tab session as a value: the prompt, the tokens chosen so far, and the next step.

Generation is autoregressive (the lecture, "Next-Token Sampling"): a chosen token w_t is appended,
w_{1:t} goes back into the model, and the model returns the next distribution. A Continuation holds
exactly what that needs — the prompt's token ids, the continuation's ids, the probability each token
had when it was chosen, and the logits of the next step (so a slider move never runs the model),
plus the grammar's mask A(s_t) when a constraint is on.

Randomness: the uniform draw u of step t comes from numpy's Generator seeded with (seed, draws);
the same seed gives the same draws, a slider move never changes u, and a re-roll is its own action
(draws + 1). Every function returns a new Continuation; nothing is mutated.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from agent.sampling import new_u

MAX_PROMPT_CHARS = 100_000  # bounds what a request may send; the model's window bounds the tokens
MAX_CONTINUATION = 512  # tokens a session may append
RESERVED_FOR_CONTINUATION = 64  # a prompt is cut from the left to leave room for this many tokens
MAX_PROMPT_TOKENS = 2048  # one forward pass over more takes many seconds on a CPU shared by a class


@dataclass(frozen=True)
class Continuation:
    prompt: str  # as typed
    chat: bool  # True: the prompt was sent as a user message through the chat template
    prompt_text: str  # the exact string the model continues
    prompt_ids: tuple[int, ...]
    truncated: int  # prompt tokens dropped from the left to fit the context window
    ids: tuple[int, ...]  # the continuation, token by token
    chosen_probs: tuple[float, ...]  # the final probability each token had when it was chosen
    logits: np.ndarray  # (V,) logits of the next token after prompt_ids + ids
    seed: int
    draws: int  # uniform draws consumed so far
    u: float  # the uniform draw of the next Sample
    finished: bool  # an end-of-sequence token was chosen
    grammar: object | None = None  # agent.constraints.Grammar or None
    mask: np.ndarray | None = None  # (V,) bool A(s_t), None without a grammar
    grammar_state: object | None = None  # agent.constraints.ConstraintState
    # The live parser at exactly this state (agent.constraints.Constraint), never mutated: the next
    # step copies it and feeds one token, Back copies it and rolls one back. Per session, so no
    # visitor can time another's grammar work.
    constraint: object | None = field(default=None, compare=False, repr=False)
    weights: str = "base"  # the model's weights choice (agent.llm.weights): tuning moves the distribution

    @property
    def all_ids(self) -> tuple[int, ...]:
        return self.prompt_ids + self.ids


class PromptError(ValueError):
    """A prompt the model cannot continue (empty, ...); the message is for the page."""


def u_for(seed: int, draws: int) -> float:
    """The uniform draw number ``draws`` of a seed: the same (seed, draws) always gives the same u."""
    return new_u(np.random.default_rng([int(seed) & 0xFFFFFFFF, int(draws)]))


def clean_prompt(prompt: str) -> str:
    """Bound and clean a prompt from the page: at most MAX_PROMPT_CHARS, no NUL, no lone surrogates."""
    if not isinstance(prompt, str):
        raise PromptError("The prompt must be text.")
    prompt = prompt.encode("utf-8", errors="replace").decode("utf-8").replace("\x00", "")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise PromptError(f"The prompt has {len(prompt):,} characters; the limit is {MAX_PROMPT_CHARS:,}.")
    if not prompt.strip():
        raise PromptError("The prompt is empty: type some text for the model to continue.")
    return prompt


def prompt_string(lm, prompt: str, chat: bool) -> str:
    """Raw text as it is, or one user message rendered through the model's chat template."""
    return lm.apply_chat_template([{"role": "user", "content": prompt}]) if chat else prompt


def cap_prompt(lm, ids, reserved: int) -> tuple[tuple[int, ...], int]:
    """The prompt cap every model-running action applies: the last MAX_PROMPT_TOKENS token ids (fewer
    if the window minus `reserved` is smaller), and how many were cut from the left.

    >>> class LM: context_window = 8192
    >>> cap_prompt(LM(), range(3000), 64)[1]
    952
    """
    room = max(1, min(lm.context_window - reserved, MAX_PROMPT_TOKENS))
    ids = tuple(ids)
    truncated = max(0, len(ids) - room)
    return ids[truncated:], truncated


def start(lm, prompt: str, chat: bool, seed: int, grammar=None, weights: str = "base") -> Continuation:
    """A new session on a prompt: tokenize, cut from the left if too long, compute the first step."""
    prompt = clean_prompt(prompt)
    text = prompt_string(lm, prompt, chat)
    ids = lm.encode(text)
    ids, truncated = cap_prompt(lm, ids, RESERVED_FOR_CONTINUATION)
    c = Continuation(
        prompt=prompt, chat=chat, prompt_text=text, prompt_ids=ids, truncated=truncated, ids=(),
        chosen_probs=(), logits=lm.next_token_logits(ids, weights=weights), seed=int(seed), draws=0,
        u=u_for(seed, 0), finished=False, weights=weights,
    )
    return with_grammar(lm, c, grammar)


def with_grammar(lm, c: Continuation, grammar) -> Continuation:
    """The same continuation under another grammar (None = no constraint): recompute A(s_t).

    Raises agent.constraints.GrammarError for an invalid grammar and ConstraintViolation when the
    continuation so far is not valid under it; the caller keeps the previous value then.
    """
    if grammar is None:
        return replace(c, grammar=None, mask=None, grammar_state=None, constraint=None)
    from agent.constraints import constraint_for

    constraint = constraint_for(grammar, lm, c.ids, start=c.constraint)
    return replace(c, grammar=grammar, mask=constraint.allowed_mask(), grammar_state=constraint.state(),
                   constraint=constraint)


def append(lm, c: Continuation, token: int, prob: float, consume_u: bool) -> Continuation:
    """Append a chosen token; the next logits come from the prefix KV cache (one decode step)."""
    if c.finished:
        raise PromptError("The continuation has ended (end-of-sequence). Press Back or edit the prompt.")
    if len(c.ids) >= MAX_CONTINUATION or len(c.all_ids) >= lm.context_window:
        raise PromptError("The continuation is at its length limit. Press Back or start again.")
    token = int(token)
    if not 0 <= token < lm.vocab_size:
        raise PromptError(f"Token id {token} is outside the vocabulary (0 … {lm.vocab_size - 1}).")
    if c.mask is not None and not c.mask[token]:
        raise PromptError(f"The grammar forbids {lm.token_strings[token]!r} here: it is not in A(s_t).")
    ids = c.ids + (token,)
    finished = token in lm.eos_token_ids
    draws = c.draws + 1 if consume_u else c.draws
    nxt = replace(
        c, ids=ids, chosen_probs=c.chosen_probs + (float(prob),), finished=finished, draws=draws,
        u=u_for(c.seed, draws),
        logits=c.logits if finished else lm.next_token_logits(c.prompt_ids + ids, weights=c.weights),
    )
    return nxt if finished else _remask(lm, nxt)


def back(lm, c: Continuation) -> Continuation:
    """Remove the last token (the grammar rolls back with it). u stays where it is."""
    if not c.ids:
        return c
    ids = c.ids[:-1]
    nxt = replace(
        c, ids=ids, chosen_probs=c.chosen_probs[:-1], finished=False,
        logits=lm.next_token_logits(c.prompt_ids + ids, weights=c.weights),
    )
    return _remask(lm, nxt)


def reroll(c: Continuation) -> Continuation:
    """A fresh uniform draw u for the next Sample: its own action, never a side effect of a slider."""
    return replace(c, draws=c.draws + 1, u=u_for(c.seed, c.draws + 1))


def _remask(lm, c: Continuation) -> Continuation:
    return with_grammar(lm, c, c.grammar) if c.grammar is not None else c


def sample_many(c: Continuation, probs: np.ndarray, n: int) -> np.ndarray:
    """Counts (V,) of n draws from ``probs``, seeded by (seed, draws) so the histogram is repeatable."""
    from agent.sampling import sample_many as _sample_many

    rng = np.random.default_rng([c.seed & 0xFFFFFFFF, c.draws, 1])
    return _sample_many(probs, n, rng)
