"""Where the gateway learns its backends: the BackendSource interface and its implementations.

A source is an async iterator of *complete backend sets*: the first item is the initial set,
each later item the new set after a change (added, removed, URL changed). The gateway diffs
consecutive sets itself, so sources stay trivial.

* `StaticBackendSource`: the `backends:` list of the config file; yields once.
* `QueueBackendSource`: pushed sets (the local platform, tests).
* `KubernetesBackendSource`: MCPServers and MCPRemoteProxies of a group (`spec.groupRef`) in a
  namespace with a `status.url`, watched live through lightkube (group mcpfleet.dev/v1beta1, the stored version: no conversion webhook call).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcpfleet.api import kindnames

log = logging.getLogger(__name__)

API_GROUP = "mcpfleet.dev"
API_VERSION = "v1beta1"
"""The stored version (`mcpfleet.api.versions.STORAGE_VERSION`, not imported: the API models are
heavy for the gateway's start): the API server answers without calling the conversion webhook."""


@dataclass(frozen=True)
class BackendSpec:
    name: str
    url: str
    transport: str = "streamable-http"
    metadata: tuple[tuple[str, str], ...] = field(default=())


class BackendSource(Protocol):
    def watch(self) -> AsyncIterator[list[BackendSpec]]:
        """Yield the full backend set now, then again after every change."""
        ...


class StaticBackendSource:
    def __init__(self, backends: Iterable[BackendSpec]) -> None:
        self._backends = list(backends)

    async def watch(self) -> AsyncIterator[list[BackendSpec]]:
        yield list(self._backends)


class QueueBackendSource:
    """A source fed by `push()`; for the local platform supervisor and for tests."""

    def __init__(self, initial: Iterable[BackendSpec] = ()) -> None:
        self._queue: asyncio.Queue[list[BackendSpec]] = asyncio.Queue()
        self._queue.put_nowait(list(initial))

    def push(self, backends: Iterable[BackendSpec]) -> None:
        self._queue.put_nowait(list(backends))

    async def watch(self) -> AsyncIterator[list[BackendSpec]]:
        while True:
            yield await self._queue.get()


def _group_of(obj: dict[str, Any]) -> str | None:
    ref = (obj.get("spec") or {}).get("groupRef")
    if isinstance(ref, dict):  # tolerate an object-shaped ref ({name: ...}) as well as ToolHive's string
        ref = ref.get("name")
    return ref if isinstance(ref, str) else None


def backends_from_objects(objs: Iterable[dict[str, Any]], group: str) -> list[BackendSpec]:
    """Group members with a status.url, sorted by name (MCPServer and MCPRemoteProxy dicts)."""
    out: dict[str, BackendSpec] = {}
    for o in objs:
        if _group_of(o) != group:
            continue
        url = (o.get("status") or {}).get("url")
        name = (o.get("metadata") or {}).get("name")
        if not url or not name:
            continue
        spec = o.get("spec") or {}
        # status.url is the proxy in front of the server, so its protocol is the proxy mode.
        transport = "sse" if spec.get("proxyMode") == "sse" else "streamable-http"
        out[name] = BackendSpec(name=name, url=str(url), transport=transport)
    return [out[k] for k in sorted(out)]


class KubernetesBackendSource:
    """Follows a group's MCPServers / MCPRemoteProxies in one namespace via list + watch."""

    PLURALS = tuple(kindnames.PLURALS[kind] for kind in kindnames.MEMBER_KINDS)

    def __init__(self, group: str, namespace: str, client: Any | None = None) -> None:
        self.group = group
        self.namespace = namespace
        self._client = client

    def _resources(self) -> list[Any]:
        from lightkube.generic_resource import create_namespaced_resource

        return [
            create_namespaced_resource(API_GROUP, API_VERSION, kind, kindnames.PLURALS[kind])
            for kind in kindnames.MEMBER_KINDS
        ]

    async def _follow(
        self,
        client: Any,
        res: Any,
        objects: dict[tuple[str, str], dict[str, Any]],
        changed: asyncio.Queue[None],
    ) -> None:
        """Keep `objects` in step with the objects of one kind (list, then watch; re-list on error)."""
        kind = res._api_info.plural
        while True:
            try:
                seen: set[tuple[str, str]] = set()
                async for obj in client.list(res, namespace=self.namespace):
                    d = _to_dict(obj)
                    key = (kind, d["metadata"]["name"])
                    seen.add(key)
                    objects[key] = d
                for key in [k for k in objects if k[0] == kind and k not in seen]:
                    del objects[key]
                changed.put_nowait(None)
                async for op, obj in client.watch(res, namespace=self.namespace):
                    d = _to_dict(obj)
                    key = (kind, d["metadata"]["name"])
                    if op == "DELETED":
                        objects.pop(key, None)
                    else:
                        objects[key] = d
                    changed.put_nowait(None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("watching %s in %s: %s; re-listing", kind, self.namespace, exc)
                await asyncio.sleep(1.0)

    async def watch(self) -> AsyncIterator[list[BackendSpec]]:
        from lightkube import AsyncClient

        client = self._client or AsyncClient()
        objects: dict[tuple[str, str], dict[str, Any]] = {}
        changed: asyncio.Queue[None] = asyncio.Queue()

        tasks = [asyncio.create_task(self._follow(client, r, objects, changed)) for r in self._resources()]
        last: list[BackendSpec] | None = None
        try:
            # Wait for both initial lists before the first yield so the start-up set is complete.
            await changed.get()
            await changed.get()
            while True:
                current = backends_from_objects(objects.values(), self.group)
                if current != last:
                    last = current
                    yield current
                await changed.get()
                while not changed.empty():
                    changed.get_nowait()
        finally:
            for t in tasks:
                t.cancel()


def _to_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    return dict(obj.to_dict()) if hasattr(obj, "to_dict") else dict(obj)


class CombinedBackendSource:
    """Static backends plus a dynamic source (e.g. config `backends:` next to a `groupRef`)."""

    def __init__(self, static: Iterable[BackendSpec], dynamic: BackendSource) -> None:
        self._static = list(static)
        self._dynamic = dynamic

    async def watch(self) -> AsyncIterator[list[BackendSpec]]:
        names = {s.name for s in self._static}
        async for specs in self._dynamic.watch():
            yield self._static + [s for s in specs if s.name not in names]
