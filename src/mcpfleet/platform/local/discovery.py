"""Local implementations of the data plane's discovery interfaces, reading the local state file.

* `LocalBackendSource` is the vMCP's `BackendSource`: the members of one group with a status URL,
  re-read from SQLite whenever the file changed (`state_changes`) and yielded whenever the set
  changes (servers added, removed, restarted on a new URL). It is the local twin of
  `KubernetesBackendSource`.
* `LocalWorkloads` is the registry's `WorkloadSource`: workloads labelled
  `mcpfleet.dev/registry: <name>` with a status URL, like the `kubernetes` source lists them.

`state_changes` is how both notice a write of the reconcile loop within 0.1 s without querying
SQLite ten times a second: it watches the state file's size and modification time (a commit in
WAL mode appends to `state.db-wal`; a checkpoint rewrites `state.db`), two `stat` calls a poll.

Both only read; the reconcile loop is the single writer. Neither imports the operator, so the
vMCP and registry processes stay data plane plus this read-only view.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcpfleet.api.kinds import MEMBER_KINDS, PUBLISHED_KINDS
from mcpfleet.api.meta import LABEL_REGISTRY
from mcpfleet.platform.local.paths import file_signature
from mcpfleet.platform.local.snapshot import DB_FILENAME, StoredObject
from mcpfleet.platform.local.state import State
from mcpfleet.registry.sources.kubernetes import ANNOTATION_DESCRIPTION, Workload
from mcpfleet.vmcp.backends import BackendSpec, backends_from_objects

BACKEND_KINDS = MEMBER_KINDS
"""The kinds a gateway's group lists as its backends."""
REGISTRY_KINDS = PUBLISHED_KINDS
"""The kinds an MCPRegistry's workload source lists."""
CHANGE_POLL_SECONDS = 0.1
"""How often `state_changes` looks at the state file's size and modification time."""


def _signature(state_dir: Path) -> tuple[tuple[int, int, int] | None, ...]:
    """Identity, size and modification time of the state file and its WAL (None: missing)."""
    return tuple(file_signature(state_dir / name) for name in (DB_FILENAME, f"{DB_FILENAME}-wal"))


async def state_changes(
    state_dir: Path, every: float, poll: float = CHANGE_POLL_SECONDS
) -> AsyncIterator[None]:
    """Yields at once, then as soon as the state file changed (seen within `poll` seconds), and
    at least every `every` seconds anyway (a change the file's times could hide)."""
    last = _signature(state_dir)
    due = time.monotonic() + every
    yield None
    while True:
        await asyncio.sleep(min(poll, every))
        current = _signature(state_dir)
        if current != last or time.monotonic() >= due:
            last = current
            due = time.monotonic() + every
            yield None


def _document(obj: StoredObject) -> dict[str, Any]:
    return {
        "metadata": {"name": obj.name, "namespace": obj.namespace},
        "spec": obj.manifest.get("spec") or {},
        "status": obj.status,
    }


class LocalBackendSource:
    """The members of `group` in `namespace` that are running, as the vMCP's backend set."""

    def __init__(self, state_dir: Path, group: str, namespace: str, interval: float = 2.0) -> None:
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
            async for _ in state_changes(self.state_dir, self.interval):
                try:
                    current = await self.current(state)
                except Exception:  # the file is being created or migrated: try again shortly
                    current = last if last is not None else []
                if current != last:
                    last = current
                    yield current
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
