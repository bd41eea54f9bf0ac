"""--dtype float16 (agent/llm/half.py): float16 weights, float32 arithmetic.

The oracle is torch's float32 Linear on the same weights rounded to float16: fbgemm's kernel must
compute those products (it only holds the weights in half the bytes). With the real model, the
float16 weights must change what the lab shows by no more than the rounding can: the lecture's
"The capital of France is" keeps its top five, each probability within 0.001.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agent.llm.half import HalfEmbedding, HalfLinear, convert


@pytest.mark.parametrize("shape", [(1, 576), (8, 1, 576), (3, 17, 576), (0, 576)])
@pytest.mark.parametrize("bias", [False, True])
def test_a_half_linear_computes_float32_products_of_the_rounded_weights(shape, bias):
    g = torch.Generator().manual_seed(0)
    linear = torch.nn.Linear(576, 192, bias=bias)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(192, 576, generator=g) * 0.05)
    x = torch.randn(*shape, generator=g)
    half = HalfLinear(linear.weight, linear.bias)
    rounded = torch.nn.functional.linear(x, linear.weight.half().float(), linear.bias)
    out = half(x)
    assert out.dtype == torch.float32 and out.shape == (*shape[:-1], 192)
    assert torch.allclose(out, rounded, atol=1e-5, rtol=1e-5)
    if x.numel():
        assert not torch.equal(linear.weight.half().float(), linear.weight)  # the rounding is real
        assert (out - linear(x)).abs().max() < 1e-2  # and small


def test_a_half_embedding_returns_float32_rows_of_the_rounded_table():
    table = torch.randn(50, 8)
    emb = HalfEmbedding(table)
    ids = torch.tensor([[3, 0, 49]])
    out = emb(ids)
    assert out.dtype == torch.float32 and out.shape == (1, 3, 8)
    assert torch.equal(out[0], table.half().float()[[3, 0, 49]])
    assert emb.table.dtype == torch.float16


def test_convert_replaces_every_linear_and_the_embedding_and_keeps_the_numbers():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # the oracle: the same model with its weights rounded to float16 values
        for p in model.parameters():
            p.copy_(p.half().float())
    ids = torch.tensor([[1, 5, 9, 2]])
    with torch.no_grad():
        expected = model(input_ids=ids).logits
    convert(model)
    assert not any(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert isinstance(model.get_input_embeddings(), HalfEmbedding)
    with torch.inference_mode():
        assert torch.allclose(model(input_ids=ids).logits, expected, atol=1e-5)


@pytest.mark.model
def test_the_lecture_distribution_barely_moves_with_float16_weights(lm):
    from agent.llm.model import load_model
    from agent.sampling import softmax

    assert lm.dtype == "float16"  # the app's default is what the tests run
    exact = load_model(dtype="float32", log=lambda _: None, adapters=False)
    ids = lm.encode("The capital of France is")
    p = softmax(lm.next_token_logits(ids, session="half"))
    q = softmax(exact.next_token_logits(ids))
    top = np.argsort(-q)[:5]
    assert list(np.argsort(-p)[:5]) == list(top)
    assert np.abs(p[top] - q[top]).max() < 1e-3
    assert 0.5 * np.abs(p - q).sum() < 2e-3  # total variation
    assert lm.token_strings[int(top[0])] == "␠Paris"
