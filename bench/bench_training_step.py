"""Benchmark: where a training step of scripts/tune.py spends its time, and what that leaves for the
20-minute goal (issue 24).

    .venv/bin/python bench/bench_training_step.py            # about 3 minutes on 2 cores

Loads the base model and the runs exactly as `scripts/tune.py` does (float32, eager attention unless
--attention sdpa, LoRA r = 16 on every linear layer, batches of tune.BATCH runs over their shared
prefix), then:
  1. times --steps steps of the first epoch's plan (after --warmup untimed ones), each a forward,
     backward and AdamW update; every step must give a finite loss and move the LoRA weights,
     or the benchmark stops (a step that did no work would time nothing);
  2. profiles two more steps (torch.profiler) and splits their CPU time into the matrix products
     (aten::mm/addmm: the linear layers; aten::bmm: eager attention), sdpa's attention kernels
     (--attention sdpa) and everything else;
  3. times single matrix products on the linear layers' shapes at a step's row count, and one
     4096 × 4096 × 4096 product: what the BLAS reaches on this CPU at best;
  4. prints what an epoch of the shipped runs takes at the measured rate, and what share of its
     tokens `make tune`'s epochs could have in 20 minutes.
The allocator is glibc's, kept (tune.keep_freed_memory), unless the process was started under
mimalloc (`LD_PRELOAD`, as scripts/tune.py restarts itself): the header says which. Figures only,
never asserts on a timing.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tune  # noqa: E402  (scripts/tune.py)
from _common import header, print_table  # noqa: E402

from agent.tuning.trajectories import DATA_DIR  # noqa: E402

PRODUCTS = {"aten::mm": "linear layers (aten::mm)", "aten::addmm": "linear layers (aten::mm)",
            "aten::bmm": "attention (aten::bmm)"}
GOAL_S = 20 * 60


def gemm_rate(rows: int, inner: int, cols: int, seconds: float = 1.5) -> float:
    """GFLOP/s of one (rows × inner) @ (inner × cols) float32 product, repeated for `seconds`."""
    import torch

    a, b = torch.randn(rows, inner), torch.randn(inner, cols)
    for _ in range(2):
        a @ b
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
        a @ b
        n += 1
    return 2 * rows * inner * cols * n / (time.perf_counter() - t) / 1e9


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=10, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--adapter", choices=tuple(tune.ADAPTERS), default="with-thoughts")
    p.add_argument("--attention", choices=("eager", "sdpa"), default=tune.ATTENTION,
                   help=f"the attention kernel while training (scripts/tune.py: {tune.ATTENTION})")
    p.add_argument("--prefix-grad", choices=("on", "off"), default="on",
                   help="off: the shared prefix runs without autograd (the same loss, no gradient through its "
                        "keys and values; scripts/tune.py trains with it on)")
    args = p.parse_args()
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    malloc = "mimalloc" if tune.mimalloc_loaded() else ("glibc, kept" if tune.keep_freed_memory() else "default")
    header(f"A training step of scripts/tune.py (bench/bench_training_step.py; malloc: {malloc})")
    lm = tune.base_model()
    weights, data = tune.ADAPTERS[args.adapter]
    exs = tune.examples(Path(DATA_DIR), data, lm.tokenizer, None, tune.MAX_TOKENS)
    prefix = tune.shared_prefix(exs)
    model = tune.peft_model(lm)
    lm.model.config._attn_implementation = args.attention
    lora = [q for q in model.parameters() if q.requires_grad]
    optimizer = torch.optim.AdamW(lora, lr=1e-5)
    # a B matrix starts at zero, where weight decay alone cannot move it: only a gradient does
    watched = next(q for name, q in model.named_parameters() if q.requires_grad and "lora_B" in name)
    plan = tune.epoch_plan(exs, 0, tune.BATCH)
    if len(plan) < args.warmup + args.steps + 2:
        raise SystemExit(f"the plan has {len(plan)} batches, fewer than the steps asked for")

    def step(batch) -> None:
        before = watched.detach().clone()
        loss = tune.batch_loss(model, prefix, batch, False, prefix_grad=args.prefix_grad == "on")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if not math.isfinite(loss) or torch.equal(before, watched.detach()):
            raise SystemExit(f"a step did no work (loss {loss}, LoRA weights unchanged: "
                             f"{torch.equal(before, watched.detach())})")

    def processed(batch) -> int:  # the prefix once, then each row's suffix padded to the widest
        return len(prefix) + len(batch) * (max(len(e.input_ids) for e in batch) - len(prefix))

    for batch in plan[:args.warmup]:
        step(batch)
    timed = plan[args.warmup:args.warmup + args.steps]
    t = time.perf_counter()
    for batch in timed:
        step(batch)
    seconds = time.perf_counter() - t
    sequence_tokens = sum(len(e.input_ids) for b in timed for e in b)
    rate = sequence_tokens / seconds

    profiled = plan[args.warmup + args.steps:args.warmup + args.steps + 2]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in profiled:
            step(batch)
    shares: dict[str, float] = {}
    for event in prof.key_averages():
        kind = PRODUCTS.get(event.key, "attention (sdpa's kernels)" if "attention" in event.key else "everything else")
        shares[kind] = shares.get(kind, 0.0) + event.self_cpu_time_total
    total = sum(shares.values())

    positions = sum(processed(b) for b in timed) // len(timed)
    hidden, inner = lm.model.config.hidden_size, lm.model.config.intermediate_size
    print_table(f"{weights}, {args.attention} attention, the prefix's gradient {args.prefix_grad}: a step, and its CPU "
                f"by operation", ["figure", "value"], [
        ["runs · shared prefix · batch", f"{len(exs)} · {len(prefix)} tokens · {tune.BATCH} runs"],
        [f"{args.steps} steps (after {args.warmup} untimed)",
         f"{seconds:.1f} s · {seconds / args.steps:.2f} s a step · {rate:.0f} sequence tokens/s"],
        ["positions a step computes (the prefix once + padded suffixes)", f"{positions:,} (of "
         f"{sequence_tokens // len(timed):,} sequence tokens)"],
        *[[f"share of a profiled step's CPU: {k}", f"{100 * v / total:.0f} %"] for k, v in sorted(shares.items())],
        *[[f"one product {m} × {k} × {n} (float32, {torch.get_num_threads()} threads)",
           f"{gemm_rate(m, k, n):.0f} GFLOP/s"]
          for m, k, n in ((positions, hidden, inner), (positions, inner, hidden), (positions, hidden, hidden))],
        ["one product 4096 × 4096 × 4096: the BLAS's best here", f"{gemm_rate(4096, 4096, 4096):.0f} GFLOP/s"],
    ])
    epoch_tokens = sum(len(e.input_ids) for e in exs)
    epoch_s = epoch_tokens / rate
    print(f"\nAt {rate:.0f} sequence tokens/s one epoch of {epoch_tokens:,} sequence tokens takes "
          f"{epoch_s / 60:.0f} minutes; `make tune`'s {tune.EPOCHS} epochs {tune.EPOCHS * epoch_s / 60:.0f} minutes an "
          f"adapter. In 20 minutes: {100 * GOAL_S / (tune.EPOCHS * epoch_s):.0f} % of the runs' tokens at "
          f"{tune.EPOCHS} epochs, {100 * GOAL_S / epoch_s:.0f} % at one.")
    print(f"1-minute load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
