"""The ReAct loop tab driven in headless Chromium as a person would: buttons, dropdowns, sliders.

What the page shows is checked against the runtime: the pseudo-code lines against the lecture's
walk, the budget bar against the model's tokenizer on the string the page shows.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from agent.budget import FREE, RESERVED

pytestmark = [pytest.mark.browser, pytest.mark.model]
VIEWS = ("#react-pseudocode .rp", "#react-history .rh-wrap", "#react-template .rt",
         "#react-budget .rb", "#react-growth", "#react-stop .rs")
EVIL = '<img src=x onerror="window.__p=1">${window.__q=1}`'


# The views' DOM, attributes sorted: Gradio patches a changed view in place, which may reorder the
# attributes of an element without changing what it is. Gradio's own status tracker inside a view
# (the queue position while a model event waits) is left out: it is not the view.
CANONICAL_JS = """(selector) => {
  const ser = (n) => n.nodeType === 3 ? n.data : n.nodeType !== 1 ? '' :
    n.getAttribute('data-testid') === 'status-tracker' ? '' :
    '<' + n.tagName + ' ' + [...n.attributes].map((a) => a.name + '=' + a.value).sort().join(' ') +
    '>' + [...n.childNodes].map(ser).join('') + '</' + n.tagName + '>';
  return ser(document.querySelector(selector));
}"""


def views(page) -> list[str]:
    return [page.evaluate(CANONICAL_JS, v) for v in VIEWS]


def open_tab(page) -> None:
    page.get_by_role("tab", name="ReAct loop").click()
    page.locator("#react-pseudocode .rp").wait_for()


def press(page, name: str, shown: int, of: int, timeout: float = 30_000) -> None:
    """Click a button and wait until the slider says `Recorded state shown of of`."""
    page.get_by_role("button", name=name, exact=True).click()
    expect(page.locator("#react-scrub")).to_contain_text(f"Recorded state {shown} of {of}",
                                                        timeout=timeout)


def lines(page) -> str:
    return page.locator("#react-pseudocode .rp").get_attribute("data-lines")


def choose(page, label: str, option: str) -> None:
    page.get_by_role("combobox", name=label).click()
    page.get_by_role("option", name=option).click()


def open_settings(page) -> None:
    page.get_by_text("Settings: MAX_STEPS").click()
    page.get_by_label("Context budget (tokens)").wait_for()


def no_error(page) -> None:
    assert page.locator("#react-message .msg.error").count() == 0, page.locator(
        "#react-message").inner_text()
    assert not page.js_errors


def test_next_walks_the_pseudo_code_and_ends_with_the_lectures_four_messages(page):
    open_tab(page)
    assert lines(page) == ""
    walked = []
    for i in range(1, 5):
        press(page, "Next", i, i)
        walked.append(lines(page))
    assert walked == ["1", "2,3,4,5", "6,7,8", "2,3,4,5"]
    cards = page.locator("#react-history .rh-msg")
    expect(cards).to_have_count(5)
    texts = [cards.nth(i).inner_text() for i in range(1, 5)]
    assert "UserMessage" in texts[0] and "What's the weather in Berlin?" in texts[0]
    assert "AssistantMessage" in texts[1] and 'get_weather({"city": "Berlin"})' in texts[1]
    assert "ToolResultMessage" in texts[2] and "12°C, rainy" in texts[2]
    assert "AssistantMessage" in texts[3] and "It's 12°C and rainy in Berlin." in texts[3]
    link = page.locator('#react-history .rh-link[data-call-id="call_1"]')
    assert (link.get_attribute("data-from"), link.get_attribute("data-to")) == ("2", "3")
    expect(page.locator("#react-stop .rs")).to_have_attribute("data-stop", "final answer")
    expect(page.locator("#react-stop")).to_contain_text("It's 12°C and rainy in Berlin.")
    no_error(page)


def test_budget_bar_adds_up_to_the_token_count_of_the_rendered_string(page, lm):
    open_tab(page)
    for i in range(0, 5):
        if i:
            press(page, "Next", i, i)
        text = page.locator("#react-template .rt-prompt").text_content()
        n = len(lm.tokenizer(text, add_special_tokens=False)["input_ids"])
        segments = page.locator("#react-budget .rb-bar:not(.zoom) .rb-seg")
        counts = {segments.nth(k).get_attribute("data-category"): int(
            segments.nth(k).get_attribute("data-tokens")) for k in range(segments.count())}
        assert sum(v for c, v in counts.items() if c not in (RESERVED, FREE)) == n, i
        assert sum(counts.values()) == lm.context_window
        expect(page.locator("#react-budget .rb-head")).to_contain_text(f"{n:,} prompt")
        expect(page.locator("#react-budget")).to_contain_text(f"{lm.name} tokenizer · exact")
        expect(page.locator("#react-template .rt-head")).to_contain_text(f"{n:,} tokens")


def test_back_restores_exactly_the_previous_view(page):
    open_tab(page)
    press(page, "Next", 1, 1)
    press(page, "Next", 2, 2)
    before = views(page)
    press(page, "Next", 3, 3)
    assert views(page) != before
    press(page, "Back", 2, 3)
    assert views(page) == before
    press(page, "Next", 3, 3)  # forward again replays the recorded state, it does not recompute
    assert lines(page) == "6,7,8"
    no_error(page)


def test_the_slider_scrubs_through_the_recorded_states(page):
    open_tab(page)
    press(page, "Run to end", 4, 4)
    slider = page.locator("#react-scrub input[type=range]")
    slider.focus()
    slider.press("Home")
    expect(page.locator("#react-scrub")).to_contain_text("Recorded state 0 of 4")
    assert lines(page) == ""
    slider.press("End")
    expect(page.locator("#react-scrub")).to_contain_text("Recorded state 4 of 4")
    assert lines(page) == "2,3,4,5"


def test_a_typed_state_past_the_newest_shows_the_newest_without_an_error_badge(page):
    """Issue 23 item 3: 2 typed into the slider's box while states 0–1 exist."""
    open_tab(page)
    press(page, "Next", 1, 1)
    box = page.locator("#react-scrub input[type=number]")
    box.fill("2")
    box.press("Enter")
    expect(page.locator("#react-message")).to_contain_text("State 2 is not recorded yet: states 0 … 1 are")
    expect(page.locator("#react-scrub")).to_contain_text("Recorded state 1 of 1")
    expect(page.locator("#react-scrub")).not_to_contain_text("Error")  # Gradio's badge, before the fix
    assert page.get_by_text("is greater than maximum value").count() == 0
    no_error(page)


