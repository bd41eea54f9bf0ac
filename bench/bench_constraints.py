"""Benchmark of agent/constraints.py on the bundled SmolLM2 vocabulary; prints a Markdown table.

Per preset grammar:
- compile: grammar source → a new LLMatcher, which validates it (what a new grammar costs);
- check: compile_grammar alone, the model-free validation a UI may run while a grammar is typed;
- Constraint(): what the app pays per new constraint once the grammar is compiled (a copy);
- mask: one step's A(s_t) = fill the bitmask + unpack it with numpy, measured at every
  step of the preset's example output (warm: llguidance builds lexer states lazily, so the
  first mask of a step is reported apart, as "first mask, max").
Goals: compile ≤ 10 ms, mask ≤ 100 µs. Figures only, no asserts.

    REACT_LAB_CACHE=/tmp/rlcache .venv/bin/python bench/bench_constraints.py [--runs 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import llguidance
import llguidance.numpy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.constraints import (  # noqa: E402
    PRESET_EXAMPLES,
    PRESETS,
    Constraint,
    compile_grammar,
    grammar_text,
    tokenizer_info,
    unpack_bitmask,
)
from agent.llm.model import load_model  # noqa: E402


def timed(fn, runs: int) -> np.ndarray:
    """Seconds per call of fn(), one sample per run."""
    samples = np.empty(runs)
    for i in range(runs):
        start = time.perf_counter()
        fn()
        samples[i] = time.perf_counter() - start
    return samples


def compile_cold(grammar, tokenizer) -> None:
    text = grammar_text.__wrapped__(grammar)  # skip the lru_cache: measure the real work
    llguidance.LLMatcher(tokenizer, text, log_level=0)


@dataclass(frozen=True)
class MaskFigures:
    warm: np.ndarray  # seconds per mask, every step, the first run of each step left out
    cold_max: float  # slowest first mask of a step (llguidance builds lexer states lazily)
    slowest_step: str  # the step with the highest median, "median after <text>"
    n_allowed_0: int  # |A(s_0)|


def mask_figures(grammar, lm, tokenizer, repeats: int) -> MaskFigures:
    """Fill + unpack timings at every step of the preset's example output."""
    matcher = llguidance.LLMatcher(tokenizer, grammar_text(grammar), log_level=0)
    bitmask = llguidance.numpy.allocate_token_bitmask(1, lm.vocab_size)

    def one_mask() -> np.ndarray:
        llguidance.numpy.fill_next_token_bitmask(matcher, bitmask)
        return unpack_bitmask(bitmask, lm.vocab_size)

    ids = lm.encode(PRESET_EXAMPLES[grammar.name])
    per_step = []
    for token_id in ids:
        per_step.append(timed(one_mask, repeats))
        matcher.consume_token(token_id)
    medians = [np.median(s[1:]) for s in per_step]
    worst = int(np.argmax(medians))
    matcher.reset()
    return MaskFigures(
        warm=np.concatenate([s[1:] for s in per_step]),
        cold_max=max(s[0] for s in per_step),
        slowest_step=f"{medians[worst] * 1e6:.0f} µs after {lm.decode(ids[:worst])[-12:]!r}",
        n_allowed_0=int(one_mask().sum()),
    )


def ms(x: np.ndarray, q: float) -> str:
    return f"{np.percentile(x, q) * 1e3:.2f} ms"


def us(x: np.ndarray, q: float) -> str:
    return f"{np.percentile(x, q) * 1e6:.1f} µs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="compile runs per preset")
    parser.add_argument("--repeats", type=int, default=200, help="mask runs per step")
    args = parser.parse_args()
    lm = load_model(log=lambda *_: None)
    start = time.perf_counter()
    tokenizer = tokenizer_info(lm)
    built = time.perf_counter() - start
    print(
        f"llguidance {llguidance.__version__}, vocabulary {lm.vocab_size:,}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
        f"token table built once in {built:.2f} s\n"
    )
    print(
        "| preset | kind | compile median | compile p95 | check median | Constraint() median "
        "| mask median | mask p95 | slowest step | first mask, max | \\|A(s_0)\\| |"
    )
    print("|---" * 11 + "|")
    for name, grammar in PRESETS.items():
        compile_cold(grammar, tokenizer)  # warm-up
        compiles = timed(lambda g=grammar: compile_cold(g, tokenizer), args.runs)
        checks = timed(lambda g=grammar: compile_grammar(g), args.runs)
        Constraint(grammar, lm)
        copies = timed(lambda g=grammar: Constraint(g, lm), args.runs)
        masks = mask_figures(grammar, lm, tokenizer, args.repeats)
        cells = [name, grammar.kind, ms(compiles, 50), ms(compiles, 95), ms(checks, 50)]
        cells += [ms(copies, 50), us(masks.warm, 50), us(masks.warm, 95), masks.slowest_step]
        cells += [f"{masks.cold_max * 1e3:.2f} ms", f"{masks.n_allowed_0:,}"]
        print("| " + " | ".join(cells).replace("\n", "⏎") + " |")


if __name__ == "__main__":
    main()
