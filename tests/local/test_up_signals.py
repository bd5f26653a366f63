"""Ctrl-C ends `mcpfleet up` cleanly, children included; a remote proxy runs locally as it does on Kubernetes."""

from __future__ import annotations

import signal
from typing import Any

import httpx
import pytest

from tests.local.conftest import Up, manifest, pid_alive


@pytest.mark.timeout(90)
async def test_ctrl_c_stops_children_and_remote_proxy_runs(
    running_up: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No container runtime for this `up` (this machine has podman): an image is refused, as without one.
    monkeypatch.setenv("MCPFLEET_CONTAINER_RUNTIME", "none")
    # A remote proxy needs no package download: the cheapest real workload to start and stop.
    remote = manifest("MCPRemoteProxy", "upstream", {"remoteURL": "http://127.0.0.1:9/mcp"})
    image = manifest("MCPServer", "oci", {"image": "ghcr.io/example/server:1.0", "transport": "stdio"})
    up: Up = running_up({"remote.yaml": remote, "oci.yaml": image})
    status = await up.wait_phase("MCPRemoteProxy", "upstream", {"Running"}, limit=60)
    async with httpx.AsyncClient(trust_env=False) as http:
        health = await http.get(status["url"].removesuffix("/mcp") + "/health", timeout=10)
    assert health.status_code == 200
    # Without a container runtime a plain container image is refused, with the reason in the status.
    refused = await up.wait_phase("MCPServer", "oci", {"Failed"})
    assert "container images need Kubernetes" in refused["message"]
    assert "oci" not in {key.split("/")[2] for key in up.processes()}
    pids = list(up.processes().values())
    assert pids
    up.process.send_signal(signal.SIGINT)
    assert up.process.wait(30) == 0
    for pid in pids:
        assert not pid_alive(pid), f"pid {pid} survived Ctrl-C"
    assert up.get("get", "rp").split("\n")[1].split()[1] == "Stopped"
