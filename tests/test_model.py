"""The model layer with the real bundled SmolLM2-135M-Instruct (offline)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agent.llm import model as model_mod

pytestmark = pytest.mark.model
ROOT = Path(__file__).resolve().parents[1]


def softmax(z):
    p = np.exp(z - z.max())
    return p / p.sum()


def test_capital_of_france_puts_paris_first(lm):
    p = softmax(lm.next_token_logits(lm.encode("The capital of France is")))
    assert lm.token_strings[int(p.argmax())] == "␠Paris"
    assert p.max() > 0.5


def test_logits_cover_the_whole_vocabulary_as_float32(lm):
    z = lm.next_token_logits(lm.encode("Hello"))
    assert z.shape == (lm.vocab_size,) == (49152,)
    assert z.dtype == np.float32 and np.isfinite(z).all()


def test_prefix_cache_equals_full_forward_including_a_branch(lm):
    prompt = lm.encode("Once upon a time, in a small village by the sea,")
    continuation = lm.encode(
        " there lived an old fisherman who every morning rowed his small blue boat"
        " out past the rocks to the deep water"
    )[:20]
    assert len(continuation) == 20
    worst = 0.0
    for n in range(1, len(continuation) + 1):
        ids = prompt + continuation[:n]
        worst = max(worst, float(np.abs(lm.next_token_logits(ids) - lm.full_forward_logits(ids)).max()))
    branch = prompt + continuation[:5] + lm.encode(" a dragon slept under the hill")
    for n in range(len(prompt) + 6, len(branch) + 1):  # a different continuation after 5 shared tokens
        ids = branch[:n]
        worst = max(worst, float(np.abs(lm.next_token_logits(ids) - lm.full_forward_logits(ids)).max()))
    back = prompt + continuation[:3]  # Back: a strict prefix of what is cached
    worst = max(worst, float(np.abs(lm.next_token_logits(back) - lm.full_forward_logits(back)).max()))
    assert worst < 2e-4  # float32 sums in another order (fbgemm blocks by rows), on logits of ~20


def test_prefix_cache_is_safe_from_several_threads_and_sessions(lm):
    """Six threads at once, anonymous (one shared cache, as in a notebook) and under three
    sessions (a cache each): the calls share batched passes and each gets its own exact logits."""
    from concurrent.futures import ThreadPoolExecutor

    prompts = [lm.encode(t) for t in ("The sky is", "Two plus two is", "My favourite food is")] * 2
    sessions = [None, None, None, "s1", "s2", "s3"]
    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(lambda a: lm.next_token_logits(a[0], session=a[1]), zip(prompts, sessions, strict=True)))
    for ids, z in zip(prompts, got, strict=True):
        assert np.abs(z - lm.full_forward_logits(ids)).max() < 1e-4


def test_a_forward_pass_runs_on_forward_threads_and_gives_the_count_back(lm):
    """Inside a pass (seen by a hook on the first decoder layer) torch runs on forward_threads();
    the calling thread's own count is the same before and after (torch's count is global)."""
    import torch

    seen = []
    hook = lm.model.model.layers[0].register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    try:
        lm.next_token_logits(lm.encode("Threads of a forward pass, seen from inside"), session="threads")
        lm.full_forward_logits(lm.encode("and from a full pass"))
    finally:
        hook.remove()
    assert seen and set(seen) == {lm.threads} == {model_mod.forward_threads()}
    assert torch.get_num_threads() == before


def test_a_decode_pass_runs_on_one_thread_and_a_prompt_chunk_on_forward_threads(lm, monkeypatch):
    """Two spinning threads made a decode pass of several rows slower and took both cores; a prompt
    chunk of PARALLEL_TOKENS or more runs on forward_threads() (here 2, as in the model's own
    process)."""
    import torch

    from agent.llm.batching import Request

    seen = []
    monkeypatch.setattr(lm, "threads", 2)
    hook = lm.model.model.layers[0].register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    try:
        ids = lm.encode(" ".join(["a prompt long enough to run on two threads"] * 8))
        assert len(ids) >= model_mod.PARALLEL_TOKENS
        lm.next_token_logits(ids, session="chunk-threads")  # a prefill of every token
        lm.next_token_logits([*ids, 13], session="chunk-threads")  # one new token on the cached prompt
        assert seen == [2, 1]
        rows = []
        for k, session in enumerate(("row-a", "row-b")):  # two rows of one new token each, one pass
            lm.next_token_logits(ids[:10 + k], session=session)
            r = Request(session, tuple(ids[:11 + k]))
            lm._prepare(r)
            rows.append((r, 1))
        del seen[:]
        lm._forward_rows(rows)
    finally:
        hook.remove()
    assert seen == [1]


@pytest.mark.parametrize(("env", "threads"), [(None, 1), ("2", 2), ("0", 1), ("two", 1)])
def test_forward_threads_is_one_unless_the_operator_sets_omp_num_threads(monkeypatch, env, threads):
    if env is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    assert model_mod.forward_threads() == threads


def test_two_passes_that_extend_one_block_never_write_the_same_positions(lm):
    """A pass appends into room after a row's block (agent/llm/kv.py). Two requests of one session
    prepared on the same cached prefix, as queued requests are: a verify (3 new tokens) extends the
    block in place, so the decode after it, prepared on the same entry, finds the same block; it
    must copy, or it would write over the verify's positions. Both continuations stay exact."""
    from agent.llm.batching import Request

    ids = lm.encode("A block extended twice: once by a verify, once by a decode")
    a, b, c, d, e, x = lm.encode(" one two three four five six")[:6]
    session = "kv-extended-twice"
    for seq in (ids, ids + [a], ids + [a, b]):  # a prompt, then two decode passes: a hot block
        lm.next_token_logits(seq, session=session)
    verify = Request(session, (*ids, a, b, c, d, e), tail=3)
    decode = Request(session, (*ids, a, b, x))
    assert lm._prepare(verify) is None and lm._prepare(decode) is None
    assert verify.base is decode.base and verify.base.block.length == len(verify.base.ids)
    lm._forward_rows([(verify, 3)])
    lm._forward_rows([(decode, 1)])
    for seq in ((*ids, a, b, c, d, e, x), (*ids, a, b, x, c)):
        assert np.abs(lm.next_token_logits(seq, session=session) - lm.full_forward_logits(seq)).max() < 1e-4


