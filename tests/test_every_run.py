"""Every shipped run, stepped through the ReAct tab's real listeners with every panel's listener
used, Token boundaries on: each listener returns what its outputs expect (Gradio's own output
processing accepts every value it returns or yields), no listener shows an error, and the server
logs no traceback.

The tab is built in a gr.Blocks (not launched); a `Page` keeps each component's value as the
browser would and calls a listener as Gradio does: its inputs' values in, then `postprocess_data`
over what it returns, then the listeners chained after it (`.then`).
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import replace

import gradio as gr
import pytest
from gradio.blocks import Block
from gradio.state_holder import SessionState

from agent.mcp.client import LAB_SERVER
from tests.page_api import outside_any_loop
from viz.react import run as react_run

MAX_APPROVALS = 20


class Page:
    """The values a browser holds for a built Blocks, and its listeners called the way Gradio does."""

    def __init__(self, demo: gr.Blocks):
        self.demo, self.state = demo, SessionState(demo)
        self.first = {b: getattr(b, "value", None) for b in demo.blocks.values()}
        self.values = dict(self.first)
        self.errors: list[str] = []

    def reload(self) -> dict:
        """A fresh page: every component as the page starts; returns the values it had."""
        before, self.values = self.values, dict(self.first)
        self.errors.clear()
        return before

    def listener(self, api_name: str):
        return next(f for f in self.demo.fns.values() if f.api_name == api_name)

    def press(self, api_name: str) -> None:
        self.call(self.listener(api_name))

    def call(self, fn) -> None:
        out = fn.fn(*[self.values[c] for c in fn.inputs])
        for update in (out if inspect.isgenerator(out) else [out]):
            outside_any_loop(self.demo.postprocess_data(fn, update, self.state))  # raises on a wrong value
            self.take(fn, update)
        for after in self.demo.fns.values():  # .then(…) listeners (a JavaScript-only one has no fn)
            if after.trigger_after == fn._id and after.fn is not None:
                self.call(after)

    def take(self, fn, update) -> None:
        pairs = update.items() if isinstance(update, dict) else zip(fn.outputs, [update], strict=False)
        for component, value in pairs:
            assert component in fn.outputs, f"{fn.name} returned a value for a component not among its outputs"
            if isinstance(value, Block):  # gr.Dropdown(choices=…, value=…): only a value it names
                if "value" not in value.constructor_args:
                    continue
                value = value.constructor_args["value"]
            if isinstance(value, str) and 'class="msg error"' in value:
                self.errors.append(f"{fn.api_name or fn.name}: {value}")
            self.values[component] = value


@pytest.fixture(scope="module")
def page_parts(lm):
    from viz.react import tab as react_tab
    from viz.react import tools_tab

    with gr.Blocks() as demo:
        react_tab.build(lm)
    page = Page(demo)
    parts = next(f.fn.args[0] for f in demo.fns.values() if f.api_name == "on_next")
    yield page, parts
    tools_tab.ended(page.values[parts.sess])  # its MCP server process and exported files go


SHIPPED = [task for task, stem in react_run.TASKS.items() if stem]


@pytest.mark.parametrize("task", SHIPPED, ids=[react_run.TASKS[t] for t in SHIPPED])
def test_every_shipped_run_steps_to_its_end_through_every_listener_without_a_traceback(page_parts, task, caplog):
    page, p = page_parts
    last = page.reload()[p.sess]  # each run on a fresh page (an MCP replay's tool source does not stay)
    page.values[p.sess] = replace(page.values[p.sess], key=last.key)  # the tab's one MCP client, reused
    caplog.set_level(logging.WARNING)
    page.values[p.show_tokens] = True
    page.values[p.task] = task
    page.press("on_task")  # the recorded run, its mode, format, budget and context
    page.press("on_run")  # Run to end (then: the facts a finished run remembers)
    for _ in range(MAX_APPROVALS):  # an untrusted server's calls wait for Approve
        if page.values[p.sess].states[-1].done:
            break
        page.press("on_approve")
        page.press("on_run")
    s = page.values[p.sess]
    assert s.states[-1].done, f"{task} did not reach its end: {s.states[-1].stop_reason}"
    for api_name in ("on_png", "on_export", "on_back"):
        page.press(api_name)
    page.values[p.scrub] = 0  # the slider dragged to the first state
    for api_name in ("on_scrub", "views", "on_next", "on_fork"):  # Fork from state 1
        page.press(api_name)
    if s.tools_from == LAB_SERVER.label:  # resources and prompts: the lab's server lists them
        page.press("on_mcp_lists")
    page.press("on_compare")
    page.press("on_reset")
    assert not page.errors, page.errors
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]


def test_a_recorded_task_after_the_untrusted_servers_replay_runs_with_the_built_in_functions(page_parts, caplog):
    """The injection replay sets Tools from to the untrusted demo server; the next recorded task
    must not inherit it (its tools are not there: the run would refuse to start)."""
    page, p = page_parts
    last = page.reload()[p.sess]
    page.values[p.sess] = replace(page.values[p.sess], key=last.key)
    page.values[p.task] = next(t for t, stem in react_run.TASKS.items() if stem == "mcp/injection-undefended")
    page.press("on_task")
    assert page.values[p.tools_from] != react_run.BUILT_IN
    page.values[p.task] = next(t for t, stem in react_run.TASKS.items() if stem == "average-temperature-specific-tools")
    page.press("on_task")
    page.press("on_run")
    assert page.values[p.tools_from] == react_run.BUILT_IN and page.values[p.sess].states[-1].done
    assert not page.errors, page.errors
