"""The demo tools: each a plain Python function plus the JSON Schema the model is shown.

What it knows: five tools — get_weather (an offline table of invented demo weather), calculator
(arithmetic through an `ast` walker, never eval, with size limits), search and lookup (over the
small offline encyclopedia in assets/encyclopedia.json), and finish (the ReAct paper's explicit
exit) — each as a frozen Tool(name, description, parameters, function). A tool that cannot do its
job raises ToolError; the loop turns that into "ERROR: " + message (lecture, line 7).

What it does not know: validation of the arguments (agent.validation), policy (what is permitted),
the loop, or any model. Every function is pure: same arguments, same result. `lookup` therefore
keeps no "current article": it takes the article as an optional argument, or searches them all.

>>> calculator("345 / 2.5")
'138'
>>> get_weather("Berlin")
'12°C, rainy'
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ENCYCLOPEDIA_PATH = Path(__file__).resolve().parent.parent / "assets" / "encyclopedia.json"
SEARCH_SENTENCES = 3  # search shows an article's first sentences; lookup finds the rest
LOOKUP_RESULTS = 3
MAX_EXPRESSION_CHARS = 500  # the calculator's own hard limit (a policy may set a lower one)
MAX_DIGITS = 100  # every intermediate result of the calculator stays below 10**100


class ToolError(Exception):
    """A tool could not do its job; the message is what the model reads after "ERROR: "."""


@dataclass(frozen=True)
class Tool:
    """A tool: the developer-written name, description and JSON Schema, and the function behind it."""

    name: str
    description: str
    parameters: dict  # JSON Schema of the arguments object
    function: Callable[..., str] = field(compare=False, repr=False)

    def schema(self) -> dict:
        """The lecture's envelope: {"type": "function", "function": {name, description, parameters}}."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": self.parameters}}

    @property
    def single_parameter(self) -> str | None:
        """The one required argument, if there is exactly one (ReAct's `tool[argument]` fills it)."""
        required = self.parameters.get("required", [])
        return required[0] if len(required) == 1 else None


