"""Trajectory tuning of the bundled model (lecture, "In-Context Learning vs. Post-Training for ReAct").

    make tune                                            # both adapters, two epochs each: ~32–58 minutes an
                                                         # adapter with bf16 (AVX-512 BF16 / AMX), ~75 in float32
    python scripts/tune.py --adapter with-thoughts --max-steps 2 --limit-runs 4 --out /tmp/a
    python scripts/tune.py --resume assets/adapters --out /tmp/b   # the epochs an adapter has not had yet

LoRA (peft) on SmolLM2-135M-Instruct: r = 16, alpha 32, on q/k/v/o/gate/up/down; batches of 4 runs;
two epochs over the versioned runs (assets/trajectories/train-*.jsonl), each in its own seeded order
and with its own schedule: a fresh AdamW, a short warm-up to the epoch's peak learning rate (6e-4,
then 3e-4: a warm restart at half the peak) and a linear decay to a tenth of it. Because an epoch
starts from the weights alone, `--resume` can add the second epoch to an adapter trained earlier:
the shipped adapters got theirs that way (docs/BENCHMARKS.md, 2026-12-07).

One run is ONE sequence — the prompt of its last call + the final reply — rendered exactly as the
ReAct tab sends it (agent.tuning.trajectories.render_run); the loss is on the assistant turns only,
each reply with its <|im_end|>. Writes, per adapter, the peft folder (adapter_model.safetensors + adapter_config.json,
weights stored as bfloat16), loss.png and training.json.

The shared prefix. Every run opens with the same ~510 tokens (the system prompt with the tool
schemas, no exemplars) and carries no loss there, so a batch runs that prefix ONCE, repeats its
keys and values over the batch's rows, and runs only each row's own ~150 tokens on top. Gradients
still flow through the prefix: the loss and every gradient equal those of the rows run whole
(tests/test_tuning.py checks it), at about a third of the cost.

What it does not know: the app, the batcher, evaluation (bench/bench_tuning.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.llm.weights import ADAPTERS_DIR, FOLDERS  # noqa: E402
from agent.tuning.trajectories import DATA_DIR, MASKED, encode_run, read_jsonl  # noqa: E402

SEED = 0
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
# The peak learning rate of each epoch; each epoch warms up and decays on its own. A second epoch
# at half the first's peak took the seven held-out sets from 224 to 236 of 263 (85.2 → 89.7 %) and
# held-in from 25 to 28 of 28 (docs/BENCHMARKS.md, 2026-12-07).
EPOCH_LR = (6e-4, 3e-4)
WARMUP_STEPS = 10
BATCH = 4  # runs per step: they share one pass over the common prefix (4: twice the steps of 8)
EPOCHS = len(EPOCH_LR)
# Attention while training: "eager" (plain matmuls) measured 1.2–1.3× the tokens/s of "sdpa" here,
# whose CPU flash-attention backward took a third of a step (Intel Xeon with AMX, 2026-12-01).
ATTENTION = "eager"
MAX_TOKENS = 10_000_000  # a cap on sequence tokens per adapter (default: no cap at this data size)
BASE_NAME = "bundled:SmolLM2-135M-Instruct"  # never a hub id: nothing may try to download it
ADAPTERS = {"with-thoughts": ("trajectory-tuned", "train-with-thoughts.jsonl"),
            "without-thoughts": ("trajectory-tuned without thoughts", "train-without-thoughts.jsonl")}


@dataclass(frozen=True)
class Example:
    """One run as the model sees it: token ids, and labels (-100 where no loss is taken)."""

    id: str
    input_ids: tuple[int, ...]
    labels: tuple[int, ...]


def encode(record: dict, tokenizer) -> Example:
    """The run as ids and labels (agent.tuning.trajectories.encode_run: loss on the assistant turns)."""
    ids, labels = encode_run(record, tokenizer)
    return Example(record["id"], tuple(ids), tuple(labels))


def examples(data: Path, name: str, tokenizer, limit_runs: int | None, max_tokens: int) -> list[Example]:
    """The runs of one file in a seeded order, cut at limit_runs, or where the WITH-thoughts
    sequences reach max_tokens: both adapters train on the same runs (the lecture's ablation)."""
    order = list(range(len(read_jsonl(data / ADAPTERS["with-thoughts"][1]))))
    random.Random(SEED).shuffle(order)
    order = order[:limit_runs]
    with_thoughts = read_jsonl(data / ADAPTERS["with-thoughts"][1])
    rows = read_jsonl(data / name)
    if [r["id"] for r in rows] != [r["id"] for r in with_thoughts]:
        raise ValueError(f"{name} does not hold the same runs, in the same order, as the runs with thoughts")
    keep, total = 0, 0
    for i in order:
        total += len(encode(with_thoughts[i], tokenizer).input_ids)
        if total > max_tokens:
            break
        keep += 1
    return [encode(rows[i], tokenizer) for i in order[:keep]]


def base_model():
    """The bundled model as training takes it: float32 torch Linears (peft adapts those, not the
    float16 ones of the app's default --dtype, agent/llm/half.py), without the shipped adapters."""
    from agent.llm.model import load_model

    return load_model(dtype="float32", log=lambda *_: None, adapters=False)


def peft_model(lm):
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(SEED)
    config = LoraConfig(task_type="CAUSAL_LM", **LORA)
    model = get_peft_model(lm.model, config)
    model.train()
    return model


def shared_prefix(exs: list[Example]) -> tuple[int, ...]:
    """The longest prefix every run shares and on which no token carries loss (nor the token after
    it: the prefix's last position predicts it)."""
    n = min(len(e.input_ids) for e in exs) - 1
    for e in exs:
        k = next((i for i in range(n) if e.input_ids[i] != exs[0].input_ids[i] or e.labels[i + 1] != MASKED), n)
        n = min(n, k)
    return exs[0].input_ids[:n]


def batch_loss(model, prefix: tuple[int, ...], batch: list[Example], bf16: bool, backward: bool = True,
               prefix_grad: bool = True) -> float:
    """Forward (+ backward) of a batch of runs over their shared prefix; the mean loss per trained token.

    The prefix runs once; its keys and values are repeated over the rows (autograd follows the
    repeat, so the prefix's weights get every row's gradient); each row's suffix is right-padded and
    masked, its padding carries no loss. prefix_grad=False runs the prefix without autograd: the
    same loss, but no gradient through the prefix's keys and values (bench/bench_training_step.py
    --prefix-grad off times it; `make tune` does not use it: docs/BENCHMARKS.md, 2026-12-07 21:26)."""
    import torch

    causal_lm = model.get_base_model()
    p, rows = len(prefix), len(batch)
    width = max(len(e.input_ids) for e in batch) - p
    ids = torch.zeros((rows, width), dtype=torch.long)
    labels = torch.full((rows, width), MASKED, dtype=torch.long)
    mask = torch.zeros((rows, p + width), dtype=torch.long)
    mask[:, :p] = 1
    for i, e in enumerate(batch):
        if e.input_ids[:p] != prefix:
            raise ValueError(f"run {e.id} does not start with the shared prefix")
        n = len(e.input_ids) - p
        ids[i, :n] = torch.tensor(e.input_ids[p:])
        labels[i, :n] = torch.tensor(e.labels[p:])
        mask[i, p:p + n] = 1
    targets = labels[:, 1:]
    keep = targets != MASKED  # the vocabulary head runs only where the loss is taken
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        with torch.set_grad_enabled(prefix_grad):
            cache = causal_lm.model(input_ids=torch.tensor([prefix]), use_cache=True).cache
        cache.batch_repeat_interleave(rows)
        hidden = causal_lm.model(input_ids=ids, attention_mask=mask, cache=cache,
                                 use_cache=True).last_hidden_state[:, :-1]
        logits = causal_lm.lm_head(hidden[keep]).float()
    loss = torch.nn.functional.cross_entropy(logits, targets[keep])
    if backward:
        loss.backward()
    return float(loss.detach())


def freeze_in_bf16(model) -> None:
    """The frozen base weights stored in bfloat16, the LoRA weights left in float32: under bf16
    autocast every matmul casts its weights to bfloat16 anyway, so the matmuls compute the same
    numbers without re-casting 135 M weights in every step (aten::copy_, 10 % of a step here); the
    norms' and the embedding's weights, which autocast would keep in float32, are rounded too."""
    import torch

    for p in model.parameters():
        if not p.requires_grad:
            p.data = p.data.to(torch.bfloat16)


def batches(exs: list[Example], size: int, seed: int) -> list[list[Example]]:
    """Batches of `size` runs of similar length (little padding), in a seeded order: the runs are
    cut into windows of 8 batches, each window sorted by length and cut into batches."""
    out = []
    window = 8 * size
    for w in range(0, len(exs), window):
        part = sorted(exs[w:w + window], key=lambda e: len(e.input_ids))
        out += [part[i:i + size] for i in range(0, len(part), size)]
    random.Random(seed).shuffle(out)
    return out


def time_bf16(model, prefix: tuple[int, ...], exs: list[Example], batch: int, n: int = 2) -> dict:
    """tokens/s (sequence tokens, as if each run were run whole) of n batches forward+backward in
    float32 and under bf16 autocast (no update)."""
    result = {}
    sample = batches(exs[: n * batch], batch, SEED)[:n]
    batch_loss(model, prefix, sample[0][:2], False)  # warm-up, not timed
    for bf16 in (False, True):
        t, tokens = time.perf_counter(), 0
        for b in sample:
            batch_loss(model, prefix, b, bf16)
            tokens += sum(len(e.input_ids) for e in b)
        model.zero_grad(set_to_none=True)
        result["bf16" if bf16 else "float32"] = round(tokens / (time.perf_counter() - t), 1)
    return result


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep the memory a step frees for the next step instead of giving it back.

    A step's activations come to several GB, in blocks of a few MB. By default glibc serves every
    block above its mmap threshold with a fresh mmap and unmaps it when freed, so the next step
    faults the same gigabytes in again, page by page, zeroed by the kernel. Measured on this Intel
    Xeon (2026-12-05, 48 steps): 63 s of the 240 s went to the kernel, and a step that faulted in
    ~1 GB took twice as long as one that did not. With mmap off, a heap that is not trimmed below
    1 GB and 256 MB of padding, the kernel's share fell to 37 s, nearly all in the first steps.
    The arithmetic is untouched: the same operations on the same numbers, in other memory.
    Returns False where the C library is not glibc (nothing is changed there)."""
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX = -1, -2, -4
    return all(mallopt(option, value) == 1 for option, value in
               ((M_TRIM_THRESHOLD, 1 << 30), (M_TOP_PAD, 256 << 20), (M_MMAP_MAX, 0)))


def mimalloc_library() -> Path | None:
    """libmimalloc.so from the cmeel-mimalloc wheel (requirements-dev.txt) in this interpreter's
    site-packages, or None where it is not installed."""
    import sysconfig

    path = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "lib" / "libmimalloc.so"
    return path if path.is_file() else None


def mimalloc_loaded() -> bool:
    """Whether this process allocates with mimalloc (it was preloaded when the process started)."""
    try:
        return "libmimalloc" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def restart_under_mimalloc() -> None:
    """Start this script again with mimalloc preloaded; a process's allocator is chosen before it starts.

    Why. A step allocates and frees thousands of blocks of many sizes (the suffix width varies from
    batch to batch). glibc's malloc keeps the freed blocks in bins that fragment as training goes
    on, and searching them grew from 13 % to 18 % of the process's CPU samples between steps ~90
    and ~195 (perf, 2026-12-05): one adapter's steps slowed from ~3.9 to ~6.2 s at the same work,
    and a fresh process ran the same late batches twice as fast. mimalloc serves sizes from
    per-size pages and does not fragment so.
    It is told never to give freed memory back (MIMALLOC_PURGE_DELAY=-1): with its default of 10 ms
    it returned a step's activations to the kernel and faulted them in again, and a third of the
    CPU went to the kernel (the same trap as glibc's default, see keep_freed_memory).
    Nothing is done where mimalloc is loaded, not installed, or already asked for and not loaded
    (no second restart); main then keeps glibc's, tuned by keep_freed_memory."""
    library = mimalloc_library()
    if library is None or mimalloc_loaded() or str(library) in os.environ.get("LD_PRELOAD", ""):
        return
    preload = " ".join(filter(None, (str(library), os.environ.get("LD_PRELOAD", ""))))
    env = {"MIMALLOC_PURGE_DELAY": "-1", **os.environ, "LD_PRELOAD": preload}
    os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]], env)


