"""SSE stream behaviour: resuming with Last-Event-ID, and which stream a notification lands on."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tests.mcp_messages import initialize_request
from tests.proxy.conftest import RunningProxy

ACCEPT = "application/json, text/event-stream"


async def _events(resp: aiohttp.ClientResponse) -> Any:
    """Yield (event id, message) pairs of an SSE body as they arrive."""
    event_id, data = None, ""
    async for raw in resp.content:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif not line:
            if data:
                yield event_id, json.loads(data)
            event_id, data = None, ""


async def test_response_stream_resumes_after_disconnect(fixture_proxy: RunningProxy) -> None:
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as http:
        init = initialize_request()
        async with http.post(fixture_proxy.url, json=init, headers=headers) as resp:
            assert resp.status == 200
            headers["Mcp-Session-Id"] = resp.headers["Mcp-Session-Id"]
            await resp.read()
        headers["MCP-Protocol-Version"] = "2025-11-25"
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with http.post(fixture_proxy.url, json=note, headers=headers) as resp:
            assert resp.status == 202

        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "tok"}},
        }
        first: tuple[str, dict[str, Any]] | None = None
        async with http.post(fixture_proxy.url, json=call, headers=headers) as resp:
            async for event_id, message in _events(resp):
                if message.get("method") == "notifications/progress":
                    assert event_id is not None
                    first = (event_id, message)
                    break  # drop the connection after the first progress event
        assert first is not None and first[1]["params"]["progress"] == 0

        resume = {**headers, "Accept": "text/event-stream", "Last-Event-ID": first[0]}
        replayed: list[dict[str, Any]] = []
        async with http.get(fixture_proxy.url, headers=resume) as resp:
            assert resp.status == 200
            async for _, message in _events(resp):
                replayed.append(message)
                if message.get("id") == 2:
                    break
        progress = [m["params"]["progress"] for m in replayed if m.get("method") == "notifications/progress"]
        assert progress == [50, 100]
        assert replayed[-1]["result"]["content"][0]["text"] == "tok"


async def test_event_store_is_bounded_and_replays_one_stream() -> None:
    from mcp.server.streamable_http import EventMessage
    from mcp.types import JSONRPCNotification

    from mcpfleet.proxy.events import BoundedEventStore

    store = BoundedEventStore(max_events=3)
    assert store  # the SDK transport tests the store for truth
    note = JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"n": 1})
    ids = [await store.store_event(stream, note) for stream in ("a", "b", "a", "a")]
    assert store.size == 3  # the first event was evicted
    got: list[str | None] = []

    async def collect(event: EventMessage) -> None:
        got.append(event.event_id)

    assert await store.replay_events_after(ids[0], collect) is None  # evicted: nothing to resume from
    assert await store.replay_events_after(ids[2], collect) == "a"
    assert got == [ids[3]]  # only later events of the same stream


async def test_stateless_logs_go_to_the_request_that_opted_in(fixture_proxy: RunningProxy) -> None:
    """2026-07-28: a later request without a logLevel opt-in must not receive another request's logs."""
    import asyncio

    def body(request_id: int, name: str, log_level: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        if log_level:
            meta["io.modelcontextprotocol/logLevel"] = log_level
        params = {"name": name, "arguments": {}, "_meta": meta}
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    headers = {"Accept": ACCEPT, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}

    async def post(http: aiohttp.ClientSession, message: dict[str, Any]) -> list[dict[str, Any]]:
        name = message["params"]["name"]
        async with http.post(fixture_proxy.url, json=message, headers={**headers, "Mcp-Name": name}) as resp:
            assert resp.status == 200
            if resp.content_type == "application/json":
                return [await resp.json()]
            return [m async for _, m in _events(resp)]

    async with aiohttp.ClientSession() as http:
        logging_call = asyncio.create_task(post(http, body(1, "test_tool_with_logging", "debug")))
        await asyncio.sleep(0.02)
        quiet = await post(http, body(1, "test_tool_with_progress", None))
        logged = await logging_call
    assert [m for m in quiet if m.get("method") == "notifications/message"] == []
    assert quiet[-1]["result"]["content"][0]["type"] == "text"
    logs = [m["params"]["data"] for m in logged if m.get("method") == "notifications/message"]
    assert logs == ["Tool execution started", "Tool processing data", "Tool execution completed"]