def prompt_tokens(page) -> int:
    return int(page.locator("#react-budget .rb").get_attribute("data-prompt-tokens"))


def test_a_small_context_budget_stops_the_run_with_context_window_full(page):
    open_tab(page)
    press(page, "Next", 1, 1)
    first = prompt_tokens(page)  # the string call 1 will send
    press(page, "Next", 2, 2)
    press(page, "Next", 3, 3)
    second = prompt_tokens(page)  # the longer string call 2 will send
    open_settings(page)
    reply = page.get_by_role("slider", name="Reply tokens (reserved)")
    reply.focus()
    for _ in range(7):  # 256 → 200, in steps of 8
        reply.press("ArrowLeft")
    expect(reply).to_have_value("200")
    page.get_by_label("Context budget (tokens)").fill(str((first + second) // 2 + 200))
    press(page, "Reset", 0, 0)
    press(page, "Run to end", 4, 4)  # call 1 fits the budget, call 2 does not
    expect(page.locator("#react-stop .rs")).to_have_attribute("data-stop", "context window full")
    expect(page.locator("#react-budget")).to_contain_text("the context window is full")
    expect(page.locator("#react-history .rh-msg")).to_have_count(4)
    assert page.locator("#react-growth .rg").get_attribute("data-calls") == "1"


def test_fork_from_an_earlier_state_continues_with_other_settings(page):
    open_tab(page)
    press(page, "Run to end", 4, 4)
    press(page, "Back", 3, 4)
    open_settings(page)
    page.get_by_label("Context budget (tokens)").fill("300")
    page.get_by_role("button", name="Fork from here").click()
    expect(page.locator("#react-message")).to_contain_text("Forked at state 3")
    press(page, "Next", 4, 4)
    expect(page.locator("#react-stop .rs")).to_have_attribute("data-stop", "context window full")


def test_two_calls_get_two_ids_and_a_validation_error_is_its_own_event(page):
    open_tab(page)
    choose(page, "Task", "What's the weather in Berlin and in Paris? (two calls, two ids)")
    expect(page.locator("#react-message")).to_contain_text("New run")
    press(page, "Run to end", 5, 5)
    links = page.locator("#react-history .rh-link.paired")
    expect(links).to_have_count(2)
    assert [links.nth(i).get_attribute("data-to") for i in range(2)] == ["3", "4"]
    choose(page, "Task", "What's the weather in Paris? (a validation error, repaired)")
    press(page, "Run to end", 6, 6)
    expect(page.locator("#react-history .kind-validation_error")).to_contain_text(
        "validation error: returned to the model as the result")
    expect(page.locator("#react-stop .rs")).to_have_attribute("data-stop", "final answer")
    no_error(page)


def test_bad_input_gets_a_message_and_the_run_stays(page):
    open_tab(page)
    press(page, "Next", 1, 1)
    press(page, "Next", 2, 2)
    before = views(page)
    choose(page, "Backend", "OpenAI-compatible server")
    page.get_by_label("Server URL").fill("ftp://example.org")
    page.get_by_label("Server model").fill("qwen2.5:7b")
    page.get_by_role("button", name="Reset").click()
    expect(page.locator("#react-message .msg.error")).to_contain_text("must be http:// or https://")
    assert views(page) == before
    assert not page.js_errors


def test_hostile_task_text_shows_as_text_and_never_runs(page):
    open_tab(page)
    choose(page, "Task", "Free text…")
    choose(page, "Backend", "Local model")
    page.get_by_label("Your task").fill(EVIL)
    press(page, "Reset", 0, 0)
    press(page, "Next", 1, 1)  # line 1 only: the user input is appended, no model call yet
    expect(page.locator('#react-history .rh-msg[data-index="1"] .rh-body')).to_have_text(EVIL)
    assert EVIL in page.locator("#react-template .rt-prompt").text_content()
    assert page.evaluate("() => [window.__p, window.__q]") == [None, None]
    assert not page.js_errors


def test_an_exported_run_loads_back_and_replays(page, tmp_path):
    open_tab(page)
    choose(page, "Task", "What's the weather in Berlin and in Paris? (two calls, two ids)")
    press(page, "Run to end", 5, 5)
    page.get_by_role("button", name="Export run (JSON)").click()
    link = page.locator("#react-download a").first
    link.wait_for()
    with page.expect_download() as info:
        link.click()
    path = tmp_path / "run.json"
    info.value.save_as(path)
    assert json.loads(path.read_text(encoding="utf-8"))["stop_reason"] == "final answer"
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Load a run (JSON)").click()
    chooser.value.set_files(str(path))
    expect(page.locator("#react-message")).to_contain_text("Loaded")
    expect(page.get_by_role("combobox", name="Task")).to_have_value(
        "Loaded run: Two tool calls in one turn (Berlin and Paris)")
    press(page, "Run to end", 5, 5)
    expect(page.locator("#react-history .rh-link.paired")).to_have_count(2)
    no_error(page)


def test_a_local_model_run_reaches_a_stop_reason_without_error(page):
    open_tab(page)
    choose(page, "Backend", "Local model")
    open_settings(page)
    steps = page.get_by_role("slider", name="MAX_STEPS")
    steps.focus()
    steps.press("Home")
    reply = page.get_by_role("slider", name="Reply tokens (reserved)")
    reply.focus()
    reply.press("Home")
    reply.press("ArrowRight")  # 16 tokens: one short call on a slow shared CPU
    expect(reply).to_have_value("16")
    press(page, "Reset", 0, 0)
    expect(page.locator("#react-message")).to_contain_text("Local model")
    page.get_by_role("button", name="Run to end").click()
    stop = page.locator("#react-stop .rs.done")
    stop.wait_for(timeout=300_000)
    assert stop.get_attribute("data-stop") in ("final answer", "step budget exhausted", "finish",
                                               "no parsable output twice in a row")
    assert int(page.locator("#react-growth .rg").get_attribute("data-calls")) == 1
    no_error(page)


def test_html_in_a_tool_call_and_its_tool_result_is_shown_as_text_and_never_runs(page, tmp_path):
    """A loaded run whose model asks the weather of an HTML 'city': the call, the tool's error that
    quotes it, and the template string all show it as text; no script runs."""
    run = json.loads((__import__("pathlib").Path(__file__).parents[1] / "assets/runs/berlin-weather.json")
                     .read_text(encoding="utf-8"))
    run["title"] = "hostile city"
    run["replies"][0]["tool_calls"][0]["function"]["arguments"] = json.dumps({"city": EVIL})
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    open_tab(page)
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Load a run (JSON)").click()
    chooser.value.set_files(str(path))
    expect(page.locator("#react-message")).to_contain_text("Loaded")
    page.get_by_role("button", name="Run to end", exact=True).click()
    expect(page.locator("#react-stop")).to_contain_text("final answer", timeout=30_000)
    expect(page.locator("#react-history")).to_contain_text('onerror="window.__p=1"')
    assert page.evaluate("() => [window.__p, window.__q]") == [None, None]
    assert page.locator("#react-history img, #react-template img").count() == 0
    assert not page.js_errors


def test_a_held_out_question_runs_to_an_answer_through_a_tool_on_tuned_weights(page):
    """Issues 24 and 23: Local weights = trajectory-tuned (the default), "Free text…" (which moves
    Backend to the Local model), a typed question with a city no training run showed, Run to end at
    once (no Reset): the typed question runs and reaches a final answer after a get_weather call
    whose observation the answer repeats."""
    open_tab(page)
    expect(page.get_by_role("combobox", name="Local weights")).to_have_value("trajectory-tuned")
    expect(page.get_by_role("combobox", name="Backend")).to_have_value("Scripted replay")
    choose(page, "Task", "Free text…")  # a scripted replay cannot run a typed task: Backend moves on its own
    expect(page.get_by_role("combobox", name="Backend")).to_have_value("Local model")
    expect(page.locator("#react-message")).to_contain_text("Backend is now the Local model")
    choose(page, "Mode", "ReAct")
    page.get_by_label("Your task").fill("How's the weather in Lisbon today?")
    expect(page.locator("#react-message")).to_contain_text("starts a new run")
    page.get_by_role("button", name="Run to end").click()
    stop = page.locator("#react-stop .rs.done")
    expect(stop).to_have_attribute("data-stop", "final answer", timeout=180_000)
    history = page.locator("#react-history").text_content()
    assert "get_weather" in history and "Lisbon" in history
    assert "19°C" in stop.text_content()
    assert "Berlin" not in history  # the typed question ran, not the recording
    assert not page.js_errors
