"""The gateway's `/status`: credentials redacted, the `/mcp` Host / Origin policy, and what a caller
without a token sees on a gateway with incoming auth (issue 27, defect 8).

Before: backend URL credentials (`user:pw@`, query values) were shown verbatim, a foreign `Host`
was served, and an OIDC gateway showed everything to anyone.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp

from mcpfleet.vmcp.status import SUMMARY_KEYS
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend
from tests.vmcp.test_auth import issuer as issuer  # the fixture

SECRETS = ("hunter2", "sekrit-token", "other-secret")


def _secret_url(port: int) -> str:
    return f"http://alice:hunter2@127.0.0.1:{port}/mcp?token=sekrit-token&plain=other-secret"


async def _get(h: aiohttp.ClientSession, url: str, **headers: str) -> tuple[int, str]:
    async with h.get(url, headers=headers) as r:
        return r.status, await r.text()


async def test_status_redacts_backend_credentials(
    gateway: GatewayFactory, served: Any, tmp_path: Path
) -> None:
    s = await served(JsonRpcBackend("be"))
    status_file = tmp_path / "status.json"
    gw = await gateway(
        {"backends": [{"name": "be", "url": _secret_url(s.port)}]}, status_file=str(status_file)
    )
    async with aiohttp.ClientSession() as h:
        code, text = await _get(h, gw.base + "/status")
    assert code == 200
    for secret in SECRETS:
        assert secret not in text, text
    (backend,) = json.loads(text)["backends"]
    assert backend["url"] == f"http://***@127.0.0.1:{s.port}/mcp?token=***&plain=***", backend
    assert backend["state"] == "ready"  # the credentials still reach the backend; only the view is masked
    # The status file (and so a VirtualMCPServer's status) carries the same masked URL.
    gw.app.gateway._status_dirty.set()
    for _ in range(100):
        if status_file.exists():
            break
        await asyncio.sleep(0.05)
    assert not any(secret in status_file.read_text() for secret in SECRETS)


async def test_status_applies_the_host_and_origin_policy(gateway: GatewayFactory, served: Any) -> None:
    s = await served(JsonRpcBackend("be"))
    gw = await gateway({"backends": [{"name": "be", "url": s.url}]})
    async with aiohttp.ClientSession() as h:
        assert (await _get(h, gw.base + "/status", Host="evil.example"))[0] == 421
        assert (await _get(h, gw.base + "/status", Origin="http://evil.example"))[0] == 403
        assert (await _get(h, gw.base + "/status", Origin="http://localhost:1234"))[0] == 200


async def test_status_without_a_token_is_a_summary_on_an_authenticated_gateway(
    gateway: GatewayFactory, served: Any, issuer: Any
) -> None:
    s = await served(JsonRpcBackend("be"))
    issuer.add_rsa("k")
    auth = {"type": "oidc", "oidc": {"issuer": issuer.base, "audience": "vmcp", "insecureAllowHTTP": True}}
    gw = await gateway({"backends": [{"name": "be", "url": _secret_url(s.port)}], "incomingAuth": auth})
    async with aiohttp.ClientSession() as h:
        code, text = await _get(h, gw.base + "/status")
        assert code == 200
        summary = json.loads(text)
        assert set(summary) == set(SUMMARY_KEYS), summary
        assert "be" not in json.dumps(summary["name"]) and "backends" not in summary
        code, _ = await _get(h, gw.base + "/status", Authorization="Bearer not-a-jwt")
        assert code == 401
        code, text = await _get(h, gw.base + "/status", Authorization="Bearer " + issuer.token("k"))
        assert code == 200
        full = json.loads(text)
        assert [b["name"] for b in full["backends"]] == ["be"]
        assert not any(secret in text for secret in SECRETS)
