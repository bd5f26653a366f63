"""End to end on the local platform: an MCPRemoteProxy with `externalAuthConfigRef` (the shape of
examples/kinds/remote-proxy.yaml) reaches a remote that requires the header, the value coming from a
local Secret; credentials in `remoteURL` appear in no log, status or run config."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from tests.local.conftest import manifest, reconcile_until
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.vmcp.servers import JsonRpcBackend, Served

PORTS = (32300, 32399)
SECRETS = ("hunter2", "KEY-123", "s3cret-api-key")


@pytest.mark.timeout(180)
async def test_remote_proxy_applies_its_external_auth_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = JsonRpcBackend("remote", require_header=("x-api-key", "s3cret-api-key"))
    served = await Served(backend).start()
    monkeypatch.setenv("MCPFLEET_SECRET_REMOTE_CREDENTIALS_API_KEY", "s3cret-api-key")
    manifests = tmp_path / "m"
    manifests.mkdir()
    remote_url = served.url.replace("http://", "http://user:hunter2@") + "?api_key=KEY-123"
    (manifests / "auth.yaml").write_text(
        manifest(
            "MCPExternalAuthConfig",
            "api-key",
            {
                "type": "headerInjection",
                "headerInjection": {
                    "headerName": "X-API-Key",
                    "valueSecretRef": {"name": "remote-credentials", "key": "api-key"},
                },
            },
        )
    )
    spec = {
        "remoteURL": remote_url,
        "externalAuthConfigRef": {"name": "api-key"},
        "headerForward": {"addPlaintextHeaders": {"X-Tenant": "platform"}},
    }
    (manifests / "proxy.yaml").write_text(manifest("MCPRemoteProxy", "remote-docs", spec))
    state_dir = tmp_path / "state"
    state = await State.open(state_dir)
    runner = Runner(manifests, state, port_range=PORTS)
    try:

        async def running() -> dict[str, object] | None:
            obj = await state.get_object("MCPRemoteProxy", "default", "remote-docs")
            status = dict(obj.status) if obj is not None else {}
            return status if status.get("phase") == "Running" and status.get("url") else None

        status = await reconcile_until(runner, "remote-docs Running with a URL", running, within=90)
        url = str(status["url"])
        async with httpx.AsyncClient(trust_env=False) as http:
            answer = await http.post(
                url, json=initialize_request(), headers=dict(STREAMABLE_HTTP_HEADERS), timeout=10
            )
            health = (await http.get(url.removesuffix("/mcp") + "/health", timeout=10)).text
        assert answer.status_code == 200 and answer.json()["result"]["serverInfo"], answer.text
        seen = backend.headers_by_method["initialize"]
        assert seen["x-api-key"] == "s3cret-api-key" and seen["x-tenant"] == "platform"
        assert seen["authorization"].startswith("Basic ")  # from the URL's user:pw
        configs = list((state_dir / "config").rglob("runconfig.json"))
        assert configs, "the run config was not written"
        shown = [
            health,
            json.dumps(status),
            (state_dir / "logs" / "mcpremoteproxy-remote-docs.log").read_text(),
            *(p.read_text() for p in configs),
        ]
        for text in shown:
            assert not any(s in text for s in SECRETS), text
        assert "http://***@127.0.0.1" in health
    finally:
        await runner.shutdown()
        await state.close()
        await served.stop()
