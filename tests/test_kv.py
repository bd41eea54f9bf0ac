"""agent/llm/kv.py: a KV layer that appends into room after its positions (torch only, no model)."""

from __future__ import annotations

import torch

from agent.llm import kv


def test_an_append_writes_into_the_room_and_earlier_views_keep_their_positions():
    keys, values = kv.with_room((2, 3, 5, 4), torch.float32), kv.with_room((2, 3, 5, 4), torch.float32)
    keys[:] = torch.arange(5.0).view(1, 1, 5, 1)
    layer = kv.AppendLayer(keys, values, room=True)
    new = torch.full((2, 3, 1, 4), 9.0)
    k, v = layer.update(new, new)
    assert k.shape == v.shape == (2, 3, 6, 4)
    assert k.untyped_storage().data_ptr() == keys.untyped_storage().data_ptr()  # no copy
    assert torch.equal(k[:, :, :5], keys) and torch.equal(k[:, :, 5:], new)
    assert keys.shape == (2, 3, 5, 4)  # the earlier view still sees its own 5 positions


def test_without_room_an_append_copies_and_leaves_the_buffers_alone():
    keys = kv.with_room((1, 2, 3, 4), torch.float32)
    layer = kv.AppendLayer(keys, keys.clone(), room=False)
    k, _ = layer.update(torch.ones(1, 2, 2, 4), torch.ones(1, 2, 2, 4))
    assert k.untyped_storage().data_ptr() != keys.untyped_storage().data_ptr()
    assert torch.equal(kv.grown(keys, 5), torch.zeros(1, 2, 5, 4))  # nothing written after the 3 positions


def test_has_room_counts_from_a_views_first_position():
    buf = kv.with_room((2, 3, 10, 4), torch.float32)
    full = kv.grown(buf, 10 + kv.ROOM)
    row = full[1:2, :, 7:10]  # an entry: row 1, positions [7, 10)
    assert kv.has_room(row, kv.ROOM + 3) and not kv.has_room(row, kv.ROOM + 4)
    assert not kv.has_room(torch.zeros(2, 3, 10, 4), 11)  # a plain tensor has none
    assert not kv.has_room(buf.transpose(1, 2), 11)
    layer = kv.AppendLayer(row, kv.with_room((2, 3, 10, 4), torch.float32)[1:2, :, 7:10], room=True)
    k, _ = layer.update(torch.ones(1, 3, 2, 4), torch.ones(1, 3, 2, 4))
    assert torch.equal(full[1, :, 10:12], torch.ones(3, 2, 4))  # written in place, after the entry
