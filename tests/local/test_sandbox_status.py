"""What `up` says about a server's sandbox: the profile in its status, and a sandbox that cannot be set
up (bubblewrap missing) is `Failed` with the cause, the server never started without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpfleet.platform.local.runner import Runner, workload_key
from mcpfleet.platform.local.state import State
from tests.local.conftest import manifest, reconcile_until

PORTS = (32450, 32469)


async def _status_when(runner: Runner, state: State, name: str, phase: str) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        obj = await state.get_object("MCPServer", "default", name)
        status = dict(obj.status) if obj is not None and obj.status else {}
        return status if status.get("phase") == phase else None

    return await reconcile_until(runner, f"{name} {phase}", reached, within=60)


@pytest.mark.timeout(120)
async def test_missing_bubblewrap_fails_the_server_naming_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PATH without bwrap (and without the package managers: nothing may start unsandboxed).
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    manifests = tmp_path / "m"
    manifests.mkdir()
    spec = {"image": "uvx://mcp-server-time", "permissionProfile": {"name": "none"}}
    (manifests / "s.yaml").write_text(manifest("MCPServer", "boxed", spec))
    state = await State.open(tmp_path / "state")
    runner = Runner(manifests, state, port_range=PORTS)
    try:
        status = await _status_when(runner, state, "boxed", "Failed")
        assert "sandbox: bubblewrap (bwrap) is not installed" in status["message"], status
        permissions = next(c for c in status["conditions"] if c["type"] == "Permissions")
        assert permissions["status"] == "True"
        assert permissions["message"].startswith("builtin none: no network; files: own work folder only")
        key = f"{workload_key('MCPServer', 'default', 'boxed')}/proxy/0"
        assert runner.supervisor.state(key) is None  # nothing started without its sandbox
    finally:
        await runner.shutdown()
        await state.close()


@pytest.mark.timeout(120)
async def test_a_profile_the_platform_refuses_is_failed_naming_the_field(tmp_path: Path) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    spec = {
        "image": "uvx://mcp-server-time",
        "permissionProfile": {"type": "configmap", "name": "profiles", "key": "strict.json"},
    }
    (manifests / "s.yaml").write_text(manifest("MCPServer", "strict", spec))
    folder = tmp_path / "state" / "configmaps" / "profiles"
    folder.mkdir(parents=True)
    (folder / "strict.json").write_text('{"read": ["relative"]}')
    state = await State.open(tmp_path / "state")
    runner = Runner(manifests, state, port_range=PORTS)
    try:
        status = await _status_when(runner, state, "strict", "Failed")
        assert (
            "spec.permissionProfile: ConfigMap profiles key strict.json: read: [0] 'relative' is not an"
            " absolute path" in status["message"]
        ), status
    finally:
        await runner.shutdown()
        await state.close()
