"""The lab's tools as a real MCP server over stdio (lecture, Part III, "Standardising Tools: MCP").

    python -m agent.mcp.server        # speaks JSON-RPC on stdin/stdout; point any MCP client at it

What it offers, built on the official SDK's low-level `Server` (mcp 1.x):
  - tools: get_weather, calculator, search, lookup — the very Tool objects of agent.tools, so the
    names, descriptions and JSON Schemas a client discovers are those the built-in tools advertise
    (byte for byte: the schema dicts are sent as they are, not regenerated from signatures);
  - resources: the encyclopedia's articles, one per title, and the template `encyclopedia://{title}`
    (the title percent-encoded, as in encyclopedia://Italo%20Calvino);
  - prompts: `weather_report(city)` → the user message "What's the weather in {city}?".
A tool that raises ToolError answers `isError: true` with the message as its text, so a client that
prefixes "ERROR: " shows what the built-in tool would have shown.

What it does not know: the loop, any model, the client. It never imports torch: it is a small
subprocess (agent.tools needs only the standard library and the encyclopedia file).

>>> [t.name for t in SERVED_TOOLS]
['get_weather', 'calculator', 'search', 'lookup']
>>> article_uri("Italo Calvino")
'encyclopedia://Italo%20Calvino'
>>> weather_report_text("Berlin")
"What's the weather in Berlin?"
"""

from __future__ import annotations

from urllib.parse import quote, unquote

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from agent.tools import CALCULATOR_TOOL, LOOKUP_TOOL, SEARCH_TOOL, WEATHER_TOOL, Tool, find_article, load_encyclopedia

SERVER_NAME = "react-lab"
SERVED_TOOLS: tuple[Tool, ...] = (WEATHER_TOOL, CALCULATOR_TOOL, SEARCH_TOOL, LOOKUP_TOOL)
URI_SCHEME = "encyclopedia://"
URI_TEMPLATE = URI_SCHEME + "{title}"
WEATHER_PROMPT = "weather_report"


def article_uri(title: str) -> str:
    return URI_SCHEME + quote(title, safe="")


def weather_report_text(city: str) -> str:
    """The task the weather_report prompt fills in (the lecture's trace for city="Berlin")."""
    return f"What's the weather in {city.strip()}?"


def read_article(uri: str) -> str:
    """The article behind encyclopedia://{title}; ValueError names what is wrong."""
    if not uri.startswith(URI_SCHEME):
        raise ValueError(f"not an encyclopedia URI: {uri[:100]!r} (expected {URI_TEMPLATE})")
    title = unquote(uri[len(URI_SCHEME):]).strip("/")
    article = find_article(title, load_encyclopedia())
    if article is None:
        raise ValueError(f"no article titled {title[:100]!r}")
    return f"{article.title}\n\n{article.text}"


def tool_listing(tools: tuple[Tool, ...]) -> list[types.Tool]:
    return [types.Tool(name=t.name, description=t.description, inputSchema=t.parameters) for t in tools]


def add_tools(server: Server, tools: tuple[Tool, ...]) -> None:
    """tools/list and tools/call over `tools`; an exception becomes isError with its message."""
    by_name = {t.name: t for t in tools}

    @server.list_tools()
    async def _list() -> list[types.Tool]:
        return tool_listing(tools)

    @server.call_tool()
    async def _call(name: str, arguments: dict) -> list[types.TextContent]:
        if name not in by_name:
            raise ValueError(f"unknown tool {name!r}")
        return [types.TextContent(type="text", text=str(by_name[name].function(**arguments)))]


def add_encyclopedia(server: Server) -> None:
    """resources/list, resources/templates/list and resources/read over assets/encyclopedia.json."""

    @server.list_resources()
    async def _resources() -> list[types.Resource]:
        return [types.Resource(uri=article_uri(a.title), name=a.title, mimeType="text/plain")
                for a in load_encyclopedia()]

    @server.list_resource_templates()
    async def _templates() -> list[types.ResourceTemplate]:
        return [types.ResourceTemplate(uriTemplate=URI_TEMPLATE, name="encyclopedia article",
                                       description="An article of the lab's offline encyclopedia, by title.",
                                       mimeType="text/plain")]

    @server.read_resource()
    async def _read(uri) -> str:
        return read_article(str(uri))


def add_weather_prompt(server: Server) -> None:
    @server.list_prompts()
    async def _prompts() -> list[types.Prompt]:
        city = types.PromptArgument(name="city", description="The city, e.g. Berlin", required=True)
        return [types.Prompt(name=WEATHER_PROMPT, description="A weather report for a city.", arguments=[city])]

    @server.get_prompt()
    async def _get(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        city = (arguments or {}).get("city", "")
        if name != WEATHER_PROMPT or not city.strip():
            raise ValueError(f"unknown prompt {name!r} or missing argument 'city'")
        text = types.TextContent(type="text", text=weather_report_text(city[:100]))
        return types.GetPromptResult(description=f"A weather report for {city[:100]}.",
                                     messages=[types.PromptMessage(role="user", content=text)])


def build_server() -> Server:
    server = Server(SERVER_NAME)
    add_tools(server, SERVED_TOOLS)
    add_encyclopedia(server)
    add_weather_prompt(server)
    return server


def serve_stdio(server: Server) -> None:
    """Run `server` on stdin/stdout until the client closes stdin."""

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


if __name__ == "__main__":
    serve_stdio(build_server())
