"""Fixtures for every test and every `>>>` example (pytest --doctest-modules over agent/ and viz/).

The real bundled model is loaded once per session (`lm`, `tok`). A doctest gets it as the name
`lm` — and `softmax` from agent.sampling — only when its examples use them, so the examples
that need no model run without loading one.
"""

from __future__ import annotations

import re

import pytest

NEEDS_MODEL = re.compile(r"\blm\b")


@pytest.fixture(scope="session")
def lm():
    """The real SmolLM2-135M-Instruct, loaded once for the whole session."""
    from agent.llm.model import load_model

    return load_model()


@pytest.fixture(scope="session")
def tok(lm):
    """The real SmolLM2 tokenizer, from the session's bundled model."""
    return lm.tokenizer


@pytest.fixture(autouse=True)
def _doctest_names(request, doctest_namespace):
    """`lm` and `softmax` for a `>>>` example that uses them without defining them."""
    from _pytest.doctest import DoctestItem

    if not isinstance(request.node, DoctestItem):
        return
    from agent.sampling import softmax

    doctest_namespace["softmax"] = softmax
    if any(NEEDS_MODEL.search(e.source) for e in request.node.dtest.examples):
        doctest_namespace["lm"] = request.getfixturevalue("lm")


MODEL_FIXTURES = {"lm", "tok", "app_demo", "app_url", "client", "warm", "proc_lm"}
BROWSER_FIXTURES = {"browser", "page"}


def pytest_collection_modifyitems(config, items):
    """Every test that loads the model or drives Chromium carries its marker, whether or not it was
    written with one, so `make test-fast` (-m "not model and not browser") never loads either."""
    from _pytest.doctest import DoctestItem

    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if isinstance(item, DoctestItem) and any(NEEDS_MODEL.search(e.source) for e in item.dtest.examples):
            names.add("lm")
        if names & BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        if names & (MODEL_FIXTURES | BROWSER_FIXTURES):
            item.add_marker(pytest.mark.model)
