"""Kept so that MCP clients configured with `python -m agent.mcp_server` keep working: the lab's
MCP server moved to agent.mcp.server (`python -m agent.mcp.server`)."""

from agent.mcp.server import build_server, serve_stdio

if __name__ == "__main__":
    serve_stdio(build_server())
