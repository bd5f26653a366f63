"""Child supervision through the running proxy: restart after a crash, backoff, /health."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitRequestParams, ElicitResult, ErrorData, TextContent

from mcpfleet.backoff import Backoff
from tests.conformance import harness
from tests.proxy.conftest import running_proxy
from tests.waiting import wait_until


async def test_session_survives_child_restart() -> None:
    in_child = asyncio.Event()

    async def elicitation(
        context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        # The tool call is now certainly running in the child: kill it from under the request.
        in_child.set()
        await asyncio.sleep(30)
        return ErrorData(code=-1, message="unreachable")

    async with running_proxy(harness.fixture_stdio_command()) as proxy:
        async with Client(proxy.url, mode="legacy", elicitation_callback=elicitation) as client:
            await client.call_tool("test_simple_text", {})
            pid = (await proxy.child())["pid"]

            # A request in flight when the child dies fails with an error naming the cause ...
            async def kill_when_in_child() -> None:
                await asyncio.wait_for(in_child.wait(), 30)
                os.kill(pid, signal.SIGKILL)

            killer = asyncio.create_task(kill_when_in_child())
            with pytest.raises(MCPError, match="exited"):
                await client.call_tool("test_elicitation", {"message": "name?"})
            await killer

            async def back() -> bool:
                child = await proxy.child()
                return bool(child["running"] and child["restarts"] >= 1 and child["pid"] != pid)

            await wait_until(back, "the child restarted with a new pid")
            child = await proxy.child()
            assert child["lastExitCode"] == -signal.SIGKILL
            # ... and the same MCP session goes on with the new process, which the proxy
            # initialised with the session's parameters before letting requests through.
            result = await client.call_tool("test_simple_text", {})
            text = result.content[0]
            assert isinstance(text, TextContent) and text.text.startswith("This is a simple text")


async def test_crashing_child_backs_off_and_health_reports_it() -> None:
    crash = [sys.executable, "-c", "import sys; sys.stderr.write('boom: no config\\n'); sys.exit(3)"]
    async with running_proxy(crash) as proxy:
        snapshot: dict[str, Any] = {}

        async def down_twice() -> bool:
            status, body = await proxy.health()
            if status == 503 and body["children"]["handshake"]["restarts"] >= 2:
                snapshot.update(body)
                return True
            return False

        await wait_until(down_twice, "/health 503 after two restarts")
        child = snapshot["children"]["handshake"]
        assert snapshot["status"] == "unavailable"
        assert child["lastExitCode"] == 3
        assert "boom: no config" in child["stderrTail"]

        # Backoff doubles: after >= 2 quick crashes the next delay is at least 1s.
        async def backing_off() -> bool:
            return bool(((await proxy.child())["nextRestartIn"] or 0) > 0.9)

        await wait_until(backing_off, "a restart delay over 0.9 s")


def test_backoff_policy() -> None:
    policy = Backoff(initial=0.5, factor=2, maximum=4)
    assert [policy.delay(n) for n in range(6)] == [0, 0.5, 1, 2, 4, 4]


async def test_stopping_the_proxy_stops_the_servers_own_children() -> None:
    """Launchers (uvx, npx, shell wrappers) run the server as their child: the whole group goes."""
    marker = f"{3000 + os.getpid() % 1000}.5"  # a sleep duration unique to this test run
    fixture = " ".join(harness.fixture_stdio_command())
    command = ["sh", "-c", f"sleep {marker} & exec {fixture}"]

    def sleepers() -> list[str]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        if f.read().split(b"\0")[:2] == [b"sleep", marker.encode()]:
                            found.append(entry)
                except OSError:
                    continue
        return found

    async with running_proxy(command) as proxy:
        async with Client(proxy.url, mode="legacy") as client:
            assert not (await client.call_tool("test_simple_text", {})).is_error
        assert sleepers(), "the wrapper's background child should be running"
    for _ in range(50):
        if not sleepers():
            break
        await asyncio.sleep(0.1)
    assert sleepers() == []
