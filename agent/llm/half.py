"""Weights in float16, products in float32: the `--dtype float16` of the model layer.

    half.convert(model)    # every Linear and the tied embedding of a causal LM, in place

The bundled model is a Q4_1 GGUF: each weight is d·q + m, a 4-bit q with a float16 scale d and
minimum m per block of 32, dequantized to float32 on load. Rounding those values to float16 moves
each by at most 2⁻¹¹ of itself, far less than a Q4_1 step (a sixteenth of the block's range). A
pass then reads half the bytes of weights, and fbgemm's float16 kernels
(`quantized.linear_dynamic_fp16`) convert them to float32 in registers and multiply and add in
float32: the products equal float32 products on the rounded weights (tests/test_half.py).

Why: a decode pass of a few rows is bound by reading the weights, and MKL's float32 kernels run
such thin products at a fraction of their speed. On the AVX2 host the decoder layers' products of
one row took 19 against 35 ms, of 8 rows 37 against 76 ms, and the tied head of 8 rows 11 against
27 ms (docs/DESIGN-NOTES.md, "Weights in float16, products in float32").

What it does not know: training (peft adapts torch's Linear only: scripts/tune.py loads float32),
the adapters' low-rank updates (forward hooks on these modules, agent/llm/weights.py, in float32).
"""

from __future__ import annotations

import ctypes

import torch


def rounded(weight: torch.Tensor) -> torch.Tensor:
    """The weight's values rounded to float16 (the numbers --dtype float16 computes with)."""
    return weight.detach().to(torch.float16)


class HalfLinear(torch.nn.Module):
    """y = x Wᵀ + b with W held as fbgemm's packed float16 matrix; x, y and the sums in float32."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        # fbgemm takes float32 and rounds it to float16 itself (to nearest, as Tensor.half())
        self.packed = torch.ops.quantized.linear_prepack_fp16(
            weight.detach().float(), None if bias is None else bias.detach().float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.quantized.linear_dynamic_fp16(x, self.packed)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, weights=float16"


class HalfEmbedding(torch.nn.Module):
    """The token embedding as a float16 table; the vectors it returns are float32."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.table = rounded(weight)
        self.num_embeddings, self.embedding_dim = weight.shape

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(ids, self.table).float()


def convert(model) -> None:
    """Every torch Linear of `model` (a transformers causal LM, in float32 or float16) becomes a
    HalfLinear and its input embedding a HalfEmbedding, in place; every other parameter and buffer
    becomes float32. A head tied to the embedding gets the same rounded values."""
    for name, module in list(model.named_modules()):
        if isinstance(module, torch.nn.Linear):
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent), child, HalfLinear(module.weight, module.bias))
    model.set_input_embeddings(HalfEmbedding(model.get_input_embeddings().weight))
    for t in [*model.parameters(), *model.buffers()]:  # the rest (the norms) in float32, in memory of
        t.data = t.data.to(torch.float32, copy=True)  # their own: a mapped weights file is let go
    give_back_freed_memory()


def give_back_freed_memory() -> None:
    """glibc keeps the blocks the loader's float16 weights freed (~200 MB here) for later mallocs;
    hand them back to the system, so the process stays at what it holds. Elsewhere: nothing."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
