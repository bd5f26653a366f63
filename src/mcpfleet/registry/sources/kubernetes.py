"""`kubernetes` source: workloads labelled `mcpfleet.dev/registry: <registry name>` become entries.

Discovery sits behind the `WorkloadSource` protocol: `KubernetesWorkloads` lists MCPServer,
VirtualMCPServer and MCPRemoteProxy objects through the API server; the local platform can supply the
same `Workload` records from its own state. `WorkloadReader` turns records into entries named
`dev.mcpfleet.k8s.<namespace>/<name>` with `remotes[{type: streamable-http, url: status.url}]`; an
object without `status.url` (not running yet) is not listed, and an object that goes away leaves.

A source that can report changes (`KubernetesWorkloads.changes`: a watch on the labelled objects) gives
the reader a `watch`, so a workload that starts running is listed at once instead of at the next
interval (5 minutes by default): a registry started beside its servers would otherwise stay empty.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.types import OnErrorAction, OnErrorResult

from mcpfleet.api.kindnames import PLURALS, PUBLISHED_KINDS
from mcpfleet.backoff import Backoff
from mcpfleet.registry.entry import Entry, EntryError, ParseResult
from mcpfleet.registry.formats.upstream import SERVER_SCHEMA_URL, validation_error
from mcpfleet.registry.sources.base import Fetched, SourceError

GROUP = "mcpfleet.dev"
VERSION = "v1beta1"
"""The stored version: a watch in it needs no call to the conversion webhook per event (v1alpha1 did)."""
LABEL_REGISTRY = f"{GROUP}/registry"
NAME_PREFIX = "dev.mcpfleet.k8s."
ENTRY_VERSION = "1.0.0"
WATCH_RETRY = Backoff(initial=0.5, maximum=30.0)
"""A watch that failed is reopened after 1, 2, 4 ... 30 s (a kind without its CRD keeps failing)."""
ANNOTATION_DESCRIPTION = f"{GROUP}/description"
KINDS = tuple((kind, PLURALS[kind]) for kind in PUBLISHED_KINDS)


@dataclass(frozen=True, slots=True)
class Workload:
    """A running MCP endpoint the platform knows about."""

    namespace: str
    name: str
    url: str
    kind: str
    description: str | None = None


class WorkloadSource(Protocol):
    async def workloads(self) -> list[Workload]: ...

    async def close(self) -> None: ...


def workload_entry(workload: Workload) -> dict[str, Any]:
    """The server.json document for a workload."""
    description = workload.description or f"{workload.kind} {workload.namespace}/{workload.name}"
    if len(description) > 100:
        description = description[:97] + "..."
    return {
        "$schema": SERVER_SCHEMA_URL,
        "name": f"{NAME_PREFIX}{workload.namespace}/{workload.name}",
        "title": workload.name,
        "description": description,
        "version": ENTRY_VERSION,
        "remotes": [{"type": "streamable-http", "url": workload.url}],
        "_meta": {
            "io.modelcontextprotocol.registry/publisher-provided": {
                "dev.mcpfleet": {
                    "kind": workload.kind,
                    "namespace": workload.namespace,
                    "name": workload.name,
                }
            }
        },
    }


class WorkloadReader:
    """Adapts any WorkloadSource to the SourceReader protocol."""

    def __init__(self, source: str, workloads: WorkloadSource) -> None:
        self.source = source
        self._workloads = workloads

    async def fetch(self) -> Fetched:
        found = sorted(await self._workloads.workloads(), key=lambda w: (w.namespace, w.name, w.kind))
        docs = [workload_entry(w) for w in found]
        digest = hashlib.sha256(orjson.dumps(docs, option=orjson.OPT_SORT_KEYS)).hexdigest()

        def parse() -> ParseResult:
            result = ParseResult()
            seen: set[str] = set()
            for index, doc in enumerate(docs):
                message = validation_error(doc)
                if message is not None:
                    result.errors.append(
                        EntryError(self.source, index, doc["name"], f"schema violation: {message}")
                    )
                elif doc["name"] in seen:
                    result.errors.append(
                        EntryError(
                            self.source, index, doc["name"], "two workloads share this name; later ignored"
                        )
                    )
                else:
                    seen.add(doc["name"])
                    result.entries.append(Entry(doc["name"], doc["version"], doc))
            return result

        return Fetched(digest, parse)

    async def watch(self) -> AsyncIterator[None]:
        """One item per change the source reports (none when it cannot watch: the interval applies)."""
        changes = getattr(self._workloads, "changes", None)
        if changes is None:
            return
        async for _ in changes():
            yield None

    async def close(self) -> None:
        await self._workloads.close()


class KubernetesWorkloads:
    """Lists labelled MCPServer / VirtualMCPServer / MCPRemoteProxy objects through the API server."""

    def __init__(self, registry_name: str, namespaces: list[str], client: Callable[[], AsyncClient]) -> None:
        self.registry_name = registry_name
        self.namespaces = namespaces
        self._client_factory = client
        self._client: AsyncClient | None = None
        self._resources = {
            kind: create_namespaced_resource(GROUP, VERSION, kind, plural) for kind, plural in KINDS
        }

    def _api(self) -> AsyncClient:
        if self._client is None:
            try:
                self._client = self._client_factory()
            except Exception as exc:  # no kubeconfig / not in a cluster: a clear, per-source error
                raise SourceError(f"no Kubernetes API access: {type(exc).__name__}: {exc}") from None
        return self._client

    async def workloads(self) -> list[Workload]:
        client = self._api()
        out: list[Workload] = []
        labels: dict[str, Any] = {LABEL_REGISTRY: self.registry_name}
        for kind, resource in self._resources.items():
            for namespace in self.namespaces or ["*"]:
                try:
                    async for obj in client.list(resource, namespace=namespace, labels=labels):
                        workload = _workload(kind, obj)
                        if workload is not None:
                            out.append(workload)
                except ApiError as exc:
                    if exc.status.code == 404:
                        continue  # the CRD of this kind is not installed: nothing to discover
                    raise SourceError(
                        f"cannot list {kind} in {namespace}: {exc.status.reason or exc.status.code}"
                    ) from None
                except Exception as exc:
                    raise SourceError(f"cannot list {kind}: {type(exc).__name__}: {exc}") from None
        return out

    async def changes(self) -> AsyncIterator[None]:
        """One item per watch event on a labelled object of any kind, in any watched namespace.

        Each watch retries after an error with back-off (a kind whose CRD is not installed keeps
        failing quietly; the interval still applies to it)."""
        client = self._api()
        labels: dict[str, Any] = {LABEL_REGISTRY: self.registry_name}
        events: asyncio.Queue[None] = asyncio.Queue(maxsize=1)

        def backoff(_exc: Exception, count: int) -> OnErrorResult:
            return OnErrorResult(OnErrorAction.RETRY, sleep=WATCH_RETRY.delay(count + 1))

        async def follow(resource: Any, namespace: str) -> None:
            async for _ in client.watch(resource, namespace=namespace, labels=labels, on_error=backoff):
                if events.empty():  # one pending wake-up is enough: the sync reads everything
                    events.put_nowait(None)

        tasks = [
            asyncio.create_task(follow(resource, namespace))
            for resource in self._resources.values()
            for namespace in self.namespaces or ["*"]
        ]
        try:
            while True:
                await events.get()
                yield None
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _workload(kind: str, obj: Any) -> Workload | None:
    status = obj.get("status") or {}
    url = status.get("url") if isinstance(status, dict) else None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    meta = obj.metadata
    spec = obj.get("spec") or {}
    description = (meta.annotations or {}).get(ANNOTATION_DESCRIPTION) or (
        spec.get("description") if isinstance(spec, dict) else None
    )
    return Workload(meta.namespace or "default", meta.name or "", url, kind, description)
