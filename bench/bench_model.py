"""Model benchmarks: how fast agent.llm.model answers, and how far bfloat16 drifts from float32.

    .venv/bin/python bench/bench_model.py            # ~3-5 min on 2 cores
    .venv/bin/python bench/bench_model.py --repeats 2 --tokens 32   # a quick look

Prints Markdown tables: a 16-token forward pass (no cache), decode through next_token_logits
(one greedy token appended at a time, at a short and a long context), the total-variation
distance of bfloat16's next-token distribution to float32's, and experiments that live only here
(thread count, the raw transformers loop, int4 weights that reproduce the GGUF's Q4_1 grid), plus
a profile of the decode step. Figures only: nothing here asserts on a timing.

What it does not know: the page. Startup time and memory are in bench_startup.py.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import header, median, ms, p95, print_table  # noqa: E402

from agent.llm.model import LanguageModel, load_model  # noqa: E402

LLAMA_CPP_TOK_S = 98  # measured earlier on this machine, same GGUF (DESIGN.md); not measured here
GOAL_TOK_S = 25
GOAL_TV = 0.02
INT4_GROUP = 32  # GGUF Q4_1 blocks: 32 weights sharing one scale d and one minimum m

STORY = "Once upon a time, in a small village by the sea, there lived"
FORWARD_TEXT = (
    "The quick brown fox jumps over the lazy dog while the farmer counts his sheep in the "
    "early morning light."
)
TV_PROMPTS = [
    "The capital of France is",
    "Water boils at a temperature of",
    "Once upon a time, a little dragon",
    "def fibonacci(n):\n    ",
    "import numpy as np\nx = np.",
    '{"name": "get_weather", "arguments": {"',
    "The three primary colours are red,",
    "Q: What is 17 times 3?\nA:",
    "SELECT name, age FROM",
]
CHAT = [{"role": "user", "content": "What is the tallest mountain in Europe?"}]
LONG_SYSTEM = (
    "You are a helpful assistant that answers with the ReAct format. You may call these tools: "
    + " ".join(
        f"Tool {i}: get_item_{i}(id: integer) returns the record number {i} of the store, with "
        "its name, price, stock and a short description written by the shop keeper."
        for i in range(24)
    )
)


# --- timing helpers --------------------------------------------------------------------------


STARTED = time.perf_counter()


def progress(what: str) -> None:
    """A line on stderr, so a slow run on a busy machine shows where it is."""
    print(f"[{time.perf_counter() - STARTED:6.0f} s] {what}", file=sys.stderr, flush=True)


def timed(f: Callable[[], object]) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def forward_times(lm: LanguageModel, ids: list[int], runs: int, warmup: int = 3) -> list[float]:
    """Seconds per full_forward_logits call (no cache) over ``runs`` calls after a warm-up."""
    for _ in range(warmup):
        lm.full_forward_logits(ids)
    return [timed(lambda: lm.full_forward_logits(ids)) for _ in range(runs)]


def decode_steps(lm: LanguageModel, prompt_ids: list[int], tokens: int) -> list[float]:
    """Seconds of each next_token_logits call that appends one greedy token (prefill excluded)."""
    ids = list(prompt_ids)
    logits = lm.next_token_logits(ids)  # prefill: runs the whole prompt
    steps = []
    for _ in range(tokens):
        ids.append(int(logits.argmax()))
        start = time.perf_counter()
        logits = lm.next_token_logits(ids)
        steps.append(time.perf_counter() - start)
    return steps


def raw_decode_steps(lm: LanguageModel, prompt_ids: list[int], tokens: int) -> list[float]:
    """The same decode as plain transformers: the cache object kept, no prefix bookkeeping."""
    model = lm.model
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([prompt_ids]), use_cache=True, logits_to_keep=1)
        cache, steps = out.cache, []
        for _ in range(tokens):
            nxt = torch.tensor([[int(out.logits[0, -1].argmax())]])
            start = time.perf_counter()
            out = model(input_ids=nxt, cache=cache, use_cache=True, logits_to_keep=1)
            out.logits[0, -1].float().numpy().copy()  # as next_token_logits hands logits over
            steps.append(time.perf_counter() - start)
    return steps


class Prompts:
    """Distinct prompts, so no decode run ever finds its sequence already in the prefix cache."""

    def __init__(self, lm: LanguageModel, text: str):
        self.lm, self.text, self.n = lm, text, 0

    def next(self) -> list[int]:
        self.n += 1
        return self.lm.encode(f"{self.n}. {self.text}")


# --- int4 weights on the Q4_1 grid (an experiment: agent/llm/model.py is not changed) --------------


class Int4Linear(torch.nn.Module):
    """A bias-free Linear whose weights are 4-bit codes with one scale and minimum per 32 inputs.

    A GGUF Q4_1 block stores w = d·q + m with q ∈ 0..15, and its quantizer maps the block's
    minimum to q = 0 and maximum to q = 15, so d = (max − min)/15 and m = min recover the codes
    exactly from the dequantized float32 weights. torch's CPU kernel computes (q − 8)·s + z, so
    s = d, z = m + 8d. The kernel is fast for bfloat16 inputs only: inputs are cast to it.
    """

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        w = linear.weight.detach().float()
        n, k = w.shape
        blocks = w.view(n, k // INT4_GROUP, INT4_GROUP)
        low = blocks.amin(-1)
        scale = ((blocks.amax(-1) - low) / 15).clamp(min=1e-12)
        q = torch.round((blocks - low[..., None]) / scale[..., None]).clamp(0, 15)
        self.code_error = float((q * scale[..., None] + low[..., None] - blocks).abs().max())
        codes = q.to(torch.int32).view(n, k)
        self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 1)
        zeros = low + 8 * scale
        self.scales_zeros = torch.stack([scale, zeros], -1).transpose(0, 1).contiguous().bfloat16()
        s, z = self.scales_zeros.float().transpose(0, 1).unbind(-1)  # as the kernel will see them
        self.weight_error = float(((q - 8) * s[..., None] + z[..., None] - blocks).abs().max())
        self.k, self.n = k, n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.k).to(torch.bfloat16)
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(
            flat, self.packed, INT4_GROUP, self.scales_zeros
        )
        return y.to(x.dtype).reshape(*x.shape[:-1], self.n)


def int4_body(lm: LanguageModel, fp32: LanguageModel) -> tuple[LanguageModel, float, float]:
    """A copy of lm whose decoder-layer Linears are Int4Linear, built from fp32's weights (bfloat16
    weights are off the Q4_1 grid). lm_head (the tied embedding, Q8_0 in this GGUF) keeps lm's
    dtype. Returns (model, worst code-recovery error, worst weight error with bfloat16 scales)."""
    model = copy.deepcopy(lm.model)
    code_error = weight_error = 0.0
    for layer, exact in zip(model.model.layers, fp32.model.model.layers, strict=True):
        for parent, source in ((layer.self_attn, exact.self_attn), (layer.mlp, exact.mlp)):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    new = Int4Linear(getattr(source, name))
                    code_error = max(code_error, new.code_error)
                    weight_error = max(weight_error, new.weight_error)
                    setattr(parent, name, new)
    dtype = f"{lm.dtype} + int4 layers"
    quantized = LanguageModel(model, lm.tokenizer, lm.source, dtype, lm.from_cache)
    return quantized, code_error, weight_error


def weight_bytes(lm: LanguageModel) -> int:
    """Bytes of matrix weights one decode step reads (every Linear, lm_head included)."""
    total = 0
    for module in lm.model.modules():
        if isinstance(module, torch.nn.Linear):
            total += module.weight.nbytes
        elif isinstance(module, Int4Linear):
            total += module.packed.nbytes + module.scales_zeros.nbytes
    return total


# --- the measurements ------------------------------------------------------------------------


def bench_forward(models: dict[str, LanguageModel], runs: int) -> None:
    ids = models["float32"].encode(FORWARD_TEXT)[:16]
    assert len(ids) == 16, "the forward-pass text must give at least 16 tokens"
    rows = []
    for name, lm in models.items():
        t = forward_times(lm, ids, runs)
        rows.append([name, 16, len(t), ms(median(t)), ms(p95(t))])
    print_table(
        "Forward pass, 16-token prompt, no cache (full_forward_logits)",
        ["dtype", "tokens", "runs", "median", "p95"],
        rows,
    )


Run = Callable[[], list[float]]  # one decode run on a fresh prompt → seconds per step


def bench_decode(variants: dict[str, tuple[Run, int]]) -> dict[str, list[float]]:
    """Round-robin over variants (name → (run, repeats)), so a burst of load from other work hits
    all of them alike."""
    steps: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(max(repeats for _, repeats in variants.values())):
        for name, (run, repeats) in variants.items():
            if round_ < repeats:
                steps[name] += run()
        progress(f"decode round {round_ + 1} done")
    return steps


def decode_row(name: str, context: str, steps: list[float], nbytes: int) -> list[object]:
    med = median(steps)
    goal = "yes" if 1 / med >= GOAL_TOK_S else "no"
    gbs = nbytes / med / 1e9
    return [name, context, len(steps), ms(med), ms(p95(steps)), ms(min(steps)), f"{1 / med:.1f}",
            goal, f"{nbytes / 1e6:.0f} MB", f"{gbs:.1f}"]


DECODE_COLUMNS = ["variant", "context (tokens)", "steps", "median step", "p95 step", "min step",
                  "tok/s (median)", f"≥ {GOAL_TOK_S} tok/s", "weights read / step",
                  "GB/s (median)"]


def with_threads(n: int, run: Callable[[], list[float]]) -> Callable[[], list[float]]:
    def wrapped() -> list[float]:
        before = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            return run()
        finally:
            torch.set_num_threads(before)

    return wrapped


def thread_probe(tokens: int, repeats: int) -> None:
    """Child mode (--thread-probe): decode with 2 and 1 threads, print one JSON line of steps."""
    lms = {d: load_model(dtype=d, log=lambda m: None) for d in ("float32", "bfloat16")}
    prompts = {n: Prompts(lm, STORY) for n, lm in lms.items()}
    variants = {
        f"{n}|{t}": (with_threads(t, lambda n=n: decode_steps(lms[n], prompts[n].next(), tokens)),
                     repeats)
        for n in lms for t in (2, 1)
    }
    print("PROBE " + json.dumps(bench_decode(variants)), flush=True)


def bench_threads(tokens: int, repeats: int) -> None:
    """Threads × OpenMP wait policy, each policy in a fresh process (libgomp reads it at start)."""
    rows = []
    for policy in (None, "PASSIVE"):
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        if policy:
            env["OMP_WAIT_POLICY"] = policy
        argv = [sys.executable, __file__, "--thread-probe", "--tokens", str(tokens),
                "--experiment-repeats", str(repeats)]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
        lines = [x for x in done.stdout.splitlines() if x.startswith("PROBE ")]
        if not lines:
            rows.append([policy or "unset", "", "", f"probe failed: {done.stderr[-200:]!r}"])
            continue
        for key, steps in json.loads(lines[0][len("PROBE "):]).items():
            dtype, threads = key.split("|")
            rows.append([policy or "unset (libgomp spins)", dtype, threads, len(steps),
                         ms(median(steps)), ms(p95(steps)), ms(min(steps)),
                         f"{1 / median(steps):.1f}"])
    print_table(
        f"Threads × OMP_WAIT_POLICY: decode through next_token_logits ({tokens} tokens per run, "
        "short context, each policy in its own process)",
        ["OMP_WAIT_POLICY", "dtype", "threads", "steps", "median step", "p95 step", "min step",
         "tok/s (median)"],
        rows,
    )


def next_token_probs(lm: LanguageModel, text: str) -> np.ndarray:
    z = lm.full_forward_logits(lm.encode(text)).astype(np.float64)
    p = np.exp(z - z.max())
    return p / p.sum()


def bench_tv(reference: LanguageModel, others: dict[str, LanguageModel]) -> None:
    """Total-variation distance 0.5·Σ|p − q| of each variant's next-token distribution to
    float32's."""
    prompts = TV_PROMPTS + [reference.apply_chat_template(CHAT)]
    ref = [next_token_probs(reference, t) for t in prompts]
    rows = []
    for name, lm in others.items():
        got = [next_token_probs(lm, t) for t in prompts]
        tv = [0.5 * float(np.abs(p - q).sum()) for p, q in zip(ref, got, strict=True)]
        same = sum(int(p.argmax() == q.argmax()) for p, q in zip(ref, got, strict=True))
        worst = prompts[int(np.argmax(tv))][:28]
        rows.append([name, len(prompts), f"{np.mean(tv):.4f}", f"{max(tv):.4f}",
                     "yes" if max(tv) < GOAL_TV else "no", f"{same}/{len(prompts)}", repr(worst)])
    print_table(
        "Next-token distribution vs float32: total-variation distance 0.5·Σ|p−q|",
        ["variant", "prompts", "mean TV", "max TV", f"max < {GOAL_TV}", "same argmax",
         "worst prompt"],
        rows,
    )


