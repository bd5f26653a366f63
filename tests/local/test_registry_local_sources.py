"""MCPRegistry under `mcpfleet up`: a `configMapRef` source reads the ConfigMap key's local file
(`STATE/configmaps/<name>/<key>`, as docs/local.md says), and the status follows the registry's
readiness: a registry whose only source cannot be read (`/readiness` 503) is not reported Running."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.local.conftest import Up, manifest
from tests.reference import TOOLHIVE_FILE
from tests.waiting import wait_until


@pytest.mark.timeout(240)
async def test_configmap_source_is_the_local_file_and_status_follows_readiness(
    running_up: Any, tmp_path: Path
) -> None:
    spec = {
        "registries": [
            {
                "name": "team",
                "format": "toolhive",
                "configMapRef": {"name": "reg-data", "key": "registry.json"},
            }
        ]
    }
    up: Up = running_up({"registry.yaml": manifest("MCPRegistry", "team", spec)})
    # No ConfigMap file yet: the registry runs but has nothing to serve, so it is not Running.
    pending = await up.wait_for(
        "registry status reported",
        lambda: (
            (up.objects("MCPRegistry").get("team") or {}).get("phase") and up.objects("MCPRegistry")["team"]
        ),
    )
    assert pending.get("phase") != "Running", pending
    folder = tmp_path / "state" / "configmaps" / "reg-data"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "registry.json").write_text(TOOLHIVE_FILE.read_text())
    status = await up.wait_phase("MCPRegistry", "team", {"Running"}, limit=150)
    expected = len(json.loads(TOOLHIVE_FILE.read_text())["servers"])

    async def listed() -> bool | None:
        async with httpx.AsyncClient(trust_env=False) as http:
            answer = await http.get(f"{status['url']}/v0.1/servers?limit=100", timeout=10)
        return len(answer.json()["servers"]) >= min(expected, 30) or None

    await wait_until(
        listed, "the ConfigMap file's servers listed", within=60, interval=0.5, tolerate=(httpx.HTTPError,)
    )
