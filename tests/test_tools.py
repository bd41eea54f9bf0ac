"""The demo tools: weather table, a safe calculator, search/lookup over the offline encyclopedia."""

import random
import time

import jsonschema
import pytest

from agent.tools import (
    TOOLS,
    WEATHER,
    ToolError,
    calculator,
    find_article,
    finish,
    get_weather,
    load_encyclopedia,
    lookup,
    search,
)


def test_berlin_is_the_lectures_weather():
    assert get_weather("Berlin") == "12°C, rainy"


def test_weather_table_holds_about_fifteen_cities():
    assert len(WEATHER) == 15


def test_weather_ignores_case_accents_and_a_country_suffix():
    assert get_weather("bogota") == WEATHER["Bogotá"]
    assert get_weather("  BERLIN, Germany ") == "12°C, rainy"


def test_unknown_city_is_a_clear_tool_error():
    with pytest.raises(ToolError, match="no weather data for 'Atlantis'; this demo knows Berlin"):
        get_weather("Atlantis")


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_every_schema_is_the_lecture_envelope_and_closed(tool):
    schema = tool.schema()
    assert set(schema) == {"type", "function"} and schema["type"] == "function"
    assert set(schema["function"]) == {"name", "description", "parameters"}
    assert schema["function"]["name"] == tool.name
    assert tool.parameters["additionalProperties"] is False
    jsonschema.Draft202012Validator.check_schema(tool.parameters)


@pytest.mark.parametrize("expression, expected", [
    ("345 / 2.5", "138"), ("2 * (3 + 4) ** 2", "98"), ("7 // 2", "3"), ("7 % 3", "1"),
    ("-3 ** 2", "-9"), ("0.1 + 0.2", "0.3"), ("2 ** -1", "0.5"), ("+5 - -5", "10"),
    ("2 ** 0.5", "1.41421356237"), ("10 ** 99", "1" + "0" * 99),
])
def test_calculator_golden(expression, expected):
    assert calculator(expression) == expected


def _random_expression(rng: random.Random, depth: int = 0) -> str:
    if depth > 3 or rng.random() < 0.3:
        return str(rng.randint(0, 30))
    op = rng.choice(["+", "-", "*", "//", "%", "/", "**"])
    left = _random_expression(rng, depth + 1)
    right = str(rng.randint(0, 3)) if op == "**" else _random_expression(rng, depth + 1)
    return f"({left} {op} {right})" if rng.random() < 0.5 else f"-{left} {op} {right}"


def test_calculator_agrees_with_python_on_random_arithmetic():
    rng = random.Random(0)
    checked = 0
    for _ in range(400):
        expression = _random_expression(rng)
        try:
            expected = eval(expression)  # the oracle, on expressions this test generated itself
        except ZeroDivisionError:
            with pytest.raises(ToolError, match="division by zero"):
                calculator(expression)
            continue
        if isinstance(expected, complex) or abs(expected) >= 10**100:
            continue
        want = str(expected) if isinstance(expected, int) else f"{expected:.12g}"
        assert calculator(expression) == want, expression
        checked += 1
    assert checked > 300


@pytest.mark.parametrize("expression, message", [
    ("__import__('os').system('ls')", "function calls other than max"),
    ("(1).real", "attribute access is not allowed"),
    ("().__class__", "attribute access is not allowed"),
    ("x + 1", "names are not allowed"),
    ("abs(-1)", "function calls other than max"),
    ("max(1)", "function calls other than"), ("max(*[1, 2])", "function calls other than"),
    ("max(1, 2, key=abs)", "function calls other than"),
    ("[1, 2][0]", "subscripts are not allowed"),
    ("9**9**9", "power too large"),
    ("10 ** 100000", "power too large"),
    ("2 ** 1000 * 2 ** 1000", "power too large"),
    ("9" * 10_000, "10000 characters; the limit is 500"),
    ("12345678901234567890" * 6, "result too large"),
    ("'1' + '1'", "only numbers"),
    ("1 < 2", "Compare is not allowed"),
    ("True + 1", "is not allowed"),
    ("1j * 1j", "is not allowed"),
    ("2 ^ 3", "BitXor is not allowed"),
    ("(" * 240 + "1" + ")" * 240, "not an arithmetic expression"),
    ("lambda: 1", "Lambda is not allowed"),
    ("1e308 * 10", "not a finite number"),
])
def test_calculator_refuses_at_once(expression, message):
    start = time.perf_counter()
    with pytest.raises(ToolError, match=message.replace("(", r"\(").replace("*", r"\*")):
        calculator(expression)
    assert time.perf_counter() - start < 0.1


