"""The Kubernetes API as the platform uses it: apply, merge-patch, delete, get and events on plain
dicts, through the lightkube async client, with every request counted at the client.

Counting here (rather than on the server) is what the benchmark reports as "API requests per object"
and what the idle-resync test asserts to be zero writes.
"""

from __future__ import annotations

import collections
import uuid
from datetime import UTC, datetime
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.core.resource import Resource as LightkubeResource
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Event, Service, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding
from lightkube.types import PatchType

from mcpfleet.api.kinds import ALL_KINDS
from mcpfleet.api.meta import API_VERSION, GROUP, VERSION

FIELD_MANAGER = "mcpfleet"
WRITE_VERBS = frozenset({"apply", "patch", "create", "delete"})

_BUILTIN: dict[tuple[str, str], type[LightkubeResource]] = {
    ("apps/v1", "Deployment"): Deployment,
    ("v1", "ConfigMap"): ConfigMap,
    ("v1", "Service"): Service,
    ("v1", "ServiceAccount"): ServiceAccount,
    ("v1", "Event"): Event,
    ("rbac.authorization.k8s.io/v1", "Role"): Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): RoleBinding,
}


def _custom_resources() -> dict[tuple[str, str], type[LightkubeResource]]:
    return {
        (API_VERSION, kind.info.kind): create_namespaced_resource(
            GROUP, VERSION, kind.info.kind, kind.info.plural
        )
        for kind in ALL_KINDS
    }


class KubeApi:
    """Dict-in, dict-out access to the objects the operator manages; counts requests by verb and kind."""

    def __init__(self, client: AsyncClient, field_manager: str = FIELD_MANAGER) -> None:
        self.client = client
        self.field_manager = field_manager
        self.requests: collections.Counter[tuple[str, str]] = collections.Counter()
        self._resources = {**_BUILTIN, **_custom_resources()}

    def resource(self, api_version: str, kind: str) -> type[LightkubeResource]:
        try:
            return self._resources[(api_version, kind)]
        except KeyError:
            raise ValueError(f"unsupported kind {api_version}/{kind}") from None

    def _count(self, verb: str, kind: str) -> None:
        self.requests[(verb, kind)] += 1

    @property
    def writes(self) -> int:
        return sum(n for (verb, _), n in self.requests.items() if verb in WRITE_VERBS)

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    @staticmethod
    def _dict(obj: Any) -> dict[str, Any]:
        result: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
        return result

    async def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply with force: the operator owns every field it renders."""
        res: Any = self.resource(manifest["apiVersion"], manifest["kind"])
        meta = manifest["metadata"]
        self._count("apply", manifest["kind"])
        obj = await self.client.patch(
            res,
            meta["name"],
            manifest,
            namespace=meta.get("namespace"),
            patch_type=PatchType.APPLY,
            field_manager=self.field_manager,
            force=True,
        )
        return self._dict(obj)

    async def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        body: dict[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """JSON merge patch; a `metadata.resourceVersion` in `body` makes it conditional (409 if stale)."""
        res: Any = self.resource(api_version, kind)
        if subresource == "status":
            res = res.Status
        self._count("patch", kind if subresource is None else f"{kind}/{subresource}")
        obj = await self.client.patch(res, name, body, namespace=namespace, patch_type=PatchType.MERGE)
        return self._dict(obj)

    async def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        res: Any = self.resource(api_version, kind)
        self._count("get", kind)
        try:
            obj = await self.client.get(res, name, namespace=namespace)
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise
        return self._dict(obj)

    async def list(
        self, api_version: str, kind: str, namespace: str | None, labels: dict[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Every object of a kind in `namespace` (None: all namespaces), as dicts with apiVersion/kind."""
        res: Any = self.resource(api_version, kind)
        self._count("list", kind)
        items = []
        selector: Any = labels
        async for obj in self.client.list(res, namespace=namespace or "*", labels=selector, chunk_size=500):
            item = self._dict(obj)
            item["apiVersion"] = api_version
            item["kind"] = kind
            items.append(item)
        return items

    async def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        res: Any = self.resource(api_version, kind)
        self._count("delete", kind)
        try:
            await self.client.delete(res, name, namespace=namespace)
        except ApiError as exc:
            if exc.status.code != 404:
                raise

    async def event(
        self,
        involved: dict[str, Any],
        *,
        reason: str,
        message: str,
        type_: str = "Normal",
        component: str = "mcpfleet-operator",
    ) -> None:
        """Post a core/v1 Event about `involved` (a full object: kind, metadata.name/namespace/uid)."""
        meta = involved["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", API_VERSION),
                "kind": involved["kind"],
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self._count("create", "Event")
        event: Any = Event.from_dict(body)
        await self.client.create(event)
