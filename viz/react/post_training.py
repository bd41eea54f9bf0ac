"""The view "In-context learning vs post-training" (lecture, "In-Context Learning vs. Post-Training
for ReAct"; issue 24): the lecture's comparison measured by the app's own loop, the loss curves,
and one training run as the model saw it.

    comparison_html(read_comparison())          # bench/bench_tuning.py's table, held-in and held-out apart
    ids, labels = encode_run(record, tokenizer)  # the run's tokens; -100 where no loss is taken
    training_run_html(run_pieces(tokenizer.decode, ids, labels))
    loss_curve_paths()                           # {"trajectory-tuned": …/loss.png, …} for the adapters present
    with gr.Blocks(): view = build(lm)           # the accordion, closed

run_pieces merges consecutive tokens with the same state: ids [5, 6, 7, 8], labels [-100, -100, 7, 8]
→ [(decode([5, 6]), False), (decode([7, 8]), True)].

What it knows: the JSON that bench/bench_tuning.py writes (assets/trajectories/comparison.json:
"rows" of row, label, split, n, success, valid_call_rate, arg_exact_match, mean_prompt_tokens;
"measured", "machine", "settings"), Song et al. (2024)'s six pairs as the lecture gives them, and
how a run's tokens are labelled for training (agent.tuning.trajectories.encode_run). Every text
goes through ``esc``; CSS classes are pt-*.

What it does not know: the model, torch, training, how the figures were measured, or the tab's
listeners. Only layout() and build() touch Gradio.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.llm.model import DTYPE_LABELS
from agent.llm.weights import ADAPTERS_DIR, FOLDERS
from agent.tuning.sets import SPLITS
from agent.tuning.trajectories import DATA_DIR, MASKED, encode_run, read_jsonl
from viz.render import esc

TITLE = "In-context learning vs post-training"
COMPARISON_FILE = DATA_DIR / "comparison.json"
TRAIN_FILE = DATA_DIR / "train-with-thoughts.jsonl"
BENCH_COMMAND = "python bench/bench_tuning.py"
SPLIT_NOTES = {"held-out": "the sixth to tenth data sets' changes were made after reading its misses",
               "held-out-2": "a second held-out set, written after the fourth data set and before any training on it; "
                             "the sixth to tenth sets were changed after reading its misses",
               "held-out-3": "a third held-out set, written while the eighth data set trained and before any of its "
                             "results were read; the ninth and tenth sets were changed after reading its misses",
               "held-out-4": "a fourth held-out set, written with the ninth data set and before it trained; the "
                             "tenth set's library worlds were made after reading its two-hop misses",
               "held-out-5": "a fifth held-out set, written after the tenth set's adapter trained and before any of "
                             "its results were read (an eleventh data set made from its misses did not ship)",
               "held-out-6": "a sixth held-out set, written after the tenth set shipped; nothing shipped was changed "
                             "after reading its results",
               "held-out-7": "a seventh held-out set, written while a twelfth data set trained (it did not ship) and "
                             "before any of its results were read; nothing shipped was changed after reading it"}
# The ablation tested, not assumed (docs/DESIGN-NOTES.md, "An eleventh data set that did not ship")
GAP_MOVES_WITH_THE_DATA = ("The gap moves with the data and the training: a second epoch narrowed it from 12.6 to 5.7 "
                           "points over the seven held-out sets, and an eleventh data set from the same generator "
                           "(1,181 runs; it did not ship) put the two within 6 points of each other on every held-out "
                           "set. At this size one data set's gap is a hint, not a finding.")
# lecture: Song et al. (2024), the unweighted mean of task results (0–100), with → without the thought
SONG_ET_AL = {"held-out": ((29.5, 22.8), (30.0, 27.5), (36.1, 31.8)),
              "held-in": ((41.6, 41.2), (45.2, 45.5), (45.4, 43.6))}
COLUMNS = (("success", "success through the tools", True), ("valid_call_rate", "valid-call rate", True),
           ("arg_exact_match", "argument exact-match", True), ("mean_prompt_tokens", "mean prompt tokens per call",
                                                               False))
CAVEAT = ("Post-training removes the exemplars from the prompt and changes which errors occur. Executing the "
          "tools, counting the steps, stopping and handling errors remain the harness: the tuned model runs "
          "inside the same loop, with the same three checks (valid JSON, the tool exists, the arguments match "
          "its schema), the same step cap and the same stop reasons. A repeated call is one such error: a "
          "longer error message does not change a greedy reply; the step cap and the stop reason end the run.")
DENOMINATORS = ("Success: the share of the questions answered right through the tools. Valid-call rate: the "
                "share of the calls made (and unparsable replies) that pass the three checks. Argument exact-match: "
                "the share of the calls a correct run needs that the model made with exactly those arguments. "
                "Prompt tokens: the mean over every model call (exemplars are re-sent on each call).")
TRAINED_STYLE = "background:rgba(46,160,67,.30);border-radius:2px"  # legible on a dark and a light theme
MASKED_STYLE = "opacity:.55"


def read_comparison(path: Path = COMPARISON_FILE) -> dict | None:
    """The benchmark's JSON, or None when it has not been run (a malformed file raises)."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _cell(value: float | None, share: bool) -> str:
    if value is None:
        return "—"
    return f"{100 * value:.1f} %" if share else f"{value:,.1f}"