def native_bf16() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX-512 BF16 or AMX). Without either, torch
    emulates it: on an AVX2-only AMD EPYC (2026-12-02) a bf16 step of 4 runs ran at 10 sequence
    tokens/s against float32's 180 (4.5 minutes for one step), so `--bf16 auto` does not time it there."""
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    found = [getattr(torch.cpu, name, None) for name in probes]
    return any(f() for f in found if f is not None) or all(f is None for f in found)


def learning_rate(step: int, steps: int, peak: float) -> float:
    """Step `step` of an epoch of `steps`: a linear warm-up over WARMUP_STEPS to `peak`, then a
    linear decay to a tenth of it at the epoch's last step."""
    if step < WARMUP_STEPS:
        return peak * (step + 1) / WARMUP_STEPS
    return peak * (1 - 0.9 * (step - WARMUP_STEPS) / max(1, steps - WARMUP_STEPS))


def epoch_plan(exs: list[Example], epoch: int, batch: int) -> list[list[Example]]:
    """Epoch `epoch`'s batches (0 = the first): the runs in that epoch's own seeded order."""
    return batches(random.Random(SEED + epoch).sample(exs, len(exs)), batch, SEED + epoch)


def train(model, prefix: tuple[int, ...], plan: list[tuple[int, list[list[Example]]]], bf16: bool,
          max_steps: int | None, log=print) -> dict:
    """The planned epochs ((epoch, its batches), …; or their first max_steps batches), each with a
    fresh AdamW and its own schedule (EPOCH_LR); per-step loss and seconds, sequence tokens."""
    import torch

    losses, seconds_per_step, tokens, t0 = [], [], 0, time.perf_counter()
    for epoch, epoch_batches in plan:
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=EPOCH_LR[epoch])
        for i, batch in enumerate(epoch_batches):
            if max_steps is not None and len(losses) == max_steps:
                break
            t = time.perf_counter()
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(i, len(epoch_batches), EPOCH_LR[epoch])
            losses.append(batch_loss(model, prefix, batch, bf16))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            tokens += sum(len(e.input_ids) for e in batch)
            seconds_per_step.append(round(time.perf_counter() - t, 2))
            if i % 10 == 0 or i == len(epoch_batches) - 1:
                rate = tokens / (time.perf_counter() - t0)
                log(f"  epoch {epoch + 1}, step {i + 1}/{len(epoch_batches)}  loss {losses[-1]:.4f}  "
                    f"{rate:.0f} sequence tokens/s")
    seconds = time.perf_counter() - t0
    return {"steps": len(losses), "tokens": tokens, "seconds": round(seconds, 1),
            "tokens_per_s": round(tokens / seconds, 1), "losses": [round(x, 5) for x in losses],
            "final_loss": round(sum(losses[-10:]) / len(losses[-10:]), 5), "seconds_per_step": seconds_per_step}


