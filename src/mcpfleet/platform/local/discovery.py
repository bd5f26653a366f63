"""Local implementations of the data plane's discovery interfaces, reading the local state file.

* `LocalBackendSource` is the vMCP's `BackendSource`: the members of one group with a status URL,
  re-read from SQLite every `interval` and yielded whenever the set changes (servers added,
  removed, restarted on a new URL). It is the local twin of `KubernetesBackendSource`.
* `LocalWorkloads` is the registry's `WorkloadSource`: workloads labelled
  `mcpfleet.dev/registry: <name>` with a status URL, like the `kubernetes` source lists them.

Both only read; the reconcile loop is the single writer. Neither imports the operator, so the
vMCP and registry processes stay data plane plus this read-only view.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcpfleet.api.meta import LABEL_REGISTRY
from mcpfleet.platform.local.snapshot import StoredObject
from mcpfleet.platform.local.state import State
from mcpfleet.registry.sources.kubernetes import ANNOTATION_DESCRIPTION, Workload
from mcpfleet.vmcp.backends import BackendSpec, backends_from_objects

BACKEND_KINDS = ("MCPServer", "MCPRemoteProxy")
REGISTRY_KINDS = ("MCPServer", "VirtualMCPServer", "MCPRemoteProxy")


def _document(obj: StoredObject) -> dict[str, Any]:
    return {
        "metadata": {"name": obj.name, "namespace": obj.namespace},
        "spec": obj.manifest.get("spec") or {},
        "status": obj.status,
    }


class LocalBackendSource:
    """The members of `group` in `namespace` that are running, as the vMCP's backend set."""

    def __init__(self, state_dir: Path, group: str, namespace: str, interval: float = 0.5) -> None:
        self.state_dir = state_dir
        self.group = group
        self.namespace = namespace
        self.interval = interval

    async def current(self, state: State) -> list[BackendSpec]:
        objects = [
            _document(o)
            for kind in BACKEND_KINDS
            for o in await state.objects(kind)
            if o.namespace == self.namespace
        ]
        return backends_from_objects(objects, self.group)

    async def watch(self) -> AsyncIterator[list[BackendSpec]]:
        state = await State.open(self.state_dir, create=False)
        last: list[BackendSpec] | None = None
        try:
            while True:
                try:
                    current = await self.current(state)
                except Exception:  # the file is being created or migrated: try again shortly
                    current = last if last is not None else []
                if current != last:
                    last = current
                    yield current
                await asyncio.sleep(self.interval)
        finally:
            await state.close()


class LocalWorkloads:
    """Workloads labelled for `registry_name`, with a status URL, as the registry's WorkloadSource."""

    def __init__(self, state_dir: Path, registry_name: str, namespaces: list[str] | None = None) -> None:
        self.state_dir = state_dir
        self.registry_name = registry_name
        self.namespaces = namespaces or []
        self._state: State | None = None

    async def _open(self) -> State:
        if self._state is None:
            self._state = await State.open(self.state_dir, create=False)
        return self._state

    async def workloads(self) -> list[Workload]:
        state = await self._open()
        out: list[Workload] = []
        for kind in REGISTRY_KINDS:
            for obj in await state.objects(kind):
                if self.namespaces and obj.namespace not in self.namespaces:
                    continue
                meta = obj.manifest.get("metadata") or {}
                if (meta.get("labels") or {}).get(LABEL_REGISTRY) != self.registry_name:
                    continue
                url = obj.status.get("url")
                if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                    continue
                description = (meta.get("annotations") or {}).get(ANNOTATION_DESCRIPTION)
                out.append(Workload(obj.namespace, obj.name, url, kind, description))
        return out

    async def fingerprint(self) -> str:
        """Changes whenever the listed workloads change: the registry re-syncs on it (live)."""
        found = sorted(
            (w.namespace, w.name, w.kind, w.url, w.description or "") for w in await self.workloads()
        )
        return json.dumps(found)

    async def close(self) -> None:
        if self._state is not None:
            await self._state.close()
            self._state = None
