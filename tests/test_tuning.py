"""Trajectory tuning (issue 24): the generated runs, the split, the training script, the adapters.

The data tests run without a model; those marked `model` load the bundled one (training: 2 steps
on 4 runs into tmp_path, a few tens of seconds on 2 cores).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent import loop
from agent.llm.weights import WEIGHTS, adapter_folder, checked
from agent.messages import ToolResultMessage
from agent.tuning.sets import FILES, LATER, build
from agent.tuning.trajectories import DATA_DIR, judge_answer, read_jsonl, render_run, replay

ROOT = Path(__file__).resolve().parent.parent
TRAIN = [*read_jsonl(DATA_DIR / FILES["train"]), *read_jsonl(DATA_DIR / FILES["train_without"])]
QUESTION_SETS = [key for key in FILES if key.startswith("held")]


def test_every_generated_run_replays_exactly_with_real_observations():
    for record in TRAIN:
        states, prompts = replay(record)
        final = states[-1]
        assert final.stop_reason == loop.StopReason.FINAL_ANSWER, record["id"]
        assert [m.content for m in final.history if isinstance(m, ToolResultMessage)] == record["observations"]
        assert final.final_answer == record["answer"] == record["replies"][-1]
        assert len(prompts) == len(record["replies"]) == len(record["trained"])


def test_the_versioned_data_is_what_the_seeded_generator_writes():
    for key, rows in build().items():
        assert rows == read_jsonl(DATA_DIR / FILES[key]), FILES[key]


def test_with_and_without_thoughts_are_the_same_runs_without_the_thought():
    with_t, without = read_jsonl(DATA_DIR / FILES["train"]), read_jsonl(DATA_DIR / FILES["train_without"])
    assert [r["calls"] for r in with_t] == [r["calls"] for r in without]
    assert [r["observations"] for r in with_t] == [r["observations"] for r in without]
    assert any("Thought:" in x for r in with_t for x in r["replies"])
    assert not any("Thought:" in x for r in without for x in r["replies"])


def test_held_out_split_overlaps_training_in_no_template_entities_pair():
    held_out = read_jsonl(DATA_DIR / FILES["held_out"])
    train_pairs = {(r["template"], tuple(r["entities"])) for r in TRAIN}
    assert not train_pairs & {(q["template"], tuple(q["entities"])) for q in held_out}
    assert not {r["template"] for r in TRAIN} & {q["template"] for q in held_out}  # unseen phrasings
    assert not {r["question"] for r in TRAIN} & {q["question"] for q in held_out}
    from agent.tuning.task_bank import HELD_OUT_BOOKS, HELD_OUT_CITIES, HELD_OUT_UNKNOWN

    trained_entities = {e for r in TRAIN for e in r["entities"]}
    assert not trained_entities & {*HELD_OUT_CITIES, *HELD_OUT_BOOKS, *HELD_OUT_UNKNOWN}
    assert {"difference", "sum", "average", "fahrenheit", "two_hop", "unknown_city"} <= {q["group"] for q in held_out}


def test_the_unknown_places_to_copy_are_no_weather_city_and_no_held_out_place():
    """The fifth data set's unknown places (accents, several words) stay unknown to the weather tool
    and match no held-out or known city, even case-, accent- and punctuation-blind."""
    from agent.tools import WEATHER, normalize
    from agent.tuning import task_bank as tb

    more = {normalize(c) for c in tb.TRAIN_UNKNOWN_MORE}
    assert len(more) == len(tb.TRAIN_UNKNOWN_MORE)
    assert not more & {normalize(c) for c in (*WEATHER, *tb.HELD_OUT_UNKNOWN, *tb.TRAIN_UNKNOWN)}
    trained = {r["entities"][0] for r in TRAIN if r["kind"] == "unknown_city"}
    assert len(trained & set(tb.TRAIN_UNKNOWN_MORE)) >= 30
    assert any(not c.isascii() for c in trained)


def test_every_training_run_that_asks_the_weather_has_a_world_of_its_own_without_held_out_places():
    """The seventh data set: a training run that asks the weather tool reads its own table of
    readings (so no city's reading can be learnt by name), its unknown place is not in that table,
    and no world holds a held-out city or place; the held-in and held-out questions use the demo's."""
    from agent.tools import WEATHER, normalize
    from agent.tuning import task_bank as tb

    held = {normalize(c) for c in (*tb.HELD_OUT_CITIES, *tb.HELD_OUT_UNKNOWN)}
    unknown = {normalize(c) for c in (*tb.TRAIN_UNKNOWN, *tb.TRAIN_UNKNOWN_MORE)}
    assert not {normalize(c) for c in tb.WORLD_CITIES} & (held | unknown)
    asking = [r for r in TRAIN if any(c["name"] == "get_weather" for c in r["calls"])]
    assert asking and all(len(r["weather"]) == len(WEATHER) for r in asking)
    assert not {normalize(c) for r in asking for c in r["weather"]} & held
    for r in asking:
        names = {normalize(c) for c in r["weather"]}
        assert (normalize(r["entities"][0]) in names) == (r["kind"] != "unknown_city"), r["id"]
    readings = {}
    for r in asking:
        for city, report in r["weather"].items():
            readings.setdefault(city, set()).add(report)
    assert min(len(v) for c, v in readings.items() if c in tb.TRAIN_CITIES) > 5  # no fixed reading to learn
    assert len({e for r in asking for e in r["entities"]} & set(tb.WORLD_CITIES)) > 50
    for name in QUESTION_SETS:
        assert not any("weather" in q for q in read_jsonl(DATA_DIR / FILES[name]))


def test_invented_books_live_in_a_library_world_of_their_own_with_no_held_out_name():
    """The tenth data set: most extra two-hop and who-wrote runs ask about an invented book, read
    from a library world of the run's own (its author differs from run to run); about half those
    lookups give two results, as a living held-out author's does; no invented book, person or town
    is a held-out name or a real article; the held-in and held-out questions use the encyclopedia."""
    from agent.tools import load_encyclopedia, lookup, normalize
    from agent.tuning import task_bank as tb

    real = {normalize(a.title) for a in load_encyclopedia()}
    held_out = {normalize(x) for x in (*tb.HELD_OUT_BOOKS, *tb.HELD_OUT_CITIES, *tb.HELD_OUT_UNKNOWN)}
    held_out |= {normalize(tb.book_author(b)) for b in tb.HELD_OUT_BOOKS}
    born = [tb._birth(lookup("born", tb.book_author(b)))[0] for b in tb.HELD_OUT_BOOKS]  # "in Kyoto, Japan"
    held_out |= {normalize(place.split(" ", 1)[1].split(",")[0]) for place in born}  # their birthplaces
    invented = {normalize(x) for x in (*tb.WORLD_BOOKS, *tb._SURNAMES, *(t for _, _, ts in tb.NATIONS for t in ts))}
    assert not invented & (real | held_out)
    worlds = [r for r in TRAIN if r.get("library")]
    assert {r["kind"] for r in worlds} == {"two_hop", "search"}
    assert all(r["entities"][0] in tb.WORLD_BOOKS and r["library"][0]["title"] == r["entities"][0] for r in worlds)
    two_hop = [r for r in worlds if r["kind"] == "two_hop"]
    assert len(two_hop) >= 80
    two = sum("(Result 2/2)" in r["observations"][-1] for r in two_hop)
    assert 0.35 < two / len(two_hop) < 0.65, two
    authors, runs = {}, {}
    for r in worlds:
        authors.setdefault(r["entities"][0], set()).add(r["library"][1]["title"])
        runs[r["entities"][0]] = runs.get(r["entities"][0], 0) + 1
    repeated = [authors[book] for book, n in runs.items() if n > 1]
    assert len(repeated) >= 15 and sum(len(names) > 1 for names in repeated) / len(repeated) > 0.9
    for name in QUESTION_SETS:
        assert not any("library" in q for q in read_jsonl(DATA_DIR / FILES[name]))


@pytest.mark.parametrize("name", sorted(LATER))
def test_a_later_held_out_set_shares_no_phrasing_with_training_or_the_sets_before(name):
    """held-out-2 to -5: phrasings no training run and no other question set uses, over
    held-out entities only, every kind and operation the first set has."""
    from agent.tuning import task_bank as tb

    later, bank = read_jsonl(DATA_DIR / FILES[name]), LATER[name][0]
    others = [q for key in QUESTION_SETS if key != name for q in read_jsonl(DATA_DIR / FILES[key])]
    def strings(value) -> set[str]:
        if isinstance(value, str):
            return {value}
        items = value.values() if isinstance(value, dict) else value if isinstance(value, tuple) else ()
        return set().union(*(strings(v) for v in items)) if items else set()

    phrasings = {q if isinstance(q, str) else q[0] for qs in bank.values() for q in qs}
    elsewhere = set().union(*(strings(getattr(tb, n)) for n in dir(tb)
                              if n.endswith("_Q") and getattr(tb, n) is not bank))
    assert len(phrasings) == 20 and len(elsewhere) > 300
    assert not phrasings & elsewhere
    assert not {r["question"] for r in TRAIN} & {q["question"] for q in later}
    assert not {q["question"] for q in others} & {q["question"] for q in later}
    assert not {r["template"] for r in TRAIN} & {q["template"] for q in later}
    assert not {q["template"] for q in others} & {q["template"] for q in later}
    held = {*tb.HELD_OUT_CITIES, *tb.HELD_OUT_BOOKS, *tb.HELD_OUT_UNKNOWN}
    assert all(set(q["entities"]) & held for q in later if q["entities"] and q["kind"] != "arithmetic")
    first = read_jsonl(DATA_DIR / FILES["held_out"])
    assert {q["group"] for q in first} == {q["group"] for q in later}


def test_the_judge_reads_numbers_whole_and_wants_honesty_for_an_unknown_city():
    assert judge_answer({"must_contain": ["1"]}, "The difference is 1°C.")
    assert not judge_answer({"must_contain": ["1"]}, "Bogotá has 14°C.")
    honest = {"honest": True, "must_not_contain": ["°C"]}
    assert judge_answer(honest, "I don't know the weather in Hanoi: the tool has no data for it.")
    assert not judge_answer(honest, "It is 25°C in Hanoi.")


def test_the_judge_takes_a_known_fact_in_words_and_a_greeting_in_any_words():
    """A question without a tool asks what the model knows: "three" answers "3" (a tool's figure
    must still be quoted as the tool gave it), and "Hi!" returns "Hey there!" as well as "Hello!"."""
    assert judge_answer({"must_contain": ["3"], "no_tool": True}, "A triangle has three sides.")
    assert judge_answer({"must_contain": ["24"], "no_tool": True}, "A day has twenty-four hours.")
    assert not judge_answer({"must_contain": ["3"]}, "The difference is three degrees.")
    assert not judge_answer({"must_contain": ["1"], "no_tool": True}, "Someone knows.")
    assert judge_answer({"must_contain": ["hello"], "no_tool": True}, "Hi! How can I help you?")
    assert judge_answer({"must_contain": ["hello"], "no_tool": True}, "Good evening! How can I help?")
    assert not judge_answer({"must_contain": ["hello"], "no_tool": True}, "This is the weather tool.")


def test_the_judge_of_a_comparison_wants_the_right_city_named_warmer_not_only_mentioned():
    """'Berlin is warmer: 12°C … against 21°C in Rome' holds every number and both names, and is wrong."""
    from agent.tuning.trajectories import judge_answer

    held = read_jsonl(DATA_DIR / FILES["held_in"]) + read_jsonl(DATA_DIR / FILES["held_out"])
    leads = [q["expected"] for q in held if "lead" in q["expected"]]
    assert leads and all(e["lead"]["city"] in e["must_contain"] for e in leads)
    e = {"must_contain": ["12°C", "21°C", "Rome"], "lead": {"city": "Rome", "other": "Berlin", "word": "warmer"}}
    assert not judge_answer(e, "Berlin is warmer: 12°C, rainy in Berlin, against 21°C, sunny in Rome.")
    assert judge_answer(e, "Rome is warmer: 21°C, sunny in Rome, against 12°C, rainy in Berlin.")
    assert judge_answer(e, "Berlin has 12°C and Rome 21°C, so Rome is warmer.")
    assert judge_answer(e, "It is warmer in Rome (21°C) than in Berlin (12°C).")
    cold = {"must_contain": ["12°C", "21°C", "Berlin"], "lead": {"city": "Berlin", "other": "Rome", "word": "colder"}}
    assert judge_answer(cold, "Berlin is colder: 12°C against 21°C in Rome.")
    assert not judge_answer(cold, "Rome is chillier than Berlin: 21°C against 12°C.")


def test_an_unknown_weights_name_gives_a_clear_message():
    assert WEIGHTS == ("base", "trajectory-tuned", "trajectory-tuned without thoughts")
    with pytest.raises(ValueError, match="Unknown Local weights 'tuned': choose one of base, trajectory-tuned, "
                                         "trajectory-tuned without thoughts"):
        checked("tuned")
    with pytest.raises(ValueError, match="Unknown Local weights"):
        adapter_folder("")
    assert adapter_folder("base") is None


@pytest.mark.model
def test_each_turn_prompt_is_a_prefix_and_only_assistant_turns_carry_the_loss(lm):
    sys.path.insert(0, str(ROOT / "scripts"))
    from tune import encode

    for record in TRAIN[::7]:
        text, spans = render_run(record, lm.tokenizer)  # raises when a turn's prompt is not a prefix
        ex = encode(record, lm.tokenizer)
        trained = lm.tokenizer.decode([t for t in ex.labels if t != -100])
        replies = [r for r, t in zip(record["replies"], record["trained"], strict=True) if t]
        assert trained == "".join(r + "<|im_end|>" for r in replies), record["id"]
        assert ex.labels[-1] == lm.tokenizer.convert_tokens_to_ids("<|im_end|>")


@pytest.fixture(scope="module")
def trained_adapter(tmp_path_factory) -> Path:
    """The training script as `make tune` runs it (its own process, under mimalloc), 2 steps (batches
    of 2) on 4 runs, into a temporary folder."""
    import subprocess

    out = tmp_path_factory.mktemp("adapters")
    run = subprocess.run([sys.executable, "scripts/tune.py", "--adapter", "with-thoughts", "--max-steps", "2",
                          "--limit-runs", "4", "--batch", "2", "--bf16", "off", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return out


@pytest.mark.model
def test_training_resumes_from_a_trained_adapter_and_counts_only_whole_epochs(trained_adapter, tmp_path):
    """--resume starts from the adapter's weights and records every epoch it has had; the curve
    and the record go on from the earlier run's (`make tune` trains two epochs; the shipped
    adapters got their second this way)."""
    import subprocess

    import torch
    from safetensors.torch import load_file

    first = json.loads((trained_adapter / "trajectory-tuned" / "training.json").read_text())
    assert first["epochs"] == 1  # 2 steps of batches of 2 on 4 runs: the first epoch whole, no more
    run = subprocess.run([sys.executable, "scripts/tune.py", "--adapter", "with-thoughts", "--resume",
                          str(trained_adapter), "--max-steps", "1", "--limit-runs", "4", "--batch", "2",
                          "--bf16", "off", "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "epochs 2–2 to go" in run.stdout
    record = json.loads((tmp_path / "trajectory-tuned" / "training.json").read_text())
    assert record["epochs"] == 1 and record["steps"] == 1  # the second epoch was cut after its first step
    assert record["losses"][:2] == first["losses"] and len(record["losses"]) == 3
    assert record["earlier"][0]["steps"] == 2 and record["epoch_lr"] == [6e-4, 3e-4]
    sys.path.insert(0, str(ROOT / "scripts"))
    import tune
    from peft import get_peft_model_state_dict

    model = tune.peft_model(tune.base_model())  # a fresh LoRA, as the script makes
    tune.resume(model, trained_adapter / "trajectory-tuned")
    saved = load_file(str(trained_adapter / "trajectory-tuned" / "adapter_model.safetensors"))
    state = get_peft_model_state_dict(model)
    assert state.keys() == saved.keys()
    assert all(torch.equal(state[k].to(saved[k].dtype), saved[k]) for k in saved)  # the trained weights, exactly


def test_the_training_process_keeps_freed_memory_for_the_next_step():
    """`make tune` sets glibc's malloc options in its own process (a fresh interpreter here, so the
    test session's malloc is left alone): each option must be taken, or steps fault their memory anew."""
    import subprocess

    code = "import sys; sys.path.insert(0, 'scripts'); import tune; print(tune.keep_freed_memory())"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


@pytest.mark.model
def test_training_runs_two_steps_on_four_runs_and_writes_an_adapter(trained_adapter):
    folder = trained_adapter / "trajectory-tuned"
    assert (folder / "adapter_model.safetensors").stat().st_size > 1_000_000
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["r"] == 16 and config["lora_alpha"] == 32
    assert "/" not in config["base_model_name_or_path"]  # no hub id for anything to download
    record = json.loads((folder / "training.json").read_text())
    assert record["steps"] == 2 and record["runs"] == 4 and record["tokens"] > 0
    assert len(record["seconds_per_step"]) == 2 and record["peak_rss_mb"] > 0
    assert record["malloc"] == "mimalloc"  # restarted under it: glibc's bins fragment as steps go on
    assert (folder / "loss.png").stat().st_size > 0


@pytest.mark.model
def test_an_adapter_loads_offline_and_changes_the_logits(trained_adapter):
    import numpy as np
    import torch

    from agent.llm.model import load_model
    from agent.llm.weights import load_adapters

    fresh = load_model(log=lambda *_: None, adapters=False)  # not the session's model: the adapter goes in place
    ids = fresh.encode("What's the weather in Lisbon?")
    base = fresh.full_forward_logits(ids)
    adapters = load_adapters(fresh, root=trained_adapter)
    assert adapters.loaded == ("trajectory-tuned",)
    assert np.allclose(fresh.full_forward_logits(ids), base, atol=1e-5)  # base stays active
    adapters.use("trajectory-tuned")
    tuned = fresh.full_forward_logits(ids)
    assert np.abs(tuned - base).max() > 1e-3
    adapters.use("base")
    assert np.allclose(fresh.full_forward_logits(ids), base, atol=1e-5)
    with adapters.rows(["base", "trajectory-tuned"]):  # the batcher's call: rows on different weights
        mixed = fresh.model.lm_head(fresh.model.model(input_ids=torch.tensor([ids, ids])).last_hidden_state[:, -1])
    assert np.allclose(mixed[0].detach().numpy(), base, atol=1e-3)
    assert np.allclose(mixed[1].detach().numpy(), tuned, atol=1e-3)
    with adapters.rows(["base"]):  # after a mixed pass, a pass on one choice runs on it alone
        assert np.allclose(fresh.full_forward_logits(ids), base, atol=1e-5)
    with pytest.raises(ValueError, match="not loaded"):
        adapters.use("trajectory-tuned without thoughts")


@pytest.mark.model
def test_the_served_adapters_compute_what_peft_computes_row_by_row():
    """The app adds each row's low-rank update itself (agent.llm.weights: one stacked product a
    layer, a mask per row); peft, which trained the adapters, is the oracle: the shipped adapters
    give the same logits either way, on each choice alone and on rows of all three in one batch."""
    import numpy as np
    import torch
    from peft import PeftModel

    from agent.llm.model import load_model
    from agent.llm.weights import FOLDERS, load_adapters

    ours = load_model(dtype="float32", log=lambda *_: None, adapters=False)  # both in place: not the session's model
    adapters = load_adapters(ours)
    assert adapters.loaded == WEIGHTS[1:]
    oracle = PeftModel.from_pretrained(load_model(dtype="float32", log=lambda *_: None, adapters=False).model,
                                       str(adapter_folder(WEIGHTS[1])), adapter_name=FOLDERS[WEIGHTS[1]])
    oracle.load_adapter(str(adapter_folder(WEIGHTS[2])), adapter_name=FOLDERS[WEIGHTS[2]])
    ids = ours.encode("Is it warmer in Paris or in Rome?")
    expected = {}
    with torch.inference_mode():
        with oracle.disable_adapter():
            expected["base"] = oracle(input_ids=torch.tensor([ids])).logits[0, -1].numpy()
        for w in WEIGHTS[1:]:
            oracle.set_adapter(FOLDERS[w])
            expected[w] = oracle(input_ids=torch.tensor([ids])).logits[0, -1].numpy()
    for w in WEIGHTS:
        adapters.use(w)
        assert np.abs(ours.full_forward_logits(ids) - expected[w]).max() < 1e-4, w
    assert np.abs(expected[WEIGHTS[1]] - expected["base"]).max() > 1e-2  # the adapters do change the logits
    mixed = list(WEIGHTS) + [WEIGHTS[1]]
    with torch.inference_mode(), adapters.rows(mixed):
        out = ours.model(input_ids=torch.tensor([ids] * len(mixed))).logits[:, -1].numpy()
    for row, w in zip(out, mixed, strict=True):
        assert np.abs(row - expected[w]).max() < 1e-4, w
    adapters.use("base")  # rows() gives back use()'s choice
    assert np.abs(ours.full_forward_logits(ids) - expected["base"]).max() < 1e-4


@pytest.mark.model
def test_a_batch_over_the_shared_prefix_has_the_loss_and_gradients_of_its_runs_run_whole():
    """scripts/tune.py runs the common prefix once per batch: that must change the cost, never the
    loss or a gradient (float32, three runs of different lengths, so the padding is exercised)."""
    import torch

    sys.path.insert(0, str(ROOT / "scripts"))
    import tune

    fresh = tune.base_model()  # peft goes in place: not the session's model
    exs = [tune.encode(r, fresh.tokenizer) for r in TRAIN[:3]]
    assert len({len(e.input_ids) for e in exs}) > 1
    prefix = tune.shared_prefix(exs)
    assert len(prefix) > 400  # the system prompt with the tool schemas
    model = tune.peft_model(fresh)
    lora = [p for p in model.parameters() if p.requires_grad]
    batched = tune.batch_loss(model, prefix, exs, bf16=False)
    grads = [p.grad.clone() for p in lora]
    model.zero_grad(set_to_none=True)
    causal_lm, total, count = model.get_base_model(), 0.0, 0
    for e in exs:  # each run whole, no cache; the mean over every trained token of the batch
        hidden = causal_lm.model(input_ids=torch.tensor([e.input_ids]), use_cache=False).last_hidden_state[0, :-1]
        targets = torch.tensor(e.labels[1:])
        keep = targets != -100
        total = total + torch.nn.functional.cross_entropy(causal_lm.lm_head(hidden[keep]), targets[keep],
                                                          reduction="sum")
        count += int(keep.sum())
    whole = total / count
    whole.backward()
    assert abs(batched - float(whole)) < 1e-4
    assert all(torch.allclose(g, p.grad, rtol=1e-3, atol=1e-6) for g, p in zip(grads, lora, strict=True))
    assert max(float(g.abs().max()) for g in grads) > 0
    model.zero_grad(set_to_none=True)  # the prefix without autograd (bench_training_step --prefix-grad off):
    cut = tune.batch_loss(model, prefix, exs, bf16=False, prefix_grad=False)  # the same loss, another gradient
    assert abs(cut - batched) < 1e-5
    assert not all(torch.allclose(g, p.grad, rtol=1e-3, atol=1e-6) for g, p in zip(grads, lora, strict=True))


def test_the_judge_of_an_unknown_city_wants_the_call_to_name_the_place_asked():
    """An honest "no data" after a call for "Zurica" is not the answer about Zurich (the seventh set's
    held-out run that passed this way)."""
    from agent.messages import AssistantMessage, ResultKind, ToolCall, UserMessage
    from agent.tuning.trajectories import judge_run

    held_out = read_jsonl(DATA_DIR / FILES["held_out"])
    question = next(q for q in held_out if q["kind"] == "unknown_city" and q["entities"] == ["Zurich"])

    def run(city: str) -> loop.State:
        call = ToolCall("call_1", "get_weather", json.dumps({"city": city}))
        answer = f"Sorry, the weather tool has no data for {city}, so I cannot tell you."
        history = (UserMessage(question["question"]), AssistantMessage(tool_calls=(call,)),
                   ToolResultMessage("call_1", f"unknown city '{city}'", ResultKind.TOOL_ERROR),
                   AssistantMessage(answer))
        return loop.State(history, question["question"], stop_reason=loop.StopReason.FINAL_ANSWER,
                          final_answer=answer)

    assert judge_run(question["expected"], run("Zurich"))["success"]
    assert judge_run(question["expected"], run("zurich"))["success"]
    assert not judge_run(question["expected"], run("Zurica"))["success"]


def test_the_copy_probe_places_are_in_no_training_run_and_no_held_out_or_trained_place():
    """bench/bench_copy.py asks about task_bank.COPY_PROBE_PLACES: a name the model never read in training."""
    from agent.tools import WEATHER, normalize
    from agent.tuning import task_bank as tb

    probe = set(tb.COPY_PROBE_PLACES)
    assert len(probe) == len(tb.COPY_PROBE_PLACES)
    before = {normalize(c) for c in (*WEATHER, *tb.WORLD_CITIES, *tb.TRAIN_UNKNOWN, *tb.TRAIN_UNKNOWN_MORE,
                                     *tb.HELD_OUT_UNKNOWN)}
    assert not {normalize(c) for c in probe} & before
    words = {w.strip("?.,!'") for r in TRAIN for w in r["question"].split()}
    assert not words & probe
    assert not {e for r in TRAIN for e in r["entities"]} & probe


@pytest.mark.model
def test_the_copy_probe_places_are_one_token_after_a_space_and_several_in_a_json_string(lm):
    """What makes them a probe: " Tehran" is one token, "Tehran" after a quote several."""
    from agent.tuning import task_bank as tb

    for place in tb.COPY_PROBE_PLACES:
        assert len(lm.encode(" " + place)) == 1, place
        assert len(lm.encode('"' + place)) > 2, place
