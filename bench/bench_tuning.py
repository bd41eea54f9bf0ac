"""Benchmark: in-context learning vs post-training, measured by the app's own loop (issue 24).

    .venv/bin/python bench/bench_tuning.py [--limit N] [--rows base-0 tuned …] [--out PATH]

Rows: the base weights with 0, 1 and 3 few-shot exemplars (agent.context.exemplars), the trajectory-tuned
weights, and the trajectory-tuned weights without thoughts (agent.llm.weights; no exemplars).
Columns, for the held-in and the held-out questions apart (assets/trajectories/held-*.jsonl):
  success     — the right answer reached THROUGH the tools: the judge accepts the answer and every
                needed tool was called and returned a result (agent.tuning.trajectories.judge_run);
  valid calls — calls that pass the three checks, over calls + unparsable replies;
  arg match   — the oracle's calls that the model made with exactly the same arguments;
  prompt tok  — mean prompt tokens per model call (the exemplars are tokens re-sent every call);
and the held-out success without the average and Fahrenheit questions (operations no run trained
before the fourth data set; the column keeps the figures comparable across data sets).
Every run: ReAct mode, native tool calls, T = 0, no constrained decoding, MAX_STEPS = 5. A run
that made no model call is reported (and counted as a failure). Also the top-5 next tokens after
"The capital of France is" for each weights choice (general ability kept?).

Writes assets/trajectories/comparison.json (the view in the page reads it) and prints the tables.
What it does not do: assert. A full run is ~5 rows × 69 questions × a few model calls: use --limit.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, machine_line, print_table  # noqa: E402

from agent.backends import LocalBackend  # noqa: E402
from agent.llm.weights import ADAPTERS_DIR  # noqa: E402
from agent.loop import State, StopReason, run  # noqa: E402
from agent.messages import AssistantMessage, Origin, ResultKind, ToolResultMessage, UserMessage  # noqa: E402
from agent.tools import TOOLS  # noqa: E402
from agent.tuning.sets import SPLITS  # noqa: E402
from agent.tuning.trajectories import DATA_DIR, SETTINGS, judge_answer, judge_run, read_jsonl, start  # noqa: E402

MAX_STEPS = 5
REPLY_TOKENS = 128
ROWS = {"base-0": ("base, 0 exemplars", "base", 0), "base-1": ("base, 1 exemplar", "base", 1),
        "base-3": ("base, 3 exemplars", "base", 3), "tuned": ("trajectory-tuned", "trajectory-tuned", 0),
        "tuned-no-thoughts": ("trajectory-tuned without thoughts", "trajectory-tuned without thoughts", 0)}
SONG_ET_AL = {  # lecture: the unweighted mean of task results, with → without the thought, three models
    "held-out": [[29.5, 22.8], [30.0, 27.5], [36.1, 31.8]], "held-in": [[41.6, 41.2], [45.2, 45.5], [45.4, 43.6]]}
PROMPT = "The capital of France is"
NEW_COMPOSITIONS = ("average", "fahrenheit")  # held-out kinds no run trained before the fourth data set


def settings(few_shot: int):
    return replace(SETTINGS, max_steps=MAX_STEPS, max_new_tokens=REPLY_TOKENS, few_shot=few_shot,
                   temperature=0.0, constrained=False, timeout_s=600.0)


def _same_call(a: dict, name: str, arguments: str) -> bool:
    try:
        return a["name"] == name and a["arguments"] == json.loads(arguments)
    except json.JSONDecodeError:
        return False


def measure(question: dict, final: State) -> dict:
    """One run's figures: the judge's verdict, calls valid / made, oracle calls matched, prompt tokens."""
    results = {m.tool_call_id: m for m in final.history if isinstance(m, ToolResultMessage)}
    calls = [c for m in final.history if isinstance(m, AssistantMessage) for c in m.tool_calls]
    invalid = sum(1 for c in calls if c.id in results and results[c.id].kind == ResultKind.VALIDATION_ERROR
                  and not results[c.id].content.startswith("ERROR: repeated call"))
    unparsable = sum(1 for m in final.history if isinstance(m, UserMessage) and m.origin == Origin.RUNTIME
                     and m.content.startswith("ERROR: could not parse"))
    unparsable += final.stop_reason == StopReason.NO_PARSABLE_OUTPUT
    expected = question["expected"]["calls"]
    matched = sum(1 for e in expected if any(_same_call(e, c.name, c.arguments) for c in calls))
    return {**judge_run(question["expected"], final), "id": question["id"], "group": question["group"],
            "model_calls": len(final.replies), "calls": len(calls), "valid_calls": len(calls) - invalid,
            "unparsable": unparsable, "expected_calls": len(expected), "matched_calls": matched,
            "prompt_tokens": [u.prompt_tokens for u in final.usage], "stop_reason": str(final.stop_reason),
            "answer": final.final_answer, "made_calls": [f"{c.name}({c.arguments})" for c in calls]}


def summarize(runs: list[dict]) -> dict:
    def share(num: int, den: int) -> float | None:
        return round(num / den, 3) if den else None

    tokens = [t for r in runs for t in r["prompt_tokens"]]
    return {"n": len(runs), "success": share(sum(r["success"] for r in runs), len(runs)),
            "valid_call_rate": share(sum(r["valid_calls"] for r in runs),
                                     sum(r["calls"] + r["unparsable"] for r in runs)),
            "arg_exact_match": share(sum(r["matched_calls"] for r in runs), sum(r["expected_calls"] for r in runs)),
            "mean_prompt_tokens": round(sum(tokens) / len(tokens), 1) if tokens else None,
            "not_advanced": sum(r["model_calls"] == 0 for r in runs)}


def run_question(lm, label: str, weights: str, few_shot: int, text: str, session: str) -> State:
    """A question through the loop as the ReAct tab's Local model runs it (LocalBackend with the
    weights; the session's KV cache keeps the shared prefix): the run's last state."""
    backend = LocalBackend(lm, name=label, session=session, weights=weights)
    return run(start(text, settings(few_shot)), backend, TOOLS)[-1]


def run_one(lm, key: str, question: dict, session: str) -> dict:
    """One question with one row's weights and exemplars, measured."""
    t = time.perf_counter()
    final = run_question(lm, *ROWS[key], question["question"], session)
    return {**measure(question, final), "row": key, "split": question["split"],
            "seconds": round(time.perf_counter() - t, 1)}


