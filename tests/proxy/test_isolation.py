"""`--isolation session`: one server process per handshake-era session, stopped with the session."""

from __future__ import annotations

import asyncio

import pytest
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ErrorData,
    TextContent,
)

from tests.conformance import harness
from tests.proxy.conftest import running_proxy


async def _sampling(
    context: ClientRequestContext, params: CreateMessageRequestParams
) -> CreateMessageResult | CreateMessageResultWithTools | ErrorData:
    return CreateMessageResult(role="assistant", content=TextContent(type="text", text="ok"), model="m")


async def test_each_session_has_its_own_server_process() -> None:
    async with running_proxy(harness.fixture_stdio_command(), isolation="session") as proxy:
        status, body = await proxy.health()
        assert status == 200 and body["children"] == {}  # nothing runs before a session opens
        async with (
            Client(proxy.url, mode="legacy") as plain,
            Client(proxy.url, mode="legacy", sampling_callback=_sampling) as sampler,
        ):
            # Each server saw only its own client's capabilities (with a shared process the latest
            # initialize would win and the plain client would pass this check by accident).
            with pytest.raises(MCPError, match="sampling"):
                await plain.call_tool("test_missing_capability", {})
            ok = await sampler.call_tool("test_missing_capability", {})
            assert not ok.is_error
            _, body = await proxy.health()
            pids = {child["pid"] for child in body["children"].values()}
            assert len(pids) == 2 and all(child["running"] for child in body["children"].values())

        async def all_stopped() -> bool:
            return (await proxy.health())[1]["children"] == {}

        for _ in range(100):
            if await all_stopped():
                break
            await asyncio.sleep(0.1)
        assert await all_stopped()
        # The 2026-07-28 era has no sessions: it keeps one shared process.
        async with Client(proxy.url, mode="2026-07-28") as modern:
            assert not (await modern.call_tool("test_simple_text", {})).is_error


async def test_requests_that_cannot_open_a_session_start_no_process() -> None:
    import aiohttp

    async with running_proxy(harness.fixture_stdio_command(), isolation="session") as proxy:
        async with aiohttp.ClientSession() as http:
            headers = {"Accept": "application/json, text/event-stream"}
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            async with http.post(proxy.url, json=ping, headers=headers) as resp:
                assert resp.status == 400
        assert (await proxy.health())[1]["children"] == {}
