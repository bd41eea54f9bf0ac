"""Screenshots of every tab in lecture mode — 1920×1080 light and dark, and 1280×720 light (a small
projector) — for README and docs/.

    .venv/bin/python bench/screenshots.py            # writes docs/*.png
    .venv/bin/python bench/screenshots.py --scenes sampling-tour react-tour speculative-tour

Launches the app in this process on a free loopback port, drives it in Debian's headless Chromium
like a person (Greedy a few times, a constraint on, Next through the Berlin run), and saves:
docs/{sampling,react,speculative,react-tuned,post-training,sampling-tour,react-tour,
speculative-tour}-tab{,-dark,-1280}.png.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sampling_scene(page) -> None:
    page.get_by_role("tab", name="Sampling").click()
    page.get_by_role("slider", name="Top-p").focus()
    for _ in range(10):
        page.keyboard.press("ArrowLeft")  # top-p 0.90: the nucleus shows
    for _ in range(3):
        page.get_by_role("button", name="Greedy").click()
        page.wait_for_timeout(800)
    page.wait_for_timeout(1500)


def react_scene(page) -> None:
    page.get_by_role("tab", name="ReAct loop").click()
    page.wait_for_timeout(800)
    for _ in range(4):
        page.get_by_role("button", name="Next").click()
        page.wait_for_timeout(700)
    page.wait_for_timeout(1000)


def speculative_scene(page) -> None:
    page.get_by_role("tab", name="Speculative decoding").click()
    page.get_by_role("button", name="Draft and verify").click()
    page.locator("#spec-rounds .spec-round").first.wait_for(timeout=120_000)
    page.wait_for_timeout(500)


def tuned_scene(page) -> None:
    """The live agent: Local model on trajectory-tuned weights, a question it was never shown."""
    page.get_by_role("tab", name="ReAct loop").click()
    for label, option in (("Task", "Free text…"), ("Backend", "Local model"), ("Mode", "ReAct")):
        page.get_by_role("combobox", name=label).click()
        page.get_by_role("option", name=option).click()
    page.get_by_label("Your task").fill("How's the weather in Lisbon today?")
    page.wait_for_timeout(500)
    page.get_by_role("button", name="Run to end").click()
    page.locator("#react-stop .rs.done", has_text="Lisbon").wait_for(timeout=180_000)  # this run's end
    page.wait_for_timeout(800)


def post_training_scene(page) -> None:
    """The fold "In-context learning vs post-training", opened and scrolled to."""
    page.get_by_role("tab", name="ReAct loop").click()
    page.get_by_text("In-context learning vs post-training").click()
    page.locator("#pt-comparison").scroll_into_view_if_needed()
    page.wait_for_timeout(800)


def sampling_tour_scene(page) -> None:
    """A tour stop with the sliders it set and the chart (issue 23: one screen at 1280×720)."""
    page.get_by_role("tab", name="Sampling").click()
    page.get_by_text("Guided tour (lecture order)").click()
    for _ in range(2):
        page.get_by_role("button", name="Next stop ▶").first.click()
        page.wait_for_timeout(1200)


def react_tour_scene(page) -> None:
    page.get_by_role("tab", name="ReAct loop").click()
    page.get_by_text("Guided tour: CoT vs ReAct").click()
    page.locator("#react-tour-box").get_by_role("button", name="Next stop ▶").click()
    page.wait_for_timeout(1500)


def speculative_tour_scene(page) -> None:
    page.get_by_role("tab", name="Speculative decoding").click()
    page.get_by_text("Guided tour: draft → verify").click()
    page.locator("#spec-tour-box").get_by_role("button", name="Next stop ▶").click()
    page.wait_for_timeout(1200)


SCENES = (("sampling", sampling_scene), ("react", react_scene), ("speculative", speculative_scene),
          ("react-tuned", tuned_scene), ("post-training", post_training_scene),
          ("sampling-tour", sampling_tour_scene), ("react-tour", react_tour_scene),
          ("speculative-tour", speculative_tour_scene))
SCROLLED = ("post-training",)  # shot where the scene left the page, not from its top
VIEWS = ((1920, 1080, False, ""), (1920, 1080, True, "-dark"), (1280, 720, False, "-1280"))


def main(argv: list[str] | None = None) -> int:
    import argparse

    from playwright.sync_api import sync_playwright

    names = [n for n, _ in SCENES]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenes", nargs="+", choices=names, default=names, help="default: every scene")
    scenes = [(n, f) for n, f in SCENES if n in parser.parse_args(argv).scenes]

    import app
    from agent.llm.model import load_model

    lm = load_model()
    demo = app.build_demo(lm)
    demo.queue()
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **app.launch_kwargs())
    out = ROOT / "docs"
    out.mkdir(exist_ok=True)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            for width, height, dark, suffix in VIEWS:
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(f"http://127.0.0.1:{port}/")
                page.get_by_role("tab", name="Sampling").wait_for(timeout=60_000)
                if dark:
                    page.get_by_role("button", name="Dark").click()
                for name, scene in scenes:
                    scene(page)
                    if name not in SCROLLED:
                        page.evaluate("window.scrollTo(0, 0)")
                    page.wait_for_timeout(300)
                    page.screenshot(path=str(out / f"{name}-tab{suffix}.png"))
                    print(f"wrote docs/{name}-tab{suffix}.png")
                page.close()
            browser.close()
    finally:
        demo.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
