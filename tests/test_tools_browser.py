"""The ReAct tab's tool panels in headless Chromium, found by labels and roles: Berlin over MCP with
the wire read from `mcp-wire`, the injection demo with the defence (Approve / Deny), the code tool's
task stepped to its answer through the real sandbox, and the first screen on a projector with the
panels open. Scripted replays: no model call, but real server processes and a real sandbox."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from viz.react import run as react_run
from viz.react import tools as react_tools

pytestmark = [pytest.mark.browser, pytest.mark.model]
BERLIN, _, PARIS_ON = list(react_tools.MCP_TASKS)


def open_tab(page) -> None:
    """The tab by its link (a click on the tab may land before the page's load event selects the
    linked tab, which then takes it back)."""
    page.goto(page.url.split("?")[0] + "?tab=react")
    page.locator("#react-pseudocode .rp").wait_for(timeout=60_000)
    expect(page.get_by_role("combobox", name="Task")).to_be_visible(timeout=60_000)


def choose_task(page, task: str) -> None:
    page.get_by_role("combobox", name="Task").click()
    page.get_by_role("option", name=task, exact=True).click()
    expect(page.locator("#react-scrub")).to_contain_text("Recorded state 0 of 0", timeout=60_000)
    expect(page.locator("#react-message")).to_contain_text("New run", timeout=60_000)
    page.wait_for_timeout(1500)  # the page settles (a press at once was seen to be lost)


def run_to_end(page) -> None:
    """Run to end; pressed again if the page had not taken the press (seen once under load while
    the page's own load events were still in flight): Run to end continues from the newest state."""
    scrub = page.locator("#react-scrub")
    before = scrub.inner_text()
    for _ in range(3):
        page.get_by_role("button", name="Run to end", exact=True).click()
        try:
            expect(scrub).not_to_have_text(before, timeout=15_000)
            return
        except AssertionError:
            continue


def open_tools(page) -> None:
    page.get_by_text("Tools: built-in functions, an MCP server, or the code tool").click()
    page.locator("#mcp-wire").wait_for()
    page.wait_for_timeout(1000)  # the accordion's components mount


def test_berlin_over_mcp_shows_the_frames_on_the_wire(page):
    open_tab(page)
    choose_task(page, BERLIN)
    open_tools(page)
    expect(page.get_by_role("combobox", name="Tools from")).to_have_value("MCP server (stdio)")
    run_to_end(page)
    expect(page.locator("#react-stop .rs")).to_have_attribute("data-stop", "final answer", timeout=60_000)
    wire = page.locator("#mcp-wire table")
    for method in ("initialize", "tools/list", "tools/call"):
        expect(wire.get_by_role("cell", name=method, exact=True).first).to_be_visible()
    call = wire.get_by_role("row").filter(has_text="tools/call").first
    expect(call).to_contain_text("call_1")
    expect(call).to_contain_text("Berlin")
    assert not page.js_errors


def test_the_injection_demo_with_the_defence_asks_and_a_denied_call_is_refused(page):
    open_tab(page)
    choose_task(page, PARIS_ON)
    approve, deny = (page.get_by_role("button", name=n, exact=True) for n in ("Approve", "Deny"))
    run_to_end(page)
    expect(approve).to_be_visible(timeout=60_000)
    expect(deny).to_be_visible()
    expect(page.locator("#react-approval-text")).to_contain_text("get_weather")
    approve.click()
    expect(page.locator("#react-history")).to_contain_text("15°C", timeout=60_000)
    run_to_end(page)
    expect(page.locator("#react-approval-text")).to_contain_text("send_note", timeout=60_000)
    deny.click()
    expect(page.locator("#react-history")).to_contain_text("POLICY", timeout=60_000)
    expect(approve).to_be_hidden()
    run_to_end(page)
    expect(page.locator("#react-stop .rs")).to_have_attribute("data-stop", "final answer", timeout=60_000)
    open_tools(page)
    expect(page.locator("#mcp-tools")).to_contain_text("⚠ untrusted")
    assert not page.js_errors


def test_a_denied_untrusted_call_changes_what_the_run_does_next(page):
    open_tab(page)
    choose_task(page, PARIS_ON)
    deny = page.get_by_role("button", name="Deny", exact=True)
    run_to_end(page)
    expect(deny).to_be_visible(timeout=60_000)
    expect(page.locator("#react-approval-recorded")).to_contain_text("which approved this call")
    deny.click()  # the recording ran get_weather: its later replies cannot follow a refusal
    expect(page.locator("#react-history")).to_contain_text("POLICY: get_weather", timeout=60_000)
    run_to_end(page)
    stop = page.locator("#react-stop .rs")
    expect(stop).to_have_attribute("data-stop", "the recording cannot follow", timeout=60_000)
    expect(stop).not_to_contain_text("15°C")
    assert not page.js_errors


@pytest.mark.skipif(react_run.CODE_TASK not in react_run.TASKS, reason="the code tool is switched off")
def test_the_code_tool_task_steps_to_its_answer(page):
    open_tab(page)
    choose_task(page, react_run.CODE_TASK)
    for i in range(1, 4):
        page.get_by_role("button", name="Next", exact=True).click()
        expect(page.locator("#react-scrub")).to_contain_text(f"Recorded state {i} of {i}", timeout=60_000)
    expect(page.locator("#react-history")).to_contain_text("19.0", timeout=60_000)
    run_to_end(page)
    expect(page.locator("#react-stop .rs")).to_have_attribute("data-stop", "final answer", timeout=60_000)
    expect(page.locator("#react-history")).to_contain_text("19°C")
    assert not page.js_errors


@pytest.mark.parametrize("width, height", [(1920, 1080), (1280, 720)])
def test_with_the_tool_panels_open_the_loop_history_and_stop_stay_on_the_first_screen(
        browser, app_url, tmp_path_factory, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(app_url + "?tab=react")
    page.locator("#react-pseudocode .rp").wait_for(timeout=60_000)
    choose_task(page, BERLIN)
    run_to_end(page)
    expect(page.locator("#react-stop .rs")).to_have_attribute("data-stop", "final answer", timeout=60_000)
    open_tools(page)
    page.get_by_role("button", name="Compare specific tools and the code tool (same question)").click()
    expect(page.locator("#react-compare")).to_contain_text("model calls", timeout=120_000)
    page.evaluate("() => window.scrollTo(0, 0)")
    shots = Path(os.environ.get("REACT_LAB_SCREENSHOTS", tmp_path_factory.getbasetemp() / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"tools-{width}x{height}.png"))
    for view in ("#react-next", "#react-pseudocode", "#react-history", "#react-stop"):
        box = page.locator(view).bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= height, (view, box)
    page.locator("#mcp-wire").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / f"tools-{width}x{height}-wire.png"))
    page.locator("#react-compare").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / f"tools-{width}x{height}-compare.png"))
    context.close()
