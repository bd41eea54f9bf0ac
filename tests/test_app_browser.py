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
    for fact in ("SmolLM2-135M-Instruct", "bundled GGUF Q4_1", "49,152", "8,192",
                 "float16 weights, float32 arithmetic", "cpu"):
        assert fact in text
    assert page.get_by_role("tab", name="Sampling").is_visible()
    assert page.get_by_role("tab", name="ReAct loop").is_visible()
    assert not page.js_errors


@pytest.mark.parametrize(
    "path",
    ["app.py", "/etc/passwd", "../../etc/passwd", "agent/llm/model.py", "CACHE/config.json", "CACHE/model.safetensors"],
)
def test_the_file_route_serves_nothing_but_assets(page, app_url, path):
    """A browser asks the file route for source, system and model-cache files: all refused."""
    from agent.llm import model as model_mod

    cache = model_mod._gguf_cache_dir(model_mod.bundled_gguf())
    url = app_url + "gradio_api/file=" + path.replace("CACHE", str(cache))
    response = page.request.get(url)
    assert response.status in (403, 404)
    ok = page.request.get(app_url + "gradio_api/file=assets/encyclopedia.json")
    assert ok.status == 200


def test_launch_settings_fit_a_public_space():
    import app

    kwargs = app.launch_kwargs()
    assert kwargs["share"] is False and kwargs["enable_monitoring"] is False and kwargs["run_history"] is False
    assert all(p.endswith("assets") for p in kwargs["allowed_paths"])
    assert 0 < app.QUEUE_SIZE <= 256
