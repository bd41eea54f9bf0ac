"""Constrained decoding with the real SmolLM2 tokenizer and the real llguidance: no mocks.

The model fixture `lm` is the session fixture of tests/conftest.py (the bundled model, loaded
once); only the greedy-decoding test runs the network, every other test uses the tokenizer.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import llguidance
import llguidance.numpy
import numpy as np
import pytest

from agent.constraints import (
    GRAMMAR_KINDS,
    JSON_FORMAT,
    PRESET_EXAMPLES,
    PRESET_TOOLS,
    PRESETS,
    Constraint,
    ConstraintViolation,
    Grammar,
    GrammarError,
    accepts,
    compile_grammar,
    constraint_for,
    masked_logits,
    masked_probs,
    tokenizer_info,
    tool_call_schema,
    unpack_bitmask,
)
from agent.sampling import softmax

pytestmark = pytest.mark.model

TOOL_CALL = PRESETS["JSON tool call"]
# Presets whose example closes the grammar (only end-of-sequence may follow); the others are
# complete at the end of their example but may go on (an e-mail's domain, a longer sum).
CLOSED = {
    "yes / no / maybe": True,
    "Date (YYYY-MM-DD)": True,
    "E-mail address": False,
    "Arithmetic expression": False,
    "Person (JSON Schema)": True,
    "JSON tool call": True,
    "ReAct format": True,
}


def step_through(constraint: Constraint, ids: list[int]) -> list[np.ndarray]:
    """Consume ids one by one, each checked against the mask first; the masks seen, in order."""
    masks = []
    for token_id in ids:
        mask = constraint.allowed_mask().copy()
        assert mask[token_id], f"token {token_id} not in A(s_t) at step {len(masks)}"
        assert constraint.allows(token_id)
        masks.append(mask)
        constraint.consume(token_id)
    return masks


def eos_only(mask: np.ndarray, lm) -> bool:
    allowed = set(np.flatnonzero(mask).tolist())
    return bool(allowed) and allowed <= set(lm.eos_token_ids)


# --- presets, every grammar kind -------------------------------------------------------------


def test_presets_cover_every_grammar_kind_and_the_lecture_formats():
    assert {g.kind for g in PRESETS.values()} == set(GRAMMAR_KINDS)
    for name in ("JSON tool call", "yes / no / maybe", "Arithmetic expression", "ReAct format"):
        assert PRESETS[name].name == name
    assert set(PRESET_EXAMPLES) == set(PRESETS) == set(CLOSED)


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_steps_its_valid_example_token_by_token(lm, name):
    example = PRESET_EXAMPLES[name]
    constraint = Constraint(PRESETS[name], lm)
    step_through(constraint, lm.encode(example))
    state = constraint.state()
    assert constraint.is_accepting() and state.accepting and state.text == example
    mask = constraint.allowed_mask()
    assert mask.shape == (lm.vocab_size,) and mask.dtype == np.bool_
    if CLOSED[name]:
        assert constraint.is_stopped() and eos_only(mask, lm)
    else:
        assert not constraint.is_stopped() and mask[sorted(constraint.eos_token_ids)].all()


@pytest.mark.parametrize(
    "text", ["Final Answer: 12 °C and rainy", "Thought: I know it.\nFinal Answer: Berlin"]
)
def test_react_format_also_accepts_a_final_answer(lm, text):
    constraint = Constraint(PRESETS["ReAct format"], lm)
    step_through(constraint, lm.encode(text))
    assert constraint.is_accepting()


def test_tool_call_grammar_refuses_an_unknown_tool_and_an_invented_argument(lm):
    for bad in ('{"name": "send_email"', '{"name": "get_weather", "arguments": {"town'):
        with pytest.raises(ConstraintViolation):
            constraint_for(TOOL_CALL, lm, lm.encode(bad))


def test_choice_options_are_taken_verbatim_leading_space_included(lm):
    constraint = Constraint(Grammar("choice", " Paris\n Berlin"), lm)
    (space_paris,) = lm.encode(" Paris")
    (paris,) = lm.encode("Paris")
    assert constraint.allows(space_paris) and not constraint.allows(paris)


def test_date_mask_at_the_start_is_exactly_the_ascii_digit_tokens(lm):
    """An oracle for the unpacking: which ids are the digits is known without llguidance."""
    mask = Constraint(PRESETS["Date (YYYY-MM-DD)"], lm).allowed_mask()
    digits = {i for i in range(lm.vocab_size) if lm.decode([i]) in set("0123456789")}
    assert set(np.flatnonzero(mask).tolist()) == digits and len(digits) == 10


def test_unpack_bitmask_agrees_with_llguidance_numpy_kernel():
    rng = np.random.default_rng(0)
    vocab_size = 1000
    bitmask = rng.integers(-(2**31), 2**31, size=(1, (vocab_size + 31) // 32), dtype=np.int64)
    bitmask = bitmask.astype(np.int32)
    logits = np.zeros((1, vocab_size), dtype=np.float32)
    llguidance.numpy.apply_token_bitmask_inplace(logits, bitmask)
    assert np.array_equal(unpack_bitmask(bitmask, vocab_size), np.isfinite(logits[0]))


def test_every_allowed_token_is_one_llguidance_would_commit(lm):
    inside_a_string = '{"name": "get_weather", "arguments": {"city": "'
    constraint = constraint_for(TOOL_CALL, lm, lm.encode(inside_a_string))
    allowed = np.flatnonzero(constraint.allowed_mask())
    matcher = llguidance.LLMatcher(tokenizer_info(lm), compile_grammar(TOOL_CALL), log_level=0)
    matcher.consume_tokens(list(constraint.consumed()))
    sample = np.random.default_rng(1).choice(allowed, size=200, replace=False)
    assert all(matcher.validate_tokens([int(t)]) == 1 for t in sample)


def test_forced_text_is_what_every_continuation_starts_with(lm):
    assert Constraint(TOOL_CALL, lm).state().forced_text == '{"name": "'
    state = constraint_for(PRESETS["yes / no / maybe"], lm, lm.encode("may")).state()
    assert state.forced_text == "be" and not state.accepting and state.n_allowed >= 1


# --- refusing, rolling back, ending ----------------------------------------------------------


def test_forbidden_token_is_refused_and_leaves_the_matcher_unchanged(lm):
    ids = lm.encode(PRESET_EXAMPLES["JSON tool call"])
    constraint = constraint_for(TOOL_CALL, lm, ids[:5])
    before = constraint.allowed_mask().copy()
    (hello,) = lm.encode("Hello")
    with pytest.raises(ConstraintViolation) as refused:
        constraint.consume(hello)
    assert refused.value.token_id == hello and refused.value.step == 5
    assert np.array_equal(constraint.allowed_mask(), before)
    assert constraint.consumed() == tuple(ids[:5]) and constraint.state().error == ""
    step_through(constraint, ids[5:])  # the matcher still works
    assert constraint.is_stopped()


def test_token_id_outside_the_vocabulary_is_refused(lm):
    constraint = Constraint(TOOL_CALL, lm)
    for bad in (-1, lm.vocab_size):
        assert not constraint.allows(bad)
        with pytest.raises(ConstraintViolation):
            constraint.consume(bad)


def test_rollback_restores_the_identical_mask(lm):
    ids = lm.encode(PRESET_EXAMPLES["ReAct format"])
    constraint = Constraint(PRESETS["ReAct format"], lm)
    masks = step_through(constraint, ids)
    constraint.rollback(3)
    assert np.array_equal(constraint.allowed_mask(), masks[-3])
    assert constraint.consumed() == tuple(ids[:-3])
    constraint.rollback(len(ids) - 3)
    assert np.array_equal(constraint.allowed_mask(), masks[0]) and constraint.consumed() == ()
    step_through(constraint, ids)
    assert constraint.is_stopped()


def test_rollback_beyond_the_start_is_refused_without_change(lm):
    ids = lm.encode("yes")
    constraint = constraint_for(PRESETS["yes / no / maybe"], lm, ids)
    with pytest.raises(ValueError, match="cannot roll back 2"):
        constraint.rollback(2)
    assert constraint.consumed() == tuple(ids) and constraint.state().error == ""
    constraint.rollback(0)
    assert constraint.consumed() == tuple(ids)


@pytest.mark.parametrize("name", ["JSON tool call", "E-mail address"])
def test_end_of_sequence_ends_the_constraint_and_rolls_back_alone(lm, name):
    """llguidance counts an EOS in a stopped matcher as no token; Back must still undo only it."""
    constraint = constraint_for(PRESETS[name], lm, lm.encode(PRESET_EXAMPLES[name]))
    before = constraint.allowed_mask().copy()
    (eos,) = constraint.eos_token_ids
    assert eos in lm.eos_token_ids
    constraint.consume(eos)
    assert constraint.is_stopped() and constraint.state().ended
    assert eos_only(constraint.allowed_mask(), lm)
    assert constraint.state().text == PRESET_EXAMPLES[name]
    constraint.rollback(1)
    assert np.array_equal(constraint.allowed_mask(), before) and not constraint.state().ended


def test_constraint_for_equals_stepping_one_token_at_a_time(lm):
    ids = lm.encode(PRESET_EXAMPLES["Person (JSON Schema)"])[:9]
    stepped = Constraint(PRESETS["Person (JSON Schema)"], lm)
    step_through(stepped, ids)
    fresh = constraint_for(PRESETS["Person (JSON Schema)"], lm, ids)
    assert fresh.consumed() == tuple(ids)
    assert np.array_equal(fresh.allowed_mask(), stepped.allowed_mask())


def test_constraint_for_names_the_first_refused_token(lm):
    prefix = lm.encode('{"name": "')
    (oops,) = lm.encode(" why")
    with pytest.raises(ConstraintViolation) as refused:
        constraint_for(TOOL_CALL, lm, prefix + [oops, oops])
    assert refused.value.step == len(prefix) and refused.value.token_id == oops
    assert str(oops) in str(refused.value) and lm.token_strings[oops] in str(refused.value)


def test_accepts_any_tokenization_that_the_mask_refuses(lm):
    """The mask admits only the tokenizer's own split of forced text; the parser any split."""
    text = PRESET_EXAMPLES["JSON tool call"]
    one_per_char = [lm.encode(ch)[0] for ch in text]
    assert lm.decode(one_per_char) == text
    with pytest.raises(ConstraintViolation):
        constraint_for(TOOL_CALL, lm, one_per_char)
    assert accepts(TOOL_CALL, lm, one_per_char)
    assert accepts(TOOL_CALL, lm, lm.encode(text) + [min(lm.eos_token_ids)])
    assert not accepts(TOOL_CALL, lm, one_per_char[:-1])  # incomplete
    assert not accepts(TOOL_CALL, lm, lm.encode(text.replace("get_weather", "send_email")))


