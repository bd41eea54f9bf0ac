"""The view "In-context learning vs post-training" (viz/react/post_training.py, issue 24).

The sample comparison is built by bench/bench_tuning.py's own code (ROWS, summarize, and the row
assembly of its main) from hand-made run figures, so a change of the JSON's shape breaks a test here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.tuning.trajectories import read_jsonl
from viz.react import post_training as pt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_tuning as bt  # noqa: E402


def fake_run(key: str, split: str, group: str, success: bool) -> dict:
    """One run's figures, with the keys bench_tuning.measure writes that summarize reads."""
    return {"row": key, "split": split, "group": group, "success": success, "model_calls": 2, "calls": 1,
            "valid_calls": 1, "unparsable": 0, "expected_calls": 1, "matched_calls": int(success),
            "prompt_tokens": [600 + 100 * bt.ROWS[key][2], 640 + 100 * bt.ROWS[key][2]]}


def sample_comparison(keys=tuple(bt.ROWS)) -> dict:
    """What bench_tuning.main writes, from fake runs: 3 held-in and 4 held-out questions per row."""
    runs = [fake_run(k, s, g, ok) for k in keys
            for s, cases in (("held-in", [("weather", True), ("compare", True), ("search", False)]),
                             ("held-out", [("weather", True), ("average", False), ("sum", k.startswith("tuned")),
                                           ("two_hop", k == "tuned")]))
            for g, ok in cases]
    rows = []
    for key in keys:
        for split in pt.SPLITS:
            mine = [r for r in runs if r["row"] == key and r["split"] == split]
            known = bt.summarize([r for r in mine if r["group"] not in bt.NEW_COMPOSITIONS])
            rows.append({"row": key, "label": bt.ROWS[key][0], "weights": bt.ROWS[key][1], "few_shot": bt.ROWS[key][2],
                         "split": split, **bt.summarize(mine), "success_trained_kinds": known["success"],
                         "by_group": {}})
    return {"measured": "2026-12-01T01:00:00+00:00", "machine": "2026-12-01 01:00 UTC · 2 CPUs · test machine",
            "settings": {"mode": "react", "fmt": "native", "temperature": 0.0, "constrained": False,
                         "max_steps": bt.MAX_STEPS, "max_new_tokens": bt.REPLY_TOKENS, "limit": None},
            "rows": rows, "song_et_al": bt.SONG_ET_AL, "top5": {}, "runs": runs}


def table_of(html: str, split: str) -> str:
    return re.search(rf'<table class="pt-table" data-split="{split}">.*?</table>', html, re.S).group(0)


def test_table_shows_the_five_rows_per_split_apart():
    html = pt.comparison_html(sample_comparison())
    for split, n in (("held-in", 3), ("held-out", 4)):
        table = table_of(html, split)
        assert re.findall(r'data-row="([^"]+)"', table) == list(bt.ROWS)
        for label, _, _ in bt.ROWS.values():
            assert f">{label}</th>" in table
        assert f"each row over {n} questions" in table
        for _, column, _ in pt.COLUMNS:
            assert column in table
    assert "2026-12-01T01:00:00+00:00" in html and "test machine" in html


def test_figures_are_those_of_the_split():
    html = pt.comparison_html(sample_comparison())
    tuned_out = re.search(r'data-row="tuned">.*?</tr>', table_of(html, "held-out"), re.S).group(0)
    base_in = re.search(r'data-row="base-3">.*?</tr>', table_of(html, "held-in"), re.S).group(0)
    assert "<td>75.0 %</td>" in tuned_out  # 3 of 4 held-out questions
    assert "<td>66.7 %</td>" in base_in  # 2 of 3 held-in questions
    assert "<td>920.0</td>" in base_in  # mean prompt tokens per call with 3 exemplars: (900 + 940) / 2
    assert "held-out: 75.0 % → 50.0 %" in html  # our own ablation, said plainly


def test_song_et_al_six_pairs_verbatim_and_equal_to_the_benchmark():
    html = pt.comparison_html(None)
    for a, b in [(29.5, 22.8), (30.0, 27.5), (36.1, 31.8), (41.6, 41.2), (45.2, 45.5), (45.4, 43.6)]:
        assert f"{a} → {b}" in html
    assert {k: [list(p) for p in v] for k, v in pt.SONG_ET_AL.items()} == bt.SONG_ET_AL
    assert "0–100" in html and "five tasks" in html


def test_none_says_the_benchmark_has_not_been_run():
    html = pt.comparison_html(None)
    assert "The benchmark has not been run yet" in html and "python bench/bench_tuning.py" in html
    assert 'data-split="' not in html


def test_caveat_is_always_visible():
    for c in (None, sample_comparison()):
        html = pt.comparison_html(c)
        assert "remain the harness" in html and "same three checks" in html


def test_text_is_escaped():
    c = sample_comparison(("base-0",))
    c["rows"][0]["label"] = "<script>alert(1)</script>${x}"
    c["machine"] = "<img src=x onerror=alert(1)>"
    html = pt.comparison_html(c)
    assert "<script>" not in html and "<img" not in html and "${" not in html
    assert "&lt;script&gt;" in html
    run = pt.training_run_html([("<script>", False), ("`${x}`", True)], title="<b>q</b>")
    assert "<script>" not in run and "${" not in run and "<b>" not in run


