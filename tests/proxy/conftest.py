"""Fixtures for the proxy tests: the proxy app served in-process by uvicorn on a free port.

The proxy runs on the test's event loop (the CLI path is covered by the conformance tests and
test_cli_*), which keeps the suite fast on a loaded machine: only the MCP servers behind it are
separate processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import uvicorn

from mcpfleet.proxy.backend import ChildFactory
from mcpfleet.proxy.serve import bind, build_stdio_app
from mcpfleet.toolconfig import ToolPolicy
from tests.conformance import harness
from tests.inprocess_server import InProcessServer

VENV_BIN = Path(sys.executable).parent


async def wait_healthy(base: str, attempts: int = 300) -> None:
    """Wait (0.1 s steps) until a proxy started as a process answers /health with 200."""
    async with aiohttp.ClientSession() as http:
        for _ in range(attempts):
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(f"{base}/health") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)


@dataclass
class RunningProxy:
    base: str
    app: Any

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    async def health(self) -> tuple[int, dict[str, Any]]:
        async with aiohttp.ClientSession() as http, http.get(f"{self.base}/health") as resp:
            return resp.status, dict(await resp.json())

    async def child(self, era: str = "handshake") -> dict[str, Any]:
        return dict((await self.health())[1]["children"][era])


@contextlib.asynccontextmanager
async def serve_app(app: Any) -> AsyncIterator[str]:
    """Serve an ASGI app on 127.0.0.1:<free port> until the block ends; yields the base URL."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = InProcessServer(uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                raise RuntimeError(f"the proxy did not start: {task.exception()!r}")
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@contextlib.asynccontextmanager
async def running_proxy(
    command: Sequence[str] = (),
    *,
    transport: str = "streamable-http",
    factory: ChildFactory | None = None,
    isolation: str = "shared",
    tool_policy: ToolPolicy | None = None,
    modern_era: str = "auto",
) -> AsyncIterator[RunningProxy]:
    app = build_stdio_app(
        command,
        host="127.0.0.1",
        transport=transport,
        factory=factory,
        isolation=isolation,
        tool_policy=tool_policy,
        modern_era=modern_era,
    )
    async with serve_app(app) as base:
        yield RunningProxy(base, app)


def descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live descendant of `pid`, read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            # The command name may hold spaces and parentheses: fields follow the last ')'.
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found: list[tuple[int, str]] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent:
                frontier.append(child)
                with contextlib.suppress(OSError):
                    cmdline = (Path("/proc") / str(child) / "cmdline").read_bytes().replace(b"\0", b" ")
                    found.append((child, cmdline.decode(errors="replace").strip()))
    return found


@pytest.fixture(scope="module")
async def fixture_proxy() -> AsyncIterator[RunningProxy]:
    """The conformance fixture server behind the proxy (streamable HTTP + SSE)."""
    async with running_proxy(harness.fixture_stdio_command(), transport="sse") as proxy:
        yield proxy