def test_calculator_picks_the_larger_or_smaller_of_numbers_with_max_and_min():
    """A comparison's verdict comes from the tool (max(12, 21) → 21), not from a small model comparing."""
    assert calculator("max(12, 21)") == "21"
    assert calculator("min(12, 21)") == "12"
    assert calculator("max(-2, -7, 3 * 2)") == "6"
    assert calculator("min(0.1 + 0.2, 1)") == "0.3"
    with pytest.raises(ToolError, match="division by zero"):
        calculator("max(1, 1 / 0)")


def test_calculator_reports_division_by_zero():
    with pytest.raises(ToolError, match="division by zero"):
        calculator("1 / (2 - 2)")


def test_encyclopedia_has_a_few_dozen_short_articles():
    articles = load_encyclopedia()
    assert 30 <= len(articles) <= 100
    assert len({a.title for a in articles}) == len(articles)
    for a in articles:
        assert 2 <= len(a.sentences) <= 5, a.title


def test_every_book_leads_to_its_writers_birthplace_in_two_hops():
    articles = load_encyclopedia()
    books = [a for a in articles if " is a " in a.sentences[0] and " by the " in a.sentences[0]]
    assert len(books) >= 10
    for book in books:
        writer = next(a for a in articles if a.title in book.sentences[0] and a is not book)
        assert any("born" in s for s in writer.sentences[:3]), writer.title


def test_search_returns_the_first_sentences_of_the_named_article():
    assert search("Italo Calvino") == (
        "Italo Calvino (1923–1985) was an Italian writer and journalist. He was born on 15 October 1923 "
        "in Santiago de las Vegas, near Havana, Cuba. In 1925 his family moved to Sanremo, Italy.")


def test_search_matches_aliases_accents_and_a_unique_partial_name():
    assert search("Le Petit Prince").startswith("The Little Prince is a novella")
    assert search("gabriel garcia marquez").startswith("Gabriel García Márquez (1927–2014)")
    assert search("Calvino").startswith("Italo Calvino (1923–1985)")


def test_search_without_a_match_lists_similar_titles():
    result = search("Calvino's birthplace in the Caribbean")
    assert result.startswith("Could not find [Calvino's birthplace in the Caribbean]. Similar: [")
    assert "Italo Calvino" in result


def test_lookup_in_an_article_returns_the_sentences_with_the_term():
    assert lookup("population", "Paris") == "No sentence contains 'population'."
    assert lookup("people", "Paris") == "(Result 1/1) About 2.1 million people live in the city itself."


def test_lookup_everywhere_names_the_article_of_each_sentence():
    result = lookup("Sanremo")
    assert result == "(Result 1/1) In 1925 his family moved to Sanremo, Italy. [Italo Calvino]"


def test_lookup_in_an_unknown_article_is_a_tool_error():
    with pytest.raises(ToolError, match="no article named 'Atlantis'"):
        lookup("capital", "Atlantis")


def test_find_article_refuses_an_ambiguous_partial_name():
    assert find_article("Thomas", load_encyclopedia()) is not None  # only Thomas Mann
    assert find_article("Things", load_encyclopedia()) is not None
    assert find_article("The", load_encyclopedia()) is None


def test_a_library_world_adds_articles_behind_the_same_tool_schemas():
    """Trajectory tuning's library worlds: search and lookup read the encyclopedia plus a run's own
    articles, under the demo tools' names, descriptions and schemas (the prompt is the same string)."""
    from agent.tools import TOOLS, Article, library_world, tool_named

    extra = (Article("The Salt Orchard", "The Salt Orchard is a novel by the Danish writer Ana Novak, published in "
                                         "1990. It is set over a single summer."),
             Article("Ana Novak", "Ana Novak (born 1950) is a Danish writer. She was born on 2 May 1950 in Odense, "
                                  "Denmark."))
    world = library_world(extra)
    assert [t.schema() for t in world] == [t.schema() for t in TOOLS]
    assert tool_named(world, "search").function(query="The Salt Orchard").startswith("The Salt Orchard is a novel")
    assert tool_named(world, "lookup").function(term="born", article="Ana Novak") == (
        "(Result 1/2) Ana Novak (born 1950) is a Danish writer.\n"
        "(Result 2/2) She was born on 2 May 1950 in Odense, Denmark.")
    assert tool_named(world, "search").function(query="Invisible Cities") == search("Invisible Cities")
    assert search("The Salt Orchard").startswith("Could not find")  # the demo's encyclopedia is untouched


def test_finish_returns_its_answer():
    assert finish("Cuba") == "Cuba"
