"""End to end on the local platform: incoming OIDC settings from a ConfigMap (`oidcConfig.type:
configMap`, ToolHive's default key `oidc.json`) read from the local ConfigMap source
`STATE/configmaps/<name>/<key>`: the proxy refuses a request without a token and serves one with a
token of that issuer and audience."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from tests.local.conftest import manifest, reconcile_until
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.oidc import Issuer
from tests.proxy.conftest import serve_app
from tests.vmcp.servers import JsonRpcBackend, Served

PORTS = (32400, 32449)


@pytest.mark.timeout(180)
async def test_remote_proxy_reads_oidc_settings_from_a_local_config_map(tmp_path: Path) -> None:
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
        finally:
            await runner.shutdown()
            await state.close()
            await served.stop()
