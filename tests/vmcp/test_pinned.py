"""Large cached lists go out from their page-pinned copy (issue 19): same answers, a Content-Length, no per-request copy."""

from __future__ import annotations

import ctypes
import json
import mmap
from typing import Any

import aiohttp
import pytest
from mcp.client.client import Client

from mcpfleet.vmcp.pinned import MIN_BYTES, PAGE_OFFSET, Pinned, PinnedCache
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend, Served, sdk_backend

BIG = 1500  # JsonRpcBackend tools: ~120 KB of tools/list, above MIN_BYTES


def test_pinned_views_hold_the_answer_at_the_page_offset() -> None:
    result = json.dumps({"tools": [{"name": f"t{i}"} for i in range(8000)]}).encode()
    assert len(result) >= MIN_BYTES
    pin = Pinned(result)
    assert bytes(pin.json) == b'"result":' + result + b"}"
    assert bytes(pin.sse) == b'"result":' + result + b"}\n\n"
    assert pin.sse.readonly and pin.json.readonly
    # The views are of an anonymous mapping (page-aligned); the answer starts at PAGE_OFFSET in it.
    region = pin.sse.obj
    assert isinstance(region, mmap.mmap)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    assert base % 4096 == 0
    assert len(region) - len(pin.sse) == PAGE_OFFSET

    cache = PinnedCache()
    assert cache.add(b'{"tools":[]}') is None  # small lists are framed by copying as before
    added = cache.add(result)
    assert added is not None and cache.get(result) is added
    assert cache.get(bytes(bytearray(result))) is None  # an equal but different object is not the cached one
    cache.clear()
    assert cache.get(result) is None


async def _post(h: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    return await h.post(url, data=json.dumps(body), headers=headers)


@pytest.mark.parametrize("sdk_neighbour", [True, False], ids=["sse", "json"])
async def test_large_list_wire_form(served: Any, gateway: GatewayFactory, sdk_neighbour: bool) -> None:
    """With an SDK backend beside it the gateway answers lists as SSE (the backends' form), else as
    JSON; either way the bytes are the cached list with this request's id and a Content-Length."""
    big = await served(JsonRpcBackend("big", tools=[f"t{i}" for i in range(BIG)]))
    backends = [{"name": "big", "url": big.url}]
    if sdk_neighbour:
        alpha: Served = await served(sdk_backend("alpha").streamable_http_app())
        backends.append({"name": "alpha", "url": alpha.url})
    gw = await gateway({"name": "t", "backends": backends})
    async with aiohttp.ClientSession() as h:
        async with await _post(h, gw.url, initialize_request(), STREAMABLE_HTTP_HEADERS) as r:
            headers = {**STREAMABLE_HTTP_HEADERS, "mcp-session-id": r.headers["mcp-session-id"]}
        seen = []
        for req_id in ("first", 7, "first"):
            request = {"jsonrpc": "2.0", "id": req_id, "method": "tools/list"}
            async with await _post(h, gw.url, request, headers) as r:
                raw = await r.read()
                assert r.status == 200
                assert int(r.headers["content-length"]) == len(raw)
                assert "transfer-encoding" not in r.headers
                if sdk_neighbour:
                    assert r.headers["content-type"] == "text/event-stream"
                    assert raw.startswith(b"event: message\ndata: {") and raw.endswith(b"}\n\n")
                    raw = raw.split(b"data: ", 1)[1]
                else:
                    assert r.headers["content-type"] == "application/json"
            answer = json.loads(raw)
            assert answer["id"] == req_id and answer["jsonrpc"] == "2.0"
            seen.append(answer["result"])
    names = {t["name"] for t in seen[0]["tools"]}
    assert {f"big_t{i}" for i in range(BIG)} <= names
    assert seen[0] == seen[1] == seen[2]
    # The answers came from the pinned copy of the gateway's cached list.
    cached = gw.app.gateway.cached_list("tools/list", "legacy")
    pin = gw.app.gateway.pinned(cached)
    assert pin is not None and bytes(pin.json) == b'"result":' + cached + b"}"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_large_list_through_the_sdk_client(served: Any, gateway: GatewayFactory, mode: str) -> None:
    big = await served(JsonRpcBackend("big", tools=[f"t{i}" for i in range(BIG)]))
    alpha: Served = await served(sdk_backend("alpha").streamable_http_app())
    gw = await gateway(
        {"name": "t", "backends": [{"name": "big", "url": big.url}, {"name": "alpha", "url": alpha.url}]}
    )
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        for _ in range(2):
            names = {t.name for t in (await c.list_tools()).tools}
            assert {f"big_t{i}" for i in range(BIG)} | {"alpha_echo"} <= names
