"""List filtering through `mcpfleet proxy --remote` when the server answers in SSE: a real MCP SDK
server (streamable HTTP, answers POSTs as `text/event-stream`) behind the proxy with Cedar
policies; the lists the client gets hold only what it may use, in both the raw stream and the SDK
client; a hostile server's oversized or non-JSON list answer fails closed."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from mcpfleet.httplimits import read_body
from mcpfleet.policy.config import parse_document
from mcpfleet.policy.engine import PolicyEngine
from mcpfleet.policy.guard import Policy
from mcpfleet.proxy.remote import RemoteProxyApp
from mcpfleet.proxy.serve import with_auth
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.policy.test_sse_rewriter import client_events
from tests.proxy.conftest import serve_app
from tests.vmcp.servers import sdk_backend

POLICIES = [
    'permit(principal, action == Action::"call_tool", resource == Tool::"echo");',
    'permit(principal, action == Action::"call_tool", resource == Tool::"upper");',
]


def policy() -> Policy:
    doc = {"version": "1.0", "type": "cedarv1", "cedar": {"policies": POLICIES}}
    return Policy(engine=PolicyEngine(parse_document(doc, "test")))


async def test_sse_list_answers_are_filtered() -> None:
    server = sdk_backend("alpha")
    async with serve_app(server.streamable_http_app()) as remote:
        assert {t.name for t in await server.list_tools()} > {"echo", "upper", "fail"}
        app = RemoteProxyApp(remote + "/mcp")
        async with serve_app(with_auth(app, None, policy=policy())) as base:
            url = f"{base}/mcp"
            async with aiohttp.ClientSession() as http:
                hdr = dict(STREAMABLE_HTTP_HEADERS)
                async with http.post(url, json=initialize_request(), headers=hdr) as r:
                    hdr["mcp-session-id"] = r.headers["mcp-session-id"]
                    await r.read()
                await http.post(
                    url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=hdr
                )
                async with http.post(
                    url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=hdr
                ) as r:
                    assert r.headers["content-type"].startswith("text/event-stream")  # the SSE path
                    stream = await r.read()
            answers = [orjson.loads(d) for _, d in client_events(stream) if d is not None]
            (answer,) = [a for a in answers if a.get("id") == 2]
            assert {t["name"] for t in answer["result"]["tools"]} == {"echo", "upper"}
            async with Client(streamable_http_client(url), mode="legacy") as c:  # type: ignore[arg-type]
                assert {t.name for t in (await c.list_tools()).tools} == {"echo", "upper"}
                assert not (await c.call_tool("echo", {"text": "x"})).is_error


async def _hostile(scope: Any, receive: Any, send: Any) -> None:
    """A server that answers every POST with a list event over the size bound or with garbage."""
    if scope["type"] != "http":
        return
    body, _ = await read_body(receive)
    request = orjson.loads(body or b"{}")
    params = request.get("params") or {}
    count = 2 if params.get("cr") else 20_000
    tools = [
        {"name": n, "inputSchema": {"type": "object"}} for n in ["echo", *(f"t{i}" for i in range(count))]
    ]
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    )
    event = b"data: " + orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": tools}})
    end = b"\r\n\r\n"
    if params.get("cr"):
        end = b"\r\r"  # a lone CR ends a line too (the SSE standard): a client reads this event
    if params.get("garbage"):
        event = b'data: {"jsonrpc": "2.0", "id": 1, "result": {"tools": [NaN'
    for i in range(0, len(event), 4096):  # split frames
        await send({"type": "http.response.body", "body": event[i : i + 4096], "more_body": True})
    await send({"type": "http.response.body", "body": end, "more_body": False})


async def test_a_hostile_sse_list_answer_fails_closed(monkeypatch: Any) -> None:
    import mcpfleet.policy.asgi as policy_asgi

    monkeypatch.setattr(policy_asgi, "MAX_LIST_BYTES", 100_000)
    async with serve_app(_hostile) as remote:
        proxy = with_auth(RemoteProxyApp(remote + "/mcp"), None, policy=policy())
        async with serve_app(proxy) as base, aiohttp.ClientSession() as http:
            hdr = dict(STREAMABLE_HTTP_HEADERS)
            async with http.post(
                f"{base}/mcp", json={"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, headers=hdr
            ) as r:
                stream = await r.read()
            answers = [orjson.loads(d) for _, d in client_events(stream) if d is not None]
            assert answers == [
                {
                    "jsonrpc": "2.0",
                    "id": 5,
                    "error": {
                        "code": -32603,
                        "message": "the server's list response is larger than 100000 bytes: not relayed "
                        "(it cannot be authorized)",
                    },
                }
            ]
            garbage = {"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"garbage": True}}
            async with http.post(f"{base}/mcp", json=garbage, headers=hdr) as r:
                stream = await r.read()
            assert b"NaN" not in stream and client_events(stream) == []
            cr = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"cr": True}}
            async with http.post(f"{base}/mcp", json=cr, headers=hdr) as r:
                stream = await r.read()
            answers = [orjson.loads(d) for _, d in client_events(stream) if d is not None]
            assert [[t["name"] for t in a["result"]["tools"]] for a in answers] == [["echo"]]
