"""The console's Kubernetes source: the fleet of one namespace read from the API, read-only.

The client is lightkube's, as the vMCP gateway's and the registry's Kubernetes readers (over its
own httpx fork, `httpx2`, whose errors are caught here), configured from the pod's service account in a cluster or from a kubeconfig (`KUBECONFIG`, `~/.kube/config`):
`KubeConfig.from_env()`. The console only lists and gets — the mcpfleet.dev kinds, Events and pods — so
the account it runs as needs get/list/watch on those and nothing else (the chart's ClusterRole);
whatever that account may not read, the page says it could not read (the API's answer), it never
falls back to anything wider.

Bounds: every read has `READ_SECONDS`; a kind's list stops at `MAX_OBJECTS` objects and the Events
at `MAX_EVENTS_READ`, so a namespace with huge lists costs bounded memory and time per page.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import httpx2
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError, ConfigError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Event as KubeEvent
from lightkube.resources.core_v1 import Pod

from mcpfleet.api.kindnames import MCP_REGISTRY
from mcpfleet.api.kinds import ALL_KINDS
from mcpfleet.api.meta import GROUP, LABEL_INSTANCE
from mcpfleet.api.versions import STORAGE_VERSION
from mcpfleet.console import fleetview, timeline
from mcpfleet.console.source import SourceError
from mcpfleet.platform.local.snapshot import StoredObject
from mcpfleet.reconcile.common import LABEL_KIND

READ_SECONDS = 10.0
MAX_OBJECTS = 2000
"""Objects of one kind read for a page (a list stops there)."""
MAX_EVENTS_READ = 1000
MAX_PODS = 50
MANIFEST_DROPPED = ("managedFields", "resourceVersion", "uid", "generation", "creationTimestamp")
"""Metadata the manifest shown on a page leaves out (bookkeeping, not what was applied)."""


@cache
def _resource(kind: str) -> Any:
    info = {k.info.kind: k.info for k in ALL_KINDS}[kind]
    return create_namespaced_resource(GROUP, STORAGE_VERSION, info.kind, info.plural)


def _plain(obj: Any) -> dict[str, Any]:
    value = obj.to_dict() if hasattr(obj, "to_dict") else obj
    return dict(value) if isinstance(value, dict) else {}


def stored(document: dict[str, Any]) -> StoredObject:
    """An API object as the pages show objects: manifest (no status, no bookkeeping) and status."""
    metadata = document.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    status = document.get("status")
    manifest = {k: v for k, v in document.items() if k != "status"}
    manifest["metadata"] = {k: v for k, v in metadata.items() if k not in MANIFEST_DROPPED}
    annotations = manifest["metadata"].get("annotations")
    annotations = dict(annotations) if isinstance(annotations, dict) else {}
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if annotations:
        manifest["metadata"]["annotations"] = annotations
    else:
        manifest["metadata"].pop("annotations", None)
    generation = metadata.get("generation")
    return StoredObject(
        kind=str(document.get("kind") or ""),
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        manifest=manifest,
        generation=generation if isinstance(generation, int) else 0,
        status=status if isinstance(status, dict) else {},
        source=f"namespace {metadata.get('namespace') or ''}",
        created=str(metadata.get("creationTimestamp") or ""),
    )


def describe_failure(exc: BaseException) -> str:
    """What went wrong reading the API, in one line (the API's own words for a refusal)."""
    if isinstance(exc, ApiError):
        status = exc.status
        return f"the Kubernetes API answered {status.code}: {status.message or status.reason}"[:500]
    if isinstance(exc, TimeoutError):
        return f"the Kubernetes API did not answer within {READ_SECONDS:.0f} s"
    return f"the Kubernetes API could not be reached: {type(exc).__name__}: {exc}"[:500]


def _failure(exc: BaseException) -> SourceError:
    """The page answers a refusal with the API's status (403: the account may not read it)."""
    code = exc.status.code if isinstance(exc, ApiError) else None
    return SourceError(describe_failure(exc), code if isinstance(code, int) and 400 <= code < 500 else 424)


@dataclass
class KubeSource:
    """The objects of one namespace, through a lightkube client (created on first use)."""

    namespace: str
    client: AsyncClient | None = None
    _problems: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_environment(cls, namespace: str | None = None, kubeconfig: str | None = None) -> KubeSource:
        """In a pod: its service account; else the kubeconfig (`KUBECONFIG`, ~/.kube/config, or
        `kubeconfig`). The namespace defaults to the configuration's (the pod's own namespace)."""
        try:
            config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
        except ConfigError as exc:
            raise SourceError(f"no Kubernetes configuration: {exc}") from None
        client = AsyncClient(config, namespace=namespace, timeout=httpx2.Timeout(READ_SECONDS))
        return cls(namespace=namespace or client.namespace, client=client)

    @property
    def label(self) -> str:
        return f"Kubernetes namespace: {self.namespace}"

    @property
    def kubernetes(self) -> bool:
        return True

    @property
    def state_dir(self) -> None:
        return None

    def _client(self) -> AsyncClient:
        if self.client is None:
            self.client = AsyncClient(namespace=self.namespace, timeout=httpx2.Timeout(READ_SECONDS))
        return self.client

    async def _list(
        self, resource: Any, limit: int, fields: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        async with asyncio.timeout(READ_SECONDS):
            async for item in self._client().list(
                resource, namespace=self.namespace, chunk_size=min(limit, 500), fields=fields
            ):
                out.append(_plain(item))
                if len(out) >= limit:
                    break
        return out

    async def _kind(self, kind: str) -> list[StoredObject]:
        try:
            documents = await self._list(_resource(kind), MAX_OBJECTS)
        except (ApiError, httpx2.HTTPError, TimeoutError, OSError) as exc:
            self._problems[kind] = describe_failure(exc)
            return []
        self._problems.pop(kind, None)
        for document in documents:
            document.setdefault("kind", kind)
        return [stored(d) for d in documents]

    async def objects(self, kind: str | None = None) -> list[StoredObject]:
        kinds = [kind] if kind is not None else [k.info.kind for k in ALL_KINDS]
        lists = await asyncio.gather(*(self._kind(k) for k in kinds))
        return [obj for objects in lists for obj in objects]

    def problems(self) -> list[str]:
        return [f"{kind}: {message}" for kind, message in sorted(self._problems.items())]

    async def fleet(self) -> fleetview.Fleet:
        objects = await self.objects()
        problems = self.problems()
        if problems and not objects and len(problems) == len(ALL_KINDS):
            # Nothing could be read at all: one cause is enough (they are all the same refusal).
            problems = problems[:1]
        return fleetview.fleet_of(objects, problems=problems)

    async def find(self, kind: str, name: str) -> StoredObject | None:
        try:
            async with asyncio.timeout(READ_SECONDS):
                document = _plain(await self._client().get(_resource(kind), name, namespace=self.namespace))
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise _failure(exc) from None
        except (httpx2.HTTPError, TimeoutError, OSError) as exc:
            raise _failure(exc) from None
        document.setdefault("kind", kind)
        return stored(document)

    async def logs(self, name: str) -> fleetview.Logs | None:
        # The console's account may not read pods/log (read-only, least privilege): `kubectl logs`.
        return None

    async def events(self, kind: str | None = None, name: str | None = None) -> list[timeline.Event]:
        fields: dict[str, Any] | None = (
            {"involvedObject.kind": kind, "involvedObject.name": name} if kind and name else None
        )
        try:
            documents = await self._list(KubeEvent, MAX_EVENTS_READ, fields)
        except (ApiError, httpx2.HTTPError, TimeoutError, OSError) as exc:
            raise _failure(exc) from None
        ours = (
            d
            for d in documents
            if str((d.get("involvedObject") or {}).get("apiVersion") or "").startswith(f"{GROUP}/")
        )
        return timeline.newest_first(timeline.from_kubernetes(d) for d in ours)

    async def pods(self, kind: str, name: str) -> list[fleetview.PodRow] | None:
        """The pods the operator runs for the workload (its Deployment's selector labels)."""
        labels: dict[str, Any] = {LABEL_INSTANCE: name, LABEL_KIND: kind.lower()}
        try:
            async with asyncio.timeout(READ_SECONDS):
                found = [
                    _plain(p)
                    async for p in self._client().list(
                        Pod, namespace=self.namespace, labels=labels, chunk_size=MAX_PODS
                    )
                ][:MAX_PODS]
        except (ApiError, httpx2.HTTPError, TimeoutError, OSError) as exc:
            raise _failure(exc) from None
        return [fleetview.pod_row(p) for p in found]

    async def registry_urls(self) -> list[str]:
        urls = [str(o.status.get("url") or "") for o in await self.objects(MCP_REGISTRY)]
        return [u for u in urls if u.startswith(("http://", "https://"))]
