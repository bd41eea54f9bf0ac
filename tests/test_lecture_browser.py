"""Lecture mode: readable from the back row, driven from the keyboard, shareable as a link."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agent import sampling
from agent.llm import continuation as cont
from viz import charts

pytestmark = [pytest.mark.browser, pytest.mark.model]


def tokens(page) -> str:
    return page.locator("#continuation .continuation").get_attribute("data-tokens")


def test_body_text_is_at_least_22px_in_lecture_mode_and_smaller_at_the_desk(page):
    size = lambda: float(page.evaluate("() => getComputedStyle(document.body).fontSize").rstrip("px"))
    page.get_by_text("What each setting does").click()  # the lecture's formulas, folded under the sliders
    paragraph = page.locator("#tab-sampling .explain p").first
    paragraph.wait_for()  # Markdown renders after the tab itself
    prose = paragraph.evaluate("(p) => getComputedStyle(p).fontSize")
    assert size() >= 22 and float(prose.rstrip("px")) >= 22
    page.get_by_role("button", name="Desk mode").click()
    assert size() < 22
    page.get_by_role("button", name="Lecture mode").click()
    assert size() >= 22


def test_desk_mode_shrinks_the_react_views_too(page):
    """Issue 23 item 9: the ReAct views' own sizes (pseudo-code, messages, template, budget, stop
    reason) follow the toggle, not only Gradio's text."""
    page.get_by_role("tab", name="ReAct loop").click()
    views = ("#react-pseudocode .rp", "#react-history .rh-wrap", "#react-template .rt", "#react-budget .rb")
    for v in views:
        page.locator(v).wait_for()
    size = lambda v: float(page.locator(v).evaluate("(e) => getComputedStyle(e).fontSize").rstrip("px"))
    lecture = {v: size(v) for v in views}
    page.get_by_role("button", name="Desk mode").click()
    assert all(size(v) < lecture[v] for v in views), {v: (lecture[v], size(v)) for v in views}
    page.get_by_role("button", name="Lecture mode").click()
    assert {v: size(v) for v in views} == lecture


def test_dark_mode_switches_without_a_reload(page):
    page.get_by_role("button", name="Dark").click()
    assert "dark" in page.evaluate("() => document.body.className")
    page.get_by_role("button", name="Light").click()
    assert "dark" not in page.evaluate("() => document.body.className")


def test_sampling_shortcuts_s_g_b(page):
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("g")
    expect(page.locator("#continuation .continuation")).to_have_attribute("data-text", " Paris")
    page.keyboard.press("s")
    expect(page.locator("#continuation .continuation")).to_have_attribute("data-tokens", "2")
    page.keyboard.press("b")
    expect(page.locator("#continuation .continuation")).to_have_attribute("data-tokens", "1")


def test_shortcuts_do_nothing_while_typing(page):
    box = page.get_by_role("textbox", name="Prompt", exact=True)
    box.click()
    box.press("End")
    box.type(" sgb")
    expect(box).to_have_value("The capital of France is sgb")
    assert tokens(page) == "0"


def test_arrow_keys_move_the_focused_slider(page):
    slider = page.get_by_role("slider", name="Top-p")
    slider.focus()
    slider.press("ArrowLeft")
    expect(slider).to_have_value("0.99")


def test_question_mark_shows_the_shortcut_list(page):
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("?")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("next phase")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


def test_deep_link_round_trip_restores_the_same_controls_and_chart(browser, app_url, lm):
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    page = context.new_page()
    page.goto(app_url + "?tab=sampling&prompt=Once+upon+a+time&temperature=0.5&top_k=40&top_p=0.9&seed=3")
    expect(page.get_by_role("slider", name="Temperature")).to_have_value("0.5", timeout=60_000)
    expect(page.get_by_role("slider", name="Top-k")).to_have_value("40")
    expect(page.get_by_role("textbox", name="Prompt", exact=True)).to_have_value("Once upon a time")
    expect(page.get_by_role("combobox", name="Example prompts")).to_have_value("")  # issue 23: not the old example
    config = sampling.SamplingConfig(temperature=0.5, top_k=40, top_p=0.9)
    c = cont.start(lm, "Once upon a time", False, seed=3)
    t = sampling.trace(c.logits, config, u=c.u)
    first = page.locator("#next-token-chart .tok-row").first
    expect(first).to_have_attribute("data-token-id", str(int(t.order[0])))
    expect(first.locator(".bar-cell.final")).to_contain_text(charts.pct(float(t.probs[t.order[0]])))
    expect(page.locator("#sampling-readout")).to_contain_text(f"u = {c.u:.4f}")  # same seed, same draw
    page.get_by_role("button", name="Link to this view").click()
    link = page.locator("#sampling-link textarea")
    expect(link).to_have_value(re.compile(r"^http://.*\?tab=sampling&"))
    url = link.input_value()
    second = context.new_page()
    second.goto(url)
    expect(second.get_by_role("slider", name="Top-p")).to_have_value("0.9", timeout=60_000)
    row = second.locator("#next-token-chart .tok-row").first
    expect(row.locator(".bar-cell.final")).to_have_text(first.locator(".bar-cell.final").inner_text())
    expect(second.locator("#sampling-readout")).to_contain_text(f"u = {c.u:.4f}")
    context.close()


def test_a_bad_link_names_what_it_ignored(browser, app_url):
    context = browser.new_context()
    page = context.new_page()
    page.goto(app_url + "?temperature=99&top_k=banana&foo=1")
    expect(page.locator("#link-message")).to_contain_text("temperature must lie in 0 … 3, got '99'", timeout=60_000)
    expect(page.locator("#link-message")).to_contain_text("unknown parameter 'foo'")
    context.close()


