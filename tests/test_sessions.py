"""A public Space serves strangers who open sessions through the API and never close them: the
server keeps at most app.SESSION_CAPACITY sessions' state, so memory stays bounded (issue #18)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser  # needs the launched app (and is as slow as the browser tests)

SESSIONS = 1000


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kib / 1024


def test_a_thousand_api_sessions_keep_memory_bounded(app_demo):
    from gradio_client import Client

    import app

    demo, url = app_demo
    client = Client(url, verbose=False)
    client.predict(1, api_name="/seed")  # warm: the first session pays for lazy imports and caches
    before = rss_mib()
    for n in range(SESSIONS):
        client.reset_session()  # a new session hash: a new visitor as far as the server knows
        client.predict(n, api_name="/seed")
    held = len(demo.state_holder.session_data)
    grown = rss_mib() - before
    assert held <= app.SESSION_CAPACITY < SESSIONS
    # one session's state is a Continuation (≈0.2–0.5 MB with its logits): the cap bounds the total
    assert grown < 0.5 * app.SESSION_CAPACITY + 200, f"memory grew {grown:.0f} MiB over {SESSIONS} sessions"
