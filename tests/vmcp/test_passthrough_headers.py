"""`passthroughHeaders`: the gateway forwards the allowlisted client request headers to every backend
(real SDK backends that echo the headers they received), in both protocol eras and through composite
tools; other headers, and the client's Authorization, never reach a backend. The model refuses
restricted names (hop-by-hop, Host, X-Forwarded-*, Authorization, Cookie, MCP's own), as ToolHive's
gateway does, and a VirtualMCPServer's top-level list takes precedence over its config's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared._httpx_utils import create_mcp_http_client
from pydantic import ValidationError

from mcpfleet.api.kinds import ManifestError
from mcpfleet.api.virtualmcpserver import GatewayConfig
from mcpfleet.reconcile import virtualmcpserver
from mcpfleet.reconcile.model import World
from tests.reconcile.conftest import obj
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import Served


def header_echo(name: str) -> MCPServer:
    mcp = MCPServer(name)

    @mcp.tool()
    def headers(ctx: Context) -> str:
        """The request headers this backend received, as JSON."""
        return json.dumps({k.lower(): v for k, v in (ctx.headers or {}).items()})

    return mcp


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_allowlisted_client_headers_reach_every_backend(
    served: Any, gateway: GatewayFactory, mode: str
) -> None:
    a: Served = await served(header_echo("alpha").streamable_http_app())
    b: Served = await served(header_echo("beta").streamable_http_app())
    config = {
        "name": "pt",
        "backends": [{"name": "alpha", "url": a.url}, {"name": "beta", "url": b.url}],
        "passthroughHeaders": ["X-Api-Key", "x-tenant"],
        "compositeTools": [
            {"name": "both", "steps": [{"id": "one", "type": "tool", "tool": "beta_headers"}]},
        ],
    }
    gw = await gateway(config)
    sent = {"X-Api-Key": "key-123", "X-Tenant": "acme", "X-Other": "not-allowed", "Authorization": "Bearer t"}
    http = create_mcp_http_client(headers=sent)
    async with Client(streamable_http_client(gw.url, http_client=http), mode=mode) as c:  # type: ignore[arg-type]
        for tool in ("alpha_headers", "beta_headers", "both"):
            received = json.loads(text(await c.call_tool(tool, {})))
            assert received.get("x-api-key") == "key-123", (tool, received)
            assert received.get("x-tenant") == "acme", (tool, received)
            assert "x-other" not in received and "authorization" not in received, (tool, received)
    # Without the header on the request, nothing is forwarded (no stale value from another client).
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        received = json.loads(text(await c.call_tool("alpha_headers", {})))
        assert "x-api-key" not in received and "x-tenant" not in received


@pytest.mark.parametrize(
    "name",
    ["Authorization", "cookie", "Host", "Connection", "X-Forwarded-For", "Mcp-Session-Id", "Content-Length"],
)
def test_restricted_names_are_refused(name: str) -> None:
    with pytest.raises(
        ValidationError, match=f"passthroughHeaders\n.*\\[1\\]: {name} is a restricted header"
    ):
        GatewayConfig.model_validate({"passthroughHeaders": ["X-Api-Key", name]})


@pytest.mark.parametrize("bad", ["", "X Api", "X-Api:Key", "é", "x" * 129])
def test_names_must_be_header_tokens(bad: str) -> None:
    with pytest.raises(ValidationError, match="passthroughHeaders"):
        GatewayConfig.model_validate({"passthroughHeaders": [bad]})


def test_duplicates_are_refused() -> None:
    with pytest.raises(ValidationError, match="listed twice"):
        GatewayConfig.model_validate({"passthroughHeaders": ["X-Api-Key", "x-api-key"]})


def test_top_level_list_takes_precedence_in_the_rendered_config() -> None:
    group = obj("kind: MCPGroup\nmetadata: {name: g}\nspec: {}")
    doc = (
        "kind: VirtualMCPServer\nmetadata: {name: gw}\nspec: {config: {groupRef: g, passthroughHeaders: [X-From-Config]},"
        " incomingAuth: {type: anonymous}{top}}"
    )
    world = World(platform="local", namespace="default", groups={"g": group})
    for top, expected in (("", ["X-From-Config"]), (", passthroughHeaders: [X-Top]", ["X-Top"])):
        plan = virtualmcpserver.plan(obj(doc.replace("{top}", top)), world)
        assert not plan.problems
        assert f"passthroughHeaders:\n- {expected[0]}" in plan.config_files[0].content
    with pytest.raises(ManifestError, match="passthroughHeaders"):
        obj(doc.replace("{top}", ", passthroughHeaders: [Cookie]"))
