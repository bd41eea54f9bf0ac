"""The ReAct tab's handlers on real components (built, not launched): each returns
{component: value}; the session keeps digests, not HTML; exports go with the session; Run to end is
bounded per press."""

from __future__ import annotations

import os

import pytest

from tests.page_api import values
from viz.react import handlers as h
from viz.react import run as react_run


def test_every_run_control_is_a_part_of_the_same_name(tab):
    p, _ = tab
    labels = ["Task", "Your task", "Backend", "Local weights", "Mode", "Output format"]
    assert [c.label for c in p.choices][:6] == labels
    names = [f for f in react_run.Choices.__dataclass_fields__]
    assert all(getattr(p, n) is c for n, c in zip(names, p.choices, strict=True))
    assert p.choices[names.index("url"):names.index("server") + 1] == [p.url, p.model_name, p.server]


def test_the_session_keeps_digests_and_an_unchanged_view_is_not_sent_again(tab, lm):
    p, first = tab
    out = h.views(p, lm, first, False)
    s = out[p.sess]
    assert len(s.shown) == len(p.views) and all(isinstance(d, int) for d in s.shown)
    assert set(out) == {p.sess, *p.views, p.scrub}  # nothing shown yet: every view is sent
    again = h.views(p, lm, s, False)
    assert set(again) == {p.sess, p.scrub}


def test_a_bad_value_is_a_message_and_the_controls_stay(tab, lm):
    p, first = tab
    out = h.on_reset(p, lm, first, False, *values(react_run.Choices(max_steps=99, budget=8192)))
    assert "MAX_STEPS must lie in 1 … 20" in out[p.msg] and p.mode not in out
    assert out[p.sess].states == first.states


def test_a_state_past_the_newest_shows_the_newest_and_says_so(tab, lm):
    """Issue 23 item 3: typing 2 while states 0–1 exist is no error badge: the newest state, a note."""
    p, first = tab
    s = next(h.on_next(p, lm, first, False))[p.sess]  # line 1 ran: states 0 and 1
    assert len(s.states) == 2
    out = h.on_scrub(p, lm, s, 2, False)
    assert out[p.sess].index == 1 and "State 2 is not recorded yet: states 0 … 1 are" in out[p.msg]
    assert h.on_scrub(p, lm, s, "0", False)[p.sess].index == 0
    for bad in (-1, 2.5, "x", None, 10**6):
        out = h.on_scrub(p, lm, s, bad, False)
        assert "Recorded state must" in out[p.msg] and out[p.sess].index == s.index


def test_exports_live_in_the_sessions_folder_and_go_with_it(tab, lm):
    p, first = tab
    s = first
    for _ in range(3):
        s = next(h.on_next(p, lm, s, False))[p.sess]
    out = h.on_png(p, s)
    s = out[p.sess]
    out = h.on_export(p, s)
    s = out[p.sess]
    assert sorted(os.listdir(s.exports)) == ["react-growth.png", "react-run.json"]
    assert h.on_export(p, s)[p.sess].exports == s.exports  # a new export replaces the old file
    h.remove_exports(s)
    assert not os.path.exists(s.exports)


@pytest.mark.parametrize("limit, value, says", [
    ("MAX_PHASES", 2, "Stopped after 2 phases"),
    ("MAX_SENT_BYTES", 1, "bytes sent"),
])
def test_run_to_end_is_bounded_per_press(tab, lm, monkeypatch, limit, value, says):
    p, first = tab
    monkeypatch.setattr(h, limit, value)
    monkeypatch.setattr(h, "REDRAW_EVERY_S", 0.0)  # every phase redrawn: the bytes add up per phase
    outs = list(h.on_run(p, lm, first, False))
    assert says in outs[-1][p.msg]
    last = outs[-1][p.sess]
    assert not last.states[-1].done and len(last.states) <= 3
    if limit == "MAX_PHASES":  # the next press continues where this one stopped
        assert list(h.on_run(p, lm, last, False))[-1][p.sess].states[-1].done


def test_changed_controls_start_a_new_run_on_next(tab, lm):
    """Issue 23: what the controls show when Next is pressed is what runs (no Reset needed)."""
    p, first = tab
    task = next(t for t in react_run.TASKS if "Paris" in t)
    now = values(react_run.Choices(task=task, budget=8192))
    out = h.on_choice(p)
    assert out[p.pending] is True and "starts a new run" in out[p.msg]
    shown = list(h.on_next(p, lm, first, False, True, *now))
    assert shown[0][p.pending] is None and "new run" in shown[0][p.msg]
    assert "Paris" in shown[-1][p.sess].title and len(shown[-1][p.sess].states) == 2  # line 1 ran
    unchanged = list(h.on_next(p, lm, first, False, None, *now))  # nothing changed: the run goes on
    assert unchanged[-1][p.sess].title == first.title
    bad = now[:2] + ["No such backend"] + now[3:]
    refused = list(h.on_next(p, lm, first, False, True, *bad))
    assert len(refused) == 1 and "Unknown backend" in refused[0][p.msg] and refused[0][p.sess].states == first.states


def test_constrained_tool_calls_say_they_have_no_effect_on_a_scripted_replay(tab, lm):
    from dataclasses import replace

    from viz.react import views as rv

    p, first = tab
    assert first.backend.kind == react_run.SCRIPTED
    assert "no effect on a scripted replay" in h.views(p, lm, first, False)[p.template]
    local = react_run.start(react_run.checked(lm, replace(react_run.default_choices(lm), backend=react_run.LOCAL)))
    assert rv.SCRIPTED_NOTE not in h.views(p, lm, local, False)[p.template]


def test_a_streamed_reply_is_redrawn_less_often_while_a_class_streams():
    import threading

    assert react_run.redraw_every_s() == react_run.STREAM_EVERY_S
    release, inside = threading.Event(), threading.Barrier(9)

    def reply(on_token):
        on_token("Thought: ")
        inside.wait(10)
        release.wait(10)
        return "done"

    def watch():
        for _ in react_run.streamed(reply):
            pass

    threads = [threading.Thread(target=watch) for _ in range(8)]
    for t in threads:
        t.start()
    inside.wait(10)  # 8 replies stream now
    assert react_run.redraw_every_s() == pytest.approx(8 / react_run.FULL_RATE_STREAMS * react_run.STREAM_EVERY_S)
    release.set()
    for t in threads:
        t.join(10)
    assert react_run.redraw_every_s() == react_run.STREAM_EVERY_S  # counted out again
