"""MCP benchmarks: what routing the lab's tools through the stdio MCP server costs.

    .venv/bin/python bench/bench_mcp.py                # 5 starts, 200 calls, ~30 s
    .venv/bin/python bench/bench_mcp.py --starts 10 --calls 500

Start: from McpClient(LAB_SERVER).tools() being called (process spawn, initialize, tools/list)
until the Tool objects are back; then close() (stdin closed, process reaped). Call: one
tools/call round trip of get_weather("Berlin") through the client's event-loop thread, against
the same function called in-process. Figures only: nothing here asserts on a timing.

What it does not know: the model (a tool call's cost beside a model call: bench_agent.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import header, median, ms, p95, print_table  # noqa: E402

from agent.mcp.client import LAB_SERVER, McpClient  # noqa: E402
from agent.tools import get_weather  # noqa: E402


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    header("MCP: server start and tools/call round trip")
    starts, closes = [], []
    for _ in range(args.starts):
        client = McpClient(LAB_SERVER)
        starts.append(timed(client.tools))
        closes.append(timed(client.close))
    client = McpClient(LAB_SERVER)
    weather = client.tools()[0]
    calls = [timed(lambda: weather.function(city="Berlin")) for _ in range(args.calls)]
    client.close()
    local = [timed(lambda: get_weather("Berlin")) for _ in range(args.calls)]
    rows = [("start + initialize + tools/list", args.starts, ms(median(starts)), ms(p95(starts))),
            ("close (process gone)", args.starts, ms(median(closes)), ms(p95(closes))),
            ("tools/call get_weather", args.calls, ms(median(calls)), ms(p95(calls))),
            ("built-in get_weather (in-process)", args.calls, ms(median(local)), ms(p95(local)))]
    print_table("Latency", ["what", "n", "median", "p95"], rows)


if __name__ == "__main__":
    main()
