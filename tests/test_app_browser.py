"""The launched app, driven in headless Chromium as a person would."""

from __future__ import annotations

import json
import urllib.request

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.model]


def test_api_info_answers(app_url):
    with urllib.request.urlopen(app_url + "gradio_api/info", timeout=30) as r:
        assert r.status == 200
        json.loads(r.read())


def test_page_shows_the_model_header_and_both_tabs(page):
    header = page.locator("#model-header")
    header.wait_for()
    text = header.inner_text()
    for fact in ("SmolLM2-135M-Instruct", "bundled GGUF Q4_1", "49,152", "8,192", "float32", "cpu"):
        assert fact in text
    assert page.get_by_role("tab", name="Sampling").is_visible()
    assert page.get_by_role("tab", name="ReAct loop").is_visible()
    assert not page.js_errors
