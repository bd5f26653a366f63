"""`--isolation session`: one server process per handshake-era session, stopped with the session."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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

from mcpfleet.proxy.backend import SessionServerLimit, StdioBackend, process_factory
from mcpfleet.proxy.http_app import ProxyApp
from mcpfleet.proxy.serve import build_stdio_app
from tests.conformance import harness
from tests.mcp_messages import initialize_request
from tests.proxy.conftest import running_proxy, serve_app


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


async def _initialize(http: Any, url: str) -> tuple[int, dict[str, str], Any]:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with http.post(url, json=initialize_request(), headers=headers) as resp:
        raw = await resp.read()
        body = orjson.loads(raw) if raw.startswith(b"{") else raw
        return resp.status, dict(resp.headers), body


async def test_session_servers_are_capped_and_idle_ones_reaped() -> None:
    """Issue 27 risk: any anonymous client could start up to 10,000 server processes. Now at most
    `max_session_servers` run at once (503 + a clear error beyond), and an idle session's process
    ends with the session (here after a 5 s idle timeout), making room again."""
    import aiohttp

    backend = StdioBackend(
        process_factory(harness.fixture_stdio_command()), per_session=True, max_session_servers=2
    )
    app = ProxyApp(backend, security=None, isolation="session", session_idle_timeout=5.0)
    async with serve_app(app) as base, aiohttp.ClientSession() as http:
        url = base + "/mcp"
        first = await asyncio.gather(*(_initialize(http, url) for _ in range(2)))
        assert [status for status, _, _ in first] == [200, 200], first
        status, headers, body = await _initialize(http, url)
        assert status == 503 and headers.get("Retry-After") == "5", body
        assert "too many session servers running (limit 2, --max-session-servers)" in body["error"]["message"]
        assert len(backend.health()[1]["children"]) == 2
        for _ in range(300):  # the idle sessions end, and their processes with them
            if not backend.health()[1]["children"]:
                break
            await asyncio.sleep(0.1)
        assert backend.health()[1]["children"] == {}
        assert (await _initialize(http, url))[0] == 200


def test_the_session_server_cap_must_be_positive() -> None:
    with pytest.raises(ValueError, match="--max-session-servers"):
        StdioBackend(process_factory(["x"]), per_session=True, max_session_servers=0)


async def test_legacy_sse_streams_count_against_the_cap() -> None:
    """Each `GET /sse` of the legacy transport starts a session server too: same cap, same refusal."""
    import aiohttp

    app = build_stdio_app(
        harness.fixture_stdio_command(),
        host="127.0.0.1",
        transport="sse",
        isolation="session",
        max_session_servers=1,
    )
    async with serve_app(app) as base, aiohttp.ClientSession() as http:
        async with http.get(base + "/sse", headers={"Accept": "text/event-stream"}) as first:
            assert first.status == 200
            await first.content.readline()  # the stream is open (its server is starting)
            async with http.get(base + "/sse", headers={"Accept": "text/event-stream"}) as second:
                assert second.status == 503
                assert (
                    "too many session servers running (limit 1" in (await second.json())["error"]["message"]
                )


class _FakeChild:
    """A child that starts and stops at once (the cap is about bookkeeping, not processes)."""

    running = True

    async def start(self) -> None:
        return None

    async def stop(self, grace: float = 3.0) -> None:
        self.running = False

    async def send(self, message: Any) -> None:
        return None

    def status(self) -> Any:
        raise NotImplementedError


@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 9)), max_size=40), cap=st.integers(1, 4))
@settings(max_examples=100, deadline=None, database=None)
def test_session_server_cap_property(ops: list[tuple[bool, int]], cap: int) -> None:
    """Any sequence of sessions opening (acquire) and ending (release): never more than `cap`
    servers, and a refusal exactly when `cap` run."""

    async def run() -> None:
        backend = StdioBackend(lambda *_: _FakeChild(), per_session=True, max_session_servers=cap)
        held: list[Any] = []
        for acquire, pick in ops:
            if acquire:
                try:
                    held.append(await backend.dedicated())
                    assert len(held) <= cap
                except SessionServerLimit:
                    assert len(held) == cap
            elif held:
                await backend.release(held.pop(pick % len(held)))
            assert len(backend._dedicated) == len(held)

    asyncio.run(run())
