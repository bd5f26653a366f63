"""An MCPServerEntry backend in the gateway: its own headers (plain and from the environment) go with
every request, under its outgoing auth; a missing header variable is refused naming the field."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from mcp.client.client import Client

from mcpfleet.vmcp.auth.outgoing import OutgoingAuthError, backend_headers
from mcpfleet.vmcp.config import HeaderInjection
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend, Served


async def test_entry_headers_and_auth_reach_the_remote(
    gateway: GatewayFactory,
    served: Callable[[Any], Awaitable[Served]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ENTRY_KEY", "from-a-secret")
    monkeypatch.setenv("ENTRY_TOKEN", "tok-123")
    remote = JsonRpcBackend("remote")
    backend = await served(remote)
    gw = await gateway(
        {
            "name": "gw",
            "backends": [
                {
                    "name": "remote",
                    "url": backend.url,
                    "metadata": {"kind": "MCPServerEntry"},
                    "headers": [
                        {"headerName": "X-Tenant", "headerValue": "t1"},
                        {"headerName": "X-Key", "headerValueEnv": "ENTRY_KEY"},
                    ],
                }
            ],
            "outgoingAuth": {
                "backends": {"remote": {"type": "bearer_token", "bearerToken": {"tokenEnv": "ENTRY_TOKEN"}}}
            },
        }
    )
    async with Client(gw.url, mode="legacy") as client:
        await client.list_tools()
    seen = remote.headers_by_method["initialize"]
    assert seen["x-tenant"] == "t1" and seen["x-key"] == "from-a-secret"
    assert seen["authorization"] == "Bearer tok-123"


def test_a_missing_header_variable_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(OutgoingAuthError, match=r"backends\[e\]\.headers\[0\]\.headerValueEnv"):
        backend_headers([HeaderInjection(header_name="X", header_value_env="NOT_SET_ANYWHERE")], "e")