def test_run_pieces_merges_tokens_of_the_same_state():
    words = {1: "<|im_start|>", 2: "user", 3: " hi", 4: "Thought", 5: ":", 6: "<|im_end|>", 7: "tool"}
    decode = lambda ids: "".join(words[i] for i in ids)  # noqa: E731
    ids = [1, 2, 3, 4, 5, 6, 7, 4]
    labels = [pt.MASKED, pt.MASKED, pt.MASKED, 4, 5, 6, pt.MASKED, 4]
    assert pt.run_pieces(decode, ids, labels) == [("<|im_start|>user hi", False), ("Thought:<|im_end|>", True),
                                                  ("tool", False), ("Thought", True)]
    assert pt.run_pieces(decode, [], []) == []
    with pytest.raises(ValueError, match="2 ids but 1 labels"):
        pt.run_pieces(decode, [1, 2], [1])


def test_training_run_html_colours_trained_and_masked_apart_with_a_legend():
    html = pt.training_run_html([("prompt ", False), ("Thought: x", True)])
    assert re.search(r'class="pt-masked"[^>]*>prompt </span>', html)
    assert re.search(r'class="pt-trained"[^>]*>Thought: x</span>', html)
    assert 'class="pt-legend"' in html and "trained" in html and "masked" in html
    assert "No training run" in pt.training_run_html([])
    assert "world of its own" in pt.training_run_html([("a", True)], world=True)
    assert "world of its own" not in html


def test_loss_curve_paths_only_those_present(tmp_path):
    assert pt.loss_curve_paths(tmp_path) == {}
    folder = tmp_path / "trajectory-tuned-without-thoughts"
    folder.mkdir()
    (folder / "loss.png").write_bytes(b"\x89PNG")
    assert pt.loss_curve_paths(tmp_path) == {"trajectory-tuned without thoughts": folder / "loss.png"}


def test_layout_builds_a_closed_accordion(tmp_path):
    import gradio as gr

    png = tmp_path / "loss.png"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.imsave(png, [[0.0, 1.0]])
    with gr.Blocks():
        view = pt.layout(pt.comparison_html(None), pt.training_run_html([("a", True)]), {"trajectory-tuned": png})
    assert view.accordion.label == pt.TITLE and view.accordion.open is False
    assert len(view.curves) == 1 and view.curves[0].interactive is False
    assert "not been run" in view.comparison.value


@pytest.mark.model
def test_real_run_pieces_match_the_training_labels(tok):
    from tune import encode

    record = read_jsonl(pt.TRAIN_FILE)[0]
    ids, labels = pt.encode_run(record, tok)
    example = encode(record, tok)
    assert (tuple(ids), tuple(labels)) == (example.input_ids, example.labels)  # what the model was trained on
    pieces = pt.run_pieces(tok.decode, ids, labels)
    assert "".join(text for text, _ in pieces) == tok.decode(ids)
    assert all(a[1] != b[1] for a, b in zip(pieces, pieces[1:], strict=False))  # merged: states alternate
    trained = [text for text, t in pieces if t]
    assert trained == [reply + "<|im_end|>" for reply in record["replies"]]  # each assistant turn, nothing else
    assert not pieces[0][1] and "<|im_start|>system" in pieces[0][0]


@pytest.mark.model
def test_build_shows_the_first_training_run(tok):
    import gradio as gr

    with gr.Blocks():
        view = pt.build(SimpleNamespace(tokenizer=tok))
    record = read_jsonl(pt.TRAIN_FILE)[0]
    assert pt.esc(record["question"]) in view.run.value and 'class="pt-trained"' in view.run.value
    assert view.accordion.open is False


def test_a_merge_of_rows_measured_apart_says_so_and_keeps_each_rows_n():
    """bench_tuning --merge: the newest run's header, a span of dates in the view, and no --limit
    claimed for the whole table when the kept rows were measured without it."""
    old = sample_comparison()
    for r in old["rows"]:
        r["measured"] = "2026-11-30T10:00:00+00:00"
    new = sample_comparison(keys=("base-0",))
    new["measured"], new["settings"]["limit"] = "2026-12-02T05:00:00+00:00", 8
    merged = bt.merged(old, new)
    assert merged["settings"]["limit"] is None and len(merged["rows"]) == len(old["rows"])
    html = pt.comparison_html(merged)
    assert "in runs from 2026-11-30 to 2026-12-02, the newest on 2026-12-02T05:00:00+00:00" in html
    assert "a subset" not in html


def test_our_ablation_is_said_per_split_with_the_caveat_that_the_gap_moves_with_the_data():
    rows = sample_comparison()["rows"]
    said = pt.thought_effect(rows)
    for split in ("held-in", "held-out"):
        assert f"{split}: " in said
    assert "→" in said and pt.esc(pt.GAP_MOVES_WITH_THE_DATA) in said
    assert pt.thought_effect([r for r in rows if r["row"] != "tuned-no-thoughts"]) == ""


def test_the_measured_line_names_the_weights_dtype_when_the_benchmark_recorded_it():
    """bench_tuning records the model's --dtype; the view says what the table was measured on."""
    c = sample_comparison()
    assert "float16" not in pt.comparison_html(c)  # an older file: nothing is claimed
    c["settings"]["dtype"] = "float16"
    assert "MAX_STEPS = 5, float16 weights, float32 arithmetic)" in pt.comparison_html(c)