def run_rows(lm, keys: list[str], questions: list[dict], parallel: int = 1, log=print) -> list[dict]:
    """Every (row, question) run, `parallel` at a time: each worker thread is one student of the
    class, with a session (a KV cache) of its own per row, so the runs share the batcher's forward
    passes (agent/llm/batching.py) as the ReAct tab's students do. The results keep the jobs' order."""
    jobs = [(key, q) for q in questions for key in keys]  # rows side by side: their passes are shared
    sessions: set[str] = set()

    def job(item: tuple[str, dict]) -> dict:
        key, q = item
        session = f"bench-tuning-{key}-{threading.get_ident()}"
        sessions.add(session)
        m = run_one(lm, key, q, session)
        if m["model_calls"] == 0:
            log(f"  ! {q['id']}: the run made no model call ({m['stop_reason']})")
        log(f"  {ROWS[key][0]:38} {q['split']:10} {'✓' if m['success'] else '✗'} {q['question'][:60]!r} → "
            f"{(m['answer'] or '')[:70]!r} [{', '.join(m['made_calls'])[:80]}] {m['seconds']} s")
        return m

    with ThreadPoolExecutor(max(1, parallel)) as pool:
        out = list(pool.map(job, jobs))
    for session in sessions:
        lm.forget(session)
    return out


