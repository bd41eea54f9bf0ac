"""The registry of controls (agent/controls.py): every path checks a number the same way."""

from __future__ import annotations

import pytest

from agent import controls
from viz import deeplink


def test_a_non_integer_for_a_whole_number_is_refused_everywhere_never_rounded():
    for tab in (controls.SAMPLING, controls.REACT, controls.SPECULATIVE):
        for c in tab.values():
            if c.integer:
                with pytest.raises(ValueError, match="must be a whole number from"):
                    c.check(c.low + 0.5, high=c.high or c.low + 10)
    assert deeplink.parse({"top_k": "2.5"}, {}).problems == (
        "top_k must be a whole number from 0 to 200, got '2.5'",)


def test_every_default_lies_inside_its_own_bounds():
    for tab in (controls.SAMPLING, controls.REACT, controls.SPECULATIVE):
        for c in tab.values():
            if c.default is not None:
                assert c.check(c.default, high=c.high or 10**6) == c.default


def test_the_deep_link_checks_are_the_registrys():
    assert set(controls.LINKED) == {"temperature", "top_k", "top_p", "min_p", "seed", "react_temperature",
                                    "react_top_p", "react_seed", "max_steps", "step"}
    for key, c in controls.LINKED.items():
        assert deeplink.parse({key: str(c.high)}, {}).values == {key: c.high}
        assert deeplink.parse({key: str(c.high + 1)}, {}).problems


def test_the_page_reads_the_registrys_ids_and_defaults():
    page = controls.page_controls()
    assert page["n_bars"] == {"id": "sampling-bars", "default": 20}
    assert page["temperature"]["id"] == "sampling-temperature"


def test_the_sampling_tabs_settings_use_the_registry():
    from viz.sampling.tab import _settings

    assert _settings("0.7", "5", 0.9, 0).top_k == 5
    with pytest.raises(ValueError, match="top_k must be a whole number"):
        _settings(1.0, 2.5, 1.0, 0.0)
    with pytest.raises(ValueError, match="Temperature must lie in 0 … 3"):
        _settings(5, 0, 1.0, 0.0)
