"""A backend answer nested too deep to relay is a JSON-RPC error naming the backend (issue 27, defect 4).

Before: orjson reads 1,024 levels but writes only 255, so a backend's `tools/call` (or
`prompts/get`, `resources/read`) answer nested 300 levels was read, then failed to encode: an HTTP
500 with a traceback, in both protocol eras; a backend's deep `tools/list` broke the aggregate.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from mcpfleet.jsonrpc import MAX_ANSWER_DEPTH
from tests.hostile import META, nested
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend
from tests.vmcp.test_auth import post

HDR = dict(STREAMABLE_HTTP_HEADERS)
MODERN = "2026-07-28"
DEEP = 300


def _deep_answers(depth: int) -> dict[str, Any]:
    return {
        "tools/call": {"content": [], "structuredContent": {"v": nested(depth)}},
        "prompts/list": {"prompts": [{"name": "p"}]},
        "prompts/get": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "x"}}],
            "x": nested(depth),
        },
        "resources/list": {"resources": [{"uri": "mem://r", "name": "r"}]},
        "resources/read": {"contents": [{"uri": "mem://r", "text": "x"}], "x": nested(depth)},
    }


REQUESTS = [
    ("tools/call", {"name": "echo", "arguments": {}}),
    ("prompts/get", {"name": "p"}),
    ("resources/read", {"uri": "mem://r"}),
]


async def _ask(h: aiohttp.ClientSession, url: str, era: str, method: str, params: dict[str, Any]) -> Any:
    msg = {"jsonrpc": "2.0", "id": 7, "method": method, "params": dict(params)}
    if era == MODERN:
        msg["params"]["_meta"] = META
        name = params.get("name") or params.get("uri")
        headers = {**HDR, "mcp-protocol-version": MODERN, "mcp-method": method}
        if name:
            headers["mcp-name"] = name
    else:
        _, got, _ = await post(h, url, initialize_request(), HDR)
        headers = {**HDR, "mcp-session-id": got["mcp-session-id"]}
    status, _, body = await post(h, url, msg, headers)
    return status, body


@pytest.mark.parametrize("era", ["legacy", MODERN])
async def test_deep_backend_answers_are_errors_naming_the_backend(
    gateway: GatewayFactory, served: Any, era: str
) -> None:
    s = await served(JsonRpcBackend("deep", answers=_deep_answers(DEEP)))
    ok = await served(JsonRpcBackend("fine", answers=_deep_answers(MAX_ANSWER_DEPTH - 10)))
    gw = await gateway(
        {"backends": [{"name": "deep", "url": s.url}, {"name": "fine", "url": ok.url}]},
    )
    async with aiohttp.ClientSession() as h:
        for method, params in REQUESTS:
            p = dict(params)
            if "name" in p:
                p["name"] = f"deep_{p['name']}"
            status, body = await _ask(h, gw.url, era, method, p)
            assert status == 200, (method, status, body)
            err = body["error"]
            assert err["code"] == -32603, body
            assert "backend 'deep' sent an invalid response" in err["message"], body
            assert f"nested deeper than {MAX_ANSWER_DEPTH} levels" in err["message"], body
        # An answer within the bound is relayed as it is.
        status, body = await _ask(h, gw.url, era, "tools/call", {"name": "fine_echo", "arguments": {}})
        assert status == 200 and "structuredContent" in body["result"], body


async def test_deep_modern_backend_answer(gateway: GatewayFactory, served: Any) -> None:
    """The same over the 2026-07-28 wire between the gateway and the backend."""
    s = await served(
        JsonRpcBackend("deep", modern_only=True, answers={"tools/call": _deep_answers(DEEP)["tools/call"]})
    )
    gw = await gateway({"backends": [{"name": "deep", "url": s.url}]})
    async with aiohttp.ClientSession() as h:
        for era in ("legacy", MODERN):
            status, body = await _ask(h, gw.url, era, "tools/call", {"name": "deep_echo", "arguments": {}})
            assert status == 200, (era, body)
            assert "backend 'deep' sent an invalid response" in body["error"]["message"], body


async def test_deep_tools_list_leaves_the_other_backends_serving(
    gateway: GatewayFactory, served: Any
) -> None:
    deep_list = {"tools": [{"name": "t", "inputSchema": {"type": "object", "x": nested(DEEP)}}]}
    s = await served(JsonRpcBackend("deep", answers={"tools/list": deep_list}))
    ok = await served(JsonRpcBackend("fine"))
    gw = await gateway(
        {
            "backends": [{"name": "deep", "url": s.url}, {"name": "fine", "url": ok.url}],
            "operational": {"failureHandling": {"partialFailureMode": "best_effort"}},
        }
    )
    async with aiohttp.ClientSession() as h:
        for era in ("legacy", MODERN):
            status, body = await _ask(h, gw.url, era, "tools/list", {})
            assert status == 200, body
            names = {t["name"] for t in body["result"]["tools"]}
            assert "fine_echo" in names and not any(n.startswith("deep_") for n in names), body
    status_doc = gw.app.gateway.status()
    deep = next(b for b in status_doc["backends"] if b["name"] == "deep")
    assert "nested deeper than" in str(deep["listErrors"]), deep
