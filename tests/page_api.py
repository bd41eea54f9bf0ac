"""The tabs as a test calls them: the Sampling tab's endpoints with outputs by name, not by
position, and the ReAct tab's run controls as the values of its inputs.

    out = call(client, "/run_prompt", "The capital of France is", "Raw text", 0)
    message(out), out["continuation"], out["chart"]["logits"]
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import html

from viz.react import run as react_run
from viz.sampling.tab import POSITION_OUTPUTS

SETTINGS = (1.0, 0, 1.0, 0.0)  # temperature, top-k, top-p, min-p: what Sample and a pick draw under
SHOWN = tuple(n for n in POSITION_OUTPUTS if n != "state")  # the API leaves the State (and layout) out
OUTPUTS = {"/sample_n": ("hist", "msg"), "/asking": ("asking", "msg"),
           "/own_numbers": ("own_chart", "msg"), "/example": ("prompt", "mode", *SHOWN),
           "/sampling_link": ("link",)}


def outside_any_loop(coroutine):
    """asyncio.run in a thread of its own: the browser tests' Playwright (sync API) keeps an event
    loop running in the main thread for the whole session, where asyncio.run refuses to start."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def call(client, endpoint: str, *args) -> dict:
    """One API call; its outputs by name ("msg", "chart", "continuation", …)."""
    out = client.predict(*args, api_name=endpoint)
    names = OUTPUTS.get(endpoint, SHOWN)
    return dict(zip(names, out if isinstance(out, (tuple, list)) else (out,), strict=True))


def message(out: dict) -> str:
    return html.unescape(out["msg"] or "") if isinstance(out.get("msg"), str) else ""


def values(c: react_run.Choices) -> list:
    """A ReAct tab's Choices as its listeners' input values, in order."""
    return [getattr(c, name) for name in react_run.Choices.__dataclass_fields__]


def merged(updates) -> dict:
    """What the page shows after a stepping event: every update applied in order."""
    shown: dict = {}
    for update in updates:
        shown.update(update)
    return shown