def split_table(rows: Sequence[dict], split: str) -> str:
    """One split's rows (in the JSON's order) as a table; each row says how many questions it is over."""
    mine = [r for r in rows if r.get("split") == split]
    head = "".join(f"<th>{esc(label)}</th>" for _, label, _ in COLUMNS)
    body = "".join(
        f'<tr class="pt-row" data-row="{esc(r.get("row", ""))}"><th scope="row">{esc(r.get("label", r.get("row")))}'
        f"</th>{''.join(f'<td>{_cell(r.get(k), share)}</td>' for k, _, share in COLUMNS)}"
        f'<td class="pt-n">{esc(r.get("n", "—"))}</td></tr>'
        for r in mine)
    n = sorted({r.get("n") for r in mine if r.get("n") is not None})
    if not mine and split in SPLITS[2:]:
        return ""  # not measured yet: a later set's table appears once the benchmark has run it
    over = f"each row over {' / '.join(str(k) for k in n)} questions" if n else "no questions measured"
    if split in SPLIT_NOTES:
        over += f"; {SPLIT_NOTES[split]}"
    return (f'<table class="pt-table" data-split="{esc(split)}"><caption>{esc(split)} questions: {esc(over)}'
            f"</caption><thead><tr><th>weights</th>{head}<th>questions</th></tr></thead>"
            f"<tbody>{body}</tbody></table>")


def _measured_line(comparison: dict) -> str:
    s = comparison.get("settings", {})
    how = (f"T = {s.get('temperature', '?')}, {s.get('fmt', '?')} tool calls, "
           f"{'constrained' if s.get('constrained') else 'no constrained decoding'}, "
           f"MAX_STEPS = {s.get('max_steps', '?')}"
           + (f", {DTYPE_LABELS.get(s['dtype'], s['dtype'])}" if s.get("dtype") else ""))
    subset = f"; a subset: --limit {s['limit']} questions per split" if s.get("limit") else ""
    dates = sorted({r["measured"][:10] for r in comparison.get("rows", ()) if r.get("measured")})
    when = (f"in runs from {dates[0]} to {dates[-1]}, the newest on " if len(dates) > 1 else "on ")
    return (f'<p class="pt-meta">Measured by the app\'s own loop ({esc(how)}{esc(subset)}) {esc(when)}'
            f'{esc(comparison.get("measured", "an unrecorded date"))} · '
            f'{esc(comparison.get("machine", "machine not recorded"))}.</p>')


