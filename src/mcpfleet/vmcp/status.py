"""Where the gateway reports its backends and counts: the StatusWriter interface.

* `NoopStatusWriter`: nothing (static mode without a cluster).
* `FileStatusWriter`: a JSON file, atomically replaced (the local platform reads it).
* `status_summary`: the part of the document `/status` shows a caller without a token when the
  gateway has incoming auth.
* `KubernetesStatusWriter`: merge-patches `status` of the VirtualMCPServer
  (mcpfleet.dev/v1beta1 virtualmcpservers, the stored version: no conversion webhook call) through
  lightkube's generic resources, so the data
  plane never imports the operator. Fields follow `mcpfleet.api.virtualmcpserver.VirtualMCPServerStatus`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

from mcpfleet.api import kindnames
from mcpfleet.api.kindnames import VIRTUAL_MCP_SERVER

API_GROUP = "mcpfleet.dev"
API_VERSION = "v1beta1"
"""The stored version (`mcpfleet.api.versions.STORAGE_VERSION`, not imported: the API models are
heavy for the gateway's start): the API server answers without calling the conversion webhook."""


class StatusWriter(Protocol):
    async def write(self, status: dict[str, Any]) -> None: ...


class NoopStatusWriter:
    async def write(self, status: dict[str, Any]) -> None:
        return None


class FileStatusWriter:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    async def write(self, status: dict[str, Any]) -> None:
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(status, indent=2, sort_keys=True))
        os.replace(tmp, self.path)


SUMMARY_KEYS = ("name", "phase", "ready", "backendCount", "healthyBackends")
"""What `/status` shows a caller without a token on a gateway with incoming auth: whether it
serves, nothing about its backends (names, URLs, errors) or its sessions."""


def status_summary(status: dict[str, Any]) -> dict[str, Any]:
    """The unauthenticated view of a `/status` document (`SUMMARY_KEYS`)."""
    return {key: status[key] for key in SUMMARY_KEYS}


_HEALTH = {"ready": "healthy", "degraded": "healthy", "unavailable": "unhealthy", "unknown": "unknown"}


def to_resource_status(status: dict[str, Any]) -> dict[str, Any]:
    """Map the gateway's /status document onto the VirtualMCPServer status fields it owns."""
    backends = []
    for b in status["backends"]:
        d: dict[str, Any] = {
            "name": b["name"],
            "url": b["url"],
            "status": _HEALTH.get(b["state"], "unknown"),
            "consecutiveFailures": b["consecutiveFailures"],
        }
        if b["lastCheck"]:
            d["lastHealthCheck"] = b["lastCheck"]
        if b["error"]:
            d["message"] = b["error"]
        if b["circuitBreaker"]:
            d["circuitBreakerState"] = b["circuitBreaker"]
        for key in ("circuitLastChanged", "mcpRevision", "authType", "authConfigRef"):
            if b.get(key):
                d[key] = b[key]
        backends.append(d)
    return {
        "discoveredBackends": backends,
        "backendCount": status["backendCount"],
        "toolCount": status["counts"]["tools"],
        "resourceCount": status["counts"]["resources"],
        "promptCount": status["counts"]["prompts"],
    }


class KubernetesStatusWriter:
    """Patches the status subresource of one VirtualMCPServer."""

    def __init__(self, name: str, namespace: str, client: Any | None = None) -> None:
        self.name = name
        self.namespace = namespace
        self._client = client

    async def write(self, status: dict[str, Any]) -> None:
        from lightkube import AsyncClient
        from lightkube.generic_resource import create_namespaced_resource
        from lightkube.types import PatchType

        if self._client is None:
            self._client = AsyncClient()
        res = create_namespaced_resource(
            API_GROUP, API_VERSION, VIRTUAL_MCP_SERVER, kindnames.PLURALS[VIRTUAL_MCP_SERVER]
        )
        await self._client.patch(
            res.Status,
            self.name,
            {"status": to_resource_status(status)},
            namespace=self.namespace,
            patch_type=PatchType.MERGE,
        )
