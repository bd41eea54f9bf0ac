"""A KV cache layer that appends in place (model layer; imported by agent/llm/model.py when it runs a pass).

transformers' DynamicLayer appends a step's new keys and values with ``torch.cat``: every decode
step copies the whole cache of every row, ≈ 46 KB a token (SmolLM2-135M). For 8 rows of 640
tokens that is 236 MB read and written per step, ~15 % of the pass. An ``AppendLayer`` keeps its
keys and values as the first n positions of buffers with ``ROOM`` positions after them, and writes
the new positions there; only when the room is used up (once every ROOM steps) are the buffers
copied into larger ones.

The views handed out stay valid: a write lands only after the positions any earlier view covers.
Whether a buffer's room may be written is the caller's to say (``room=``): two passes that both
extend the same block would write the same positions, so agent/llm/model.py lets only the first
extend a block in place (``_Block.extended``).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicLayer

ROOM = 64  # positions of room after a buffer's tokens: the next 64 decode steps append in place


def with_room(shape: tuple[int, int, int, int], dtype) -> torch.Tensor:
    """A zeroed (B, H, length, D) view of buffers with ROOM positions after ``length``."""
    b, h, length, d = shape
    return torch.zeros((b, h, length + ROOM, d), dtype=dtype)[:, :, :length]


def has_room(t: torch.Tensor, length: int) -> bool:
    """True if t, a (B, H, n, D) view of positions [s, s + n) of (B, H, capacity, D) buffers, can
    grow to ``length`` positions in its own storage: s + length <= capacity."""
    d = t.shape[3]
    packed = t.shape[0] == 1 or t.stride(0) == t.shape[1] * t.stride(1)
    if t.stride(3) != 1 or t.stride(2) != d or t.stride(1) % d or not packed:
        return False
    start = (t.storage_offset() % t.stride(1)) // d
    return start + length <= t.stride(1) // d


def grown(t: torch.Tensor, length: int) -> torch.Tensor:
    """The same storage seen as ``length`` positions (has_room(t, length) must hold)."""
    b, h, _, d = t.shape
    return t.as_strided((b, h, length, d), t.stride(), t.storage_offset())


def moved(t: torch.Tensor, length: int) -> torch.Tensor:
    """t's positions copied to the start of new buffers with room for ``length`` positions and more."""
    out = with_room((*t.shape[:2], length, t.shape[3]), t.dtype)
    out[:, :, :t.shape[2]] = t
    return out[:, :, :t.shape[2]]


class AppendLayer(DynamicLayer):
    """A DynamicLayer whose update writes into room after its positions instead of concatenating."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, room: bool):
        super().__init__()
        self.lazy_initialization(keys, values)
        self.keys, self.values, self.room = keys, values, room

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        n, length = self.keys.shape[-2], self.keys.shape[-2] + key_states.shape[-2]
        if not (self.room and has_room(self.keys, length) and has_room(self.values, length)):
            self.keys, self.values, self.room = moved(self.keys, length), moved(self.values, length), True
        self.keys, self.values = grown(self.keys, length), grown(self.values, length)
        self.keys[:, :, n:], self.values[:, :, n:] = key_states, value_states
        return self.keys, self.values
