"""Deep-link parsing: checked values, problems named, never raised."""

from viz import deeplink

CHOICES = {"mode": ("Raw text", "Chat message"), "constraint": ("None", "JSON tool call")}


def test_parse_checks_every_value_and_names_the_problems():
    link = deeplink.parse(
        {"tab": "sampling", "temperature": "0.7", "top_k": "50", "seed": "3", "mode": "Chat message",
         "top_p": "2", "min_p": "x", "constraint": "<script>", "evil": "1", "__theme": "dark"},
        CHOICES,
    )
    assert link.values == {"tab": "sampling", "temperature": 0.7, "top_k": 50, "seed": 3, "mode": "Chat message"}
    assert len(link.problems) == 4 and any("unknown parameter 'evil'" in p for p in link.problems)


def test_query_round_trips():
    values = {"tab": "sampling", "prompt": "a & b = c?", "temperature": 0.5, "top_k": 40}
    from urllib.parse import parse_qsl

    q = deeplink.query(values)
    assert deeplink.parse(dict(parse_qsl(q[1:])), CHOICES).values == values


def test_integers_and_bounds():
    assert deeplink.parse({"top_k": "2.5"}, {}).problems
    assert deeplink.parse({"seed": "-1"}, {}).problems
    assert deeplink.parse({"prompt": "x" * 3000}, {}).problems


def test_a_react_link_names_its_run_by_id_and_a_link_written_with_the_labels_still_opens():
    from urllib.parse import parse_qsl

    from viz.react import handlers
    from viz.react import run as react_run

    label = react_run.TASK_LABELS["berlin-weather"]
    new = {"tab": "react", "task": "berlin-weather", "backend": "scripted", "react_mode": "react", "max_steps": "6"}
    old = {"tab": "react", "task": label, "backend": "Scripted replay", "react_mode": "ReAct", "max_steps": "6"}
    opened = deeplink.parse(new, handlers.LINK_CHOICES)
    assert opened == deeplink.parse(old, handlers.LINK_CHOICES) and not opened.problems
    assert opened.values == {"tab": "react", "task": label, "backend": "Scripted replay", "react_mode": "ReAct",
                             "max_steps": 6}
    written = handlers.react_link(label, "Scripted replay", "ReAct", 0.0, 1.0, 0, 6)
    assert dict(parse_qsl(written[1:])) == {**new, "react_temperature": "0", "react_top_p": "1", "react_seed": "0"}


def test_a_sampling_link_writes_stable_names_and_reads_the_old_labels():
    from viz.sampling import tab

    written = tab.on_link("Hi", "Chat message", 0.7, 0, 1.0, 0.0, "None", 3)
    assert "mode=chat" in written
    for mode in ("chat", "Chat message"):
        assert deeplink.parse({"mode": mode}, tab.LINK_CHOICES).values == {"mode": "Chat message"}


def test_the_tours_name_runs_and_examples_by_stable_names():
    from viz import tour
    from viz.react import run as react_run
    from viz.sampling import tab

    assert all(s.settings["task"] in react_run.TASK_LABELS for s in tour.REACT_TOUR)
    assert all(s.settings["example"] in tab.EXAMPLE_NAMES for s in tour.SAMPLING_TOUR if "example" in s.settings)


def test_a_react_link_away_from_the_first_state_says_what_it_leaves_out():
    """Issue 23 item 9: on a model backend the link cannot carry the step, and the page says so."""
    from viz.react import handlers, run

    assert "step=3" in handlers.react_link("berlin-weather", run.SCRIPTED, "ReAct", 0.0, 1.0, 0, 6, 3)
    assert "&step=" not in handlers.react_link("berlin-weather", "Local model", "ReAct", 0.0, 1.0, 0, 6, 3)
    note = handlers.link_note("Local model", 3)
    assert "opens the task at its first state, not at state 3" in note and "Local model" in note
    assert handlers.link_note(run.SCRIPTED, 3) == "" and handlers.link_note("Local model", 0) == ""
