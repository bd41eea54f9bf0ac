"""Stop sequences: where a reply ends, and how much of a growing reply may be shown yet.

A stop sequence ("\\nObservation:" of the ReAct text format, "<|im_end|>") ends a reply where it
first appears; it is not part of the reply. While the reply grows token by token, its tail may be
the start of a stop sequence (or half a UTF-8 character, decoded as U+FFFD), so that tail is held
back until the next token decides.

>>> cut("Action: search[x]\\nObservation: made up", ("\\nObservation:",))
('Action: search[x]', True)
>>> held_back("Action: search[x]\\nObs", ("\\nObservation:",))
4

What it does not know: tokens, the model, or which format a reply is in. Used by
agent.backends' stream buffer and by agent.llm.generation.
"""

from __future__ import annotations

from collections.abc import Sequence

END_OF_TURN = "<|im_end|>"  # ChatML's end of a message: every reply stops here


def cut(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """`text` up to the earliest stop sequence in it, and whether there was one."""
    cuts = [text.find(s) for s in stops if s and s in text]
    return (text[:min(cuts)], True) if cuts else (text, False)


def held_back(text: str, stops: Sequence[str]) -> int:
    """How many characters at the end of `text` could still become a stop sequence or a character."""
    hold = max((k for s in stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
    return max(hold, len(text) - len(text.rstrip("\ufffd")))
