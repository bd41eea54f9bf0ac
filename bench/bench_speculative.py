"""Benchmark of speculative decoding (agent/llm/speculative.py) on the bundled model; prints a table.

Per draft kind (early exit at L = 8, 24 and 27 of 30 layers; prompt lookup) and γ ∈ {1, 2, 4, 8},
side by side in one run, over the same prompts: the acceptance rate α, tokens per target pass,
tokens/s, and the speedup against plain decoding of the same continuation by the target alone
(one token per pass, the prompt's prefill excluded from both). Greedy (T = 0), so every row
emits the same tokens. Figures only, no asserts.

    .venv/bin/python bench/bench_speculative.py [--tokens 24]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.llm import speculative
from agent.llm.model import load_model  # noqa: E402
from agent.sampling import SamplingConfig  # noqa: E402
from bench._common import header, print_table  # noqa: E402

PROMPTS = (
    "Berlin is the capital of Germany. Paris is the capital of France. Rome is the capital of Italy. "
    "Berlin is the capital of",
    '<|im_start|>user\nWhat is the weather in Berlin?<|im_end|>\n<|im_start|>assistant\n<tool_call>'
    '{"name": "get_weather", "arguments": {"city": "',
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
)


def drafts(lm):
    yield from ((f"early exit L = {L}", speculative.ModelDraft(f"L{L}", lambda ids, L=L: lm.early_exit_logits(ids, L)))
                for L in (8, 24, 27))
    yield "prompt lookup", speculative.PromptLookupDraft(lm.vocab_size)


def measure(lm, draft, gamma: int, tokens: int):
    config = SamplingConfig(temperature=0)
    stats, plain, emitted = speculative.Stats(), 0.0, 0
    for text in PROMPTS:
        ids = lm.encode(text)
        lm.next_token_logits(ids)  # the prompt's prefill, outside both timings
        start = time.perf_counter()
        out, _, s = speculative.run(ids, draft, lm.tail_logits, gamma, config, np.random.default_rng(0), tokens)
        seconds = time.perf_counter() - start
        plain += lm.plain_decode_seconds(ids, out)
        emitted += len(out)
        stats = speculative.Stats(stats.rounds + s.rounds, stats.drafted + s.drafted, stats.accepted + s.accepted,
                                  stats.resampled + s.resampled, stats.bonus + s.bonus,
                                  stats.draft_steps + s.draft_steps, stats.seconds + seconds)
    return stats, plain, emitted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=24)
    args = parser.parse_args()
    lm = load_model(log=lambda m: None)
    header("Speculative decoding: draft kinds × γ (greedy, same continuation, side by side)")
    rows = []
    for name, draft in drafts(lm):
        for gamma in (1, 2, 4, 8):
            s, plain, emitted = measure(lm, draft, gamma, args.tokens)
            rows.append((name, gamma, f"{s.alpha:.2f}", f"{s.tokens_per_pass:.2f}",
                         f"{speculative.expected_tokens_per_pass(s.alpha, gamma):.2f}",
                         f"{emitted / s.seconds:.1f}", f"{emitted / plain:.1f}", f"{plain / s.seconds:.2f}×"))
            print(rows[-1], flush=True)
    print_table("Speculative decoding", ("draft", "γ", "α", "tokens / target pass", "expected",
                                         "tok/s speculative", "tok/s plain", "speedup"), rows)


if __name__ == "__main__":
    main()
