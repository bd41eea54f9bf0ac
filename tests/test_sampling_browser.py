"""The Sampling tab driven in headless Chromium as a person would: sliders, buttons, tokens.

Every value read off the chart is checked against agent.sampling's trace on the same logits.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agent import sampling
from agent.llm import continuation as cont
from viz import charts

pytestmark = [pytest.mark.browser, pytest.mark.model]
PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def logits(lm):
    return cont.start(lm, PROMPT, False, seed=0).logits


def move_slider(page, label: str, key: str, times: int) -> None:
    slider = page.get_by_role("slider", name=label)
    slider.focus()
    for _ in range(times):
        slider.press(key)


def final_texts(page) -> dict[int, str]:
    rows = page.locator("#next-token-chart .tok-row")
    return {
        int(rows.nth(i).get_attribute("data-token-id")): rows.nth(i).locator(".bar-cell.final .bar-num").inner_text()
        for i in range(rows.count())
    }


def expect_chart_matches(page, logits, config, rows: int = 20) -> None:
    """Poll until the chart's final column equals the Python trace's numbers for `config`."""
    t = sampling.trace(logits, config)
    want = None

    def matches() -> bool:
        nonlocal want
        got = final_texts(page)
        want = {i: charts.pct(float(t.probs[i])) for i in got}
        return len(got) == rows and got == want

    page.wait_for_function("() => true")
    for _ in range(100):
        if matches():
            return
        page.wait_for_timeout(100)
    assert final_texts(page) == want


def test_temperature_to_zero_is_greedy(page, logits):
    move_slider(page, "Temperature", "Home", 1)
    expect_chart_matches(page, logits, sampling.SamplingConfig(temperature=0))
    expect(page.locator("#sampling-readout")).to_contain_text("greedy (T = 0)")
    expect(page.locator("#next-token-chart .tok-row").first.locator(".bar-cell.final")).to_contain_text("100.00%")


def test_temperature_up_flattens_the_distribution(page, logits):
    move_slider(page, "Temperature", "ArrowRight", 10)  # 1.0 → 1.5
    expect(page.get_by_role("slider", name="Temperature")).to_have_value("1.5")
    expect_chart_matches(page, logits, sampling.SamplingConfig(temperature=1.5))


def test_top_k_two_keeps_two_tokens(page, logits):
    move_slider(page, "Top-k", "ArrowRight", 2)
    expect_chart_matches(page, logits, sampling.SamplingConfig(top_k=2))
    finals = list(final_texts(page).values())
    assert sum(v != "0%" for v in finals) == 2
    expect(page.locator("#next-token-chart .tok-row.removed").first).to_contain_text("top-k")


def test_top_p_keeps_the_nucleus(page, logits):
    move_slider(page, "Top-p", "ArrowLeft", 50)  # 1.00 → 0.50
    expect(page.get_by_role("slider", name="Top-p")).to_have_value("0.5")
    config = sampling.SamplingConfig(top_p=0.5)
    expect_chart_matches(page, logits, config)
    kept = sampling.trace(logits, config).kept_count["top_p"]
    row = page.locator("#sampling-readout tr", has_text="top-p")
    expect(row).to_contain_text(f"{kept:,}")


def test_min_p_removes_the_tail(page, logits):
    move_slider(page, "Min-p", "ArrowRight", 5)  # 0 → 0.05
    config = sampling.SamplingConfig(min_p=0.05)
    expect_chart_matches(page, logits, config)
    kept = sampling.trace(logits, config).kept_count["min_p"]
    expect(page.locator("#sampling-readout tr", has_text="min-p")).to_contain_text(f"{kept:,}")


def continuation_tokens(page) -> int:
    return int(page.locator("#continuation .continuation").get_attribute("data-tokens"))


def wait_tokens(page, n: int) -> None:
    """A step runs the model: on a loaded shared CPU it can take seconds, so wait up to 30 s."""
    expect(page.locator("#continuation .continuation")).to_have_attribute("data-tokens", str(n), timeout=30_000)


def test_sample_greedy_and_back_change_the_continuation(page, lm):
    page.get_by_role("button", name="Greedy").click()
    wait_tokens(page, 1)
    assert page.locator("#continuation .continuation").get_attribute("data-text") == " Paris"
    page.get_by_role("button", name="Sample", exact=True).click()
    wait_tokens(page, 2)
    page.get_by_role("button", name="Back").click()
    wait_tokens(page, 1)
    expect(page.locator("#continuation .continuation")).to_have_attribute("data-text", " Paris")


def test_choosing_a_shown_token_appends_it(page, lm):
    row = page.locator("#next-token-chart .tok-row").nth(3)
    token = int(row.get_attribute("data-token-id"))
    row.click()
    wait_tokens(page, 1)
    expect(page.locator("#continuation .continuation")).to_have_attribute("data-text", lm.decode([token]))


def test_sample_n_shows_an_empirical_histogram(page):
    page.get_by_label("N draws").fill("500")
    page.get_by_role("button", name="Sample ×N").click()
    expect(page.locator("#sample-histogram")).to_contain_text("drawn in 500 samples")


def test_an_empty_prompt_gets_a_message_and_keeps_the_chart(page):
    before = final_texts(page)
    page.get_by_role("textbox", name="Prompt", exact=True).fill("   ")
    page.get_by_role("button", name="Run prompt").click()
    expect(page.locator("#sampling-message")).to_contain_text("The prompt is empty")
    assert final_texts(page) == before


def test_html_and_template_syntax_in_a_prompt_never_run(page):
    evil = '<img src=x onerror="window.__pwned=1">${window.__pwned2=1}`'
    page.get_by_role("textbox", name="Prompt", exact=True).fill(evil)
    page.get_by_role("button", name="Run prompt").click()
    expect(page.locator("#continuation .cprompt")).to_have_text(evil)
    assert page.evaluate("() => [window.__pwned, window.__pwned2]") == [None, None]
    assert not page.js_errors


def test_chat_mode_shows_the_exact_template_string(page):
    page.get_by_label("Chat message").check()
    expect(page.locator("#continuation .cprompt")).to_contain_text("<|im_start|>assistant")


def test_json_tool_call_constraint_greedy_until_it_stops_parses_and_validates(page):
    import json

    import jsonschema

    from agent.constraints import PRESETS

    page.get_by_role("combobox", name="Example prompts").click()
    page.get_by_role("option", name="A tool-call request").click()
    expect(page.locator("#continuation .cprompt")).to_contain_text("Call get_weather with city Berlin.")
    page.get_by_role("combobox", name="Constraint").click()
    page.get_by_role("option", name="JSON tool call", exact=True).click()
    expect(page.locator("#constraint-readout")).to_contain_text("JSON tool call")
    expect(page.locator("#next-token-chart .ntc")).to_have_class("ntc masked")
    for n in range(1, 80):
        page.get_by_role("button", name="Greedy").click()
        done = page.locator("#continuation .cend")
        wait_tokens_or_end(page, n)
        if done.count():
            break
    text = page.locator("#continuation .continuation").get_attribute("data-text").replace("<|im_end|>", "")
    jsonschema.validate(json.loads(text), json.loads(PRESETS["JSON tool call"].source))


def wait_tokens_or_end(page, n: int) -> None:
    page.wait_for_function(
        f"""() => {{ const c = document.querySelector('#continuation .continuation');
            return c && (c.dataset.tokens === '{n}' || document.querySelector('#continuation .cend')); }}"""
    )


def test_your_own_numbers_show_the_lecture_example(page):
    page.get_by_text("Your own numbers").first.click()
    page.get_by_role("button", name="Show my numbers").click()
    chart = page.locator("#own-numbers-chart")
    expect(chart.locator(".tok-row")).to_have_count(5)
    move_slider(page, "Top-k", "ArrowRight", 2)
    expect(chart.locator(".tok-row").nth(0).locator(".bar-cell.final")).to_contain_text("57.14%")
    expect(chart.locator(".tok-row").nth(1).locator(".bar-cell.final")).to_contain_text("42.86%")
    expect(chart.locator(".ntc-row.other")).to_have_count(0)  # every token has its row: no "all other 0"
    expect(chart.locator(".ntc-foot")).not_to_contain_text("click")  # its rows append nothing


def test_bad_own_numbers_get_a_message(page):
    page.get_by_text("Your own numbers").first.click()
    box = page.get_by_label("Your own numbers")
    expect(box).to_be_visible()
    message = page.locator("#sampling-message")
    for _ in range(2):  # a click that lands before the just-opened fold has bound its textbox is retried
        box.fill("0.5, banana")
        box.press("Tab")  # the field's blur: Gradio has its value before the click
        page.get_by_role("button", name="Show my numbers").click()
        try:
            expect(message).to_contain_text("'banana' is not a number", timeout=15_000)
            return
        except AssertionError:
            continue
    expect(message).to_contain_text("'banana' is not a number")


def chart_text(page) -> str:
    return page.locator("#next-token-chart .rl-chart-host").inner_text()


# In an order where each move changes what is shown (min-p first: after top-k = 3 it would cut nothing).
MOVES = [("Temperature", "ArrowRight"), ("Min-p", "ArrowRight"), ("Top-p", "ArrowLeft"), ("Top-k", "ArrowRight"),
         ("Bars shown", "ArrowRight")]


def test_every_slider_repaints_in_the_page_and_no_request_leaves_it(page):
    sent: list[str] = []
    expect(page.locator("#next-token-chart .tok-row")).to_have_count(20)
    page.wait_for_timeout(1500)  # the page load's own events (deep-link restore) end first
    page.on("request", lambda r: sent.append(f"{r.method} {r.url}"))
    for label, key in MOVES:
        before = chart_text(page)
        move_slider(page, label, key, 3)
        page.wait_for_function(
            "(before) => document.querySelector('#next-token-chart .rl-chart-host').innerText !== before", arg=before
        )
    before = chart_text(page)
    page.locator("#sampling-axis").get_by_label("Log").check()
    page.wait_for_function(
        "(before) => document.querySelector('#next-token-chart .rl-chart-host').innerText !== before", arg=before
    )
    expect(page.locator("#next-token-chart .ntc-foot")).to_contain_text("log axis")
    page.wait_for_timeout(500)  # anything a move might still send
    assert sent == []


def test_a_use_case_preset_sets_the_sliders_in_the_page(page, logits):
    page.get_by_role("button", name="Preset: An answer").click()
    expect(page.get_by_role("slider", name="Temperature")).to_have_value("0.7")
    expect(page.get_by_role("slider", name="Top-p")).to_have_value("0.9")
    expect_chart_matches(page, logits, sampling.SamplingConfig(temperature=0.7, top_p=0.9))