def test_the_cache_is_keyed_by_session(lm):
    ids = tuple(lm.encode("A prompt typed by one visitor only"))
    lm.next_token_logits(ids, session="one")
    assert lm._store.get("one", ids) is not None
    assert lm._store.get("other", ids) is None and lm._store.get(model_mod.ANONYMOUS, ids) is None


def test_distinct_ids_never_share_a_display_string_unless_marked_ambiguous(lm):
    seen: dict[str, int] = {}
    for i, s in enumerate(lm.token_strings):
        if s in seen:
            assert i in lm.ambiguous_ids and seen[s] in lm.ambiguous_ids
        seen[s] = i
    assert len(seen) == lm.vocab_size


def test_display_strings_make_whitespace_and_bytes_visible(lm):
    assert lm.token_strings[lm.encode(" Paris")[0]] == "␠Paris"
    assert "⏎" in lm.token_strings[lm.encode("\n")[0]]
    assert model_mod.visible_text(b"\t\xe2\x80") == "⇥<0xE2><0x80>"
    assert model_mod.visible_text("a\u200bb".encode()) == "a<U+200B>b"
    assert lm.token_strings[2] == "<|im_end|>" and 2 in lm.special_ids


def test_end_of_sequence_ids_include_chatml_end(lm):
    assert lm.tokenizer.convert_tokens_to_ids("<|im_end|>") in lm.eos_token_ids


def test_chat_template_is_chatml(lm):
    text = lm.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


def test_header_names_what_is_loaded(lm):
    h = lm.header
    assert h["model"] == "SmolLM2-135M-Instruct"
    assert "bundled GGUF Q4_1" in h["source"] and "dequantized" in h["source"]
    assert h["vocabulary"] == "49,152" and h["context window"] == "8,192"
    assert h["dtype"] == "float16 weights, float32 arithmetic" and h["device"] == "cpu" and h["parameters"] == "135 M"


