"""The ReAct tab's Context panel in headless Chromium, by labels and roles: one browser session's
memory never appears in another's; the long recorded run steps through compaction and the views
show it (the summary in the history, the compaction line in the pseudo-code and the budget)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from playwright.sync_api import expect

from agent.loop import LINE_COMPACT
from viz.react import run as react_run

pytestmark = [pytest.mark.browser, pytest.mark.model]
COMPACTION_TASK = next(t for t, stem in react_run.TASKS.items() if stem == "compaction-long-run")
FACT = "The visitor's locker code is 4711."


def open_context(page, app_url: str) -> None:
    page.goto(app_url + "?tab=react")  # the page's load selects the tab: no race with a click
    page.locator("#react-pseudocode .rp").wait_for(timeout=60_000)
    page.get_by_text("Context: few-shot exemplars").click()
    page.get_by_label("A fact to remember").wait_for()


def reset_with_memory(page) -> None:
    page.get_by_role("checkbox", name="Memory", exact=True).check()
    page.get_by_role("button", name="Reset", exact=True).click()
    expect(page.locator("#react-message")).to_contain_text("New run")


def test_one_sessions_memory_never_appears_in_another(page, browser, app_url):
    open_context(page, app_url)
    page.get_by_label("A fact to remember").fill(FACT)
    page.get_by_role("button", name="Pin", exact=True).click()
    expect(page.locator("#react-facts")).to_contain_text(FACT)
    reset_with_memory(page)
    expect(page.locator("#react-template")).to_contain_text("4711")

    other = browser.new_context(viewport={"width": 1920, "height": 1080})
    try:
        b = other.new_page()
        open_context(b, app_url)
        expect(b.locator("#react-facts")).to_contain_text("No facts kept in this tab yet")
        reset_with_memory(b)
        expect(b.locator("#react-template")).not_to_contain_text("4711")
        expect(b.locator("#react-facts")).not_to_contain_text("4711")
    finally:
        other.close()
    page.get_by_role("combobox", name="Forget a fact").click()
    page.get_by_role("option", name=f"1. {FACT}").click()
    page.get_by_role("button", name="Forget", exact=True).click()
    expect(page.locator("#react-facts")).to_contain_text("No facts kept in this tab yet")


def compaction_index(lm) -> tuple[int, int]:
    """(index of the compaction phase, index of the last state) of the recorded run, in-process."""
    c = replace(react_run.default_choices(lm), task=COMPACTION_TASK, budget=800, max_steps=12,
                reply_tokens=128, compact=True, compact_at=60)
    s = react_run.start(react_run.checked(lm, c))
    states = s.states
    while not states[-1].done:
        states += (next(react_run.one_phase(replace(s, states=states), lm))[0],)
    return next(i for i, st in enumerate(states) if st.lines == (LINE_COMPACT,)), len(states) - 1


def test_the_long_recorded_run_steps_through_compaction(page, lm, app_url):
    k, last = compaction_index(lm)
    page.goto(app_url + "?tab=react")
    page.locator("#react-pseudocode .rp").wait_for(timeout=60_000)
    page.get_by_role("combobox", name="Task").click()
    page.get_by_role("option", name=COMPACTION_TASK).click()
    expect(page.locator("#react-pseudocode .rp-compact")).to_contain_text("Compact at 60 %")
    page.get_by_role("button", name="Run to end", exact=True).click()
    expect(page.locator("#react-scrub")).to_contain_text(f"Recorded state {last} of {last}", timeout=60_000)
    expect(page.locator("#react-stop .rs")).to_have_attribute("data-stop", "final answer")
    expect(page.locator("#react-history .rh-summary").first).to_contain_text("compaction summary")
    for i in range(last - 1, k - 1, -1):
        page.get_by_role("button", name="Back", exact=True).click()
        expect(page.locator("#react-scrub")).to_contain_text(f"Recorded state {i} of {last}")
    expect(page.locator("#react-pseudocode .rp-compact")).to_have_attribute("data-compact", "1")
    expect(page.locator("#react-budget .rb-compact")).to_contain_text("→")
    before = int(page.locator("#react-budget .rb-compact").get_attribute("data-before"))
    after = int(page.locator("#react-budget .rb-compact").get_attribute("data-after"))
    assert after < before
    assert page.locator("#react-message .msg.error").count() == 0
