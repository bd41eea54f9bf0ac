"""The lecture's three checks, in order, with jsonschema as the oracle — and policy kept apart."""

import random

import jsonschema
import pytest

from agent.messages import ToolCall
from agent.tools import TOOLS, WEATHER_TOOL
from agent.validation import (
    CHECK_EXISTS,
    CHECK_JSON,
    CHECK_SCHEMA,
    DEFAULT_POLICY,
    EUROPE_ONLY,
    NO_POLICY,
    check_policy,
    schema_problems,
    validate_call,
)


def _call(name: str, arguments: str) -> ToolCall:
    return ToolCall("call_1", name, arguments)


def test_a_valid_call_passes_with_its_parsed_arguments():
    v = validate_call(_call("get_weather", '{"city": "Berlin"}'), TOOLS)
    assert v.ok and v.check is None and v.arguments == {"city": "Berlin"} and v.tool is WEATHER_TOOL


def test_check_1_invalid_json_names_the_decoder_error():
    v = validate_call(_call("get_weather", '{"city": "Berlin"'), TOOLS)
    assert not v.ok and v.check == CHECK_JSON
    assert v.message == ("ERROR: invalid arguments for get_weather: not valid JSON "
                         "(Expecting ',' delimiter at column 18): {\"city\": \"Berlin\"")


def test_check_2_unknown_tool_lists_the_available_ones():
    v = validate_call(_call("get_wether", '{"city": "Berlin"}'), TOOLS)
    assert v.check == CHECK_EXISTS
    assert v.message == ("ERROR: unknown tool 'get_wether'; available tools: "
                         "get_weather, calculator, search, lookup, finish")


@pytest.mark.parametrize("arguments, detail", [
    ("{}", "'city' is a required property"),
    ('{"city": 42}', "42 is not of type 'string' (at city)"),
    ('{"city": "Berlin", "unit": "C"}', "Additional properties are not allowed ('unit' was unexpected)"),
    ('"Berlin"', "'Berlin' is not of type 'object'"),
])
def test_check_3_schema_violations_are_detailed(arguments, detail):
    v = validate_call(_call("get_weather", arguments), TOOLS)
    assert v.check == CHECK_SCHEMA
    assert v.message == f"ERROR: invalid arguments for get_weather: {detail}"


def test_checks_run_in_the_lectures_order():
    assert validate_call(_call("no_such_tool", "{broken"), TOOLS).check == CHECK_JSON
    assert validate_call(_call("no_such_tool", '{"x": 1}'), TOOLS).check == CHECK_EXISTS


def test_empty_arguments_string_means_no_arguments():
    assert validate_call(_call("get_weather", ""), TOOLS).message.endswith("'city' is a required property")


def test_schema_problems_agree_with_jsonschema_on_random_instances():
    rng = random.Random(1)
    values = [None, 1, 2.5, "Berlin", True, [], {}, {"city": "x"}]
    for _ in range(300):
        instance = {k: rng.choice(values) for k in rng.sample(["city", "unit", "x"], rng.randint(0, 3))}
        if rng.random() < 0.1:
            instance = rng.choice(values)
        assert (schema_problems(instance, WEATHER_TOOL.parameters) == []) == jsonschema.Draft202012Validator(
            WEATHER_TOOL.parameters).is_valid(instance)


def test_policy_refuses_a_well_formed_call_with_a_policy_message():
    arguments = {"city": "Tokyo"}
    assert validate_call(_call("get_weather", '{"city": "Tokyo"}'), TOOLS).ok  # valid …
    refusal = check_policy("get_weather", arguments, EUROPE_ONLY)  # … but not permitted
    assert refusal.startswith("POLICY: get_weather is not permitted for 'Tokyo'; permitted cities: Berlin,")


def test_policy_permits_listed_cities_and_default_permits_any():
    assert check_policy("get_weather", {"city": "berlin"}, EUROPE_ONLY) is None
    assert check_policy("get_weather", {"city": "Tokyo"}, DEFAULT_POLICY) is None


def test_calculator_length_policy():
    long = "1 + " * 30 + "1"
    assert check_policy("calculator", {"expression": long}, DEFAULT_POLICY) == (
        "POLICY: calculator expressions are limited to 100 characters; this one has 121")
    assert check_policy("calculator", {"expression": long}, NO_POLICY) is None
