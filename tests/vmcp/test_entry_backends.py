"""An MCPServerEntry backend in the gateway: its own headers (plain and from the environment) go with
every request, under its outgoing auth; a missing header variable is refused naming the field."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mcp.client.client import Client

from mcpfleet.devcluster.pki import ensure_pki
from mcpfleet.vmcp.auth.outgoing import OutgoingAuthError, backend_headers
from mcpfleet.vmcp.config import ConfigError, HeaderInjection, parse_config
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


async def test_static_entry_backend_with_ca_bundle_path_and_metadata(
    gateway: GatewayFactory, served: Callable[..., Awaitable[Served]], tmp_path: Path
) -> None:
    """ToolHive's `backends[].{type: entry, caBundlePath, metadata}`: the gateway verifies the remote's
    TLS certificate with that CA (without it the same remote is refused), and shows the metadata."""
    pki = ensure_pki(tmp_path / "pki")
    remote = JsonRpcBackend("remote", tools=["echo"])
    tls = await Served(remote, tls=(str(pki.serving_cert), str(pki.serving_key))).start()
    try:
        entry = {"name": "remote", "url": tls.url, "type": "entry", "metadata": {"env": "prod", "kind": "x"}}
        trusted = await gateway({"name": "gw", "backends": [{**entry, "caBundlePath": str(pki.ca_cert)}]})
        async with Client(trusted.url, mode="legacy") as client:
            assert "remote_echo" in {t.name for t in (await client.list_tools()).tools}
        async with aiohttp.ClientSession() as h, h.get(trusted.base + "/status") as r:
            backend = (await r.json())["backends"][0]
        assert backend["state"] == "ready" and backend["metadata"] == {"env": "prod", "kind": "x"}

        untrusted = await gateway({"name": "gw2", "backends": [entry]})
        async with aiohttp.ClientSession() as h, h.get(untrusted.base + "/status") as r:
            backend = (await r.json())["backends"][0]
        assert backend["state"] != "ready" and "certificate" in (backend["error"] or "").lower()
    finally:
        await tls.stop()


def test_ca_bundle_path_needs_type_entry() -> None:
    with pytest.raises(ConfigError, match="caBundlePath is only valid when type is 'entry'"):
        parse_config({"backends": [{"name": "r", "url": "https://r/mcp", "caBundlePath": "/ca.crt"}]})
