"""The Speculative tab's views as HTML: the introduction, the end-of-sequence note and the rejection
rule at T = 0 (pure functions of agent.llm.speculative's values; no model)."""

from __future__ import annotations

from agent.llm.speculative import PositionView, RoundView, Stats
from viz.speculative import views

STRINGS = ["a", "b", "c"]


def rejected(u: float | None) -> RoundView:
    pos = PositionView(0, 0.1, 0.9, u, 0.11, False, 1, ((1, 0.9),), ((0, 0.9),), ((1, 1.0),))
    return RoundView((pos,), None, (), 1, 1, 0.01)


def test_the_introduction_names_gamma_l_p_q_and_why_the_early_exit_draft_is_slow():
    html = views.intro(30, 24)
    for symbol in ("<b>γ</b>", "<b>L</b>", "<b>p</b>", "<b>q</b>"):
        assert symbol in html
    assert "L = 24 of 30" in html and "2–3×" in html and "same model" in html


def test_a_rejection_at_temperature_zero_is_the_argmax_not_a_draw():
    assert "drew" not in views.rounds((rejected(None),), STRINGS)
    assert "argmax" in views.rounds((rejected(None),), STRINGS)
    assert "drew" in views.rounds((rejected(0.5),), STRINGS)


def test_an_end_of_sequence_is_said_where_fewer_tokens_were_emitted():
    stats = Stats(rounds=1, drafted=2, accepted=2, bonus=1)
    assert "end of sequence" in views.stats(stats, 4, 1.0, "early exit", ended=True)
    assert "end of sequence" not in views.stats(stats, 4, 1.0, "early exit")
    assert "end of sequence" in views.continuation("x", STRINGS, (0,), ("accepted",), ended=True)
    assert "end of sequence" not in views.continuation("x", STRINGS, (0,), ("accepted",))