def test_constraints_built_in_parallel_threads_agree(lm):
    ids = lm.encode(PRESET_EXAMPLES["JSON tool call"])[:7]
    expected = constraint_for(TOOL_CALL, lm, ids).allowed_mask()

    def build(_):
        return constraint_for(TOOL_CALL, lm, ids).allowed_mask()

    with ThreadPoolExecutor(4) as pool:
        masks = list(pool.map(build, range(8)))
    assert all(np.array_equal(m, expected) for m in masks)
    assert tokenizer_info(lm) is tokenizer_info(lm)


# --- the lecture's P' ------------------------------------------------------------------------


def test_masked_probs_golden_numbers():
    p = masked_probs(np.array([0.5, 0.3, 0.2]), np.array([True, False, True]))
    assert np.allclose(p, [0.5 / 0.7, 0.0, 0.2 / 0.7])


def test_masked_probs_follow_the_formula_on_real_logits(lm):
    probs = softmax(lm.next_token_logits(lm.encode("The capital of France is")))
    mask = Constraint(Grammar("choice", " Paris\n Berlin\n Rome"), lm).allowed_mask()
    constrained = masked_probs(probs, mask)
    assert np.isclose(constrained.sum(), 1.0)
    assert (constrained[~mask] == 0).all() and (constrained[mask] > 0).all()
    assert np.allclose(constrained[mask], probs[mask] / probs[mask].sum())
    assert np.allclose(softmax(masked_logits(np.log(probs), mask)), constrained)