def _object_schema(properties: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def normalize(text: str) -> str:
    """Case-, accent- and punctuation-blind form for matching: 'Bogotá!' → 'bogota'."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return " ".join(re.findall(r"[a-z0-9]+", plain.casefold()))


# --- get_weather ---------------------------------------------------------------------------------

# Invented demo data, not a forecast. Berlin is the lecture's trace ("A Concrete Trace").
WEATHER = {
    "Berlin": "12°C, rainy", "Paris": "15°C, cloudy", "London": "11°C, drizzle",
    "Madrid": "24°C, sunny", "Rome": "21°C, sunny", "Vienna": "14°C, windy",
    "Prague": "10°C, overcast", "Stockholm": "6°C, snow showers", "Lisbon": "19°C, sunny",
    "Tokyo": "18°C, clear", "New York": "16°C, partly cloudy", "Sydney": "22°C, sunny",
    "Nairobi": "25°C, thunderstorms", "Bogotá": "14°C, light rain", "Ottawa": "5°C, cloudy",
}


def weather_in(table: dict[str, str], city: str) -> str:
    """The weather tool's work on one table of readings (city → "12°C, rainy")."""
    by_key = {normalize(c): report for c, report in table.items()}
    report = by_key.get(normalize(city.split(",")[0]))
    if report is None:
        raise ToolError(f"no weather data for {city!r}; this demo knows {', '.join(table)}")
    return report


def get_weather(city: str) -> str:
    """The current (demo) weather for a city: get_weather("Berlin") → "12°C, rainy"."""
    return weather_in(WEATHER, city)


# --- calculator ----------------------------------------------------------------------------------

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS = {"max": max, "min": min}  # which of two readings is warmer: a small model cannot compare
_REFUSED = {ast.Name: "names are not allowed", ast.Attribute: "attribute access is not allowed",
            ast.Call: "function calls other than max() and min() are not allowed",
            ast.Subscript: "subscripts are not allowed"}
ALLOWED = "only numbers, + - * / // % **, max(), min() and parentheses"


def calculator(expression: str) -> str:
    """Evaluate arithmetic without eval: calculator("2 * (3 + 4) ** 2") → "98", calculator("max(12, 21)")
    → "21"; any other name is refused."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"expression has {len(expression)} characters; the limit is {MAX_EXPRESSION_CHARS}")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise ToolError(f"not an arithmetic expression ({e.__class__.__name__}): {ALLOWED}") from None
    return _format(_evaluate(tree.body))


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _bounded(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _bounded(_UNARY[type(node.op)](_evaluate(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        try:
            return _bounded(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ToolError("division by zero") from None
        except OverflowError:
            raise ToolError(f"result too large (limit: {MAX_DIGITS} digits)") from None
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
            and len(node.args) >= 2 and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)):
        return _FUNCTIONS[node.func.id](_evaluate(a) for a in node.args)
    if type(node) in _REFUSED:
        raise ToolError(f"{_REFUSED[type(node)]}: {ALLOWED}")
    what = type(getattr(node, "op", node)).__name__
    raise ToolError(f"{what} is not allowed: {ALLOWED}")


def _check_power(base: int | float, exponent: int | float) -> None:
    """Refuse a power whose result would exceed MAX_DIGITS digits before computing it (9**9**9)."""
    if isinstance(base, complex) or isinstance(exponent, complex):
        raise ToolError("complex numbers are not allowed")
    if abs(base) > 1 and exponent > 0 and exponent * math.log10(abs(base)) > MAX_DIGITS:
        raise ToolError(f"power too large: the result would exceed {MAX_DIGITS} digits")


def _bounded(value: object) -> int | float:
    if isinstance(value, complex):
        raise ToolError("the result is a complex number; only real arithmetic is supported")
    if isinstance(value, int) and abs(value) >= 10**MAX_DIGITS:
        raise ToolError(f"result too large (limit: {MAX_DIGITS} digits)")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("the result is not a finite number")
    return value


def _format(value: int | float) -> str:
    """Integers exactly; floats to 12 significant digits, so 0.1 + 0.2 reads 0.3."""
    return str(value) if isinstance(value, int) else f"{value:.12g}"


# --- search and lookup ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Article:
    title: str
    text: str
    aliases: tuple[str, ...] = ()

    @property
    def sentences(self) -> tuple[str, ...]:
        return tuple(re.split(r"(?<=[.!?])\s+(?=[A-Z0-9(])", self.text.strip()))


@lru_cache(maxsize=4)
def load_encyclopedia(path: Path = ENCYCLOPEDIA_PATH) -> tuple[Article, ...]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return tuple(Article(a["title"], a["text"], tuple(a.get("aliases", ()))) for a in data["articles"])


def find_article(name: str, articles: tuple[Article, ...]) -> Article | None:
    """The article named exactly (title or alias), else the only title that contains or is contained
    in the name as whole words ('Calvino' → 'Italo Calvino'); None when that is not unique."""
    key = normalize(name)
    for a in articles:
        if key in {normalize(t) for t in (a.title, *a.aliases)}:
            return a
    padded = f" {key} "
    partial = [a for a in articles
               if key and (padded in f" {normalize(a.title)} " or f" {normalize(a.title)} " in padded)]
    return partial[0] if len(partial) == 1 else None


def _similar_titles(query: str, articles: tuple[Article, ...], n: int = 5) -> list[str]:
    words = set(normalize(query).split())
    scored = [(len(words & set(normalize(a.title + " " + a.text).split())), a.title) for a in articles]
    return [title for score, title in sorted(scored, key=lambda s: -s[0]) if score > 0][:n]


def search(query: str) -> str:
    """The first sentences of the article named by `query`, else similar titles (as the ReAct paper's
    Wikipedia API does): search("Italo Calvino") → "Italo Calvino (1923–1985) was an Italian …"."""
    return search_in(load_encyclopedia(), query)


def search_in(articles: tuple[Article, ...], query: str) -> str:
    """search over the given articles (the encyclopedia, or a training run's library world)."""
    article = find_article(query, articles)
    if article is None:
        return f"Could not find [{query}]. Similar: {_similar_titles(query, articles)}"
    return " ".join(article.sentences[:SEARCH_SENTENCES])


def lookup(term: str, article: str | None = None) -> str:
    """The sentences containing `term` — in `article` if given, else in every article, with titles.

    Pure by design: no hidden "last searched page"; the model names the article it means.
    """
    return lookup_in(load_encyclopedia(), term, article)


def lookup_in(articles: tuple[Article, ...], term: str, article: str | None = None) -> str:
    """lookup over the given articles (the encyclopedia, or a training run's library world)."""
    if article is not None:
        found = find_article(article, articles)
        if found is None:
            raise ToolError(f"no article named {article!r}; search for it first")
        articles = (found,)
    key = normalize(term)
    hits = [(s, a.title) for a in articles for s in a.sentences if key and key in normalize(s)]
    if not hits:
        return f"No sentence contains {term!r}."
    shown = hits[:LOOKUP_RESULTS]
    return "\n".join(f"(Result {i}/{len(hits)}) {s}" + ("" if article else f" [{title}]")
                     for i, (s, title) in enumerate(shown, 1))


def finish(answer: str) -> str:
    """The explicit exit of the ReAct paper: finish[answer] ends the run with `answer`."""
    return answer


_STRING = {"type": "string"}
WEATHER_TOOL = Tool("get_weather", "Get the current weather for a city.",
                    _object_schema({"city": _STRING}, ["city"]), get_weather)

CALCULATOR_TOOL = Tool(
    "calculator", 'Evaluate an arithmetic expression with + - * / // % **, max(), min() and parentheses, '
                  'e.g. "345 / 2.5".',
    _object_schema({"expression": _STRING}, ["expression"]), calculator)
SEARCH_TOOL = Tool(
    "search", "Search the encyclopedia for an article by its title; returns its first sentences, "
              "or similar titles if there is no such article.",
    _object_schema({"query": _STRING}, ["query"]), search)
LOOKUP_TOOL = Tool(
    "lookup", "Return the sentences that contain a term, in the named article or in all articles.",
    _object_schema({"term": _STRING, "article": _STRING}, ["term"]), lookup)
FINISH_TOOL = Tool("finish", "Give the final answer and end the run.",
                   _object_schema({"answer": _STRING}, ["answer"]), finish)
TOOLS: tuple[Tool, ...] = (WEATHER_TOOL, CALCULATOR_TOOL, SEARCH_TOOL, LOOKUP_TOOL, FINISH_TOOL)
FINISH = FINISH_TOOL.name


def weather_world(table: dict[str, str], tools: tuple[Tool, ...] = TOOLS) -> tuple[Tool, ...]:
    """`tools` with get_weather reading another table of demo readings: the same name, description
    and schema, so the prompt is the same string. Trajectory tuning draws one such table a training
    run (agent.tuning), so the model learns to read the reading instead of memorising the demo's."""
    return _replaced(tools, Tool(WEATHER_TOOL.name, WEATHER_TOOL.description, WEATHER_TOOL.parameters,
                                 lambda city: weather_in(table, city)))


def library_world(extra: tuple[Article, ...], tools: tuple[Tool, ...] = TOOLS) -> tuple[Tool, ...]:
    """`tools` with search and lookup reading the encyclopedia plus `extra` articles (a training
    run's invented book and author, agent.tuning): same names, descriptions and schemas, so the
    prompt is the same string; the model learns to read an article instead of memorising ten."""
    articles = load_encyclopedia() + tuple(extra)
    tools = _replaced(tools, Tool(SEARCH_TOOL.name, SEARCH_TOOL.description, SEARCH_TOOL.parameters,
                                  lambda query: search_in(articles, query)))
    return _replaced(tools, Tool(LOOKUP_TOOL.name, LOOKUP_TOOL.description, LOOKUP_TOOL.parameters,
                                 lambda term, article=None: lookup_in(articles, term, article)))


def _replaced(tools: tuple[Tool, ...], tool: Tool) -> tuple[Tool, ...]:
    return tuple(tool if t.name == tool.name else t for t in tools)


def tool_named(tools: tuple[Tool, ...], name: str) -> Tool | None:
    return next((t for t in tools if t.name == name), None)


# --- run_python: the code tool (lecture, "Specific Tools vs. a Code Tool") -----------------------

MAX_CODE_CHARS = 4000  # the longest code a run_python call may carry (the sandbox checks it again)
CODE_FUNCTIONS = (get_weather, calculator, search, lookup)  # the specific tools, as functions in the code
RUN_PYTHON_DESCRIPTION = (
    "Run Python code in a sandbox and return what it prints plus the value of its last expression. "
    "Inside the code these functions are available: get_weather(city), calculator(expression), "
    "search(query), lookup(term, article=None); imports only from math, statistics, itertools, "
    "collections, functools, random, re, json, datetime, string, fractions, decimal.")
PARSING_VS_POLICY = (
    "A specific tool's arguments are checked by its JSON Schema: get_weather takes one city name, "
    "and a policy can permit or refuse that city. The code tool's only argument is a string: the "
    "schema checks that it is a string of at most 4000 characters, and nothing more. What the "
    "code does can only be restrained by the sandbox it runs in.")


def run_python(code: str) -> str:
    """The code tool: run `code` in agent.sandbox (a separate, confined process), never here.

    What the code prints plus its last expression's value is the observation; a failure raises
    ToolError, which the loop turns into "ERROR: …". The server only counts the characters.
    """
    from agent import sandbox  # imported when first called: a run without the code tool never needs it

    if not sandbox.code_tool_enabled():
        raise ToolError(f"the code tool is switched off on this deployment ({sandbox.ENV_SWITCH}=off)")
    result = sandbox.run_code(code)
    if not result.ok:
        raise ToolError(result.error + (f"\nprinted before the error:\n{result.output}" if result.output else ""))
    return result.output or "(no output: print something, or end the code with an expression)"


RUN_PYTHON_TOOL = Tool("run_python", RUN_PYTHON_DESCRIPTION,
                       _object_schema({"code": {"type": "string", "maxLength": MAX_CODE_CHARS}}, ["code"]),
                       run_python)
CODE_TOOLS: tuple[Tool, ...] = (RUN_PYTHON_TOOL, FINISH_TOOL)  # the code tool's run: code, then finish
ALL_TOOLS: tuple[Tool, ...] = TOOLS + (RUN_PYTHON_TOOL,)  # every tool a recorded run may name
TOOL_SETS: dict[str, tuple[Tool, ...]] = {"specific tools": TOOLS, "code tool": CODE_TOOLS}


def tool_sets(code_tool: bool | None = None) -> dict[str, tuple[Tool, ...]]:
    """The tool sets a view may offer: without "code tool" where the deployment switched it off."""
    if code_tool is None:
        from agent.sandbox import code_tool_enabled

        code_tool = code_tool_enabled()
    return dict(TOOL_SETS) if code_tool else {"specific tools": TOOLS}
