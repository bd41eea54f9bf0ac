"""Benchmark: the linear layers' products of one pass, float32 (MKL) against float16 weights (fbgemm).

    .venv/bin/python bench/bench_products.py [--threads 1] [--rows 1 2 8 11 128]

The shapes are SmolLM2-135M's (hidden 576, MLP 1536, 3 key/value heads of 64): the seven products
of a decoder layer, 30 times, and the tied head over the 49,152-token vocabulary, on random weights,
for a pass of N rows. The float16 side is what `--dtype float16` runs (agent/llm/half.py). Each
product's result is checked against float32 on the rounded weights, so neither side can time a
no-op. Figures only (median of --repeat calls), never asserts on a timing. About a minute.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from _common import header, median, ms, print_table  # noqa: E402

from agent.llm.half import HalfLinear  # noqa: E402

HIDDEN, MLP, KV, VOCAB, LAYERS = 576, 1536, 192, 49152, 30
LAYER = [(HIDDEN, HIDDEN), (KV, HIDDEN), (KV, HIDDEN), (HIDDEN, HIDDEN), (MLP, HIDDEN), (MLP, HIDDEN), (HIDDEN, MLP)]


def layers(products: list, xs: dict) -> None:
    """The decoder layers' products of one pass: product i of LAYER, LAYERS times."""
    for _ in range(LAYERS):
        for product, (_, inputs) in zip(products, LAYER, strict=True):
            product(xs[inputs])


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rows", type=int, nargs="+", default=[1, 2, 8, 11, 64, 128])
    p.add_argument("--repeat", type=int, default=15)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    header(f"The products of one pass, float32 against float16 weights ({args.threads} thread(s))")
    g = torch.Generator().manual_seed(0)
    weights = [torch.randn(o, i, generator=g) * 0.02 for o, i in LAYER]
    head = torch.randn(VOCAB, HIDDEN, generator=g) * 0.02
    halves, half_head = [HalfLinear(w) for w in weights], HalfLinear(head)
    table = []
    with torch.inference_mode():
        for rows in args.rows:
            xs = {i: torch.randn(rows, i, generator=g) for i in (HIDDEN, MLP)}
            for w, h in zip(weights + [head], halves + [half_head], strict=True):  # the work is done, and right
                x = xs[w.shape[1]]
                assert torch.allclose(h(x), torch.nn.functional.linear(x, w.half().float()), atol=1e-4)

            f32 = [functools.partial(torch.nn.functional.linear, weight=w) for w in weights]
            table.append([rows, ms(timed(functools.partial(layers, f32, xs), args.repeat)),
                          ms(timed(functools.partial(layers, halves, xs), args.repeat)),
                          ms(timed(functools.partial(torch.nn.functional.linear, xs[HIDDEN], head), args.repeat)),
                          ms(timed(functools.partial(half_head, xs[HIDDEN]), args.repeat))])
    print_table("Median per call", ["rows", "30 layers: float32", "float16 weights", "tied head: float32",
                                     "float16 weights"], table)


if __name__ == "__main__":
    main()
