"""Benchmark: a decode step's attention for one row, as agent/llm/kv.py runs it (issue 25).

    .venv/bin/python bench/bench_attention.py        # about half a minute

A decode pass attends each row to its own keys and values (RaggedKV.attend): per layer and row one
SDPA call, the row's 9 query heads folded onto its 3 key/value heads (1, 3, 3, 64) against its
past (1, 3, n, 64), on the pass's one thread. Nothing of it is shared between rows, so its cost
grows with every row a pass carries. Here each call reads buffers of its own, 240 of them (8 rows
× 30 layers, as a pass does), so the keys and values come from memory, not from the cache, as in
a pass. Timed, per call (median of 5 rounds over the 240):
  - SDPA on float32 keys and values (the app's);
  - SDPA on bfloat16 and on float16 ones (half the bytes to read), and the same cast to float32
    first;
  - the floor: reading the same float32 keys and values once (a sum of each), the memory's own
    rate on one thread.
Every call's output is checked against float32 SDPA (a kernel that returns nothing would time
nothing). Figures only, never asserts.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, median, print_table  # noqa: E402

ROOM = 64  # as agent/llm/kv.ROOM: each buffer has room after its positions
CALLS = 240  # 8 rows × 30 layers


def ways(sdpa, q, kv: list, halves: dict) -> dict:
    """name → a function running the 240 calls one way, each returning the calls' outputs."""
    out = {"SDPA, float32 keys and values (the app's)": lambda: [sdpa(q, k, v, scale=0.125) for k, v in kv]}
    for dt, pairs in halves.items():
        name = str(dt).removeprefix("torch.")
        out[f"SDPA, {name} keys and values"] = (
            lambda dt=dt, pairs=pairs: [sdpa(q.to(dt), k, v, scale=0.125).float() for k, v in pairs])
        out[f"{name} cast to float32, then SDPA"] = (
            lambda pairs=pairs: [sdpa(q, k.float(), v.float(), scale=0.125) for k, v in pairs])
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--past", type=int, nargs="+", default=[600, 1500], help="positions of each row's past")
    args = p.parse_args()
    import torch
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    torch.set_num_threads(1)
    header("A decode step's attention for one row (bench/bench_attention.py)")
    rows = []
    for n in args.past:
        kv = [(torch.randn(1, 3, n + ROOM, 64)[:, :, :n], torch.randn(1, 3, n + ROOM, 64)[:, :, :n])
              for _ in range(CALLS)]
        q = torch.randn(1, 3, 3, 64)
        reference = [sdpa(q, k, v, scale=0.125) for k, v in kv]
        halves = {dt: [(k.to(dt), v.to(dt)) for k, v in kv] for dt in (torch.bfloat16, torch.float16)}
        cases = ways(sdpa, q, kv, halves)
        for name, run in cases.items():
            out = run()
            worst = max(float((a - b).abs().max()) for a, b in zip(out, reference, strict=True))
            if worst > 0.05:
                raise SystemExit(f"{name}: the output differs from float32 SDPA by {worst}")
            times = []
            for _ in range(5):
                t = time.perf_counter()
                run()
                times.append((time.perf_counter() - t) / CALLS)
            rows.append([n, name, f"{median(times) * 1e6:.0f} µs", f"{worst:.1e}"])
        times = []
        for _ in range(5):
            t = time.perf_counter()
            total = sum(float(k.sum()) + float(v.sum()) for k, v in kv)
            times.append((time.perf_counter() - t) / CALLS)
        if not math.isfinite(total):
            raise SystemExit("the floor's sums are not finite: the keys and values were not read")
        gbs = 2 * n * 3 * 64 * 4 / median(times) / 1e9
        rows.append([n, f"the floor: read the float32 keys and values once ({gbs:.1f} GB/s)",
                     f"{median(times) * 1e6:.0f} µs", "—"])
    print_table("One row's attention in one layer, keys and values from memory (one thread, median of 5 rounds "
                f"of {CALLS} calls)", ["past", "how", "per call", "max |difference| from float32 SDPA"], rows)


if __name__ == "__main__":
    main()
