"""A projector's first screen (1280×720, lecture mode): each tab's key controls and the top of its main
view are inside the first 720 px and do not overlap, checked by bounding boxes (issue 23, item 4)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.model]

WIDTH, HEIGHT = 1280, 720
VIEW_LINES = 60  # px of a main view that must show (its heading and first lines)


@pytest.fixture
def small_page(browser, app_url, request, tmp_path_factory):
    """A fresh 1280×720 page on the app, as the `page` fixture but for a small projector."""
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    pg = context.new_page()
    pg.goto(app_url)
    pg.get_by_role("tab", name="Sampling").wait_for(timeout=30_000)
    pg.locator("#rl-help").wait_for(state="attached", timeout=30_000)
    yield pg
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        shots = tmp_path_factory.getbasetemp() / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(shots / f"{request.node.name}.png"))
        print(f"\nscreenshot of the failed page: {shots / request.node.name}.png")
    context.close()


def boxes(page, locators: dict) -> dict:
    """name → bounding box of each locator (at the page's top: scrolled to 0)."""
    page.evaluate("window.scrollTo(0, 0)")
    found = {}
    for name, loc in locators.items():
        loc.wait_for(state="visible", timeout=30_000)
        found[name] = loc.bounding_box()
    return found


def overlap(a: dict, b: dict, slack: float = 1.0) -> bool:
    return (a["x"] + slack < b["x"] + b["width"] and b["x"] + slack < a["x"] + a["width"]
            and a["y"] + slack < b["y"] + b["height"] and b["y"] + slack < a["y"] + a["height"])


def check_first_screen(controls: dict, views: dict) -> None:
    """Every control wholly inside 1280×720 and clear of the others; each view starts with at least
    VIEW_LINES px on the screen, and no control lies over a view's top."""
    for name, b in controls.items():
        assert b["y"] >= 0 and b["y"] + b["height"] <= HEIGHT, f"{name} is off the first screen: {b}"
        assert b["x"] >= 0 and b["x"] + b["width"] <= WIDTH, f"{name} is cut at the side: {b}"
    names = list(controls)
    for i, a in enumerate(names):
        for other in names[i + 1:]:
            assert not overlap(controls[a], controls[other]), f"{a} overlaps {other}"
    for name, v in views.items():
        assert 0 <= v["y"] <= HEIGHT - VIEW_LINES, f"the top of {name} is off the first screen: {v}"
        top = {**v, "height": VIEW_LINES}
        for c, b in controls.items():
            assert not overlap(top, b), f"{c} lies over the top of {name}"


def test_sampling_tab_fits_a_projector(small_page):
    page = small_page
    page.get_by_role("tab", name="Sampling").click()
    page.locator("#next-token-chart .ntc-row.tok-row").first.wait_for(timeout=30_000)
    controls = boxes(page, {
        "Prompt": page.get_by_label("Prompt", exact=True),
        "Run prompt": page.get_by_role("button", name="Run prompt"),
        "Temperature": page.get_by_role("slider", name="Temperature"),
        "Top-k": page.get_by_role("slider", name="Top-k"),
        "Top-p": page.get_by_role("slider", name="Top-p"),
        "Sample": page.get_by_role("button", name="Sample", exact=True),
        "Greedy": page.get_by_role("button", name="Greedy"),
    })
    views = boxes(page, {"the chart": page.locator("#next-token-chart .ntc")})
    check_first_screen(controls, views)
    tenth = page.locator("#next-token-chart .ntc-row.tok-row").nth(9).bounding_box()
    assert tenth["y"] + tenth["height"] <= HEIGHT, "fewer than ten chart rows on the first screen"


def test_react_tab_fits_a_projector(small_page):
    page = small_page
    page.get_by_role("tab", name="ReAct loop").click()
    controls = boxes(page, {
        "Task": page.get_by_role("combobox", name="Task"),
        "Backend": page.get_by_role("combobox", name="Backend"),
        "Mode": page.get_by_role("combobox", name="Mode"),
        "Constrained tool calls": page.get_by_label("Constrained tool calls"),
        "Next": page.get_by_role("button", name="Next", exact=True),
        "Run to end": page.get_by_role("button", name="Run to end"),
    })
    views = boxes(page, {"the pseudo-code": page.locator("#react-pseudocode"),
                         "the history": page.locator("#react-history"),
                         "the template view": page.locator("#react-template")})
    check_first_screen(controls, views)


def test_react_approval_row_is_on_the_first_screen(small_page):
    page = small_page
    page.get_by_role("tab", name="ReAct loop").click()
    page.get_by_role("combobox", name="Task").click()
    page.get_by_role("option", name="What's the weather in Paris? (an untrusted MCP server, defence on)").click()
    approve = page.get_by_role("button", name="Approve")
    for _ in range(6):
        if approve.is_visible():
            break
        page.get_by_role("button", name="Next", exact=True).click()
        page.wait_for_timeout(1_500)
    controls = boxes(page, {"Approve": approve, "Deny": page.get_by_role("button", name="Deny"),
                            "Next": page.get_by_role("button", name="Next", exact=True)})
    check_first_screen(controls, {})


def test_speculative_tab_fits_a_projector(small_page):
    page = small_page
    page.get_by_role("tab", name="Speculative decoding").click()
    controls = boxes(page, {
        "Prompt": page.locator("#spec-prompt textarea"),
        "Draft and verify": page.get_by_role("button", name="Draft and verify"),
        "Run": page.get_by_role("button", name="Run", exact=True),
        "γ": page.get_by_role("slider", name="γ (drafted tokens per round)"),
    })
    check_first_screen(controls, {})
    assert page.locator("#spec-rounds").bounding_box()["y"] <= HEIGHT - VIEW_LINES  # "Press Draft and verify…"
    page.get_by_role("button", name="Draft and verify").click()
    page.locator("#spec-rounds .spec-round").first.wait_for(timeout=120_000)
    check_first_screen(controls, boxes(page, {"the text": page.locator("#spec-text")}))


def test_a_sampling_tour_stop_the_sliders_and_the_chart_share_the_first_screen(small_page):
    """Issue 23, item 8: the tour opens above the sliders it moves, beside the chart."""
    page = small_page
    page.get_by_role("tab", name="Sampling").click()
    page.locator("#next-token-chart .ntc-row.tok-row").first.wait_for(timeout=30_000)
    page.get_by_text("Guided tour (lecture order)").click()
    page.get_by_role("button", name="Next stop ▶").first.click()
    expect_text(page.locator("#sampling-tour"), "1 · Softmax")
    controls = boxes(page, {"the stop": page.locator("#sampling-tour"),
                            "Temperature": page.get_by_role("slider", name="Temperature")})
    check_first_screen(controls, boxes(page, {"the chart": page.locator("#next-token-chart .ntc")}))


def test_a_react_tour_stop_and_the_views_share_the_first_screen(small_page):
    page = small_page
    page.get_by_role("tab", name="ReAct loop").click()
    page.get_by_text("Guided tour: CoT vs ReAct").click()
    page.locator("#react-tour-box").get_by_role("button", name="Next stop ▶").click()
    expect_text(page.locator("#react-tour"), "CoT vs ReAct")
    controls = boxes(page, {"the stop": page.locator("#react-tour"),
                            "Next": page.get_by_role("button", name="Next", exact=True)})
    check_first_screen(controls, boxes(page, {"the pseudo-code": page.locator("#react-pseudocode"),
                                              "the history": page.locator("#react-history")}))


def test_your_own_numbers_sit_under_the_chart_beside_the_sliders(small_page):
    """Issue 23, item 8: not at the page's bottom, away from the sliders that apply to them."""
    page = small_page
    page.get_by_role("tab", name="Sampling").click()
    chart = page.locator("#next-token-chart .ntc")
    chart.wait_for(timeout=30_000)
    own = page.locator("#own-numbers-box")
    c, o = chart.bounding_box(), own.bounding_box()
    slider = page.get_by_role("slider", name="Temperature").bounding_box()
    assert o["x"] > slider["x"] + slider["width"], "the fold is not in the column beside the sliders"
    sample_n = page.get_by_role("button", name="Sample ×N").bounding_box()
    assert c["y"] + c["height"] <= o["y"] < sample_n["y"], "the fold is not between the chart and Sample ×N"


def expect_text(locator, text: str) -> None:
    from playwright.sync_api import expect

    expect(locator).to_contain_text(text, timeout=30_000)


def test_a_speculative_tour_stop_and_the_settings_it_sets_share_the_first_screen(small_page):
    page = small_page
    page.get_by_role("tab", name="Speculative decoding").click()
    page.get_by_text("Guided tour: draft → verify").click()
    page.locator("#spec-tour-box").get_by_role("button", name="Next stop ▶").click()
    page.locator("#spec-tour").get_by_text("1 ·").first.wait_for(timeout=30_000)
    controls = boxes(page, {"the stop": page.locator("#spec-tour"),
                            "Draft and verify": page.get_by_role("button", name="Draft and verify"),
                            "γ": page.get_by_role("slider", name="γ (drafted tokens per round)")})
    check_first_screen(controls, {})


@pytest.mark.parametrize("mode", ["lecture", "desk"])
def test_the_react_scrub_rows_labels_are_whole_at_1280(small_page, mode):
    """Issue 23: "Token boundaries" was cut to "Token bou" at 1280 in both modes (a 192 px label in a
    143 px share of the scrub slider's form box)."""
    page = small_page
    page.get_by_role("tab", name="ReAct loop").click()
    if mode == "desk":
        page.locator("#rl-mode-toggle").click()
        page.wait_for_function("document.body.classList.contains('rl-desk')", timeout=10_000)
    box = page.get_by_label("Token boundaries")
    box.wait_for(state="visible", timeout=30_000)
    text = page.locator("#react-show-tokens label span").last
    fits = text.evaluate("el => el.scrollWidth <= el.clientWidth + 1 && el.getBoundingClientRect().right"
                         " <= el.closest('#react-show-tokens').getBoundingClientRect().right + 1")
    assert fits, f"the label is cut: {text.bounding_box()} in {page.locator('#react-show-tokens').bounding_box()}"