def test_resolution_order_prefers_argument_then_env_then_bundled(monkeypatch, tmp_path):
    monkeypatch.delenv(model_mod.MODEL_ENV, raising=False)
    assert model_mod.resolve_source().kind == "gguf"
    assert model_mod.resolve_source().location == str(model_mod.bundled_gguf())
    monkeypatch.setenv(model_mod.MODEL_ENV, "someone/some-model")
    hub = model_mod.ModelSource("hub", "someone/some-model", "hub someone/some-model")
    assert model_mod.resolve_source() == hub
    assert model_mod.resolve_source(str(tmp_path)).kind == "local"


def test_a_corrupt_cache_is_detected_and_never_loaded(lm, tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert not model_mod.cache_is_valid(folder)  # no manifest: a partial write
    (folder / "manifest.json").write_text(
        json.dumps(
            {"format": model_mod.CACHE_FORMAT, "files": {"config.json": {"size": 2, "sha256": "0" * 64}}}
        )
    )
    assert not model_mod.cache_is_valid(folder)  # hash mismatch: corrupt
    real = model_mod._gguf_cache_dir(model_mod.bundled_gguf())
    assert model_mod.cache_is_valid(real)


def test_the_cache_loads_as_a_plain_model_without_the_gguf_quantizer_or_its_warning(lm, caplog):
    """The cache holds dequantized weights; its config.json still names the GGUF file it came from.
    Loaded as it is, transformers went through its GGUF quantizer and warned at every start that
    "every matmul will cast its input and its output" — never true of these weights."""
    import logging

    caplog.set_level(logging.WARNING)
    model, _, from_cache = model_mod._load_weights(model_mod.resolve_source(None), lambda *_: None, "float16")
    assert from_cache and getattr(model, "hf_quantizer", None) is None
    assert not hasattr(model.config, "quantization_config")
    assert "will cast" not in caplog.text and "GGUF" not in caplog.text


def test_corrupt_cache_is_rebuilt(tmp_path, monkeypatch):
    """Truncate the weights in a copied cache: the loader rebuilds it from the GGUF, then loads."""
    import shutil

    real = model_mod._gguf_cache_dir(model_mod.bundled_gguf())
    target = tmp_path / real.name
    shutil.copytree(real, target)
    with open(target / "model.safetensors", "r+b") as f:
        f.truncate(1000)
    monkeypatch.setenv(model_mod.CACHE_ENV, str(tmp_path))
    assert model_mod._gguf_cache_dir(model_mod.bundled_gguf()) == target
    messages: list[str] = []
    lm2 = model_mod.load_model(log=messages.append)
    assert not lm2.from_cache and any("corrupt" in m for m in messages)
    assert model_mod.cache_is_valid(target)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--model", "/no/such/model.gguf"], "no such .gguf file"),
        (["--model", "not-a-model"], "not a .gguf file, a model folder or a hub id"),
        (["--dtype", "float32", "--model", "CORRUPT"], "Could not load the model"),
    ],
)
def test_cli_load_failure_exits_nonzero_with_one_clear_line(args, expected, tmp_path):
    if "CORRUPT" in args:
        bad = tmp_path / "broken.gguf"
        bad.write_bytes(b"GGUF" + b"\0" * 64)
        args = [str(bad) if a == "CORRUPT" else a for a in args]
    run = subprocess.run(
        [sys.executable, str(ROOT / "app.py"), *args],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**__import__("os").environ, model_mod.CACHE_ENV: str(tmp_path / "cache")},
    )
    assert run.returncode == 2
    last = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert len(last) == 1 and expected in last[0]


def test_cli_help_documents_the_flags():
    out = subprocess.run([sys.executable, str(ROOT / "app.py"), "--help"], capture_output=True, text=True)
    for flag in ("--model", "--host", "--port", "--dtype", "GRADIO_SERVER_NAME", "GRADIO_SERVER_PORT"):
        assert flag in out.stdout
