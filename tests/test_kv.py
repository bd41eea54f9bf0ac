"""agent/llm/kv.py: each row's keys and values in buffers of its own, appended into room after
their positions, and the attention that reads them (torch only, no model)."""

from __future__ import annotations

import torch

from agent.llm import kv


def test_an_append_writes_into_the_room_and_earlier_views_keep_their_positions():
    keys, values = kv.with_room((1, 3, 5, 4), torch.float32), kv.with_room((1, 3, 5, 4), torch.float32)
    keys[:] = torch.arange(5.0).view(1, 1, 5, 1)
    cache = kv.RaggedKV([[(keys, values)]], new=[1], room=[True])
    new = torch.full((1, 3, 1, 4), 9.0)
    cache.update(new, new, 0)
    k = cache.keys[0][0]
    assert k.shape == cache.values[0][0].shape == (1, 3, 6, 4)
    assert k.untyped_storage().data_ptr() == keys.untyped_storage().data_ptr()  # no copy
    assert torch.equal(k[:, :, :5], keys) and torch.equal(k[:, :, 5:], new)
    assert keys.shape == (1, 3, 5, 4)  # the earlier view still sees its own 5 positions


def test_without_room_an_append_copies_and_leaves_the_buffers_alone():
    keys = kv.with_room((1, 2, 3, 4), torch.float32)
    cache = kv.RaggedKV([[(keys, keys.clone())]], new=[2], room=[False])
    cache.update(torch.ones(1, 2, 2, 4), torch.ones(1, 2, 2, 4), 0)
    assert cache.keys[0][0].untyped_storage().data_ptr() != keys.untyped_storage().data_ptr()
    assert torch.equal(kv.grown(keys, 5), torch.zeros(1, 2, 5, 4))  # nothing written after the 3 positions


def test_has_room_counts_from_a_views_first_position():
    buf = kv.with_room((1, 3, 10, 4), torch.float32)
    full = kv.grown(buf, 10 + kv.ROOM)
    entry = full[:, :, 7:10]  # positions [7, 10) of the buffers
    assert kv.has_room(entry, kv.ROOM + 3) and not kv.has_room(entry, kv.ROOM + 4)
    assert not kv.has_room(torch.zeros(1, 3, 10, 4), 11)  # a plain tensor has none
    assert not kv.has_room(buf.transpose(1, 2), 11)
    cache = kv.RaggedKV([[(entry, kv.with_room((1, 3, 10, 4), torch.float32)[:, :, 7:10])]], new=[2], room=[True])
    cache.update(torch.ones(1, 3, 2, 4), torch.ones(1, 3, 2, 4), 0)
    assert torch.equal(full[0, :, 10:12], torch.ones(3, 2, 4))  # written in place, after the entry


def test_a_row_without_a_past_gets_buffers_of_its_own_with_room():
    cache = kv.RaggedKV([[None, None]], new=[3, 1], room=[True, True])
    states = torch.randn(2, 3, 3, 4)
    cache.update(states, states + 1, 0)
    assert torch.equal(cache.keys[0][0], states[0:1]) and torch.equal(cache.values[0][1], states[1:2, :, :1] + 1)
    assert kv.has_room(cache.keys[0][0], kv.ROOM)  # its next decode steps append in place
    assert cache.keys[0][0].untyped_storage().data_ptr() != cache.keys[0][1].untyped_storage().data_ptr()


def reference_attention(q, k, v, scale):
    """Plain softmax attention of new queries q (heads, n, d) at the last n of k's positions,
    causal, each query head on its key/value head (heads // kv_heads query heads share one)."""
    heads, n, _ = q.shape
    groups = heads // k.shape[0]
    k, v = k.repeat_interleave(groups, 0), v.repeat_interleave(groups, 0)
    total = k.shape[1]
    scores = q @ k.transpose(1, 2) * scale
    allowed = torch.arange(total)[None, :] <= torch.arange(total - n, total)[:, None]
    return (scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v).transpose(0, 1)  # (n, heads, d)


def test_each_row_attends_to_its_own_past_causally_and_padding_stays_zero():
    """Three rows in one pass, as a class makes them: a decode row on a long past, a prompt chunk
    (3 new tokens) on a short past, a prompt with no past; 6 query heads on 2 key/value heads."""
    torch.manual_seed(0)
    heads, kv_heads, d, scale = 6, 2, 8, 8 ** -0.5
    pasts, new = [11, 4, 0], [1, 3, 2]
    past = [[(torch.randn(1, kv_heads, p, d), torch.randn(1, kv_heads, p, d)) if p else None for p in pasts]]
    cache = kv.RaggedKV(past, new=new, room=[True] * 3)
    length = max(new)
    key_states, value_states = torch.randn(3, kv_heads, length, d), torch.randn(3, kv_heads, length, d)
    cache.update(key_states, value_states, 0)
    query = torch.randn(3, heads, length, d)
    out = cache.attend(0, query, scale)
    assert out.shape == (3, length, heads, d)
    for i, n in enumerate(new):
        k, v = cache.keys[0][i][0], cache.values[0][i][0]
        assert k.shape[1] == pasts[i] + n
        expected = reference_attention(query[i, :, :n], k, v, scale)
        assert torch.allclose(out[i, :n], expected, atol=1e-5)
        assert not out[i, n:].any()  # a padded position is neither attended to nor given a value


def test_without_a_ragged_cache_the_attention_is_sdpas():
    class Module:
        num_key_value_groups, is_causal, layer_idx = 1, True, 0

    q, k, v = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8)
    out, _ = kv.ragged_attention(Module(), q, k, v, None, scaling=0.5)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
    assert torch.allclose(out, expected.transpose(1, 2), atol=1e-6)
