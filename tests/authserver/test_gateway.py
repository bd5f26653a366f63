"""Through `mcpfleet up`: a VirtualMCPServer with `authServerConfig` (ToolHive v1beta1) is the issuer of
its clients' tokens. The gateway serves the authorization server's endpoints beside `/mcp`, a client
registers, logs in through the test IdP and lists the backend's tools with the JWT; without a token, or
with a token signed by another key, it gets 401. A mismatched incomingAuth issuer is a problem naming the
field, never a running gateway that accepts nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from tests.authserver.flow import login
from tests.authserver.test_local_up import _running_url, assert_no_secret_shown
from tests.local.conftest import manifest, reconcile_until
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.oidc import Issuer
from tests.vmcp.servers import JsonRpcBackend, Served, free_port


def _gateway(idp: Issuer, port: int, backend_url: str, incoming_issuer: str) -> str:
    auth_server = json.loads(_auth_manifest_spec(idp, port))
    spec: dict[str, Any] = {
        "config": {
            "groupRef": "team",
            "backends": [{"name": "remote", "url": backend_url}],
        },
        "incomingAuth": {
            "type": "oidc",
            "oidcConfig": {
                "type": "inline",
                "inline": {
                    "issuer": incoming_issuer,
                    "audience": f"http://127.0.0.1:{port}/mcp",
                    "insecureAllowHTTP": True,  # loopback test issuer
                },
            },
        },
        "authServerConfig": auth_server,
    }
    return "\n---\n".join([manifest("MCPGroup", "team", {}), manifest("VirtualMCPServer", "gw", spec)])


def _auth_manifest_spec(idp: Issuer, port: int) -> str:
    from tests.authserver.test_local_up import _auth_manifest

    return json.dumps(json.loads(_auth_manifest(idp, port))["spec"]["embeddedAuthServer"])


@pytest.mark.timeout(240)
async def test_gateway_is_its_own_authorization_server(tmp_path: Path, idp: Issuer) -> None:
    backend = JsonRpcBackend("remote", tools=["echo"])
    backend_served = await Served(backend).start()
    port = free_port()
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "gw.yaml").write_text(_gateway(idp, port, backend_served.url, f"http://127.0.0.1:{port}"))
    state_dir = tmp_path / "state"
    state = await State.open(state_dir)
    runner = Runner(manifests, state, port_range=(port, port))
    try:
        url = await _running_url(runner, state, "VirtualMCPServer", "gw", phase="Ready")
        assert url == f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient(trust_env=False, timeout=15) as http:
            done = await login(http, url)  # discovery from the gateway's 401, as a client does
            assert done.metadata["issuer"] == f"http://127.0.0.1:{port}"
            headers = {**STREAMABLE_HTTP_HEADERS, "Authorization": f"Bearer {done.tokens['access_token']}"}
            answer = await http.post(url, json=initialize_request(), headers=headers)
            assert answer.status_code == 200, answer.text
            session = answer.headers.get("mcp-session-id")
            listed = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                headers={**headers, **({"mcp-session-id": session} if session else {})},
            )
            idp.add_rsa("foreign")  # the gateway's issuer and audience, but not its key
            foreign = idp.token("foreign", aud=url, iss=f"http://127.0.0.1:{port}")
            forged = {**STREAMABLE_HTTP_HEADERS, "Authorization": f"Bearer {foreign}"}
            other_issuer = await http.post(url, json=initialize_request(), headers=forged)
        assert listed.status_code == 200 and "echo" in listed.text, listed.text
        assert other_issuer.status_code == 401
        # The client's JWT is the gateway's business: the backend never sees it.
        sent = backend.headers_by_method["initialize"].get("authorization", "")
        assert done.tokens["access_token"] not in sent
        assert_no_secret_shown(state_dir, "virtualmcpserver-gw.log")
    finally:
        await runner.shutdown()
        await state.close()
        await backend_served.stop()


@pytest.mark.timeout(120)
async def test_issuer_mismatch_is_a_problem(tmp_path: Path, idp: Issuer) -> None:
    port = free_port()
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "gw.yaml").write_text(
        _gateway(idp, port, "http://127.0.0.1:9/mcp", "https://other.example.com")
    )
    state = await State.open(tmp_path / "state")
    runner = Runner(manifests, state, port_range=(port, port))

    async def failed() -> str | None:
        obj = await state.get_object("VirtualMCPServer", "default", "gw")
        status = dict(obj.status) if obj is not None else {}
        return str(status.get("message")) if status.get("phase") == "Failed" else None

    try:
        message = await reconcile_until(runner, "gw Failed", failed, within=60)
        assert "spec.authServerConfig.issuer" in message and "other.example.com" in message, message
    finally:
        await runner.shutdown()
        await state.close()
