"""Secrets on the local platform, end to end through the in-process reconcile loop.

A Secret key is read from `$MCPFLEET_SECRET_<NAME>_<KEY>` or `STATE/secrets/<name>/<key>` and reaches
the process as the env var (`secret_env`) or the file (`secret_files`) its plan names: the vMCP's
`bearerToken` outgoing auth and the registry's private git source, against servers that require them.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from tests.local.conftest import manifest, reconcile_until
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.registry.test_git_http import PASSWORD, USER, serve_http_repo
from tests.vmcp.servers import JsonRpcBackend, Served

PORTS = (32400, 32699)
"""Inside the local tests' range (below the kernel's ephemeral ports), apart from other in-process tests."""


def _status(state: State, kind: str, name: str) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def read() -> dict[str, Any]:
        obj = await state.get_object(kind, "default", name)
        return dict(obj.status) if obj is not None else {}

    return read


def _phase(state: State, kind: str, name: str, phase: str) -> Callable[[], Awaitable[dict[str, Any] | None]]:
    read = _status(state, kind, name)

    async def check() -> dict[str, Any] | None:
        status = await read()
        return status if status.get("phase") == phase else None

    return check


@pytest.mark.timeout(180)
async def test_registry_private_git_source_reads_the_secret_file(tmp_path: Path) -> None:
    (tmp_path / "git").mkdir()
    with serve_http_repo(tmp_path / "git") as (repository, _):
        manifests = tmp_path / "m"
        manifests.mkdir()
        source = {
            "name": "private",
            "format": "upstream",
            "git": {
                "repository": repository,
                "branch": "main",
                "auth": {"username": USER, "passwordSecretRef": {"name": "git-creds", "key": "token"}},
            },
        }
        (manifests / "registry.yaml").write_text(
            manifest("MCPRegistry", "catalogue", {"registries": [source]})
        )
        state_dir = tmp_path / "state"
        state = await State.open(state_dir)
        runner = Runner(manifests, state, port_range=PORTS)
        try:
            # No such Secret on this machine: Failed, saying where the value is looked for.
            failed = await reconcile_until(
                runner, "Failed", _phase(state, "MCPRegistry", "catalogue", "Failed")
            )
            assert "secret git-creds key token: not found locally" in failed["message"], failed
            assert "MCPFLEET_SECRET_GIT_CREDS_TOKEN" in failed["message"]

            secret = state_dir / "secrets" / "git-creds" / "token"
            secret.parent.mkdir(parents=True)
            secret.write_text(PASSWORD + "\n")
            running = await reconcile_until(
                runner, "Running", _phase(state, "MCPRegistry", "catalogue", "Running")
            )

            async def names() -> list[str]:
                async with httpx.AsyncClient(trust_env=False) as http:
                    response = await http.get(f"{running['url']}/v0.1/servers", timeout=10)
                if response.status_code != 200:
                    return []
                return [s["server"]["name"] for s in response.json()["servers"]]

            assert await reconcile_until(runner, "the private entry", names) == ["com.example/private"]
            async with httpx.AsyncClient(trust_env=False) as http:
                sources = (await http.get(f"{running['url']}/status", timeout=10)).json()["sources"]
            assert sources[0]["lastError"] is None and sources[0]["entries"] == 1

            config_dir = state_dir / "config" / "mcpregistry" / "default" / "catalogue"
            config = (config_dir / "registry.yaml").read_text()
            assert "passwordFile: secrets/git-private-password" in config and PASSWORD not in config
            password_file = config_dir / "secrets" / "git-private-password"
            assert password_file.read_text() == PASSWORD
            assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
            assert stat.S_IMODE(password_file.parent.stat().st_mode) == 0o700
            assert PASSWORD not in (state_dir / "logs" / "mcpregistry-catalogue.log").read_text()

            # The object removed: its Secret files go with it.
            (manifests / "registry.yaml").unlink()
            runner.manifests_changed()

            async def removed() -> bool:
                return not password_file.parent.exists() and not runner.supervisor.keys()

            await reconcile_until(runner, "the secret files removed", removed)
        finally:
            await runner.shutdown()
            await state.close()


@pytest.mark.timeout(180)
async def test_vmcp_bearer_token_from_a_local_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = JsonRpcBackend("locked", require_header=("authorization", "Bearer tok-local"))
    served = await Served(backend).start()
    monkeypatch.setenv("MCPFLEET_SECRET_API_TOKEN_TOKEN", "tok-local")
    manifests = tmp_path / "m"
    manifests.mkdir()
    files = {
        "group.yaml": manifest("MCPGroup", "g", {}),
        "auth.yaml": manifest(
            "MCPExternalAuthConfig",
            "bt",
            {"type": "bearerToken", "bearerToken": {"tokenSecretRef": {"name": "api-token", "key": "token"}}},
        ),
        "gw.yaml": manifest(
            "VirtualMCPServer",
            "gw",
            {
                "config": {"groupRef": "g", "backends": [{"name": "locked", "url": served.url}]},
                "incomingAuth": {"type": "anonymous"},
                "outgoingAuth": {
                    "default": {"type": "external_auth_config_ref", "externalAuthConfigRef": {"name": "bt"}}
                },
            },
        ),
    }
    for name, content in files.items():
        (manifests / name).write_text(content)
    state_dir = tmp_path / "state"
    state = await State.open(state_dir)
    runner = Runner(manifests, state, port_range=PORTS)
    try:
        ready = await reconcile_until(runner, "Ready", _phase(state, "VirtualMCPServer", "gw", "Ready"))
        assert ready["discoveredBackends"][0]["status"] == "healthy", ready
        async with httpx.AsyncClient(trust_env=False) as http:
            init = await http.post(
                ready["url"], json=initialize_request(), headers=dict(STREAMABLE_HTTP_HEADERS), timeout=10
            )
            headers = {**STREAMABLE_HTTP_HEADERS, "mcp-session-id": init.headers["mcp-session-id"]}
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "locked_echo", "arguments": {}},
            }
            answer = await http.post(ready["url"], json=call, headers=headers, timeout=10)
        assert answer.json()["result"]["isError"] is False, answer.text
        assert backend.headers_by_method["tools/call"]["authorization"] == "Bearer tok-local"
        config = (state_dir / "config" / "virtualmcpserver" / "default" / "gw" / "vmcp.yaml").read_text()
        assert "tokenEnv: MCPFLEET_SECRET_0" in config and "tok-local" not in config
        assert "tok-local" not in json.dumps(ready)
    finally:
        await runner.shutdown()
        await state.close()
        await served.stop()
