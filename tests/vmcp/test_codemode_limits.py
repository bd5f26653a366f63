"""Calls made for a client through `call_tool` and inside code-mode scripts are charged to the rate
limits and audited like the client's own (issue 27, items 5 and 6): every backend call takes every
bucket a direct call would take, and leaves an audit event naming the real tool, its backend and
outcome, linked to the client's request; a Cedar denial inside a script leaves a `denied` event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import orjson

from mcpfleet.ratelimit import RATE_LIMITED
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend, Served
from tests.vmcp.test_auth import post

HDR = dict(STREAMABLE_HTTP_HEADERS)
HOUR = "1h"


class Raw:
    """One anonymous 2025-era session over plain HTTP: every request it sends is counted exactly."""

    def __init__(self, h: aiohttp.ClientSession, url: str) -> None:
        self.h, self.url, self.headers, self.ids = h, url, dict(HDR), 100

    async def open(self) -> Raw:
        status, got, _ = await post(self.h, self.url, initialize_request(), self.headers)
        assert status == 200
        self.headers["mcp-session-id"] = got["mcp-session-id"]
        self.headers["mcp-protocol-version"] = "2025-11-25"
        return self

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.ids += 1
        body = {
            "jsonrpc": "2.0",
            "id": self.ids,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        status, _, answer = await post(self.h, self.url, body, self.headers)
        return status, answer

    async def script(self, source: str) -> dict[str, Any]:
        status, answer = await self.call("execute_tool_script", {"script": source})
        assert status == 200, answer
        result: dict[str, Any] = answer["result"]
        return result


def _text(result: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for c in result.get("content") or [])


async def _gateway(gateway: GatewayFactory, be: Served, **extra: Any) -> Served:
    return await gateway(
        {
            "name": "lim",
            "backends": [{"name": "be", "url": be.url}],
            "optimizer": {},
            "codeMode": {"enabled": True},
            **extra,
        }
    )


async def test_per_tool_limits_are_charged_inside_scripts_and_through_call_tool(
    gateway: GatewayFactory, served: Any
) -> None:
    """Regression (issue 27, 5): per-tool buckets were never charged for these calls."""
    be = JsonRpcBackend("be", tools=["echo", "other"])
    limits = {
        "tools": [
            {"name": "be_echo", "shared": {"maxTokens": 2, "refillPeriod": HOUR}},
            {"name": "be_other", "perUser": {"maxTokens": 1, "refillPeriod": HOUR}},
        ]
    }
    gw = await _gateway(gateway, await served(be), rateLimiting=limits)
    async with aiohttp.ClientSession() as h:
        c = await Raw(h, gw.url).open()
        res = await c.script("[be_echo(text='1'), be_echo(text='2'), be_echo(text='3')]")
        assert res["isError"] is True
        assert "script line 1: tool be_echo: rate limit exceeded (tool 'be_echo' shared)" in _text(res)
        assert be.calls["tools/call"] == 2
        # Through call_tool: the empty tool bucket refuses as the client's own call would be refused.
        status, answer = await c.call("call_tool", {"tool_name": "be_echo", "parameters": {}})
        assert status == 200 and answer["error"]["code"] == RATE_LIMITED
        assert answer["error"]["message"].startswith("rate limit exceeded (tool 'be_echo' shared)")
        assert answer["error"]["data"]["limit"] == "tool 'be_echo' shared"
        status, answer = await c.call("call_tool", {"tool_name": "be_other", "parameters": {}})
        assert status == 200 and answer["result"]["isError"] is False
        status, answer = await c.call("call_tool", {"tool_name": "be_other", "parameters": {}})
        assert (
            answer["error"]["code"] == RATE_LIMITED
            and "tool 'be_other' perUser" in answer["error"]["message"]
        )
        res = await c.script("be_other()")
        assert res["isError"] is True and "tool 'be_other' perUser" in _text(res)
    assert be.calls["tools/call"] == 3


async def test_server_limits_are_charged_per_backend_call_of_a_script(
    gateway: GatewayFactory, served: Any
) -> None:
    """Regression (issue 27, 5): a script took the server-level bucket once for up to maxToolCalls calls."""
    be = JsonRpcBackend("be")
    gw = await _gateway(
        gateway, await served(be), rateLimiting={"shared": {"maxTokens": 4, "refillPeriod": HOUR}}
    )
    async with aiohttp.ClientSession() as h:
        c = await Raw(h, gw.url).open()
        # The script request takes one token, its first three calls one each; the fourth is refused.
        res = await c.script("[be_echo(text=str(i)) for i in range(5)]")
        assert res["isError"] is True
        assert "script line 1: tool be_echo: rate limit exceeded (shared)" in _text(res)
        assert be.calls["tools/call"] == 3
        status, answer = await c.call("execute_tool_script", {"script": "1"})
        assert status == 429 and answer["error"]["code"] == RATE_LIMITED


async def test_call_tool_takes_the_server_limits_once(gateway: GatewayFactory, served: Any) -> None:
    """A call_tool request is one request making one backend call: one token of each server bucket."""
    be = JsonRpcBackend("be")
    limits = {
        "shared": {"maxTokens": 3, "refillPeriod": HOUR},
        "perUser": {"maxTokens": 3, "refillPeriod": HOUR},
    }
    gw = await _gateway(gateway, await served(be), rateLimiting=limits)
    async with aiohttp.ClientSession() as h:
        c = await Raw(h, gw.url).open()
        for _ in range(3):
            status, answer = await c.call("call_tool", {"tool_name": "be_echo", "parameters": {}})
            assert status == 200 and answer["result"]["isError"] is False, answer
        status, answer = await c.call("call_tool", {"tool_name": "be_echo", "parameters": {}})
        assert status == 429
    assert be.calls["tools/call"] == 3


POLICIES = [
    'permit(principal, action == Action::"call_tool", resource == Tool::"be_echo");',
    'permit(principal, action == Action::"call_tool", resource == Tool::"execute_tool_script");',
    'permit(principal, action == Action::"call_tool", resource == Tool::"call_tool");',
]


def _events(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_text().splitlines()]


async def test_calls_for_a_client_are_audited_and_linked(
    gateway: GatewayFactory, served: Any, tmp_path: Path
) -> None:
    """Regression (issue 27, 6): these calls left no event naming the real tool, backend and outcome,
    and a Cedar denial inside a script left no `denied` event."""
    be = JsonRpcBackend("be", tools=["echo", "secret"])
    audit_file = tmp_path / "audit.jsonl"
    gw = await _gateway(
        gateway,
        await served(be),
        authz={"version": "1.0", "type": "cedarv1", "cedar": {"policies": POLICIES, "entities_json": "[]"}},
        audit={"enabled": True, "logFile": str(audit_file)},
    )
    async with aiohttp.ClientSession() as h:
        c = await Raw(h, gw.url).open()
        res = await c.script(
            "a = be_echo(text='x')\nb = call_tool('call_tool', {'tool_name': 'be_echo', 'parameters': {}})\n[a, b]"
        )
        assert res["isError"] is False, res
        script_id = c.ids
        res = await c.script("be_secret()")
        assert res["isError"] is True
        denied_id = c.ids
        status, answer = await c.call("call_tool", {"tool_name": "be_echo", "parameters": {"text": "y"}})
        assert status == 200 and answer["result"]["isError"] is False
        call_id = c.ids
    events = [e for e in _events(audit_file) if e["method"] == "tools/call"]
    nested = [
        (e["target"]["name"], e.get("backend"), e["outcome"], e.get("parent"))
        for e in events
        if "parent" in e
    ]
    via_script = {"requestId": script_id, "via": "execute_tool_script"}
    via_call = {"requestId": script_id, "via": "call_tool"}
    assert nested == [
        ("be_echo", "be", "success", via_script),
        ("be_echo", "be", "success", via_call),  # made by call_tool, for the script's request
        ("call_tool", "be", "success", via_script),
        ("be_secret", None, "denied", {"requestId": denied_id, "via": "execute_tool_script"}),
        ("be_echo", "be", "success", {"requestId": call_id, "via": "call_tool"}),
    ]
    denied = next(e for e in events if e["outcome"] == "denied")
    assert "Tool" in denied["reason"] or "be_secret" in denied["reason"]
    # The client's own requests keep their one event each (no parent).
    own = [(e["target"]["name"], e["requestId"], e["outcome"]) for e in events if "parent" not in e]
    assert own == [
        ("execute_tool_script", script_id, "success"),
        ("execute_tool_script", denied_id, "tool_error"),
        ("call_tool", call_id, "success"),
    ]
    # Every nested event carries the session of the client's request.
    assert {e.get("sessionId") for e in events} == {events[0]["sessionId"]}