def epochs_done(first: int, plan: list[tuple[int, list]], steps: int) -> int:
    """The epochs an adapter has had after `steps` steps of `plan` on top of `first` (a --max-steps run
    may end inside an epoch: that one does not count)."""
    for _, epoch_batches in plan:
        if steps < len(epoch_batches):
            break
        steps, first = steps - len(epoch_batches), first + 1
    return first


def resume(model, folder: Path) -> dict:
    """Load the trained adapter in `folder` (scripts/tune.py's output) into the fresh peft model;
    its training record, whose "epochs" it has had (1 for a record written before there were two)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    record = json.loads((folder / "training.json").read_text(encoding="utf-8"))
    record.setdefault("epochs", 1)
    result = set_peft_model_state_dict(model, load_file(str(folder / "adapter_model.safetensors")))
    if result.unexpected_keys:
        raise ValueError(f"{folder}: not an adapter of this model ({result.unexpected_keys[0]} …)")
    return record


def save(model, folder: Path) -> int:
    """The adapter in bfloat16 (half the bytes of float32); the base named so nothing downloads it."""
    import torch

    model.peft_config["default"].base_model_name_or_path = BASE_NAME
    for p in model.parameters():
        if p.requires_grad:
            p.data = p.data.to(torch.bfloat16)
    model.save_pretrained(str(folder))
    (folder / "README.md").unlink(missing_ok=True)  # peft's blank model card names this machine's cache path
    return sum(f.stat().st_size for f in folder.iterdir() if f.name.startswith("adapter_"))


def plot_loss(losses: list[float], title: str, path: Path, batch: int = BATCH, epoch_steps: int | None = None) -> None:
    """The loss per batch and its running mean, on a log scale; a dashed line where each epoch after
    the first starts (every `epoch_steps` steps)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = max(1, len(losses) // 20)
    smooth = [sum(losses[max(0, i - k + 1):i + 1]) / len(losses[max(0, i - k + 1):i + 1]) for i in range(len(losses))]
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=120)
    ax.plot(range(1, len(losses) + 1), losses, color="#bbb", lw=0.8, label="loss per batch")
    ax.plot(range(1, len(losses) + 1), smooth, color="#c0392b", lw=1.8, label=f"mean of {k}")
    starts = range(epoch_steps, len(losses), epoch_steps) if epoch_steps else ()
    for epoch, start in enumerate(starts, start=2):
        ax.axvline(start + 0.5, color="#555", lw=1, ls="--")
        ax.text(start + 0.5, 0.97, f" epoch {epoch}", transform=ax.get_xaxis_transform(), va="top", fontsize=8)
    ax.set(xlabel=f"step (batch of {batch} runs)", ylabel="loss on assistant turns", title=title, yscale="log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def tune_one(adapter: str, args) -> dict:
    """Load the base model fresh, train one adapter, save it with its loss curve and record."""
    import torch

    weights, data = ADAPTERS[adapter]
    folder = Path(args.out) / FOLDERS[weights]
    load_before = os.getloadavg()
    lm = base_model()
    exs = examples(Path(args.data), data, lm.tokenizer, args.limit_runs, args.max_tokens)
    n_tokens = sum(len(e.input_ids) for e in exs)
    trained = sum(1 for e in exs for x in e.labels if x != -100)
    print(f"{weights}: {len(exs)} runs, {n_tokens:,} sequence tokens ({trained:,} with loss)")
    prefix = shared_prefix(exs)
    print(f"  shared prefix: {len(prefix)} tokens, run once per batch of {args.batch}")
    torch.manual_seed(SEED)
    model = peft_model(lm)
    earlier = resume(model, Path(args.resume) / FOLDERS[weights]) if args.resume else None
    first = earlier["epochs"] if earlier else 0
    if first >= args.epochs:
        print(f"  {args.resume} has had {first} epochs already: nothing to add")
        return earlier
    if earlier:
        print(f"  resumed from {args.resume}: epochs {first + 1}–{args.epochs} to go")
    lm.model.config._attn_implementation = ATTENTION
    native = native_bf16()
    timing = time_bf16(model, prefix, exs, args.batch) if args.bf16 == "auto" and native else {}
    bf16 = args.bf16 == "on" or bool(timing and timing["bf16"] > 1.1 * timing["float32"])
    if timing:
        print(f"  bf16 autocast: {timing['bf16']} tokens/s against float32 {timing['float32']} "
              f"(2 steps each) → train in {'bf16' if bf16 else 'float32'}")
    elif args.bf16 == "auto":
        print("  bf16 autocast: this CPU has neither AVX-512 BF16 nor AMX (torch would emulate it) → train in float32")
    if bf16:
        freeze_in_bf16(model)
    plan = [(k, epoch_plan(exs, k, args.batch)) for k in range(first, args.epochs)]
    record = train(model, prefix, plan, bf16, args.max_steps)
    folder.mkdir(parents=True, exist_ok=True)
    size = save(model, folder)
    if earlier:  # the curve and the record cover every epoch the adapter has had
        record["losses"] = earlier["losses"] + record["losses"]
        record["earlier"] = [*earlier.get("earlier", []),
                             {k: v for k, v in earlier.items() if k not in ("losses", "seconds_per_step", "earlier")}]
    plot_loss(record["losses"], f"LoRA, {weights}", folder / "loss.png", args.batch, len(plan[0][1]))
    record.update(weights=weights, runs=len(exs), epochs=epochs_done(first, plan, record["steps"]), batch=args.batch,
                  shared_prefix=len(prefix), warmup_steps=WARMUP_STEPS, sequence_tokens=n_tokens, loss_tokens=trained,
                  adapter_bytes=size, bf16=bf16, bf16_timing=timing, lora=LORA, epoch_lr=EPOCH_LR[:args.epochs],
                  seed=SEED, attention=ATTENTION,
                  data=str(Path(data)), load_before=[round(x, 2) for x in load_before],
                  load_after=[round(x, 2) for x in os.getloadavg()], torch_threads=torch.get_num_threads(),
                  malloc=args.malloc, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
    (folder / "training.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"  {record['steps']} steps, {record['tokens']:,} tokens in {record['seconds']} s "
          f"({record['tokens_per_s']} tokens/s), final loss {record['final_loss']}, adapter {size / 1e6:.1f} MB "
          f"→ {folder}")
    return record


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--adapter", choices=("with-thoughts", "without-thoughts", "both"), default="both")
    p.add_argument("--max-steps", type=int, default=None, help="stop after N batches (default: every epoch)")
    p.add_argument("--limit-runs", type=int, default=None, help="use only the first N runs")
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="cap on sequence tokens per adapter")
    p.add_argument("--epochs", type=int, choices=range(1, EPOCHS + 1), default=EPOCHS,
                   help="passes over the runs (each reshuffled, with its own schedule: EPOCH_LR)")
    p.add_argument("--resume", default=None,
                   help="a folder of adapter folders (e.g. assets/adapters): start from its trained adapter and "
                        "run only the epochs it has not had")
    p.add_argument("--batch", type=int, default=BATCH, help="runs per step (sharing one prefix pass)")
    p.add_argument("--out", default=str(ADAPTERS_DIR), help="folder of the adapter folders")
    p.add_argument("--data", default=str(DATA_DIR), help="folder of the train-*.jsonl files")
    p.add_argument("--bf16", choices=("auto", "on", "off"), default="auto",
                   help="auto: on a CPU with AVX-512 BF16 or AMX, time 2 steps each way and train in bf16 only if "
                        ">10%% faster; float32 elsewhere")
    p.add_argument("--malloc", choices=("mimalloc", "keep", "default"), default="mimalloc",
                   help="mimalloc: run under mimalloc (restart_under_mimalloc; glibc's, kept, where it is not "
                        "installed); keep: glibc keeps freed memory for the next step (keep_freed_memory); "
                        "default: as the process has it")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    if args.malloc == "mimalloc" and not mimalloc_loaded():
        print("  malloc: mimalloc is not preloaded (pip install cmeel-mimalloc, and run the script itself) "
              "→ glibc's, kept (steps slow down as its bins fragment)")
        args.malloc = "keep"
    if args.malloc == "keep" and not keep_freed_memory():
        print("  malloc: not glibc, left as it is (a step may fault its activations in anew)")
        args.malloc = "default"
    names = ("with-thoughts", "without-thoughts") if args.adapter == "both" else (args.adapter,)
    for name in names:
        tune_one(name, args)
    return 0


if __name__ == "__main__":
    if parse_args().malloc == "mimalloc":
        restart_under_mimalloc()
    sys.exit(main())
