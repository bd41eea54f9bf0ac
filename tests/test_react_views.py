"""The ReAct tab below the browser: the pure views of viz/react/views.py on real replayed runs, and
the tab's checks, fork and run files (viz/react/run.py functions, no page)."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace

import pytest

from agent import loop
from agent.backends import BackendReply, ScriptedBackend, Settings
from agent.budget import BUDGET_CATEGORIES, FREE, RESERVED, Usage
from agent.loop import Phase, StopReason, build_prompt
from agent.messages import (
    AssistantMessage,
    ResultKind,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agent.recording import load_run, record_run, replay, shipped_runs, tools_of
from agent.template import render, system_prompt
from viz.react import run as react_run
from viz.react import views as rv

EVIL = '<img src=x onerror="window.__p=1">${window.__q=1}`'


def replayed(stem: str, tokenizer=None, **settings) -> tuple:
    run = load_run(shipped_runs()[stem])
    if settings:
        run = replace(run, settings=replace(run.settings, **settings))
    return replay(run, tokenizer=tokenizer), tools_of(run)


def text_of(fragment: str) -> str:
    """The text a browser shows for an HTML fragment (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def classes(fragment: str, name: str) -> list[str]:
    """The inner HTML of every element whose class list contains `name` (no nesting inside)."""
    return re.findall(rf'<(\w+) class="[^"]*\b{name}\b[^"]*"[^>]*>(.*?)</\1>', fragment, re.S)


def frame(states, tools, i, tokenizer=None, window=8192):
    return rv.frame(states, i, tools, tokenizer, window)


# --- Prompt-ToolLoop ---------------------------------------------------------------------------

def test_berlin_run_walks_the_pseudo_code_lines_in_order():
    states, _ = replayed("berlin-weather")
    walked = [re.search(r'data-lines="([\d,]*)"', rv.pseudocode_view(s)).group(1) for s in states]
    assert walked == ["", "1", "2,3,4,5", "6,7,8", "2,3,4,5"]


def test_last_executed_line_is_current_and_the_rest_of_the_phase_ran():
    states, _ = replayed("berlin-weather")
    view = rv.pseudocode_view(states[3])  # lines 6–8: get_weather executed
    assert re.findall(r'rp-line current" data-line="(\d)"', view) == ["8"]
    assert re.findall(r'rp-line ran" data-line="(\d)"', view) == ["6", "7"]
    assert "step 1 of MAX_STEPS = 8" in text_of(view)
    assert "next: lines 2–5" in text_of(view)


def test_all_nine_lines_of_the_lecture_are_shown():
    view = text_of(rv.pseudocode_view(replayed("berlin-weather")[0][0]))
    for line in loop.PSEUDO_CODE:
        assert line.split("//")[0].strip() in view


def test_a_running_model_call_highlights_line_3():
    states, _ = replayed("berlin-weather")
    view = rv.pseudocode_view(states[1], running=True)
    assert 'data-lines="2,3"' in view and "running: LLM(context)" in view


# --- the history -------------------------------------------------------------------------------

def test_berlin_history_ends_with_the_lectures_four_messages():
    states, _ = replayed("berlin-weather")
    view = rv.history_view(states[-1], rv.new_from(states, len(states) - 1))
    heads = [text_of(h) for _, h in classes(view, "rh-head")]
    assert [h.split()[1] for h in heads] == ["SystemMessage", "UserMessage", "AssistantMessage",
                                             "ToolResultMessage", "AssistantMessage"]
    bodies = text_of(view)
    for text in ("What's the weather in Berlin?", "get_weather", '{"city": "Berlin"}',
                 "12°C, rainy", "It's 12°C and rainy in Berlin."):
        assert text in bodies


def test_each_tool_call_is_bracketed_to_the_result_with_its_id():
    states, _ = replayed("two-cities")
    view = rv.history_view(states[-1], 1)
    found = re.findall(r'rh-link (\w+)" data-call-id="(\w+)" data-from="(\d+)" data-to="(\d*)"',
                       view)
    assert found == [("paired", "call_1", "2", "3"), ("paired", "call_2", "2", "4")]
    lanes = [k.lane for k in rv.links(states[-1].history)]
    assert lanes == [0, 1]  # both start at the same message: they cannot share a lane


def test_a_call_waiting_for_lines_6_to_8_is_pending_not_a_violation():
    states, _ = replayed("two-cities")
    after_call = next(s for s in states if s.phase == Phase.EXECUTE)
    view = rv.history_view(after_call, 1)
    assert 'rh-link pending" data-call-id="call_1"' in view
    assert "pending: lines 6–8 run it on Next" in view and "pairing invariant violated" not in view


def test_broken_pairing_is_flagged():
    call = ToolCall("call_1", "get_weather", '{"city": "Berlin"}')
    history = (SystemMessage("s"), UserMessage("q"), AssistantMessage(tool_calls=(call,)),
               ToolResultMessage("call_9", "12°C, rainy"), AssistantMessage("done"))
    state = loop.State(history, "q", phase=Phase.DONE, stop_reason=StopReason.FINAL_ANSWER)
    view = rv.history_view(state, 1)
    assert "pairing invariant violated" in view
    assert "orphan tool result" in text_of(view) and "⚠ orphan" in view
    assert 'rh-link missing" data-call-id="call_1"' in view


def test_validation_errors_and_policy_refusals_are_their_own_events():
    states, _ = replayed("validation-recovery")
    view = rv.history_view(states[-1], 1)
    assert "kind-validation_error rh-event" in view
    assert "validation error: returned to the model as the result" in text_of(view)
    refused = ToolResultMessage("call_1", "POLICY: not permitted", ResultKind.POLICY_REFUSAL)
    call = AssistantMessage(tool_calls=(ToolCall("call_1", "get_weather", "{}"),))
    state = loop.State((SystemMessage("s"), UserMessage("q"), call, refused), "q")
    assert "policy refusal: well-formed, but not permitted" in text_of(rv.history_view(state, 1))


def test_messages_added_since_the_previous_model_call_are_new():
    states, _ = replayed("berlin-weather")
    assert [rv.new_from(states, i) for i in range(len(states))] == [1, 1, 2, 2, 4]
    view = rv.history_view(states[3], rv.new_from(states, 3))  # after get_weather ran
    new = re.findall(r'rh-msg [^"]* new" data-index="(\d+)"', view)
    assert new == ["2", "3"]  # the call and its result: what call 2 sends in addition


# --- the exact string --------------------------------------------------------------------------

def test_template_text_is_exactly_the_rendered_string(lm):
    states, tools = replayed("two-hop-search", lm.tokenizer)
    for i in range(len(states)):
        f = frame(states, tools, i, lm.tokenizer)
        view = rv.template_view(f, tuple(lm.tokenizer.all_special_tokens), show_tokens=True)
        prompt = re.search(r'<span class="rt-prompt">(.*)</span><span class="rt-reply"|'
                           r'<span class="rt-prompt">(.*)</span></pre>', view, re.S)
        assert text_of(prompt.group(1) or prompt.group(2)) == f.rendered.text


def test_a_model_call_state_shows_the_string_that_was_sent_and_the_reply(lm):
    states, tools = replayed("berlin-weather", lm.tokenizer)
    f = frame(states, tools, 4, lm.tokenizer)  # the second call: text-only answer
    assert f.sent and f.call == 2
    assert f.rendered.text == render(build_prompt(states[3], tools), lm.tokenizer).text
    assert f.reply == "It's 12°C and rainy in Berlin."
    assert f.breakdown.prompt_tokens == states[4].usage[-1].prompt_tokens
    nxt = frame(states, tools, 3, lm.tokenizer)
    assert not nxt.sent and nxt.call == 2 and nxt.rendered.text == f.rendered.text


def test_special_tokens_are_marked_and_token_starts_ruled(lm):
    states, tools = replayed("berlin-weather", lm.tokenizer)
    f = frame(states, tools, 3, lm.tokenizer)
    view = rv.template_view(f, tuple(lm.tokenizer.all_special_tokens), show_tokens=True)
    marked = [text_of(x) for _, x in classes(view, "sp")]
    assert marked.count("<|im_start|>") == f.rendered.text.count("<|im_start|>") == 5
    assert marked.count("<|im_end|>") == f.rendered.text.count("<|im_end|>")
    ids = lm.tokenizer(f.rendered.text, add_special_tokens=False)["input_ids"]
    assert len(re.findall(r'class="[^"]*\btb\b', view)) == len(ids) == f.breakdown.prompt_tokens


def test_new_messages_are_underlined_in_the_string():
    states, tools = replayed("berlin-weather")
    view = rv.template_view(frame(states, tools, 3))
    underlined = "".join(text_of(x) for _, x in classes(view, "nw"))
    assert "12°C, rainy" in underlined and "What's the weather" not in underlined


def test_streaming_text_follows_the_prompt_with_a_caret():
    states, tools = replayed("berlin-weather")
    view = rv.template_view(frame(states, tools, 1), streaming="It's 12")
    assert "writing its reply" in view and "rt-caret" in view
    assert text_of(classes(view, "rt-reply")[0][1]) == "It's 12"


# --- the budget --------------------------------------------------------------------------------

def test_budget_categories_add_up_to_the_rendered_strings_tokens(lm):
    states, tools = replayed("two-hop-search", lm.tokenizer)
    for i in range(len(states)):
        f = frame(states, tools, i, lm.tokenizer, lm.context_window)
        view = rv.budget_view(f.breakdown, "SmolLM2-135M-Instruct tokenizer")
        segs = dict(re.findall(r'rb-seg cat-\w+" data-category="(\w+)" data-tokens="(\d+)"',
                               view.split('rb-bar zoom')[0]))
        in_prompt = sum(int(n) for c, n in segs.items() if c not in (RESERVED, FREE))
        ids = lm.tokenizer(f.rendered.text, add_special_tokens=False)["input_ids"]
        assert in_prompt == len(ids)
        assert sum(int(n) for n in segs.values()) == lm.context_window
        assert "SmolLM2-135M-Instruct tokenizer · exact" in view


def test_every_category_is_in_the_legend_with_its_count():
    states, tools = replayed("arithmetic")
    f = frame(states, tools, len(states) - 1)
    view = rv.budget_view(f.breakdown, "no tokenizer")
    rows = re.findall(r'rb-row" data-category="(\w+)".*?rb-n">([\d,]+)<', view)
    assert [c for c, _ in rows] == list(BUDGET_CATEGORIES)
    assert {c: int(n.replace(",", "")) for c, n in rows} == f.breakdown.counts
    assert "· estimated" in view


def test_a_small_budget_stops_the_run_and_the_bar_says_full():
    states, tools = replayed("berlin-weather", context_budget=256, max_new_tokens=64)
    assert states[-1].stop_reason == StopReason.CONTEXT_FULL
    f = frame(states, tools, len(states) - 1)
    view = rv.budget_view(f.breakdown, "no tokenizer")
    assert f.breakdown.over and "the context window is full" in view and "rb-limit" in view
    assert "context window full" in rv.stop_view(states[-1])


def test_the_backends_own_count_is_shown_beside_ours():
    states, tools = replayed("berlin-weather")
    f = frame(states, tools, 2)
    view = rv.budget_view(f.breakdown, "x", Usage(170, 12, "server"))
    assert "the server reported on this call: prompt_tokens 170 · completion_tokens 12" in view
    assert "reported" not in rv.budget_view(f.breakdown, "x", Usage(170, 12, "tokenizer"))


def test_an_estimated_usage_is_said_to_be_an_estimate():
    states, tools = replayed("berlin-weather")
    f = frame(states, tools, 2)
    view = rv.budget_view(f.breakdown, "x", Usage(170, 12, "estimate"))
    assert "no usage from the server on this call: prompt_tokens ≈ 170" in view and "estimated" in view


def test_a_server_length_stop_is_named_the_servers():
    reply = BackendReply("Once upon a time", finish_reason="length", from_server=True)
    final = loop.run(loop.new_state("Tell me a story", "act"), ScriptedBackend((reply,)), ())[-1]
    assert final.stop_reason == StopReason.TOKEN_LIMIT_SERVER == "token limit (server)"
    assert final.final_answer == "stopped: token limit (server)" and "finish_reason length" in rv.stop_view(final)
    assert BackendReply.from_dict(reply.to_dict()) == reply


# --- growth and stop ---------------------------------------------------------------------------

def test_growth_lists_each_call_and_the_running_total():
    view = rv.growth_view((Usage(100, 5), Usage(130, 5), Usage(160, 5)))
    rows = re.findall(r"<tr><td>(\d+)</td><td>([\d,]+)</td><td>([\d,]+)</td></tr>", view)
    assert rows == [("1", "100", "100"), ("2", "130", "230"), ("3", "160", "390")]
    assert 'data-total="390"' in view and "square of the number of turns" in view
    assert "No model call yet" in rv.growth_view(())


def test_growth_chart_exports_a_png(tmp_path):
    fig = rv.growth_figure((Usage(158, 10), Usage(216, 12)), "Berlin")
    path = tmp_path / "growth.png"
    fig.savefig(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(fig.axes[0].patches) == 2


@pytest.mark.parametrize("stem, reason, answer", [
    ("berlin-weather", "final answer", "It's 12°C and rainy in Berlin."),
    ("two-hop-search", "finish", "Cuba"),
])
def test_stop_view_names_the_reason_and_the_answer(stem, reason, answer):
    states, _ = replayed(stem)
    view = rv.stop_view(states[-1])
    assert f'data-stop="{reason}"' in view and answer in text_of(view)
    assert "No stop yet" in rv.stop_view(states[0])


def test_step_budget_stop_is_named():
    states, _ = replayed("two-hop-search", max_steps=1)
    assert 'data-stop="step budget exhausted"' in rv.stop_view(states[-1])
    assert "line 9" in text_of(rv.stop_view(states[-1]))


def test_hostile_text_is_escaped_in_every_view():
    state = loop.new_state(EVIL, "act", "native")
    state = loop.step(state, ScriptedBackend(()), ())
    states = (state,)
    f = rv.frame(states, 0, (), None, 8192)
    done = replace(state, stop_reason=StopReason.FINAL_ANSWER, final_answer=EVIL)
    for view in (rv.history_view(state, 1), rv.template_view(f), rv.stop_view(done)):
        assert "<img" not in view and "${" not in view and "`" not in view
        assert EVIL in text_of(view)


def test_a_view_is_the_same_string_every_time():
    states, tools = replayed("two-cities")
    first = [rv.template_view(frame(states, tools, i)) for i in range(len(states))]
    again = [rv.template_view(frame(states, tools, i)) for i in range(len(states))]
    assert first == again and len(set(first)) == len(states)


# --- the tab's checks, fork and run files -------------------------------------------------------

def controls(**changes) -> react_run.Choices:
    """The run controls as the page sends them, Act mode, with `changes`."""
    return replace(react_run.Choices(mode="Act", fmt="native tool calls", constrained=False, budget=8192),
                   **changes)


@pytest.mark.parametrize("change, says", [
    (dict(max_steps=21), "MAX_STEPS must lie in 1 … 20"),
    (dict(budget=100), "Context budget must lie in 256 … 8192"),
    (dict(budget=10**9), "Context budget must lie in 256 … 8192"),
    (dict(temperature="nan"), "Temperature must lie in 0 … 2"),
    (dict(top_p=0), "Top-p must lie in 0.05 … 1"),
    (dict(seed=1.5), "Seed must be a whole number"),
    (dict(task="rm -rf"), "Unknown task"),
    (dict(backend="Magic"), "Unknown backend"),
    (dict(task=react_run.FREE_TEXT, task_text="x" * 2001, backend=react_run.LOCAL), "longer than 2,000"),
    (dict(task=react_run.FREE_TEXT, task_text="   ", backend=react_run.LOCAL), "Type a task"),
    (dict(backend=react_run.REMOTE, url="file:///etc/passwd", model_name="m"), "http:// or https://"),
    (dict(backend=react_run.REMOTE, url="http://127.0.0.1:11434", model_name=""), "Name the server's"),
])
def test_bad_controls_are_refused_with_a_sentence(lm, change, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        react_run.checked(lm, controls(**change))


def test_scripted_replay_needs_a_recorded_task(lm):
    c = react_run.checked(lm, controls(task=react_run.FREE_TEXT, task_text="hello"))
    with pytest.raises(ValueError, match="Scripted replay replays a recorded run"):
        react_run.start(c)


def test_scripted_replay_keeps_the_recorded_mode_and_format(lm):
    s = react_run.start(react_run.checked(lm, controls(task=next(k for k, v in react_run.TASKS.items()
                                                      if v == "two-hop-search"), mode="Act")))
    assert (s.state.mode, s.state.fmt) == ("react", "react") and s.backend.kind == react_run.SCRIPTED


def test_fork_continues_the_shown_state_with_new_settings(lm):
    s = react_run.start(react_run.checked(lm, controls()))
    states = loop.run(s.state, react_run.make_backend(s.backend, lm), s.tools)
    s = replace(s, states=states, index=3)
    forked = react_run.fork(s, react_run.checked(lm, controls(budget=256, reply_tokens=64)))
    assert len(forked.states) == 4 and forked.states[:3] == states[:3]
    assert forked.state.history == states[3].history and forked.state.settings.context_budget == 256
    nxt = loop.step(forked.state, react_run.make_backend(forked.backend, lm), forked.tools)
    assert nxt.stop_reason == StopReason.CONTEXT_FULL
    with pytest.raises(ValueError, match="This state is final"):
        react_run.fork(replace(s, index=len(states) - 1), react_run.checked(lm, controls()))


def test_fork_to_another_mode_swaps_the_system_prompt(lm):
    s = react_run.start(react_run.checked(lm, controls()))
    s = replace(s, states=(s.state, loop.step(s.state, None, s.tools)), index=1)
    forked = react_run.fork(s, react_run.checked(lm, controls(backend=react_run.LOCAL, mode="ReAct")))
    assert forked.state.mode == "react" and forked.backend.kind == react_run.LOCAL
    assert forked.state.history[0] == SystemMessage(system_prompt("react", "native"))
    assert forked.state.history[1:] == s.state.history[1:]


def test_an_exported_run_loads_back_and_replays_the_same_history(lm, tmp_path):
    states, tools = replayed("two-cities", lm.tokenizer)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(record_run(states[-1], tools, "mine")), encoding="utf-8")
    s = react_run.load_session(str(path), lm)
    again = loop.run(s.state, react_run.make_backend(s.backend, lm), s.tools)
    assert again[-1].history == states[-1].history and s.title == "mine"


@pytest.mark.parametrize("content, says", [
    ("not json", "Not a run this tab can replay"),
    ('{"format": "other"}', "Not a run this tab can replay"),
    ("[" * 100_000, "Not a run this tab can replay"),
])
def test_a_bad_run_file_is_refused(lm, tmp_path, content, says):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=says):
        react_run.load_session(str(path), lm)


def test_a_loaded_run_gets_the_same_bounds_as_the_controls(lm, tmp_path):
    states, tools = replayed("berlin-weather")
    d = record_run(states[-1], tools)
    d["settings"]["max_steps"] = 999
    path = tmp_path / "run.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(ValueError, match="MAX_STEPS must lie in 1 … 20"):
        react_run.load_session(str(path), lm)


def test_a_settings_value_is_bounded_before_it_reaches_the_loop():
    assert react_run.checked_settings(8192, "3", "512", 64.0) == Settings(
        max_steps=3, context_budget=512, max_new_tokens=64, timeout_s=react_run.CALL_LIMIT_S)


def test_growth_chart_splits_each_call_into_its_categories_shares():
    composition = ({"system": 60, "user": 40}, {"system": 60, "user": 40, "summary": 30})
    view = rv.growth_view((Usage(100, 5), Usage(130, 5)), composition=composition)
    assert view.count('data-category="summary"') == 2  # one segment, one share in the table
    assert "summary 23 %" in view and "system prompt: 60 (46 %)" in view
    assert 'data-category' not in rv.growth_view((Usage(100, 5), Usage(130, 5)))


def test_budget_bar_names_every_new_category():
    state = loop.new_state("Weather in Berlin? Who wrote Ulysses?", "react", "native",
                      Settings(few_shot=1, retrieve=True, max_new_tokens=64))
    f = rv.frame((state,), 0, tools_of(load_run(shipped_runs()["two-hop-search"])), None, 4096)
    view = rv.budget_view(f.breakdown, "no tokenizer")
    for label in ("few-shot exemplars", "retrieved documents", "memory", "summary"):
        assert label in view
    assert 'class="rb-seg cat-exemplars"' in view and 'class="rb-seg cat-documents"' in view


# --- the OpenAI-compatible server: a choice among the operator's, never a visitor's address -----

@pytest.fixture
def configured():
    """Configure agent.llm.remote for one test; the app's configuration comes back after."""
    from agent.llm import remote

    saved = dict(remote._config)
    yield remote.configure
    remote._config.update(saved)


@pytest.fixture
def models_server():
    """A real HTTP server on loopback that lists two models at /v1/models."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Models(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = json.dumps({"data": [{"id": "small"}, {"id": "large"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_listed_server_is_chosen_by_label_and_lists_its_models(lm, configured, models_server):
    configured([f"lab={models_server}"], free_url=False)
    assert react_run.server_labels() == ["lab"]
    assert react_run.models_of("lab") == ("small", "large")
    c = react_run.checked(lm, controls(backend=react_run.REMOTE, server="lab", model_name="small"))
    assert (c.url, c.model) == ("lab", "small")


def test_without_free_urls_a_typed_url_reaches_nothing(lm, configured):
    from agent.llm.remote import RemoteRefused

    configured(["lab=http://10.0.0.2:8000"], free_url=False)
    with pytest.raises(ValueError, match="Choose a server"):
        react_run.checked(lm, controls(backend=react_run.REMOTE, server="elsewhere", model_name="m"))
    with pytest.raises(ValueError, match="No model list from http://127.0.0.1:9/v1.*operator listed"):
        react_run.models_of("http://127.0.0.1:9/v1")
    s = react_run.start(react_run.checked(lm, controls(task=react_run.FREE_TEXT, task_text="hi",
                                                       backend=react_run.REMOTE,
                                                       url="http://127.0.0.1:9/v1", model_name="m")))
    with pytest.raises(RemoteRefused, match="operator listed"):
        react_run.make_backend(s.backend, lm)


def test_with_no_server_allowed_the_choice_says_how_to_allow_one(lm, configured):
    configured([], free_url=False)
    with pytest.raises(ValueError, match="--remote"):
        react_run.checked(lm, controls(backend=react_run.REMOTE, model_name="m"))
