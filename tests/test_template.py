"""Rendering through the model's own chat template (the real SmolLM2 tokenizer), and reading replies."""

import copy
import json

import pytest

from agent.messages import AssistantMessage, SystemMessage, ToolCall, ToolResultMessage, UserMessage
from agent.parsing import parse_reply, split_thought
from agent.recording import load_run, shipped_runs, tools_of
from agent.template import (
    CATEGORIES,
    Fmt,
    Prompt,
    call_text,
    render,
    render_chatml,
    render_prompt,
    stop_sequences,
    supports_tools,
    wire_messages,
)
from agent.tools import LOOKUP_TOOL, SEARCH_TOOL, TOOLS, WEATHER_TOOL
from agent.validation import CHECK_JSON, validate_call

BERLIN = ToolCall("call_1", "get_weather", '{"city": "Berlin"}')
TRACE = (SystemMessage("S"), UserMessage("What's the weather in Berlin?"), AssistantMessage(tool_calls=(BERLIN,)),
         ToolResultMessage("call_1", "12°C, rainy"))
WEATHER_JSON = json.dumps(WEATHER_TOOL.schema(), ensure_ascii=False)


def test_smollm2_template_has_no_tool_support(tok):
    assert not supports_tools(tok)


def test_native_format_renders_tools_the_hermes_way_through_the_models_template(tok):
    assert render_prompt(tok, Prompt(TRACE, (WEATHER_TOOL,), Fmt.NATIVE)) == (
        "<|im_start|>system\nS\n\n"
        'To call a tool, write <tool_call>{"name": <tool-name>, "arguments": <args-json-object>}</tool_call>. '
        f"The tools:\n<tools>\n{WEATHER_JSON}\n</tools><|im_end|>\n"
        "<|im_start|>user\nWhat's the weather in Berlin?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>{"name": "get_weather", "arguments": {"city": "Berlin"}}'
        "</tool_call><|im_end|>\n"
        "<|im_start|>tool\n12°C, rainy<|im_end|>\n"
        "<|im_start|>assistant\n")


def test_smollm2_rendering_is_the_lectures_chatml(tok):
    prompt = Prompt(TRACE, (WEATHER_TOOL,), Fmt.NATIVE)
    assert render_prompt(tok, prompt) == render_prompt(None, prompt)


def test_react_format_renders_thought_action_and_observation(tok):
    history = (SystemMessage("S"), UserMessage("Q"),
               AssistantMessage(thought="Find the author.",
                                tool_calls=(ToolCall("call_1", "search", '{"query": "Invisible Cities"}'),)),
               ToolResultMessage("call_1", "Invisible Cities is a novel by Italo Calvino."))
    text = render_prompt(tok, Prompt(history, (SEARCH_TOOL, LOOKUP_TOOL), Fmt.REACT_TEXT))
    assert "\n\nTools:\n- search[query]: Search the encyclopedia" in text
    assert '- lookup[term]: Return the sentences that contain a term, in the named article or in all ' \
           'articles. (or lookup[{"term": …, "article": …}])' in text
    assert "<|im_start|>assistant\nThought: Find the author.\nAction: search[Invisible Cities]<|im_end|>" in text
    assert "<|im_start|>user\nObservation: Invisible Cities is a novel by Italo Calvino.<|im_end|>" in text


def test_stop_sequences_are_turn_boundaries_of_the_react_format():
    assert stop_sequences("react") == ("\nObservation:",) and stop_sequences("native") == ()


def test_spans_tile_the_rendered_string_and_label_each_piece(tok):
    for path in shipped_runs().values():
        run = load_run(path)
        for fmt in Fmt:
            rendered = render(Prompt(run.history, tools_of(run), fmt), tok)
            assert rendered.spans[0].start == 0 and rendered.spans[-1].end == len(rendered.text)
            assert all(a.end == b.start for a, b in zip(rendered.spans, rendered.spans[1:], strict=False))
            assert {s.category for s in rendered.spans} <= set(CATEGORIES)
    rendered = render(Prompt(TRACE, (WEATHER_TOOL,)), tok)
    labelled = [(s.category, s.message, rendered.text[s.start:s.end]) for s in rendered.spans
                if s.category != "template"]
    assert labelled[0] == ("system", 0, "S")
    assert labelled[1][:2] == ("tools", 0) and WEATHER_JSON in labelled[1][2]
    assert labelled[2:] == [("user", 1, "What's the weather in Berlin?"),
                            ("tool_call", 2, call_text(BERLIN, "native", TOOLS)),
                            ("tool_result", 3, "12°C, rainy")]
    template = [rendered.text[s.start:s.end] for s in rendered.spans if s.category == "template"]
    assert template[-1] == "<|im_start|>assistant\n"  # the generation prompt, message len(history)
    assert rendered.spans[-1].message == len(TRACE)


