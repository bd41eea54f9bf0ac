"""The model in a process of its own (agent/llm/process.py): the same answers as in one process,
sessions still batched together, errors and Stop carried across, a dead child replaced."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from agent.llm.batching import Busy, Cancelled
from agent.llm.process import ModelProcess, ModelProcessError


@pytest.fixture(scope="module")
def proc_lm():
    from agent.llm.process import start_model_process

    lm = start_model_process(log=lambda _: None)
    yield lm
    lm.close()


PROMPT = "The capital of France is"


def test_it_offers_what_the_model_in_this_process_offers(proc_lm, lm):
    assert isinstance(proc_lm, ModelProcess)
    for name in ("name", "vocab_size", "context_window", "n_params", "num_layers", "eos_token_ids",
                 "weights_choices", "token_strings", "header"):
        assert getattr(proc_lm, name) == getattr(lm, name), name
    assert proc_lm.encode(PROMPT) == lm.encode(PROMPT)
    assert not hasattr(proc_lm, "model")  # the weights live in the child only


@pytest.mark.parametrize("weights", ["base", "trajectory-tuned"])
def test_its_logits_are_the_model_in_this_process_logits(proc_lm, lm, weights):
    ids = lm.encode(PROMPT)
    got = proc_lm.next_token_logits(ids, session=("t", weights), weights=weights)
    want = lm.full_forward_logits(ids, weights=weights)
    assert got.shape == (lm.vocab_size,) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-3)
    assert lm.token_strings[int(got.argmax())] == "␠Paris"


def test_the_speculative_calls_cross_too(proc_lm, lm):
    ids = lm.encode(PROMPT + " Paris")
    np.testing.assert_allclose(proc_lm.tail_logits(ids, 2, session=("spec",)),
                               lm.tail_logits(ids, 2, session=("spec",)), atol=1e-3)
    np.testing.assert_allclose(proc_lm.early_exit_logits(ids, 10, session=("spec",)),
                               lm.early_exit_logits(ids, 10, session=("spec",)), atol=1e-3)
    assert proc_lm.plain_decode_seconds(ids, lm.encode(" and"), session=("spec",)) > 0


def test_students_at_once_share_forward_passes_in_the_child(proc_lm, lm):
    prompts = [f"Pupil {i} counts sheep: {i}, {i + 1}," for i in range(6)]
    proc_lm.share_prefix(lm.encode("Pupil"))
    before = proc_lm.batcher_stats()
    together = threading.Barrier(len(prompts))

    def student(i):
        ids = lm.encode(prompts[i])
        together.wait(timeout=60)
        for _ in range(6):
            ids.append(int(proc_lm.next_token_logits(ids, session=("pupil", i)).argmax()))
        return lm.decode(ids)

    with ThreadPoolExecutor(len(prompts)) as pool:
        got = list(pool.map(student, range(len(prompts))))
    after = proc_lm.batcher_stats()
    assert after.steps > before.steps and after.max_rows > 1, "the students never shared a forward pass"
    for i, text in enumerate(got):  # each its own tokens: what the model alone continues
        ids = lm.encode(prompts[i])
        for _ in range(6):
            ids.append(int(lm.full_forward_logits(ids).argmax()))
        assert text == lm.decode(ids)


def test_bad_input_gets_the_same_clear_message(proc_lm):
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 49152\)"):
        proc_lm.next_token_logits([10**9])
    with pytest.raises(ValueError, match="Unknown Local weights 'nope'"):
        proc_lm.next_token_logits([1, 2], weights="nope")
    with pytest.raises(ValueError, match="layers must be between 1 and 30"):
        proc_lm.early_exit_logits([1, 2, 3], 99)
    with pytest.raises(ValueError, match="is not a call the model's process answers"):
        proc_lm._call("__init__")


def test_a_session_over_its_request_cap_is_told_it_is_busy(proc_lm, lm):
    """SESSION_REQUESTS is the child's batcher's: the parent's callers see its Busy."""
    ids = lm.encode("Count slowly: " + "one, two, three, " * 200)
    errors = []

    def ask(k):
        try:
            proc_lm.next_token_logits(ids + [k], session=("greedy", "one"))
        except Busy as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors and "model requests waiting" in str(errors[0])


def test_stop_reaches_a_call_in_the_child(proc_lm, lm):
    ids = lm.encode("Tell me a long story: " + "once upon a time, " * 300)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    with pytest.raises(Cancelled):
        proc_lm.next_token_logits(ids, session=("stopper",), cancel=stop.is_set)
    with pytest.raises(Cancelled):  # already stopped: never sent
        proc_lm.next_token_logits(ids, session=("stopper",), cancel=lambda: True)


def test_a_dead_child_fails_the_waiting_calls_and_the_next_call_starts_a_new_one(lm):
    from agent.llm.process import start_model_process

    proc = start_model_process(log=lambda _: None)
    try:
        ids = lm.encode("Tell me a long story: " + "once upon a time, " * 300)
        threading.Timer(0.5, proc._child.kill).start()
        with pytest.raises(ModelProcessError, match="ended"):
            proc.next_token_logits(ids, session=("victim",))
        first = proc._child
        assert lm.token_strings[int(proc.next_token_logits(lm.encode(PROMPT)).argmax())] == "␠Paris"
        assert proc._child is not first and proc._child.poll() is None
    finally:
        proc.close()
    assert proc._child.wait(timeout=15) == 0  # close() ends the child


@pytest.mark.browser
def test_the_app_started_with_its_model_in_a_process_serves_students_their_own_tokens(lm, tmp_path):
    """`python app.py --model-process on`, as a Space runs it: students pressing Greedy at once
    through the API each get what the model alone continues."""
    import os
    import subprocess
    import sys
    import urllib.request
    from pathlib import Path

    from gradio_client import Client

    from tests.conftest import free_port
    from tests.page_api import SETTINGS, call, message
    from tests.test_batching import continuation_text, expected_greedy

    root, port = Path(__file__).resolve().parent.parent, free_port()
    log = open(tmp_path / "app.log", "wb")
    app = subprocess.Popen([sys.executable, "app.py", "--host", "127.0.0.1", "--port", str(port),
                            "--model-process", "on"], cwd=root, stdout=log, stderr=subprocess.STDOUT,
                           env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"})
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(240):
            try:
                urllib.request.urlopen(url + "gradio_api/info", timeout=2).read()
                break
            except OSError:
                assert app.poll() is None, (tmp_path / "app.log").read_text()[-2000:]
                threading.Event().wait(0.5)
        prompts = [f"Pupil {i} writes: my favourite colour is" for i in range(4)]
        clients = [Client(url, verbose=False, httpx_kwargs={"timeout": 300}) for _ in prompts]

        def student(i):
            assert message(call(clients[i], "/run_prompt", prompts[i], "Raw text", 0)) == ""
            for _ in range(4):
                out = call(clients[i], "/greedy", *SETTINGS)
                assert message(out) == "", message(out)
            return continuation_text(out["continuation"])

        with ThreadPoolExecutor(len(prompts)) as pool:
            got = list(pool.map(student, range(len(prompts))))
        assert got == [expected_greedy(lm, p, 4) for p in prompts]
        children = subprocess.run(["pgrep", "-P", str(app.pid), "-f", "agent.llm.process"],
                                  capture_output=True, text=True).stdout.split()
        assert len(children) == 1, "the model runs in one child process"
    finally:
        app.terminate()
        app.wait(timeout=30)
        log.close()
