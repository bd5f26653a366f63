"""End to end on the local platform: incoming OIDC settings from a ConfigMap (`oidcConfig.type:
configMap`, ToolHive's default key `oidc.json`) read from the local ConfigMap source
`STATE/configmaps/<name>/<key>`: the proxy refuses a request without a token and serves one with a
token of that issuer and audience.

And, in the same process afterwards, a plain stdio proxy hosted in-process (as `mcpfleet up` hosts
them) still answers streamable HTTP in full. This scenario once left a stopped test server's uvicorn
`handle_exit` installed as pytest's SIGTERM handler; sse-starlette, finding that stopped server
behind the handler, ended every later SSE response of the process after its priming event (see
`tests/inprocess_server.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from mcpfleet.platform.local.supervisor import Supervisor
from tests.inprocess_server import leaked_uvicorn_handlers
from tests.local.conftest import manifest, reconcile_until
from tests.local.test_hosted import tiny_proxy_spec
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.oidc import Issuer
from tests.proxy.conftest import serve_app
from tests.vmcp.servers import JsonRpcBackend, Served, free_port
from tests.waiting import wait_until

PORTS = (32400, 32449)


async def _remote_proxy_with_oidc_from_a_config_map(tmp_path: Path) -> None:
    backend = JsonRpcBackend("remote")
    served = await Served(backend).start()
    issuer = Issuer()
    async with serve_app(issuer) as base:
        issuer.base = base
        issuer.add_rsa("k")
        state_dir = tmp_path / "state"
        folder = state_dir / "configmaps" / "shared-oidc"
        folder.mkdir(parents=True)
        (folder / "oidc.json").write_text(
            json.dumps({"issuer": base, "audience": "docs", "insecureAllowHTTP": True})
        )
        manifests = tmp_path / "m"
        manifests.mkdir()
        spec = {
            "remoteURL": served.url,
            "oidcConfig": {"type": "configMap", "configMap": {"name": "shared-oidc"}},
        }
        (manifests / "proxy.yaml").write_text(manifest("MCPRemoteProxy", "docs", spec))
        state = await State.open(state_dir)
        runner = Runner(manifests, state, port_range=PORTS)
        try:

            async def running() -> dict[str, object] | None:
                obj = await state.get_object("MCPRemoteProxy", "default", "docs")
                status = dict(obj.status) if obj is not None else {}
                return status if status.get("phase") == "Running" and status.get("url") else None

            status = await reconcile_until(runner, "docs Running with a URL", running, within=90)
            url = str(status["url"])
            headers = dict(STREAMABLE_HTTP_HEADERS)
            async with httpx.AsyncClient(trust_env=False) as http:
                anonymous = await http.post(url, json=initialize_request(), headers=headers, timeout=10)
                token = issuer.token("k", aud="docs")
                signed = await http.post(
                    url,
                    json=initialize_request(),
                    headers={**headers, "authorization": f"Bearer {token}"},
                    timeout=10,
                )
            assert anonymous.status_code == 401, anonymous.text
            assert signed.status_code == 200 and signed.json()["result"]["serverInfo"], signed.text
            assert issuer.jwks_hits >= 1  # the token was verified against this issuer's keys
        finally:
            await runner.shutdown()
            await state.close()
            # Stopped before the issuer although started first: lifetimes that do not nest, the
            # pattern that used to leave a uvicorn signal handler behind.
            await served.stop()


@pytest.mark.timeout(180)
async def test_remote_proxy_reads_oidc_settings_from_a_local_config_map(tmp_path: Path) -> None:
    await _remote_proxy_with_oidc_from_a_config_map(tmp_path)


@pytest.mark.timeout(300)
async def test_a_hosted_plain_proxy_answers_in_full_after_the_oidc_scenario(tmp_path: Path) -> None:
    await _remote_proxy_with_oidc_from_a_config_map(tmp_path / "oidc")
    assert leaked_uvicorn_handlers() == []
    supervisor = Supervisor(tmp_path / "logs", lambda: None, _noop, _noop)
    spec = tiny_proxy_spec("plain", free_port(), tmp_path)
    try:
        await supervisor.ensure(spec)
        # Ready means /health answered and so did an `initialize` over streamable HTTP (the SSE-
        # capable path that used to end after its priming event).
        log_path = tmp_path / "logs" / "plain.log"
        await wait_until(
            lambda: (s := supervisor.state(spec.key)) is not None and s.ready,
            "the hosted proxy ready",
            within=120,
            context=lambda: log_path.read_text()[-2000:] if log_path.exists() else "(no log)",
        )
        assert spec.mcp_probe_url is not None
        async with httpx.AsyncClient(trust_env=False) as http:
            response = await http.post(
                spec.mcp_probe_url, json=initialize_request(), headers=STREAMABLE_HTTP_HEADERS, timeout=30
            )
        assert response.status_code == 200, response.text
        assert '"serverInfo"' in response.text and '"tiny"' in response.text, response.text
        log = log_path.read_text()
        assert "ASGI callable returned without completing response" not in log, log
    finally:
        await supervisor.stop_all()


async def _noop(*_args: object) -> None:
    return None
