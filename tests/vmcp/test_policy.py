"""Cedar authorization and audit in the vMCP gateway: denied calls never reach a backend, lists are
filtered per caller, composite steps are authorized one by one, policy edits apply on live sessions,
and every request leaves one audit line (argument values redacted, never a token)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import yaml

from mcpfleet.policy.guard import FORBIDDEN
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, answer_message, initialize_request
from tests.oidc import Issuer
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend, Served

HDR = dict(STREAMABLE_HTTP_HEADERS)
VERSION = "2025-11-25"

POLICIES = [
    # Everyone may call `be_echo`, but not with a `secret` argument.
    'permit(principal, action == Action::"call_tool", resource == Tool::"be_echo");',
    'forbid(principal, action == Action::"call_tool", resource) when { context has arg_secret };',
    # Admins may call anything on backend `be`.
    'permit(principal, action == Action::"call_tool", resource in Backend::"be") '
    'when { principal.claim_roles.contains("admin") };',
    # The composite itself is open; its steps are checked one by one.
    'permit(principal, action == Action::"call_tool", resource == Tool::"pipeline");',
]


@pytest.fixture
async def issuer(served: Any) -> Issuer:
    iss = Issuer()
    s: Served = await served(iss)
    iss.base = s.base
    iss.add_rsa("k")
    return iss


def _config(issuer: Issuer, backend_url: str, policies: list[str], audit_file: Path | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "backends": [{"name": "be", "url": backend_url}],
        "incomingAuth": {
            "type": "oidc",
            "oidc": {"issuer": issuer.base, "audience": "vmcp", "insecureAllowHTTP": True},
        },
        "compositeTools": [
            {
                "name": "pipeline",
                "description": "echo, then admin_tool",
                "steps": [
                    {"id": "one", "tool": "be_echo", "arguments": {"text": "a"}},
                    {"id": "two", "tool": "be_admin_tool", "arguments": {}, "dependsOn": ["one"]},
                ],
            }
        ],
        "authz": {
            "version": "1.0",
            "type": "cedarv1",
            "cedar": {"policies": policies, "entities_json": "[]"},
        },
    }
    if audit_file is not None:
        config["audit"] = {"enabled": True, "logFile": str(audit_file)}
    return config


class Caller:
    def __init__(self, h: aiohttp.ClientSession, url: str, token: str) -> None:
        self.h, self.url, self.token, self.sid = h, url, token, ""
        self.ids = 1

    async def open(self) -> Caller:
        headers = {**HDR, "authorization": f"Bearer {self.token}"}
        async with self.h.post(self.url, json=initialize_request(), headers=headers) as r:
            assert r.status == 200, await r.text()
            self.sid = r.headers["mcp-session-id"]
        return self

    async def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        headers = {
            **HDR,
            "authorization": f"Bearer {self.token}",
            "mcp-session-id": self.sid,
            "mcp-protocol-version": VERSION,
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        }
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        async with self.h.post(self.url, json=body, headers=headers) as r:
            assert r.status == 200, await r.text()
            text = await r.text()
        out: dict[str, Any] = answer_message(text)
        return out

    async def tools(self) -> set[str]:
        return {t["name"] for t in (await self.rpc("tools/list", {}))["result"]["tools"]}


async def test_denied_calls_never_reach_the_backend_and_lists_are_filtered(
    issuer: Issuer, gateway: GatewayFactory, served: Any, tmp_path: Path
) -> None:
    be = JsonRpcBackend("be", tools=["echo", "admin_tool"])
    s = await served(be)
    audit_file = tmp_path / "audit.jsonl"
    gw = await gateway(_config(issuer, s.url, POLICIES, audit_file))
    user_token = issuer.token("k", sub="alice", extra={"roles": ["user"]})
    admin_token = issuer.token("k", sub="root", extra={"roles": ["admin"]})
    async with aiohttp.ClientSession() as h:
        user = await Caller(h, gw.url, user_token).open()
        admin = await Caller(h, gw.url, admin_token).open()

        assert await user.tools() == {"be_echo", "pipeline"}
        assert await admin.tools() == {"be_echo", "be_admin_tool", "pipeline"}

        before = be.calls.get("tools/call", 0)
        denied = await user.rpc("tools/call", {"name": "be_admin_tool", "arguments": {}})
        assert denied["error"]["code"] == FORBIDDEN
        assert "be_admin_tool" in denied["error"]["message"]
        # A forbid on an argument: the caller may call be_echo, but not with `secret`.
        denied_arg = await user.rpc("tools/call", {"name": "be_echo", "arguments": {"secret": "hunter2"}})
        assert denied_arg["error"]["code"] == FORBIDDEN
        # The composite is permitted, its second step is not: refused before the step runs.
        composite = await user.rpc("tools/call", {"name": "pipeline", "arguments": {}})
        assert composite.get("error") or composite["result"]["isError"] is True
        assert be.calls.get("tools/call", 0) == before + 1  # only the composite's first step ran
        assert be.calls.get("tools/call", 0) == before + 1

        ok = await user.rpc("tools/call", {"name": "be_echo", "arguments": {"text": "hi"}})
        assert ok["result"]["content"][0]["text"].startswith("be:echo")
        admin_ok = await admin.rpc("tools/call", {"name": "be_admin_tool", "arguments": {}})
        assert admin_ok["result"]["isError"] is False
        admin_pipeline = await admin.rpc("tools/call", {"name": "pipeline", "arguments": {}})
        assert "error" not in admin_pipeline and admin_pipeline["result"].get("isError") is not True
        assert be.calls["tools/call"] == before + 1 + 1 + 1 + 2

    lines = [orjson.loads(line) for line in audit_file.read_text().splitlines()]
    calls = [e for e in lines if e["method"] == "tools/call"]
    outcomes = [(e["subject"]["sub"], e["target"]["name"], e["outcome"]) for e in calls]
    assert ("alice", "be_admin_tool", "denied") in outcomes
    assert ("alice", "be_echo", "denied") in outcomes
    assert ("alice", "be_echo", "success") in outcomes
    assert ("root", "be_admin_tool", "success") in outcomes
    success = next(e for e in calls if e["outcome"] == "success" and e["subject"]["sub"] == "alice")
    assert success["backend"] == "be"
    assert success["traceId"] == "0af7651916cd43dd8448eb211c80319c"
    assert success["arguments"] == {"text": "[redacted]"}
    assert success["requestId"] is not None and success["durationMs"] >= 0
    assert success["client"]["address"].startswith("127.0.0.1:")
    assert {e["eventType"] for e in lines} >= {"mcp_tool_call", "mcp_tools_list"}
    raw = audit_file.read_text()
    assert "hunter2" not in raw and user_token not in raw and admin_token not in raw


async def test_policy_edits_apply_on_live_sessions(
    issuer: Issuer, gateway: GatewayFactory, served: Any, tmp_path: Path
) -> None:
    be = JsonRpcBackend("be", tools=["echo", "admin_tool"])
    s = await served(be)
    config = _config(issuer, s.url, POLICIES, None)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    gw = await gateway(config, config_file=str(path))
    async with aiohttp.ClientSession() as h:
        user = await Caller(h, gw.url, issuer.token("k", sub="alice")).open()
        assert await user.tools() == {"be_echo", "pipeline"}
        # Open everything up: the same session sees the new policy within the poll interval.
        config["authz"]["cedar"]["policies"] = ["permit(principal, action, resource);"]
        tmp = path.with_name("config.yaml.tmp")
        tmp.write_text(yaml.safe_dump(config))
        tmp.replace(path)
        for _ in range(50):
            if await user.tools() == {"be_echo", "be_admin_tool", "pipeline"}:
                break
            await asyncio.sleep(0.2)
        assert await user.tools() == {"be_echo", "be_admin_tool", "pipeline"}
        ok = await user.rpc("tools/call", {"name": "be_admin_tool", "arguments": {}})
        assert ok["result"]["isError"] is False
        # A broken policy is not applied: the current one stays.
        config["authz"]["cedar"]["policies"] = ["permit(principal, action"]
        tmp.write_text(yaml.safe_dump(config))
        tmp.replace(path)
        await asyncio.sleep(1.5)
        assert await user.tools() == {"be_echo", "be_admin_tool", "pipeline"}


async def test_optimizer_calls_are_authorized_like_any_tools_call(
    gateway: GatewayFactory, alpha_beta: tuple[Served, Served]
) -> None:
    """find_tool shows only permitted tools; call_tool of a refused tool is refused (-32012) before
    it reaches the backend; the permitted one runs."""
    from mcp.client.client import Client
    from mcp.shared.exceptions import MCPError

    a, b = alpha_beta
    policies = [
        'permit(principal, action == Action::"call_tool", resource == Tool::"find_tool");',
        'permit(principal, action == Action::"call_tool", resource == Tool::"call_tool");',
        'permit(principal, action == Action::"call_tool", resource in Backend::"alpha");',
    ]
    config = {
        "name": "opt",
        "backends": [{"name": "alpha", "url": a.url}, {"name": "beta", "url": b.url}],
        "optimizer": {"maxToolsToReturn": 50},
        "authz": {"version": "1.0", "type": "cedarv1", "cedar": {"policies": policies}},
    }
    gw = await gateway(config)
    async with Client(gw.url, mode="legacy") as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"find_tool", "call_tool"}
        res = await c.call_tool("find_tool", {"tool_description": "upper case text echo"})
        names = [t["name"] for t in res.structured_content["tools"]]  # type: ignore[index]
        assert names and all(n.startswith("alpha_") for n in names)
        ok = await c.call_tool("call_tool", {"tool_name": "alpha_upper", "parameters": {"text": "abc"}})
        assert not ok.is_error
        with pytest.raises(MCPError) as denied:
            await c.call_tool("call_tool", {"tool_name": "beta_upper", "parameters": {"text": "abc"}})
        assert denied.value.error.code == FORBIDDEN


@pytest.mark.parametrize("detect", [True, False])
async def test_audit_response_data_application_errors_and_delegation_chain(
    issuer: Issuer, gateway: GatewayFactory, served: Any, tmp_path: Path, detect: bool
) -> None:
    """ToolHive's `includeResponseData`, `detectApplicationErrors` and `maxDelegationDepth`."""
    s = await served(JsonRpcBackend("be", tools=["echo"]))
    audit_file = tmp_path / "audit.jsonl"
    config = _config(issuer, s.url, ["permit(principal, action, resource);"], None)
    config["audit"] = {
        "enabled": True,
        "logFile": str(audit_file),
        "includeResponseData": True,
        "maxDataSize": 30,
        "maxDelegationDepth": 2,
        "detectApplicationErrors": detect,
    }
    gw = await gateway(config)
    # alice's token, used by agent-1 on behalf of agent-2 on behalf of agent-3 (RFC 8693 act).
    act = {"sub": "agent-1", "act": {"sub": "agent-2", "iss": "https://idp", "act": {"sub": "agent-3"}}}
    token = issuer.token("k", sub="alice", extra={"act": act})
    async with aiohttp.ClientSession() as h:
        caller = await Caller(h, gw.url, token).open()
        ok = await caller.rpc("tools/call", {"name": "be_echo", "arguments": {"text": "hi"}})
        assert ok["result"]["content"][0]["text"].startswith("be:echo")
        missing = await caller.rpc("tools/call", {"name": "no_such_tool", "arguments": {}})
        assert missing["result"]["isError"] is True
    calls = [orjson.loads(x) for x in audit_file.read_text().splitlines()]
    calls = [e for e in calls if e["method"] == "tools/call"]
    echo = next(e for e in calls if e["target"]["name"] == "be_echo")
    assert echo["outcome"] == "success"
    assert echo["response"].endswith("…") and len(echo["response"]) == 31 and echo["response"].startswith("{")
    assert echo["delegationChain"] == [{"sub": "agent-1"}, {"sub": "agent-2", "iss": "https://idp"}]
    assert echo["delegationTruncated"] is True
    assert echo["subject"]["sub"] == "alice"
    failed = next(e for e in calls if e["target"]["name"] == "no_such_tool")
    # The tool's error arrived in a 200 answer: an error only when answers are inspected.
    assert failed["outcome"] == ("tool_error" if detect else "success")
    assert failed["response"].startswith('{"content":')
    assert token not in audit_file.read_text()
