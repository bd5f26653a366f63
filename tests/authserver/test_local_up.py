"""Through `mcpfleet up`: an MCPRemoteProxy whose `externalAuthConfigRef` (or `authServerRef`) is an embeddedAuthServer
(oauth2 upstream = the test IdP on loopback, client secret and HMAC key from local Secrets) in front
of a recording MCP backend. A client registers, logs in through the IdP and calls the backend with
the JWT; the backend sees the user's upstream token; no secret is in any rendered file or log."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from tests.authserver.conftest import SECRETS
from tests.authserver.flow import login
from tests.local.conftest import manifest, reconcile_until
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.oidc import Issuer
from tests.vmcp.servers import JsonRpcBackend, Served, free_port


async def _running_url(runner: Runner, state: State, kind: str, name: str, phase: str = "Running") -> str:
    """The URL in the status once the workload reached `phase` (a VirtualMCPServer says Ready)."""

    async def running() -> dict[str, object] | None:
        obj = await state.get_object(kind, "default", name)
        status = dict(obj.status) if obj is not None else {}
        return status if status.get("phase") == phase and status.get("url") else None

    status = await reconcile_until(runner, f"{name} {phase} with a URL", running, within=120)
    return str(status["url"])


def _auth_manifest(idp: Issuer, port: int) -> str:
    """An embeddedAuthServer whose issuer is the proxy's URL, the test IdP as its oauth2 upstream."""
    return manifest(
        "MCPExternalAuthConfig",
        "login",
        {
            "type": "embeddedAuthServer",
            "embeddedAuthServer": {
                "issuer": f"http://127.0.0.1:{port}",
                "upstreamProviders": [
                    {
                        "name": "test-idp",
                        "type": "oauth2",
                        "oauth2Config": {
                            "authorizationEndpoint": idp.base + "/authorize",
                            "tokenEndpoint": idp.base + "/token",
                            "clientId": "mcpfleet",
                            "clientSecretRef": {"name": "idp", "key": "client-secret"},
                            "identityFromToken": {"subjectPath": "user.id"},
                        },
                    }
                ],
                "hmacSecretRefs": [{"name": "as-keys", "key": "hmac"}],
            },
        },
    )


async def _remote_with_auth(tmp_path: Path, idp: Issuer) -> tuple[JsonRpcBackend, Served, int, Path]:
    """A recording backend, the port `mcpfleet up` will serve on, and a manifest folder holding the
    embeddedAuthServer config `login` (issuer = that port)."""
    backend = JsonRpcBackend("remote")
    backend_served = await Served(backend).start()
    port = free_port()
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "auth.yaml").write_text(_auth_manifest(idp, port))
    return backend, backend_served, port, manifests


def assert_no_secret_shown(state_dir: Path, log_name: str) -> None:
    """The rendered config (authserver.json among it) and the workload's log hold no secret value."""
    rendered = [p for p in (state_dir / "config").rglob("*") if p.is_file() and "secrets" not in p.parts]
    assert any(p.name == "authserver.json" for p in rendered), rendered
    for text in [p.read_text() for p in rendered] + [(state_dir / "logs" / log_name).read_text()]:
        assert not any(s in text for s in SECRETS)


@pytest.mark.timeout(240)
async def test_embedded_auth_server_through_mcpfleet_up(tmp_path: Path, idp: Issuer) -> None:
    backend, backend_served, port, manifests = await _remote_with_auth(tmp_path, idp)
    spec = {"remoteURL": backend_served.url, "externalAuthConfigRef": {"name": "login"}}
    (manifests / "proxy.yaml").write_text(manifest("MCPRemoteProxy", "guarded", spec))
    state_dir = tmp_path / "state"
    state = await State.open(state_dir)
    runner = Runner(manifests, state, port_range=(port, port))
    try:
        url = await _running_url(runner, state, "MCPRemoteProxy", "guarded")
        assert url == f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient(trust_env=False, timeout=15) as http:
            done = await login(http, url)
            headers = {**STREAMABLE_HTTP_HEADERS, "Authorization": f"Bearer {done.tokens['access_token']}"}
            answer = await http.post(url, json=initialize_request(), headers=headers)
        assert answer.status_code == 200, answer.text
        upstream = backend.headers_by_method["initialize"]["authorization"].removeprefix("Bearer ")
        assert idp.access_tokens[upstream] == "user-1"
        assert_no_secret_shown(state_dir, "mcpremoteproxy-guarded.log")
    finally:
        await runner.shutdown()
        await state.close()
        await backend_served.stop()


