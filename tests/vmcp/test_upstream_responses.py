"""Hostile or broken backend answers reach the client as clear JSON-RPC errors naming the backend."""

from __future__ import annotations

import aiohttp
import pytest

from mcpfleet import sse
from mcpfleet.vmcp import httpclient, wire
from mcpfleet.vmcp.streamable import Upstream
from mcpfleet.vmcp.wire import RPCError
from tests.vmcp.test_httpclient import Script, ScriptServer


def _sse(body: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(body)
    return head + body


def _json(status: int, body: bytes) -> bytes:
    head = b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % (
        status,
        len(body),
    )
    return head + body


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        (_sse(b"data: 1\n\n"), "sent an invalid response"),
        (_sse(b"data: {not json\n\n"), "sent an invalid response"),
        (_sse(b"data: " + b"x" * 2_000_000 + b"\n\n"), "sent an invalid response: SSE"),
        # Nested deeper than the gateway can relay (issue 27, defect 4): as SSE and as JSON.
        (
            _sse(b'data: {"jsonrpc":"2.0","id":1,"result":' + b"[" * 300 + b"]" * 300 + b"}\n\n"),
            "nested deeper",
        ),
        (_json(200, b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * 300 + b"]" * 300 + b"}"), "nested deeper"),
        (_json(200, b'{"jsonrpc":"2.0","id":1,"error":"bad"}'), "not an object with an integer code"),
        (_json(200, b'{"jsonrpc":"2.0","id":1,"error":{"code":1e30,"message":"m"}}'), "integer code"),
        (
            _json(400, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Missing sess"}}'),
            "backend 'be' refused the request: HTTP 400: Missing sess",
        ),
    ],
)
async def test_bad_backend_answers_are_gateway_errors(
    reply: bytes, needle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sse.iter_sse, "__defaults__", (1_000_000,))  # a 1 MB event limit here
    script = Script(reply=lambda i, head: (reply, False))
    fast = httpclient.Client()
    async with ScriptServer(script) as srv, aiohttp.ClientSession() as http:
        up = Upstream("be", srv.url, http, fast=fast)
        up.modern = True  # skip the probe: talk the sessionless wire straight away
        with pytest.raises(RPCError) as ei:
            await up.call("tools/call", {"name": "x"}, era="modern")
        assert needle in ei.value.message
        assert ei.value.code == wire.INTERNAL_ERROR
    fast.close()