HERMES_TEMPLATE = """{%- if tools %}<|im_start|>system
{{ messages[0]['content'] }}

# Tools
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools><|im_end|>
{% else %}<|im_start|>system
{{ messages[0]['content'] }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'assistant' and not message.tool_calls) -%}
<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{%- if message.content %}
{{ message.content }}{% endif %}
{%- for tool_call in message.tool_calls %}
<tool_call>
{"name": "{{ tool_call.function.name }}", "arguments": {{ tool_call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def test_a_template_with_tool_support_gets_tools_and_structured_calls(tok):
    qwen_like = copy.deepcopy(tok)
    qwen_like.chat_template = HERMES_TEMPLATE
    assert supports_tools(qwen_like)
    rendered = render(Prompt(TRACE, (WEATHER_TOOL,), Fmt.NATIVE), qwen_like)
    assert "# Tools\n<tools>" + WEATHER_JSON in rendered.text and "To call a tool" not in rendered.text
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Berlin"}}\n</tool_call>' in rendered.text
    found = {s.category: rendered.text[s.start:s.end] for s in rendered.spans}
    assert found["tools"] == WEATHER_JSON
    assert found["tool_call"] == '{"name": "get_weather", "arguments": {"city": "Berlin"}}'
    assert found["tool_result"] == "12°C, rainy"


def test_render_without_tokenizer_is_chatml():
    assert render_chatml([{"role": "user", "content": "hi"}]) == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


# --- reading replies ---

def test_native_reply_with_thought_and_two_calls():
    parsed = parse_reply('Thought: Two cities.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Berlin"}}'
                         '</tool_call>\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
                         "native", next_id=4)
    assert parsed.thought == "Two cities." and parsed.text == "" and parsed.error == ""
    assert [(c.id, c.arguments) for c in parsed.tool_calls] == [("call_4", '{"city": "Berlin"}'),
                                                                 ("call_5", '{"city": "Paris"}')]


def test_native_text_only_reply_is_the_answer():
    assert parse_reply("It's 12°C and rainy in Berlin.<|im_end|>", "native").text == "It's 12°C and rainy in Berlin."
    assert split_thought("Thought: done.\n\nIt is 138 km/h.") == ("done.", "It is 138 km/h.")


def test_native_unclosed_block_at_the_end_still_parses():
    parsed = parse_reply('<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}', "native")
    assert parsed.tool_calls[0].arguments == '{"expression": "1+1"}'


def test_broken_json_with_a_readable_name_goes_to_validation_check_1():
    parsed = parse_reply('<tool_call>{"name": "get_weather", "arguments": {"city": "Berl}</tool_call>', "native")
    assert parsed.error == "" and parsed.tool_calls[0].arguments == '{"city": "Berl'
    assert validate_call(parsed.tool_calls[0], TOOLS).check == CHECK_JSON


@pytest.mark.parametrize("reply, error", [
    ("<tool_call>{oops</tool_call>", "the <tool_call> is not valid JSON"),
    ('<tool_call>["get_weather"]</tool_call>', 'a <tool_call> needs {"name"'),
    ("   ", "the reply is empty"),
    ("Thought: I should check the weather.", "a thought but no tool call and no answer"),
])
def test_unusable_native_replies_report_an_error(reply, error):
    assert parse_reply(reply, "native").error.startswith(error)


def test_react_reply_fills_the_one_required_parameter():
    parsed = parse_reply("Thought: I need the author.\nAction: search[Invisible Cities]\nObservation: made up",
                         "react", TOOLS, 3)
    assert parsed.thought == "I need the author."
    assert parsed.tool_calls == (ToolCall("call_3", "search", '{"query": "Invisible Cities"}'),)


@pytest.mark.parametrize("action, arguments", [
    ('lookup[{"term": "born", "article": "Italo Calvino"}]', '{"term": "born", "article": "Italo Calvino"}'),
    ("calculator[345 / 2.5]", '{"expression": "345 / 2.5"}'),
    ('finish["Cuba"]', '{"answer": "Cuba"}'),
    ("unknown_tool[x]", '"x"'),
    ('Action: {"name": "finish", "arguments": {"answer": "Cuba"}}', '{"answer": "Cuba"}'),
])
def test_react_action_arguments(action, arguments):
    reply = action if action.startswith("Action:") else f"Action: {action}"
    assert parse_reply(reply, "react", TOOLS).tool_calls[0].arguments == arguments


@pytest.mark.parametrize("reply, error", [
    ("Thought: I will search.", "no 'Action:' line"),
    ("Action: search Invisible Cities", "cannot read the action 'search Invisible Cities'"),
])
def test_unusable_react_replies_report_an_error(reply, error):
    assert parse_reply(reply, "react", TOOLS).error.startswith(error)


def test_react_final_answer_line_is_a_text_answer():
    assert parse_reply("Thought: known.\nFinal Answer: Cuba", "react").text == "Cuba"


@pytest.mark.parametrize("fmt", list(Fmt))
def test_parsing_what_render_wrote_gives_back_the_message(fmt):
    for path in shipped_runs().values():
        run = load_run(path)
        calls = [m for m in run.history if isinstance(m, AssistantMessage) and m.tool_calls]
        for m in calls:
            written = "\n".join(filter(None, [f"Thought: {m.thought}" if m.thought else "",
                                              *(call_text(c, fmt, TOOLS) for c in m.tool_calls)]))
            first = int(m.tool_calls[0].id.split("_")[1])
            parsed = parse_reply(written, fmt, TOOLS, first)
            expected = m.tool_calls if fmt == Fmt.NATIVE else m.tool_calls[:1]  # ReAct: one action a turn
            assert (parsed.thought, parsed.tool_calls) == (m.thought, expected)


def test_wire_messages_native_keep_structured_calls_and_send_tools():
    messages, tools = wire_messages(Prompt(TRACE, (WEATHER_TOOL,), Fmt.NATIVE))
    assert tools == [WEATHER_TOOL.schema()]
    assert messages[2] == {"role": "assistant", "content": "", "tool_calls": [BERLIN.to_dict()]}  # never null
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "12°C, rainy"}


def test_wire_messages_react_are_text_only():
    messages, tools = wire_messages(Prompt(TRACE, (WEATHER_TOOL,), Fmt.REACT_TEXT))
    assert tools == [] and all(set(m) == {"role", "content"} for m in messages)
    assert messages[3] == {"role": "user", "content": "Observation: 12°C, rainy"}