def test_empty_allowed_set_is_unsatisfiable():
    with pytest.raises(ValueError, match="unsatisfiable"):
        masked_probs(np.array([0.5, 0.5]), np.array([False, False]))
    with pytest.raises(ValueError, match="unsatisfiable"):
        masked_logits(np.array([1.0, 2.0]), np.array([False, False]))
    with pytest.raises(ValueError, match="shape"):
        masked_probs(np.array([0.5, 0.5]), np.array([True]))


# --- invalid grammars ------------------------------------------------------------------------


def llguidance_message(kind: str, source: str) -> str:
    """The oracle: llguidance's own message for the same source (JSON with the same options)."""
    matcher = llguidance.LLMatcher
    try:
        if kind == "json_schema":
            text = matcher.grammar_from_json_schema(source, defaults=JSON_FORMAT)
        elif kind == "regex":
            text = matcher.grammar_from_regex(source)
        else:
            text = matcher.grammar_from_lark(source)
    except ValueError as exc:  # a JSON syntax error is reported while reading the schema
        return str(exc).strip()
    return matcher.validate_grammar(text).strip()


@pytest.mark.parametrize(
    ("kind", "source", "fragment"),
    [
        ("regex", "[0-9", "unclosed character class"),
        ("json_schema", '{"type": "object", "properties": {name: 1}}', "key must be a string"),
        ("json_schema", '{"type": "strnig"}', "strnig"),
        ("lark", 'start: "a" (', "Expected token"),
        ("lark", "start: undefined_rule", "unknown name"),
    ],
)
def test_invalid_grammar_raises_grammar_error_with_llguidance_message(lm, kind, source, fragment):
    grammar = Grammar(kind, source)
    expected = llguidance_message(kind, source)
    assert fragment in expected
    with pytest.raises(GrammarError) as compiled:
        compile_grammar(grammar)
    assert expected in str(compiled.value) and str(compiled.value).startswith(f"{kind} grammar")
    with pytest.raises(GrammarError) as built:
        Constraint(grammar, lm)
    assert expected in str(built.value)