def thought_effect(rows: Sequence[dict]) -> str:
    """Our own ablation in the lecture's words: success with → without the thought, per split."""
    def success(key: str, split: str) -> float | None:
        return next((r.get("success") for r in rows if r.get("row") == key and r.get("split") == split), None)

    pairs = [(s, success("tuned", s), success("tuned-no-thoughts", s)) for s in SPLITS]
    pairs = [(s, a, b) for s, a, b in pairs if a is not None and b is not None]
    if not pairs:
        return ""
    said = "; ".join(f"{s}: {_cell(a, True)} → {_cell(b, True)}" for s, a, b in pairs)
    return (f'<p class="pt-effect">Here, removing the thought from the training runs: success {esc(said)}.</p>'
            f'<p class="pt-note">{esc(GAP_MOVES_WITH_THE_DATA)}</p>')


def song_table() -> str:
    """Song et al. (2024)'s figures beside ours: with → without the thought, three models."""
    rows = "".join(
        f"<tr><th scope=\"row\">model {i + 1}</th>"
        + "".join(f"<td>{a} → {b}</td>" for a, b in (SONG_ET_AL["held-in"][i], SONG_ET_AL["held-out"][i]))
        + "</tr>" for i in range(3))
    return ('<table class="pt-table pt-song"><caption>Song et al. (2024): with → without the thought</caption>'
            "<thead><tr><th></th><th>held-in tasks</th><th>held-out tasks (five)</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            '<p class="pt-note">Each figure is the unweighted mean of task results on a 0–100 scale (exact match, '
            "success rate or average reward) over the tasks, not over questions: five tasks that do not occur in "
            "the training data, and the tasks that do. It is an aggregate Song et al. define, not a share of "
            "questions: compare the direction of the change, not the figures.</p>")


def comparison_html(comparison: dict | None) -> str:
    """The lecture's comparison: our rows per split, Song et al.'s figures, and the caveat."""
    if comparison is None:
        ours = (f'<p class="pt-missing">The benchmark has not been run yet: <code>{esc(BENCH_COMMAND)}</code> '
                f"writes {esc(COMPARISON_FILE.name)}, and this table shows it at the next start.</p>")
    else:
        rows = comparison.get("rows", [])
        ours = (_measured_line(comparison) + "".join(split_table(rows, s) for s in SPLITS)
                + f'<p class="pt-note">{esc(DENOMINATORS)}</p>' + thought_effect(rows))
    return (f'<div class="pt-comparison"><div class="pt-ours">{ours}</div>'
            f'<div class="pt-theirs">{song_table()}</div>'
            f'<p class="pt-caveat" role="note"><strong>What post-training does not change.</strong> {esc(CAVEAT)}</p>'
            "</div>")


def run_pieces(decode: Callable[[list[int]], str], ids: Sequence[int],
               labels: Sequence[int]) -> list[tuple[str, bool]]:
    """Consecutive tokens with the same state (trained: label != MASKED) merged into one piece,
    decoded together (so a character split over two byte tokens stays whole)."""
    if len(ids) != len(labels):
        raise ValueError(f"{len(ids)} ids but {len(labels)} labels")
    pieces: list[tuple[str, bool]] = []
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or (labels[i] != MASKED) != (labels[start] != MASKED):
            pieces.append((decode(list(ids[start:i])), labels[start] != MASKED))
            start = i
    return pieces


WORLD_NOTE = ("This run asked the weather tool in a world of its own: its readings were drawn for this run, "
              "not the demo's. Every training run that asks the weather does, so the model learns to read "
              "the reading it gets instead of memorising one table; the app and the benchmark use the demo's.")