def test_react_shortcuts_n_b_r(page):
    page.get_by_role("tab", name="ReAct loop").click()
    scrub = page.locator("#react-scrub")
    expect(scrub).to_contain_text("Recorded state 0 of 0")
    page.locator("#react-pseudocode").click()
    page.keyboard.press("n")
    expect(scrub).to_contain_text("Recorded state 1 of 1")
    page.keyboard.press("b")
    expect(scrub).to_contain_text("Recorded state 0 of 1")
    page.keyboard.press("r")
    expect(page.locator("#react-stop")).to_contain_text("It's 12°C and rainy in Berlin.", timeout=30_000)


def test_react_deep_link_opens_the_task_backend_and_mode(browser, app_url):
    from urllib.parse import urlencode

    task = "In which country was the author of Invisible Cities born? (two-hop search)"
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    page = context.new_page()
    page.goto(app_url + "?" + urlencode({"tab": "react", "task": task, "backend": "Scripted replay",
                                          "react_mode": "ReAct", "max_steps": 6}))
    expect(page.get_by_role("tab", name="ReAct loop")).to_have_attribute("aria-selected", "true", timeout=60_000)
    expect(page.get_by_role("combobox", name="Task")).to_have_value(task)
    expect(page.locator("#react-message")).to_contain_text("New run")
    page.get_by_role("button", name="Next").click()
    expect(page.locator("#react-history")).to_contain_text("Invisible Cities")
    page.locator("#tab-react").get_by_role("button", name="Link to this view").click()
    expect(page.locator("#react-link textarea")).to_have_value(re.compile(r"\?tab=react&task=two-hop-search"))
    expect(page.locator("#react-link textarea")).to_have_value(re.compile(r"&step=1$"))  # issue 23: the step too
    second = context.new_page()
    second.goto(page.locator("#react-link textarea").input_value())
    expect(second.locator("#react-scrub")).to_contain_text("Recorded state 1 of 1", timeout=60_000)
    expect(second.locator("#react-history")).to_contain_text("Invisible Cities")
    context.close()


def test_sampling_tour_follows_the_lecture_and_sets_the_controls(page):
    page.locator("#tab-sampling").get_by_text("Guided tour (lecture order)").click()
    page.get_by_role("button", name="Next stop ▶").first.click()
    expect(page.locator("#sampling-tour")).to_contain_text("1 · Softmax")
    page.get_by_role("button", name="Next stop ▶").first.click()
    expect(page.locator("#sampling-tour")).to_contain_text("Temperature → 0")
    expect(page.get_by_role("slider", name="Temperature")).to_have_value("0.3")
    for _ in range(4):
        page.get_by_role("button", name="Next stop ▶").first.click()
    expect(page.locator("#sampling-tour")).to_contain_text("6 · Constrained decoding")
    expect(page.locator("#constraint-readout")).to_contain_text("JSON tool call")
    page.get_by_role("button", name="◀ Previous stop").first.click()
    expect(page.get_by_role("slider", name="Top-p")).to_have_value("0.9")


def test_react_tour_sets_the_task(page):
    page.get_by_role("tab", name="ReAct loop").click()
    page.get_by_text("Guided tour: CoT vs ReAct").click()
    page.locator("#tab-react").get_by_role("button", name="Next stop ▶").click()
    expect(page.locator("#react-tour")).to_contain_text("CoT vs ReAct")
    expect(page.get_by_role("combobox", name="Task")).to_have_value(
        "In which country was the author of Invisible Cities born? (two-hop search)")
    page.locator("#tab-react").get_by_role("button", name="Next stop ▶").click()
    page.locator("#tab-react").get_by_role("button", name="Next stop ▶").click()
    expect(page.locator("#react-tour")).to_contain_text("A validation error")
    expect(page.get_by_role("combobox", name="Task")).to_have_value(
        "What's the weather in Paris? (a validation error, repaired)")


@pytest.mark.parametrize("width, height", [(1280, 720), (1920, 1080)])
def test_react_tab_on_a_projector_shows_loop_history_and_stop_on_the_first_screen(browser, app_url, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(app_url + "?tab=react")
    page.locator("#react-pseudocode .rp").wait_for(timeout=60_000)
    for i in range(1, 5):
        page.locator("#react-next").click()
        expect(page.locator("#react-scrub")).to_contain_text(f"Recorded state {i} of {i}", timeout=30_000)
    expect(page.locator("#react-stop .rs")).to_have_attribute("data-stop", "final answer")
    for view in ("#react-next", "#react-pseudocode", "#react-history", "#react-stop"):
        box = page.locator(view).bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= height, (view, box)
    title, facts, toolbar = (page.locator(f"#model-header {c}").bounding_box()
                             for c in (".rl-title", ".rl-facts", ".rl-toolbar"))
    middles = [b["y"] + b["height"] / 2 for b in (title, facts, toolbar)]
    assert max(middles) - min(middles) < 12, middles  # the header is one line
    context.close()


@pytest.mark.parametrize("width, height", [(1280, 720), (1920, 1080)])
def test_sampling_tab_on_a_projector_shows_the_sliders_and_ten_bars_on_the_first_screen(browser, app_url, width,
                                                                                         height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(app_url)
    rows = page.locator("#next-token-chart .ntc-row.tok-row")
    rows.nth(9).wait_for(timeout=60_000)
    shown = [page.get_by_role("slider", name=name) for name in ("Temperature", "Top-k", "Top-p", "Min-p")]
    for locator in [*shown, rows.nth(0), rows.nth(9)]:
        box = locator.bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= height, box
    context.close()