def test_bad_json_names_the_position_of_the_syntax_error():
    with pytest.raises(GrammarError, match="json_schema grammar: .* line 1 column 2"):
        compile_grammar(Grammar("json_schema", "{bad json"))


def test_empty_choice_and_unknown_kind_are_grammar_errors():
    with pytest.raises(GrammarError, match="no options"):
        compile_grammar(Grammar("choice", "\n\n"))
    with pytest.raises(GrammarError, match="unknown grammar kind"):
        compile_grammar(Grammar("gbnf", "root ::= x"))


# --- the real model under the grammar --------------------------------------------------------


def test_greedy_decoding_under_tool_call_grammar_yields_a_valid_call(lm):
    """The system message advertises the tool schemas (the lecture's c_0); without it this
    135M model picks `calculator` and loops on emoji inside the string, never closing it."""
    schemas = json.dumps([tool["function"] for tool in PRESET_TOOLS])
    question = "What's the weather in Berlin? Answer only with a JSON tool call."
    messages = [
        {"role": "system", "content": f"Tools: {schemas}"},
        {"role": "user", "content": question},
    ]
    prompt = lm.encode(lm.apply_chat_template(messages))
    constraint, output = Constraint(TOOL_CALL, lm), []
    for _ in range(60):
        logits = masked_logits(lm.next_token_logits(prompt + output), constraint.allowed_mask())
        token_id = int(np.argmax(logits))
        constraint.consume(token_id)
        if token_id in lm.eos_token_ids:
            break
        output.append(token_id)
    call = json.loads(lm.decode(output))
    jsonschema.validate(call, tool_call_schema(PRESET_TOOLS))
    assert constraint.state().ended