def bench_profile(models: dict[str, LanguageModel], tokens: int) -> None:
    """Where one decode step's time goes: the top operators by self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    rows = []
    for name, lm in models.items():
        prompt = Prompts(lm, STORY + " a profiler").next()
        ids = list(prompt)
        logits = lm.next_token_logits(ids)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(tokens):
                ids.append(int(logits.argmax()))
                logits = lm.next_token_logits(ids)
        events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)
        total = sum(e.self_cpu_time_total for e in events)
        for e in events[:6]:
            rows.append([name, e.key, f"{e.self_cpu_time_total / tokens / 1000:.2f} ms",
                         f"{100 * e.self_cpu_time_total / total:.0f} %", e.count // tokens])
        rows.append([name, "(all operators)", f"{total / tokens / 1000:.2f} ms", "100 %", ""])
    print_table(
        f"Decode step profile ({tokens} steps, torch.profiler, top operators by self CPU time)",
        ["dtype", "operator", "self CPU / step", "share", "calls / step"],
        rows,
    )


def load_both() -> tuple[LanguageModel, LanguageModel]:
    models, rows = [], []
    for dtype in ("float32", "bfloat16"):
        start = time.perf_counter()
        models.append(load_model(dtype=dtype, log=lambda m: print(m, file=sys.stderr)))
        rows.append([dtype, f"{time.perf_counter() - start:.2f} s", models[-1].from_cache])
    print_table("Model load (load_model)", ["dtype", "time", "from cache"], rows)
    return models[0], models[1]


def decode_variants(lms: dict[str, LanguageModel], tokens: int) -> dict[str, Run]:
    """Every decode variant as a callable running one fresh prompt; the first two are the app's
    own path, the others are experiments."""
    story = {name: Prompts(lm, STORY) for name, lm in lms.items()}
    fp32, bf16 = lms["float32"], lms["bfloat16"]

    def via(name: str) -> Run:
        return lambda: decode_steps(lms[name], story[name].next(), tokens)

    return {
        "float32": via("float32"),
        "bfloat16": via("bfloat16"),
        "float32, raw transformers loop": lambda: raw_decode_steps(
            fp32, story["float32"].next(), tokens),
        "bfloat16, raw transformers loop": lambda: raw_decode_steps(
            bf16, story["bfloat16"].next(), tokens),
        "float32 + int4 layers": via("float32 + int4 layers"),
        "bfloat16 + int4 layers": via("bfloat16 + int4 layers"),
    }


def long_context_rows(lms: dict[str, LanguageModel], tokens: int, repeats: int) -> list[list]:
    """Decode after a ~1,000-token ReAct-style prompt (a system message listing 24 tools)."""
    messages = [{"role": "system", "content": LONG_SYSTEM}, *CHAT]
    prompts = {n: Prompts(lms[n], lms[n].apply_chat_template(messages))
               for n in ("float32", "bfloat16")}
    steps = bench_decode(
        {n: (lambda n=n: decode_steps(lms[n], prompts[n].next(), tokens), repeats) for n in prompts}
    )
    length = len(prompts["float32"].next())
    return [decode_row(n, f"{length} → {length + tokens}", s, weight_bytes(lms[n]))
            for n, s in steps.items()]


def bench_decode_tables(lms: dict[str, LanguageModel], tokens: int, repeats: int,
                        experiment_repeats: int) -> None:
    variants = decode_variants(lms, tokens)
    app_path = ("float32", "bfloat16")
    steps = bench_decode({n: (run, repeats if n in app_path else experiment_repeats)
                          for n, run in variants.items()})
    short = len(Prompts(lms["float32"], STORY).next())
    context = f"{short} → {short + tokens}"
    rows = {n: decode_row(n, context, steps[n], weight_bytes(lms[n.split(",")[0]]))
            for n in variants}
    reference = ["llama.cpp, same GGUF (reference, measured earlier, not by this script)", "short",
                 "", "", "", f"≈ {LLAMA_CPP_TOK_S}", "yes", "", ""]
    print_table(
        "Decode through next_token_logits, one greedy token appended per step",
        DECODE_COLUMNS,
        [rows[n] for n in app_path] + [
         *long_context_rows(lms, tokens // 2, max(2, repeats // 2)), reference],
    )
    print_table(
        "Decode experiments (this script only; agent/llm/model.py unchanged), same short context",
        DECODE_COLUMNS,
        list(rows.values()),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5, help="decode runs per variant")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per decode run")
    parser.add_argument("--experiment-repeats", type=int, default=3,
                        help="decode runs per experiment variant")
    parser.add_argument("--runs", type=int, default=30, help="forward passes per dtype")
    parser.add_argument("--thread-probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.thread_probe:
        thread_probe(args.tokens, args.experiment_repeats)
        return 0
    header("ReAct Lab · model benchmark (bench/bench_model.py)")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}. Timings are wall-clock; other work on the "
          "same cores makes them noisy (see the load average above).\n")
    fp32, bf16 = load_both()
    progress("forward passes")
    bench_forward({"float32": fp32, "bfloat16": bf16}, args.runs)
    progress("building the int4 variants")
    int4_fp32, code_error, weight_error = int4_body(fp32, fp32)
    int4_bf16, _, _ = int4_body(bf16, fp32)
    lms = {"float32": fp32, "bfloat16": bf16,
           "float32 + int4 layers": int4_fp32, "bfloat16 + int4 layers": int4_bf16}
    bench_decode_tables(lms, args.tokens, args.repeats, args.experiment_repeats)
    print("int4 layers: the Q4_1 codes recovered from the float32 weights reproduce them with "
          f"worst |Δw| = {code_error:.1e}; with the kernel's bfloat16 scales the worst |Δw| is "
          f"{weight_error:.1e}. lm_head stays in the model's dtype.\n")
    progress("threads × OpenMP wait policy (two child processes)")
    bench_threads(args.tokens // 2, max(2, args.experiment_repeats - 1))
    progress("total-variation distances")
    bench_tv(fp32, {n: lm for n, lm in lms.items() if n != "float32"})
    progress("profile")
    bench_profile({"float32": fp32, "bfloat16": bf16}, tokens=16)
    progress("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
