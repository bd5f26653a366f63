"""enforceServers on `mcpfleet up`: an MCPRegistry of the namespace with `enforceServers: true` whose
registry file is on a claim (`STATE/persistentvolumeclaims/<claim>/<path>`) admits the MCPServer whose
package it lists (ImageValidated True, the server runs) and refuses one it does not list (Failed,
ImageValidated False naming the image; no process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.local.conftest import Up, manifest, time_server

REGISTRY_FILE = {
    "version": "1.0.0",
    "last_updated": "2026-12-01T00:00:00Z",
    "servers": {
        "time": {
            "description": "Time and timezone conversion",
            "tier": "Community",
            "status": "Active",
            "transport": "stdio",
            "tools": ["get_current_time"],
            "image": "uvx://mcp-server-time",
        }
    },
}


def _condition(status: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in status["conditions"] if c["type"] == "ImageValidated")
    return found


@pytest.mark.timeout(240)
async def test_enforcing_registry_on_a_claim_admits_listed_packages(running_up: Any, tmp_path: Path) -> None:
    claim = tmp_path / "state" / "persistentvolumeclaims" / "approved"
    claim.mkdir(parents=True)
    (claim / "registry.json").write_text(json.dumps(REGISTRY_FILE))
    registry = manifest(
        "MCPRegistry",
        "approved",
        {
            "enforceServers": True,
            "registries": [{"name": "approved", "format": "toolhive", "pvcRef": {"claimName": "approved"}}],
        },
    )
    unlisted = json.loads(time_server("fetch", group=None))
    unlisted["spec"] = {"image": "uvx://mcp-server-fetch", "transport": "stdio"}
    up: Up = running_up(
        {
            "registry.yaml": registry,
            "time.yaml": time_server("time", group=None),
            "fetch.yaml": json.dumps(unlisted),
        }
    )
    time_status = await up.wait_phase("MCPServer", "time", {"Running"})
    assert _condition(time_status)["status"] == "True", time_status
    failed = await up.wait_phase("MCPServer", "fetch", {"Failed"})
    condition = _condition(failed)
    assert condition["status"] == "False" and condition["reason"] == "ImageValidationFailed"
    assert "uvx://mcp-server-fetch" in failed["message"] and "approved" in failed["message"], failed
    assert not failed.get("url")
