"""The one check for a number a visitor sends: finite, inside [low, high], whole when asked.

Every parameter that arrives from the page, the API or a link goes through ``number``: the sampling
parameters (agent.sampling.SamplingConfig), the ReAct tab's run settings (viz/react/handlers.py)
and a deep link's values (viz/deeplink.py). One function, so one wording of the message:

>>> number("3", "MAX_STEPS", 1, 20, integer=True)
3
>>> number(float("nan"), "Temperature", 0, 2)
Traceback (most recent call last):
...
ValueError: Temperature must lie in 0 … 2, got nan
>>> number("x", "Seed", 0, 9, strings=False)
Traceback (most recent call last):
...
ValueError: Seed must be a number, got 'x'
>>> number(2.5, "N draws", 1, 10_000, integer=True)
Traceback (most recent call last):
...
ValueError: N draws must be a whole number from 1 to 10000, got 2.5

What it does not know: what the number means, or where it came from.
"""

from __future__ import annotations

import math
from numbers import Real

SEED_MAX = 2**31 - 1  # the largest seed any control, link or API call may send


def number(value: object, name: str, low: float, high: float, *, integer: bool = False,
           strings: bool = True) -> float | int:
    """`value` as a float (an int when `integer`), or ValueError naming `name` and the bounds.

    A bool is never a number here (a checkbox sent to a number field is a mistake); a string
    such as "0.7" is read as one unless `strings` is False (typed values, e.g. SamplingConfig).
    """
    if isinstance(value, bool) or (isinstance(value, str) and not strings) or not isinstance(
            value, (str, Real)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        x = float(value)
    except (ValueError, OverflowError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(x) or not low <= x <= high:
        raise ValueError(f"{name} must lie in {_bound(low)} … {_bound(high)}, got {value!r}")
    if integer and not x.is_integer():  # refused, never rounded: 2.5 is not 2
        raise ValueError(f"{name} must be a whole number from {_bound(low)} to {_bound(high)}, got {value!r}")
    return int(x) if integer else x


def _bound(x: float) -> str:
    """A bound as a person reads it: 2147483647, 0.05, 3."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def checked_token_ids(token_ids, window: int, vocab_size: int, window_name: str = "the context window") -> tuple:
    """A prompt's token ids as a tuple of ints, or ValueError: none, more than `window`, or one
    outside the vocabulary [0, vocab_size)."""
    ids = tuple(int(i) for i in token_ids)
    if not ids:
        raise ValueError("next_token_logits needs at least one token id.")
    if len(ids) > window:
        raise ValueError(f"{len(ids)} tokens exceed {window_name} of {window}.")
    if min(ids) < 0 or max(ids) >= vocab_size:
        raise ValueError(f"token ids must lie in [0, {vocab_size}).")
    return ids
