"""List filtering on the legacy HTTP+SSE transport (2024-11-05) through the stdio proxy: the answers
travel on the `GET /sse` stream, not on the POST. A real stdio server behind `mcpfleet proxy
--transport sse` with a denying Cedar policy; the MCP SDK's legacy `sse_client` sees only what it
may use, denied calls never reach the server; a hostile stdio server's oversized answer, answers
repeated under the same id, and list requests for a session the proxy does not relay fail closed."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from mcp.client.client import Client
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError

from mcpfleet.policy import legacy_sse
from mcpfleet.policy.config import parse_document
from mcpfleet.policy.engine import PolicyEngine
from mcpfleet.policy.guard import FORBIDDEN, Policy
from mcpfleet.proxy.serve import build_stdio_app, with_auth
from tests.mcp_messages import initialize_request
from tests.policy.test_sse_rewriter import client_events
from tests.proxy.conftest import serve_app

SERVER = Path(__file__).parent / "example_server.py"
POLICIES = [
    'permit(principal, action == Action::"call_tool", resource == Tool::"weather");',
    'permit(principal, action == Action::"get_prompt", resource == Prompt::"greeting");',
]


def policy(policies: list[str] = POLICIES) -> Policy:
    doc = {"version": "1.0", "type": "cedarv1", "cedar": {"policies": policies}}
    return Policy(engine=PolicyEngine(parse_document(doc, "test")))


def served(path: Path) -> list[str]:
    return [json.loads(line)["name"] for line in path.read_text().splitlines()] if path.exists() else []


async def test_lists_on_the_legacy_sse_stream_are_filtered(tmp_path: Path, monkeypatch: Any) -> None:
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("POLICY_SERVER_CALLS", str(calls))
    app = build_stdio_app([sys.executable, str(SERVER)], host="127.0.0.1", transport="sse")
    unfiltered = build_stdio_app([sys.executable, str(SERVER)], host="127.0.0.1", transport="sse")
    async with serve_app(with_auth(app, None, policy=policy())) as base, serve_app(unfiltered) as bare:
        async with Client(sse_client(f"{bare}/sse"), mode="legacy") as c:  # type: ignore[arg-type]
            # The server offers more than the policy permits: what the proxy removes is real.
            assert {t.name for t in (await c.list_tools()).tools} == {"weather", "calculator", "translator"}
        async with Client(sse_client(f"{base}/sse"), mode="legacy") as c:  # type: ignore[arg-type]
            assert {t.name for t in (await c.list_tools()).tools} == {"weather"}
            assert {p.name for p in (await c.list_prompts()).prompts} == {"greeting"}
            assert (await c.list_resources()).resources == []
            assert not (await c.call_tool("weather", {"city": "Oslo"})).is_error
            with pytest.raises(MCPError) as denied:
                await c.call_tool("calculator", {"a": 1, "b": 2})
            assert denied.value.error.code == FORBIDDEN
            # Again on the same stream: every answer is filtered, not only the first.
            assert {t.name for t in (await c.list_tools()).tools} == {"weather"}
        # Two clients at once, each on its own stream and session.
        async with (
            Client(sse_client(f"{base}/sse"), mode="legacy") as c1,  # type: ignore[arg-type]
            Client(sse_client(f"{base}/sse"), mode="legacy") as c2,  # type: ignore[arg-type]
        ):
            assert {t.name for t in (await c1.list_tools()).tools} == {"weather"}
            assert {p.name for p in (await c2.list_prompts()).prompts} == {"greeting"}
    assert served(calls) == ["weather"]  # the denied call never reached the server


async def test_a_list_request_for_a_stream_the_proxy_does_not_relay_is_refused() -> None:
    app = build_stdio_app([sys.executable, str(SERVER)], host="127.0.0.1", transport="sse")
    async with serve_app(with_auth(app, None, policy=policy())) as base, aiohttp.ClientSession() as http:
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
        async with http.post(f"{base}/messages/?session_id=0123456789abcdef0123456789abcdef", json=body) as r:
            assert r.status == 403
            answer = await r.json()
        assert answer["id"] == 3 and answer["error"]["code"] == -32603
        assert "cannot be authorized" in answer["error"]["message"]


HOSTILE = """
import sys, json
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    rid, method = msg["id"], msg["method"]
    if method == "initialize":
        result = {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "hostile", "version": "1"}}
    elif method == "tools/list":
        count = 20000 if msg.get("params", {}).get("cursor") == "big" else 2
        tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ["weather", *(f"t{i}" for i in range(count))]]
        result = {"tools": tools}
        # The same answer again, and once under the id as a string: each must be filtered too
        # (the proxy's multiplexer passes on only the first; the unit test below sends them raw).
        for again in (rid, str(rid)):
            print(json.dumps({"jsonrpc": "2.0", "id": again, "result": result}), flush=True)
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}), flush=True)
"""


async def test_a_hostile_server_on_the_legacy_stream_fails_closed(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(legacy_sse, "MAX_PENDING", 4)
    import mcpfleet.policy.asgi as policy_asgi

    monkeypatch.setattr(policy_asgi, "MAX_LIST_BYTES", 100_000)
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    app = build_stdio_app([sys.executable, str(script)], host="127.0.0.1", transport="sse")
    async with serve_app(with_auth(app, None, policy=policy())) as base:
        async with Client(sse_client(f"{base}/sse"), mode="legacy") as c:  # type: ignore[arg-type]
            assert [t.name for t in (await c.list_tools()).tools] == ["weather"]
            with pytest.raises(MCPError) as big:
                await c.list_tools(cursor="big")
            assert big.value.error.code == -32603 and "cannot be authorized" in big.value.error.message
            assert [t.name for t in (await c.list_tools()).tools] == ["weather"]
        # The raw stream: every event a client reads holds only permitted tools (the repeats too).
        async with aiohttp.ClientSession() as http, http.get(f"{base}/sse") as stream:
            seen = b""
            posted = False
            answers: list[Any] = []
            async with asyncio.timeout(30):
                async for chunk in stream.content.iter_any():
                    seen += chunk
                    events = client_events(seen)
                    if not posted and events:
                        fields, data = events[0]
                        assert (b"event", b"endpoint") in fields and data is not None
                        url = base + data.decode()
                        for message in (INIT, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}):
                            async with http.post(url, json=message) as r:
                                assert r.status == 202
                        posted = True
                    answers = [orjson.loads(d) for _, d in events[1:] if d is not None]
                    if any(a.get("id") == 9 for a in answers):
                        break
        lists = [a for a in answers if a.get("id") in (9, "9")]
        assert lists
        assert all([t["name"] for t in a["result"]["tools"]] == ["weather"] for a in lists)


INIT = initialize_request("2024-11-05")


async def body(stream: Any, data: bytes) -> None:
    """One chunk of the GET stream's body, as the transport sends it."""
    await stream.send({"type": "http.response.body", "body": data, "more_body": True})


