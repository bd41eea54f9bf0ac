"""The Speculative decoding tab in headless Chromium, driven as a person would."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_one_round_shows_each_drafted_position_and_the_stats(page):
    page.get_by_role("tab", name="Speculative decoding").click()
    page.get_by_role("button", name="Draft and verify").click()
    page.locator("#spec-rounds .spec-round").first.wait_for(timeout=120_000)
    rounds = page.locator("#spec-rounds").inner_text()
    assert "Round 1: γ = 4" in rounds and "1 target pass" in rounds
    assert re.search(r"position 1: drafted .+ p\(x\) = .+ q\(x\) = .+ (accepted|rejected)", rounds)
    stats = page.locator("#spec-stats").inner_text()
    assert re.search(r"target passes\s+1\b", stats)
    assert re.search(r"acceptance rate α\s+[\d.]+% \(\d of \d\)", stats)
    assert re.search(r"emitted\s+(\d+) = \d+ accepted \+ \d+ resampled \+ \d+ bonus", stats)
    assert page.locator("#spec-text .spec-prompt").inner_text().startswith("Here is a list of countries")


def test_prompt_lookup_round_and_a_bad_gamma_through_the_api_gets_a_message(page, app_url):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    page.get_by_role("tab", name="Speculative decoding").click()
    page.get_by_role("combobox", name="Draft").click()
    page.get_by_role("option", name=re.compile("Prompt lookup")).click()
    page.get_by_role("button", name="Draft and verify").click()
    page.locator("#spec-rounds .spec-round").first.wait_for(timeout=120_000)
    assert "target pass" in page.locator("#spec-rounds").inner_text()
    client = Client(app_url, verbose=False)
    lookup = "Prompt lookup (n-grams copied from the context)"
    out = client.predict("Berlin", lookup, 24, 2.5, 0.0, 0, 1.0, 0, api_name="/spec_round")
    assert "γ must be a whole number from 1 to 8" in str(out)
    with pytest.raises(AppError, match="greater than maximum"):  # Gradio's own range check comes first
        client.predict("Berlin", lookup, 24, 99, 0.0, 0, 1.0, 0, api_name="/spec_round")


def test_the_guided_tour_sets_the_draft_and_says_the_lectures_words(page):
    """Issue 23 item 7: the Speculative tab has a tour; each stop sets the controls it talks about."""
    page.get_by_role("tab", name="Speculative decoding").click()
    page.get_by_text("Guided tour: draft → verify").click()
    tour = page.locator("#spec-tour")
    nxt = page.get_by_role("button", name="Next stop ▶").last
    nxt.click()
    expect(tour).to_contain_text("1 · Draft, then verify")
    expect(tour).to_contain_text("the large model verifies them in one pass")
    nxt.click()
    expect(tour).to_contain_text("2 · The distribution is unchanged")
    nxt.click()
    expect(tour).to_contain_text("3 · When drafting pays")
    expect(page.get_by_role("combobox", name="Draft")).to_have_value(re.compile("Prompt lookup"))
    nxt.click()
    expect(tour).to_contain_text("4 · A poor draft")
    expect(page.get_by_role("combobox", name="Draft")).to_have_value(re.compile("Early exit"))
    page.get_by_role("button", name="Run", exact=True).click()
    page.locator("#spec-rounds .spec-round").first.wait_for(timeout=120_000)
    assert "early exit, L = 8" in page.locator("#spec-stats").inner_text()