def training_run_html(pieces: list[tuple[str, bool]], title: str = "", world: bool = False) -> str:
    """One training run as the model saw it: trained pieces (the loss) and masked ones coloured apart;
    `world`: the run read its own weather readings (agent.tuning.sets.in_a_world), said under it."""
    if not pieces:
        return '<div class="pt-run pt-missing">No training run to show (assets/trajectories/ is empty).</div>'
    legend = (f'<div class="pt-legend"><span class="pt-trained" style="{TRAINED_STYLE}">trained: the loss is '
              f'taken here (assistant turns, each with &lt;|im_end|&gt;)</span> <span class="pt-masked" '
              f'style="{MASKED_STYLE}">masked: read, not trained (system prompt, question, observations)</span></div>')
    body = "".join(f'<span class="{"pt-trained" if t else "pt-masked"}" style="{TRAINED_STYLE if t else MASKED_STYLE}">'
                   f"{esc(text)}</span>" for text, t in pieces)
    caption = f'<div class="pt-run-title">{esc(title)}</div>' if title else ""
    note = f'<p class="pt-note pt-world">{esc(WORLD_NOTE)}</p>' if world else ""
    return (f'<div class="pt-run">{caption}{legend}<pre class="pt-run-text" '
            f'style="white-space:pre-wrap;max-height:28em;overflow:auto">{body}</pre>{note}</div>')


def loss_curve_paths(root: Path = ADAPTERS_DIR) -> dict[str, Path]:
    """weights name → loss.png of each adapter present (scripts/tune.py writes it beside the adapter)."""
    paths = {w: Path(root) / folder / "loss.png" for w, folder in FOLDERS.items()}
    return {w: p for w, p in paths.items() if p.is_file()}


def first_run(tokenizer, path: Path = TRAIN_FILE) -> tuple[list[tuple[str, bool]], str, bool]:
    """The first training run's pieces, its question, and whether it read weather readings of its
    own; ([], "", False) when the file is absent."""
    if not Path(path).is_file():
        return [], "", False
    record = read_jsonl(path)[0]
    ids, labels = encode_run(record, tokenizer)
    return run_pieces(tokenizer.decode, ids, labels), record["question"], "weather" in record


@dataclass(frozen=True)
class PostTrainingView:
    """The view's components (the tab wires no listener to them: they show files read at start)."""

    accordion: object  # gr.Accordion
    comparison: object  # gr.HTML
    curves: tuple  # gr.Image per adapter present
    curves_note: object  # gr.HTML
    run: object  # gr.HTML


def layout(comparison: str, run: str, curves: dict[str, Path]) -> PostTrainingView:
    """Inside a gr.Blocks: the closed accordion with the comparison, the loss curves and the run."""
    import gradio as gr

    with gr.Accordion(TITLE, open=False, elem_id="react-post-training") as accordion:
        table = gr.HTML(comparison, elem_id="pt-comparison")
        note = ("Loss on the assistant turns, one step per batch of 4 training runs, over two epochs: the "
                "second starts at the dashed line, with a fresh optimizer at half the learning rate "
                "(scripts/tune.py)." if curves else
                "No adapter trained yet: <code>make tune</code> writes assets/adapters/*/loss.png.")
        curves_note = gr.HTML(f'<p class="pt-note">{note}</p>', elem_id="pt-curves-note")
        with gr.Row():
            images = tuple(gr.Image(str(p), label=f"loss curve: {w}", interactive=False, type="filepath",
                                    elem_id=f"pt-loss-{FOLDERS[w]}") for w, p in curves.items())
        run_html = gr.HTML(run, elem_id="pt-run")
    return PostTrainingView(accordion, table, images, curves_note, run_html)


def build(lm) -> PostTrainingView:
    """Read what is on disk (the comparison, the first training run, the loss curves) and lay it out."""
    pieces, question, world = first_run(lm.tokenizer)
    title = f"A training run as the model saw it: {question}" if question else ""
    return layout(comparison_html(read_comparison()), training_run_html(pieces, title, world), loss_curve_paths())
