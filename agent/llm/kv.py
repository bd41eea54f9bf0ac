"""Each row's KV cache in buffers of its own, and the attention that reads them (model layer;
imported by agent/llm/model.py when it runs a pass).

A batched pass runs every row's new tokens through the linear layers together (one matrix
product for all rows: what batching saves), but each row attends to its own keys and values
where they lie. Nothing is gathered into a padded block. Measured before (docs/BENCHMARKS.md,
2026-12-06): a class's rows change at nearly every pass (students press at their own pace), so
gathering each row's past into a left-padded block — a zero fill and a copy of every row's whole
cache — took 30 % of a 10-row pass, and the attention then ran over the padding.

A row's keys and values are the first n positions of buffers with ROOM positions after them
(``with_room``). A step writes its new positions into that room; only when the room is used up
(once every ROOM steps) are they copied into larger buffers. The views handed out stay valid: a
write lands only after the positions any earlier view covers. Whether a row may write in its
buffers' room is the caller's to say (``room``): two rows that extend the same cached sequence
would write the same positions, so agent/llm/model.py lets only the first extend it in place
(``_Block.extended``).

    kv = RaggedKV(past, new=[1, 5], room=[True, True])  # past[layer][i]: (keys, values) or None
    layer(h, cache=kv, ragged=kv, …)                      # update() writes, attend() reads

The attention function is registered as "ragged"; without a RaggedKV (a plain forward pass, a
test's reference pass) it is transformers' SDPA attention.
"""

from __future__ import annotations

import torch
from torch.nn.functional import scaled_dot_product_attention
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

ROOM = 64  # positions of room after a row's tokens: its next 64 decode steps append in place
ATTENTION = "ragged"  # the name the attention function is registered under (config._attn_implementation)


def with_room(shape: tuple[int, int, int, int], dtype) -> torch.Tensor:
    """A zeroed (B, H, length, D) view of buffers with ROOM positions after ``length``."""
    b, h, length, d = shape
    return torch.zeros((b, h, length + ROOM, d), dtype=dtype)[:, :, :length]


def has_room(t: torch.Tensor, length: int) -> bool:
    """True if t, a (1, H, n, D) view of positions [s, s + n) of (1, H, capacity, D) buffers, can
    grow to ``length`` positions in its own storage: s + length <= capacity."""
    d = t.shape[3]
    if t.shape[0] != 1 or t.stride(3) != 1 or t.stride(2) != d or t.stride(1) % d:
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


class RaggedKV:
    """The KV of the rows of one pass, each in its own buffers.

    ``past[layer][i]``: row i's cached (keys, values), each (1, kv_heads, n_i, head_dim), or None
    (no past). ``new[i]``: row i's new tokens this pass (the pass's input is right-padded to the
    most; a padded position is computed, never stored nor attended to). ``room[i]``: row i may
    write after its past in the past's own buffers. After the pass, ``keys[layer][i]`` and
    ``values[layer][i]`` are row i's whole sequence so far.
    """

    def __init__(self, past: list[list], new: list[int], room: list[bool]):
        self.keys = [[None if kv is None else kv[0] for kv in row] for row in past]
        self.values = [[None if kv is None else kv[1] for kv in row] for row in past]
        self.new, self.room = list(new), list(room)
        self._masks: dict[int, torch.Tensor] = {}  # row → its causal mask (the same in every layer)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        """Append each row's new positions to its own keys and values (transformers' Cache.update).
        Returns the states as given: attend() reads each row's buffers, not these."""
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        for i, n in enumerate(self.new):
            k, v = keys[i], values[i]
            if k is None:
                shape = (1, key_states.shape[1], 0, key_states.shape[3])
                k, v = with_room(shape, key_states.dtype), with_room(shape, value_states.dtype)
            n0 = k.shape[2]
            if not (self.room[i] and has_room(k, n0 + n) and has_room(v, n0 + n)):
                k, v = moved(k, n0 + n), moved(v, n0 + n)
            k, v = grown(k, n0 + n), grown(v, n0 + n)
            k[:, :, n0:], v[:, :, n0:] = key_states[i:i + 1, :, :n], value_states[i:i + 1, :, :n]
            keys[i], values[i] = k, v
        return key_states, value_states

    def attend(self, layer: int, query: torch.Tensor, scaling: float | None) -> torch.Tensor:
        """(B, L, heads, head_dim): each row's new queries against its own keys and values, causal
        over its new positions; padded positions are zeros."""
        b, heads, length, d = query.shape
        out = query.new_zeros(b, length, heads, d)
        for i, n in enumerate(self.new):
            k, v = self.keys[layer][i], self.values[layer][i]
            kv_heads = k.shape[1]
            if n == 1:  # one query per head: the heads of a key/value head become its queries (no repeat)
                q = query[i, :, :1].reshape(1, kv_heads, heads // kv_heads, d)
                out[i, 0] = scaled_dot_product_attention(q, k, v, scale=scaling).reshape(heads, d)
            else:
                o = scaled_dot_product_attention(query[i:i + 1, :, :n], k, v, attn_mask=self._mask(i, k.shape[2]),
                                                 scale=scaling, enable_gqa=kv_heads != heads)
                out[i, :n] = o[0].transpose(0, 1)
        return out

    def _mask(self, i: int, total: int) -> torch.Tensor:
        """Row i's new position j (at total − n + j) sees positions 0 … total − n + j."""
        if i not in self._masks:
            n = self.new[i]
            self._masks[i] = torch.ones(n, total, dtype=torch.bool).tril(total - n)
        return self._masks[i]


def ragged_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, ragged=None, **kwargs):
    """The attention function of a pass over a RaggedKV (``ragged=``); SDPA's otherwise."""
    if ragged is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                      dropout=dropout, **kwargs)
    return ragged.attend(module.layer_idx, query, scaling), None


AttentionInterface.register(ATTENTION, ragged_attention)
AttentionMaskInterface.register(ATTENTION, sdpa_mask)
