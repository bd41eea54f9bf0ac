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