@pytest.mark.timeout(240)
async def test_stdio_server_behind_the_embedded_auth_server(tmp_path: Path, idp: Issuer) -> None:
    """A stdio server's in-process proxy (`mcpfleet up` hosts it) runs the authorization server too."""
    port = free_port()
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "auth.yaml").write_text(_auth_manifest(idp, port))
    spec = {"image": "uvx://mcp-server-time", "externalAuthConfigRef": {"name": "login"}}
    (manifests / "time.yaml").write_text(manifest("MCPServer", "time", spec))
    state = await State.open(tmp_path / "state")
    runner = Runner(manifests, state, port_range=(port, port))
    try:
        url = await _running_url(runner, state, "MCPServer", "time")
        async with httpx.AsyncClient(trust_env=False, timeout=15) as http:
            done = await login(http, url)
            headers = {**STREAMABLE_HTTP_HEADERS, "Authorization": f"Bearer {done.tokens['access_token']}"}
            answer = await http.post(url, json=initialize_request(), headers=headers)
            anonymous = await http.post(url, json=initialize_request(), headers=dict(STREAMABLE_HTTP_HEADERS))
        assert answer.status_code == 200 and "serverInfo" in answer.text, answer.text
        assert anonymous.status_code == 401
    finally:
        await runner.shutdown()
        await state.close()


@pytest.mark.timeout(240)
async def test_auth_server_ref_with_outgoing_bearer_token(tmp_path: Path, idp: Issuer) -> None:
    """ToolHive's split: `authServerRef` runs the login for the proxy's clients, `externalAuthConfigRef`
    (a bearerToken here) is what the remote gets instead of the user's upstream token."""
    backend, backend_served, port, manifests = await _remote_with_auth(tmp_path, idp)
    outgoing = {"type": "bearerToken", "bearerToken": {"tokenSecretRef": {"name": "remote", "key": "token"}}}
    (manifests / "outgoing.yaml").write_text(manifest("MCPExternalAuthConfig", "remote-key", outgoing))
    spec = {
        "remoteURL": backend_served.url,
        "authServerRef": {"kind": "MCPExternalAuthConfig", "name": "login"},
        "externalAuthConfigRef": {"name": "remote-key"},
    }
    (manifests / "proxy.yaml").write_text(manifest("MCPRemoteProxy", "split", spec))
    state_dir = tmp_path / "state"
    state = await State.open(state_dir)
    runner = Runner(manifests, state, port_range=(port, port))
    try:
        url = await _running_url(runner, state, "MCPRemoteProxy", "split")
        async with httpx.AsyncClient(trust_env=False, timeout=15) as http:
            anonymous = await http.post(url, json=initialize_request(), headers=dict(STREAMABLE_HTTP_HEADERS))
            done = await login(http, url)
            headers = {**STREAMABLE_HTTP_HEADERS, "Authorization": f"Bearer {done.tokens['access_token']}"}
            answer = await http.post(url, json=initialize_request(), headers=headers)
        assert anonymous.status_code == 401
        assert answer.status_code == 200, answer.text
        assert backend.headers_by_method["initialize"]["authorization"] == f"Bearer {SECRETS[2]}"
        login_config = await state.get_object("MCPExternalAuthConfig", "default", "login")
        assert login_config is not None
        referencing = dict(login_config.status).get("referencingWorkloads")
        assert referencing == [{"kind": "MCPRemoteProxy", "name": "split"}], referencing
    finally:
        await runner.shutdown()
        await state.close()
        await backend_served.stop()
