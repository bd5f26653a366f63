"""Benchmark: `mcpfleet run NAME` to the first tool call through the fleet's gateway (issue 30).

A person's loop from a catalogue name to an answered tool call: a fresh user fleet
(`MCPFLEET_HOME` in a temporary folder, nothing running), `mcpfleet run time` (writes the manifest,
starts `up --detach`, waits until the server runs), then the MCP SDK client calls
`time_get_current_time` through the gateway URL `run` printed. The package is cached (uv's cache,
warmed by an unmeasured first run), as it is for a person's second server. Each round ends with
`mcpfleet down`.

Side by side in the same run, as the floor: the package alone — `uvx mcp-server-time@VERSION` over
stdio with the same SDK client, spawn to the first tool answer (what any client that starts the
server itself pays, with no fleet, gateway or proxy).

    .venv/bin/python -P bench/run_first_call.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

BIN = Path(sys.executable).parent
VERSION = "2026.10.19"


async def _call(target: str | StdioServerParameters, tool: str) -> None:
    async with Client(target, read_timeout_seconds=120) as client:
        result = await client.call_tool(tool, {"timezone": "UTC"})
        assert not result.is_error, result


def one_run(home: Path) -> float:
    env = {**os.environ, "MCPFLEET_HOME": str(home)}
    start = time.perf_counter()
    try:
        out = subprocess.run(
            [str(BIN / "mcpfleet"), "run", "time"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        ).stdout
        url = re.search(r"gateway \(every server of the fleet\): (\S+)", out)
        assert url, out
        asyncio.run(_call(url.group(1), "time_get_current_time"))
        return time.perf_counter() - start
    finally:
        subprocess.run(
            [str(BIN / "mcpfleet"), "down", "--state-dir", str(home / "state")],
            env=env,
            capture_output=True,
            timeout=120,
        )
        shutil.rmtree(home, ignore_errors=True)


def package_alone() -> float:
    params = StdioServerParameters(
        command=str(BIN / "uvx"), args=[f"mcp-server-time@{VERSION}"], env=dict(os.environ)
    )
    start = time.perf_counter()
    asyncio.run(_call(params, "get_current_time"))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    base = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-run-"))
    one_run(base / "warm")  # caches the package, compiles bytecode: not measured
    fleet: list[float] = []
    alone: list[float] = []
    for index in range(runs):  # alternated, so both see the same machine load
        fleet.append(one_run(base / f"run{index}"))
        alone.append(package_alone())
    load = os.getloadavg()[0]
    print(f"load average {load:.2f}; {runs} runs each, alternated")
    print(
        f"mcpfleet run time -> first call via gateway: median {statistics.median(fleet):.2f} s, min {min(fleet):.2f} s"
    )
    print(
        f"uvx mcp-server-time (stdio, no fleet) -> first call: median {statistics.median(alone):.2f} s, min {min(alone):.2f} s"
    )
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