async def test_waiting_lists_are_bounded_per_stream(monkeypatch: Any) -> None:
    """A client that posts lists and never reads the stream holds at most MAX_PENDING of them."""
    monkeypatch.setattr(legacy_sse, "MAX_PENDING", 4)
    streams = legacy_sse.LegacyStreams(policy())
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    stream = streams.open(send)
    await stream.send({"type": "http.response.start", "status": 200, "headers": []})
    await body(stream, b"event: endpoint\r\ndata: /messages/?session_id=ab\r\n\r\n")
    assert sent[-1]["body"] == b"event: endpoint\ndata: /messages/?session_id=ab\n\n"
    # A second endpoint event (another session's) is not relayed: lists there would go unfiltered.
    await body(stream, b"event: endpoint\ndata: /messages/?session_id=cd\n\n")
    assert sent[-1]["body"] == b"" and not streams.knows(b"session_id=cd")
    assert all(streams.expect(b"session_id=ab", i, "tools/list", None) is None for i in range(4))
    assert "more than 4" in (streams.expect(b"session_id=ab", 4, "tools/list", None) or "")
    assert streams.expect(b"session_id=zz", 5, "tools/list", None) is not None
    answer = {"jsonrpc": "2.0", "id": 2.0, "result": {"tools": [{"name": "weather"}, {"name": "calculator"}]}}
    await body(stream, b"data: " + orjson.dumps(answer) + b"\n\n")
    (_, data), *_ = client_events(sent[-1]["body"])
    assert data is not None and orjson.loads(data)["result"]["tools"] == [{"name": "weather"}]
    # The same answer again, under "2" and 2: still filtered; a batch too.
    for again in ({**answer, "id": "2"}, {**answer, "id": 2}, [{**answer, "id": 3}]):
        await body(stream, b"data: " + orjson.dumps(again) + b"\n\n")
        (_, data), *_ = client_events(sent[-1]["body"])
        got = orjson.loads(data or b"null")
        got = got[0] if isinstance(got, list) else got
        assert got["result"]["tools"] == [{"name": "weather"}], again
    # An event over the bound: not relayed; the lists still waiting (0, 1) get an error instead,
    # and their answers arriving later are dropped.
    streams.max_event = 1000
    stream2 = streams.open(send)
    await stream2.send({"type": "http.response.start", "status": 200, "headers": []})
    await body(stream2, b"event: endpoint\ndata: /messages/?session_id=ef\n\n")
    assert streams.expect(b"session_id=ef", 7, "tools/list", None) is None
    huge = {"jsonrpc": "2.0", "id": 7, "result": {"tools": [{"name": f"t{i}"} for i in range(200)]}}
    await body(stream2, b"data: " + orjson.dumps(huge))
    (_, data), *_ = client_events(sent[-1]["body"])
    assert orjson.loads(data or b"null")["error"]["code"] == -32603
    small = {"jsonrpc": "2.0", "id": 7, "result": {"tools": [{"name": "calculator"}]}}
    await body(stream2, b"\n\ndata: " + orjson.dumps(small) + b"\n\n")
    assert client_events(sent[-1]["body"]) == []
    streams.close(stream2)
    streams.close(stream)
    assert not streams.knows(b"session_id=ab")