def top5(lm, weights: str) -> list[list]:
    """The five most probable next tokens after PROMPT on these weights (a cache of its own)."""
    import numpy as np

    z = lm.next_token_logits(lm.encode(PROMPT), session=f"bench-top5-{weights}", weights=weights)
    p = np.exp(z - z.max())
    p /= p.sum()
    return [[lm.token_strings[int(i)], round(float(p[i]), 4)] for i in np.argsort(-p)[:5]]


def spread(questions: list[dict], n: int | None) -> list[dict]:
    """n questions spread evenly over the file (whose task kinds come in blocks); all for None.

    >>> [q["i"] for q in spread([{"i": i} for i in range(10)], 3)]
    [0, 3, 6]
    """
    if n is None or n >= len(questions):
        return questions
    return [questions[i * len(questions) // n] for i in range(n)]


def tables(result: dict) -> None:
    cols = ["weights", "success", "success (trained kinds)", "valid calls", "arg match", "prompt tok/call", "n",
            "no call made"]
    for split in SPLITS:
        rows = [[s["label"], s["success"], s["success_trained_kinds"], s["valid_call_rate"], s["arg_exact_match"],
                 s["mean_prompt_tokens"], s["n"], s["not_advanced"]] for s in result["rows"] if s["split"] == split]
        if rows:
            print_table(f"{split} questions (T = 0, native tool calls, no constraint, MAX_STEPS = {MAX_STEPS})",
                        cols, rows)
    for split in SPLITS[1:]:
        groups = sorted({g for s in result["rows"] if s["split"] == split for g in s["by_group"]})
        rows = [[s["label"], *(s["by_group"].get(g, {}).get("success") for g in groups)]
                for s in result["rows"] if s["split"] == split]
        if rows:
            print_table(f"{split} success by task kind", ["weights", *groups], rows)
    print_table(f"top-5 next tokens after {PROMPT!r}", ["weights", "top-5"],
                [[w, ", ".join(f"{t} {p:.2f}" for t, p in top)] for w, top in result["top5"].items()])


def merged(old: dict, new: dict) -> dict:
    """`new` with the rows, runs and top-5 of `old` that `new` did not measure (a weights row on a
    split), in ROWS order; each row keeps its own n and measured time, so a table may mix a full and
    a --limit run."""
    order = list(ROWS)
    for row in new["rows"]:
        row["measured"] = new["measured"]
    done = {(r["row"], r["split"]) for r in new["rows"]}
    rows = [r for r in old["rows"] if (r["row"], r["split"]) not in done] + new["rows"]
    rows.sort(key=lambda r: (order.index(r["row"]), SPLITS.index(r["split"])))
    runs = [r for r in old["runs"] if (r["row"], r["split"]) not in done] + new["runs"]
    limit = new["settings"]["limit"] if old.get("settings", {}).get("limit") == new["settings"]["limit"] else None
    return {**new, "settings": {**new["settings"], "limit": limit},  # mixed limits: each row says its n
            "rows": rows, "runs": runs, "top5": {**old.get("top5", {}), **new["top5"]}}


def rows_of(runs: list[dict], keys: list[str], splits: list[str]) -> list[dict]:
    """The table's rows: one per (weights row, split), with its figures by task kind."""
    rows = []
    for key in keys:
        for split in splits:
            mine = [r for r in runs if r["row"] == key and r["split"] == split]
            if not mine:
                continue
            groups = {g: summarize([r for r in mine if r["group"] == g]) for g in sorted({r["group"] for r in mine})}
            known = summarize([r for r in mine if r["group"] not in NEW_COMPOSITIONS])
            rows.append({"row": key, "label": ROWS[key][0], "weights": ROWS[key][1], "few_shot": ROWS[key][2],
                         "split": split, **summarize(mine), "success_trained_kinds": known["success"],
                         "by_group": groups})
    return rows


def rejudged(result: dict) -> dict:
    """The stored runs judged again by the questions' current judges (their answers are kept
    verbatim, so a changed judge needs no new run): success = a final answer that passes AND the
    tools used, as measured; each row keeps its measured time."""
    questions = {(q["split"], q["id"]): q for name in SPLITS if (DATA_DIR / f"{name}.jsonl").exists()
                 for q in read_jsonl(DATA_DIR / f"{name}.jsonl")}
    runs = []
    for r in result["runs"]:
        q = questions[(r["split"], r["id"])]
        right = r["stop_reason"] == StopReason.FINAL_ANSWER and judge_answer(q["expected"], r["answer"])
        runs.append({**r, "answer_right": right, "success": right and r["tools_used"]})
    measured = {(r["row"], r["split"]): r.get("measured", result["measured"]) for r in result["rows"]}
    rows = rows_of(runs, list(ROWS), list(SPLITS))
    for row in rows:
        row["measured"] = measured[(row["row"], row["split"])]
    return {**result, "rows": rows, "runs": runs}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--limit", type=int, default=None, help="N questions of each split, spread over its task kinds")
    p.add_argument("--rows", nargs="+", choices=tuple(ROWS), default=list(ROWS))
    p.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS[:2]),
                   help="question sets (held-out-2: the second held-out set, written after the fourth data set; "
                        "held-out-3: the third, written while the eighth trained; held-out-4: the fourth, "
                        "written with the ninth; held-out-5: the fifth, written after the tenth trained; "
                        "held-out-6: the sixth, written after the tenth shipped; held-out-7: the seventh, "
                        "written while the twelfth trained)")
    p.add_argument("--parallel", type=int, default=8,
                   help="runs at a time, sharing the batcher's forward passes (1: one after the other)")
    p.add_argument("--merge", action="store_true",
                   help="keep the rows of --out that this run does not measure (each row says its n)")
    p.add_argument("--out", default=str(DATA_DIR / "comparison.json"))
    p.add_argument("--rejudge", action="store_true",
                   help="no new run: judge --out's stored answers again with the current judges, and rewrite it")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rejudge:
        result = rejudged(json.loads(Path(args.out).read_text(encoding="utf-8")))
        Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        tables(result)
        print(f"rejudged: {args.out}")
        return 0
    from agent.llm.model import load_model

    header("In-context learning vs post-training (trajectory tuning), measured by the app's loop")
    lm = load_model(log=lambda *_: None)  # with the shipped adapters (assets/adapters), as the app loads it
    if lm.weights_choices == ("base",):
        print(f"No adapter in {ADAPTERS_DIR} (make tune): only the base rows run.")
    keys = [k for k in args.rows if ROWS[k][1] in lm.weights_choices]
    questions = [q for name in args.splits for q in spread(read_jsonl(DATA_DIR / f"{name}.jsonl"), args.limit)]
    t0 = time.perf_counter()
    runs = run_rows(lm, keys, questions, args.parallel)
    print(f"{len(runs)} runs in {time.perf_counter() - t0:.0f} s, {args.parallel} at a time")
    rows = rows_of(runs, keys, args.splits)
    weights = sorted({ROWS[k][1] for k in keys}, key=lambda w: [ROWS[k][1] for k in ROWS].index(w))
    result = {"measured": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "machine": machine_line(), "settings": {"mode": "react", "fmt": "native", "temperature": 0.0,
                                                      "constrained": False, "max_steps": MAX_STEPS,
                                                      "max_new_tokens": REPLY_TOKENS, "limit": args.limit,
                                                      "parallel": args.parallel, "dtype": lm.dtype},
              "rows": rows, "song_et_al": SONG_ET_AL,
              "top5": {w: top5(lm, w) for w in weights}, "runs": runs}
    if args.merge and Path(args.out).exists():
        result = merged(json.loads(Path(args.out).read_text(encoding="utf-8")), result)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    tables(result)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
