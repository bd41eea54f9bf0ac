"""The two choices a run is made of: the mode (what the model is asked to do) and the output
format (how it writes a tool call). They are independent: ReAct mode can write native tool calls,
and Act mode can write the ReAct paper's text format.

The strings are what recorded runs (assets/runs/*.json) store; the Python names keep mode and
format apart (Mode.REACT is the mode, Fmt.REACT_TEXT the text format; both serialize as "react").

>>> Mode("react"), Fmt("react")
(<Mode.REACT: 'react'>, <Fmt.REACT_TEXT: 'react'>)

What it does not know: prompts, rendering or parsing (agent.template, agent.parsing).
"""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    REACT = "react"  # a thought before each action
    ACT = "act"  # actions without thoughts: the lecture's Act baseline
    COT = "cot"  # no tools advertised: open loop, parametric memory only


class Fmt(StrEnum):
    NATIVE = "native"  # <tool_call>{json}</tool_call>
    REACT_TEXT = "react"  # Thought: / Action: tool[args] / Observation: (the ReAct paper's text)
