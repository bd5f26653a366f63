"""The level-triggered reconcile loop of every kind, behind a de-duplicating work queue.

Watch events (fed by kopf, see `operator.app`) only update the `Store` and enqueue keys: the object
itself and the objects whose result depends on it (a server's group, the VirtualMCPServers of that
group, the configuration objects it references). A worker then reconciles one key at a time:

1. read the world from the store (no GET),
2. compute the plan with the platform-neutral rules (`mcpfleet.reconcile.<kind>`),
3. apply only the children that differ (`platform.kubernetes.apply`),
4. observe the Deployment / Service and compute the status,
5. patch the status only when it differs from what the object holds, conditioned on the object's
   resourceVersion: a 409 means someone wrote newer data, so the object is re-read and the key
   reconciled again (never overwritten).

A periodic resync enqueues everything again; an idle pass makes no API request.
"""

from __future__ import annotations

import asyncio
import collections
import fnmatch
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic.alias_generators import to_snake

from mcpfleet.api.embeddingserver import EmbeddingServer
from mcpfleet.api.kinds import (
    ALL_KINDS,
    CONFIG_KINDS,
    DESCRIPTOR_BY_KIND,
    ENTRY_KINDS,
    MEMBER_KINDS,
    Role,
)
from mcpfleet.api.mcpgroup import MCPGroup
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.mcpserverentry import MCPServerEntryStatus
from mcpfleet.api.meta import LABEL_MANAGED_BY, ApiModel, WorkloadStatus
from mcpfleet.api.references import Reference, names_at
from mcpfleet.api.resource import Resource
from mcpfleet.api.superseded import SUPERSEDED_FIELD
from mcpfleet.api.superseded import warnings as superseded_warnings
from mcpfleet.api.versions import STORAGE_API_VERSION
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.backoff import Backoff
from mcpfleet.operator.pods import stuck_reason
from mcpfleet.operator.queue import WorkQueue
from mcpfleet.operator.settings import OperatorSettings
from mcpfleet.operator.store import Entry, ObjKey, Store
from mcpfleet.platform.kubernetes.api import ApiError, KubeApi
from mcpfleet.platform.kubernetes.apply import apply_children
from mcpfleet.platform.kubernetes.observe import observe
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.reconcile import configkinds, enforce, kinds, mcpgroup, mcpserverentry
from mcpfleet.reconcile.common import MANAGED_BY, child_name
from mcpfleet.reconcile.model import WorkloadObservation, WorkloadPlan, World
from mcpfleet.reconcile.world import WORLD_FIELDS, build_world

log = logging.getLogger("mcpfleet.operator")

GROUP = MCPGroup.KIND
GATEWAYS = (VirtualMCPServer.KIND,)
"""Kinds whose result depends on their group's members (and inlines the members' references)."""
ENFORCED = (MCPServer.KIND, EmbeddingServer.KIND)
"""Kinds checked against the namespace's MCPRegistries with enforceServers."""
WORLD_STATUS_KINDS = (*WORLD_FIELDS, EmbeddingServer.KIND)
"""Kinds whose objects (WORLD_FIELDS) or statuses (the embedding servers' URLs) the World holds."""
RETRY = Backoff(initial=0.5, maximum=60.0)
CHILD_KINDS: tuple[tuple[str, str], ...] = (
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "ServiceAccount"),
    ("v1", "PersistentVolumeClaim"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
)


@dataclass
class Stats:
    """What the operator did, for /metrics, /stats and the tests."""

    reconciles: collections.Counter[ObjKey]
    reconciles_by_kind: collections.Counter[str]
    errors: int = 0
    conflicts: int = 0


def _enforces(entry: Entry | None) -> bool:
    """An MCPRegistry entry that sets enforceServers (its servers depend on its sources)."""
    return entry is not None and bool((entry.raw.get("spec") or {}).get("enforceServers"))


def _relevant(entry: Entry | None) -> dict[str, Any]:
    """The parts of an object other objects' results depend on (spec, identity, deletion, url)."""
    if entry is None:
        return {}
    meta = entry.raw.get("metadata", {})
    return {
        "uid": meta.get("uid"),
        "spec": entry.raw.get("spec"),
        "deleting": bool(meta.get("deletionTimestamp")),
        "url": (entry.raw.get("status") or {}).get("url"),
    }


@functools.cache
def _references(kind: object) -> tuple[Reference, ...]:
    """A kind's references with the paths of both forms an object may be held in (the storage
    version the operator reads, and the hub); worked out once per kind (called per object)."""
    found = DESCRIPTOR_BY_KIND.get(str(kind))
    if found is None:
        return ()
    return tuple(dict.fromkeys((*found.references_in(STORAGE_API_VERSION), *found.references)))


def _group_ref(entry: Entry | None) -> str | None:
    if entry is None:
        return None
    spec = entry.raw.get("spec") or {}
    for ref in _references(entry.raw.get("kind")):
        if ref.kind == GROUP:
            names = names_at(spec, ref.path)
            if names:
                return names[0]
    return None


def _in_group(group: str, entry: Entry) -> bool:
    return _group_ref(entry) == group


def _refs(entry: Entry | None) -> set[tuple[str, str]]:
    """(kind, name) of the objects other than its group an object's spec names (configurations,
    an EmbeddingServer), at the reference paths its model declares (`api.references`)."""
    if entry is None:
        return set()
    spec = entry.raw.get("spec") or {}
    return {
        (ref.kind, name)
        for ref in _references(entry.raw.get("kind"))
        if ref.kind != GROUP
        for name in names_at(spec, ref.path)
    }


ENTRY_REFERENCED = frozenset(ref.kind for kind in ENTRY_KINDS for ref in _references(kind))
"""Kinds an entry names: an entry is Failed while one it names is missing."""


class Controller:
    """Owns the queue, the workers and the per-kind reconcile passes."""

    def __init__(
        self, api: KubeApi, store: Store, settings: OperatorSettings, now: Callable[[], str] | None = None
    ) -> None:
        self.api = api
        self.store = store
        self.settings = settings
        self.queue: WorkQueue[ObjKey] = WorkQueue()
        self.stats = Stats(collections.Counter(), collections.Counter())
        self._failures: collections.Counter[ObjKey] = collections.Counter()
        self._now = now
        self._background: set[asyncio.Task[None]] = set()
        self._first_seen: dict[str, float] = {}
        """uid -> when a workload without status was first reconciled (see `_defer_first_status`)."""
        self.synced = asyncio.Event()
        """Set once the initial LIST of every kind is in the store (the operator is ready; workers start)."""

    # -- event intake ---------------------------------------------------------------------------
    def on_object(self, event_type: str | None, raw: dict[str, Any]) -> None:
        kind = raw["kind"]
        meta = raw["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        key = (kind, namespace, name)
        if event_type == "DELETED":
            previous, current = self.store.remove(kind, namespace, name), None
            self._first_seen.pop(meta.get("uid", ""), None)
        else:
            previous, current = self.store.put(raw)
            if previous is current:
                return  # an older version than the one already held
        status_only = (
            previous is not None
            and current is not None
            and _relevant(previous) == _relevant(current)
            and previous.raw["metadata"].get("finalizers") == current.raw["metadata"].get("finalizers")
        )
        if current is not None and (not status_only or kind in GATEWAYS or previous is None):
            # A VirtualMCPServer's status carries what the gateway reports (backend health): re-derive
            # the phase from it. Other kinds' status is the operator's own output.
            self.queue.add(key)
        if status_only and _relevant(previous).get("url") == _relevant(current).get("url"):
            return
        self._enqueue_dependents(kind, namespace, name, previous, current)

    def _enqueue_dependents(
        self, kind: str, namespace: str, name: str, previous: Entry | None, current: Entry | None
    ) -> None:
        if kind in MEMBER_KINDS:
            self._member_changed(namespace, previous, current)
        elif kind in ENTRY_KINDS:
            # An entry is a backend of its group's gateways (rendered into their config).
            for group in {g for g in (_group_ref(previous), _group_ref(current)) if g}:
                self.queue.add((GROUP, namespace, group))
                self._enqueue_where(namespace, GATEWAYS, functools.partial(_in_group, group))
        elif kind == GROUP:
            if previous is None or current is None:  # created or deleted
                self._enqueue_where(
                    namespace,
                    (*MEMBER_KINDS, *ENTRY_KINDS, *GATEWAYS),
                    lambda e: _group_ref(e) == name,
                )
        elif kind in CONFIG_KINDS:
            # A VirtualMCPServer also inlines its members' toolConfigRef / externalAuthConfigRef.
            self._enqueue_where(namespace, MEMBER_KINDS, lambda e: (kind, name) in _refs(e))
            self._enqueue_where(namespace, GATEWAYS, lambda e: True)
            if kind in ENTRY_REFERENCED:  # an entry is Failed while its auth config is missing
                self._enqueue_where(namespace, ENTRY_KINDS, lambda e: True)
        elif kind == EmbeddingServer.KIND:  # its URL (set while Ready) is the gateways' embedding service
            self._enqueue_where(namespace, GATEWAYS, lambda e: (kind, name) in _refs(e))
        elif kind in GATEWAYS:
            for ref_kind, ref_name in _refs(previous) | _refs(current):
                self.queue.add((ref_kind, namespace, ref_name))
        if kind == MCPRegistry.KIND and (_enforces(previous) or _enforces(current)):
            # enforceServers: the namespace's servers are checked against the registries again.
            self._enqueue_where(namespace, ENFORCED, lambda e: True)

    def _enqueue_where(
        self, namespace: str, kinds_: tuple[str, ...], wanted: Callable[[Entry], bool]
    ) -> None:
        """Enqueue the objects of `kinds_` in `namespace` for which `wanted` holds."""
        for kind in kinds_:
            for entry in self.store.entries(kind, namespace):
                if wanted(entry):
                    self.queue.add((kind, namespace, entry.raw["metadata"]["name"]))

    def _member_changed(self, namespace: str, previous: Entry | None, current: Entry | None) -> None:
        """A server / remote proxy changed: its groups (membership), their gateways, its config refs."""
        groups = {g for g in (_group_ref(previous), _group_ref(current)) if g}
        membership_changed = (
            previous is None or current is None or _group_ref(previous) != _group_ref(current)
        )
        for group in groups:
            if membership_changed:
                self.queue.add((GROUP, namespace, group))
            self._enqueue_where(namespace, GATEWAYS, functools.partial(_in_group, group))
        old_refs, new_refs = _refs(previous), _refs(current)
        if membership_changed or old_refs != new_refs:
            for ref_kind, ref_name in old_refs | new_refs:
                self.queue.add((ref_kind, namespace, ref_name))

    def on_child(self, event_type: str | None, raw: dict[str, Any]) -> None:
        if event_type == "DELETED":
            owner, changed = self.store.remove_child(raw), True
        else:
            owner, changed = self.store.put_child(raw)
        if changed and owner is not None and self.store.get(owner) is not None:
            self.queue.add(owner)

    # -- workers --------------------------------------------------------------------------------
    async def run(self, *, initial_list: bool = False) -> None:
        """Run the workers and the periodic resync until cancelled.

        With `initial_list`, nothing is reconciled before one LIST of every kind and every child kind
        has landed in the store (`synced`). The watches deliver their initial listings in an order
        that depends on the process (kopf keeps its watched resources in a set, iterated in hash
        order): a server reconciled before its ConfigMap's listing arrived looked childless, so a
        restart re-applied children that were already there and posted a `Created` event for each.
        """
        if not initial_list:
            self.synced.set()
        workers = [
            asyncio.create_task(self._worker(), name=f"reconcile-{i}") for i in range(self.settings.workers)
        ]
        try:
            if initial_list:
                await self._initial_list()
            while True:
                await asyncio.sleep(self.settings.resync_seconds)
                try:
                    await self.relist()
                except Exception as exc:  # the API server is unreachable: still reconcile what we hold
                    log.warning("resync: listing failed (%s); reconciling the objects held", exc)
                    self.resync()
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            # Events still being posted end with the run: once it returns, nothing writes any more
            # (a leader releases its lease only after that).
            background = list(self._background)
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            self.queue.close()

    async def _initial_list(self) -> None:
        """LIST everything once (reads only), retrying until the API server answers; then `synced`."""
        failures = 0
        while True:
            try:
                await self.relist()
            except Exception as exc:
                failures += 1
                delay = RETRY.delay(failures)
                log.warning("initial listing failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            self.synced.set()
            log.info(
                "operator synced: %d objects, %d children", len(self.store.keys()), len(self.store.children)
            )
            return

    def resync(self) -> None:
        """Enqueue every object: level-triggered repair of anything a lost event left behind."""
        for key in self.store.keys():
            self.queue.add(key)

    def _watched(self, namespace: str) -> bool:
        patterns = self.settings.namespaces
        return not patterns or any(fnmatch.fnmatchcase(namespace, p) for p in patterns)

    async def relist(self) -> None:
        """Refresh the store from LISTs (reads only), then enqueue everything.

        A watch that broke and resumed after its history was compacted can miss a deletion; a store
        entry the API server no longer has would otherwise be reconciled forever. Only entries that were
        already held before the LIST started are dropped, so an object created meanwhile is kept.
        """
        plain = [p for p in self.settings.namespaces if not any(c in p for c in "*?[")]
        scopes: list[str | None] = (
            list(plain) if plain and len(plain) == len(self.settings.namespaces) else [None]
        )
        before_objects = {key: self.store.get(key) for key in self.store.keys()}
        before_children = dict(self.store.children)
        seen_objects: set[ObjKey] = set()
        seen_children: set[tuple[str, str, str, str]] = set()
        for scope in scopes:
            for kind in ALL_KINDS:
                for raw in await self.api.list(STORAGE_API_VERSION, kind.info.kind, scope):
                    meta = raw["metadata"]
                    if self._watched(meta["namespace"]):
                        seen_objects.add((kind.info.kind, meta["namespace"], meta["name"]))
                        self.on_object("MODIFIED", raw)
            for api_version, kind_name in CHILD_KINDS:
                for raw in await self.api.list(
                    api_version, kind_name, scope, labels={LABEL_MANAGED_BY: MANAGED_BY}
                ):
                    if self._watched(raw["metadata"]["namespace"]):
                        seen_children.add(Store.child_key(raw))
                        self.on_child("MODIFIED", raw)
        for key, entry in before_objects.items():
            if key not in seen_objects and entry is not None and self.store.get(key) is entry:
                self.on_object("DELETED", entry.raw)
        for child_key, child in before_children.items():
            if child_key not in seen_children and self.store.child(child_key) is child:
                self.on_child("DELETED", child)
        self.resync()

    async def _worker(self) -> None:
        await self.synced.wait()
        while True:
            key = await self.queue.get()
            try:
                await self.reconcile(key)
                self._failures.pop(key, None)
            except ApiError as exc:
                if exc.code == 409:
                    self.stats.conflicts += 1
                    await self._reread(key)
                    self.queue.add(key)
                else:
                    await self._failed(key, f"API error {exc.code}: {exc.message}")
            except Exception as exc:  # a bug or an unreachable API server: retry with backoff
                log.exception("reconcile of %s/%s/%s failed", *key)
                await self._failed(key, f"{type(exc).__name__}: {exc}")
            finally:
                self.queue.done(key)

    async def _failed(self, key: ObjKey, message: str) -> None:
        self.stats.errors += 1
        self._failures[key] += 1
        failures = self._failures[key]
        delay = RETRY.delay(failures)
        log.warning(
            "reconcile of %s %s/%s failed (attempt %d, retry in %.1fs): %s", *key, failures, delay, message
        )
        entry = self.store.get(key)
        if failures == 1 and entry is not None:
            # One event per failure streak: a retry loop must not flood the namespace with events.
            await self._event(entry, "ReconcileFailed", message, "Warning")
        self.queue.add_after(key, delay)

    async def _reread(self, key: ObjKey) -> None:
        kind, namespace, name = key
        fresh = await self.api.get(STORAGE_API_VERSION, kind, namespace, name)
        if fresh is None:
            self.store.remove(kind, namespace, name)
        else:
            fresh.setdefault("kind", kind)
            fresh.setdefault("apiVersion", STORAGE_API_VERSION)
            self.on_object("MODIFIED", fresh)

    async def _event(self, entry: Entry, reason: str, message: str, type_: str = "Normal") -> None:
        """Post an event in the background: events are best effort and must not slow a pass down."""

        async def post() -> None:
            try:
                await self.api.event(entry.raw, reason=reason, message=message, type_=type_)
            except Exception as exc:  # never fail or retry a reconcile over an event
                log.debug("event %s for %s not posted: %s", reason, entry.raw["metadata"]["name"], exc)

        task = asyncio.create_task(post())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- reconcile ------------------------------------------------------------------------------
    async def reconcile(self, key: ObjKey) -> None:
        entry = self.store.get(key)
        if entry is None:
            return  # deleted: garbage collection removes the children through owner references
        self.stats.reconciles[key] += 1
        self.stats.reconciles_by_kind[key[0]] += 1
        found = DESCRIPTOR_BY_KIND.get(key[0])
        if found is None:
            return
        reconcile_role = {
            Role.WORKLOAD: self._reconcile_workload,
            Role.CONFIG: self._reconcile_config,
            Role.GROUP: self._reconcile_group,
            Role.ENTRY: self._reconcile_entry,
        }[found.role]
        await reconcile_role(key, entry)

    def world(self, namespace: str) -> World:
        """What the rules may know, read from the store (never from the API server)."""
        objects: list[Resource] = []
        statuses: dict[tuple[str, str], dict[str, Any]] = {}
        for world_kind in WORLD_STATUS_KINDS:
            for entry in self.store.entries(world_kind, namespace):
                if entry.model is not None and world_kind in WORLD_FIELDS:
                    objects.append(entry.model)
                statuses[(world_kind, entry.raw["metadata"]["name"])] = entry.raw.get("status") or {}
        return build_world(
            "kubernetes",
            namespace,
            objects,
            statuses,
            images=self.settings.images,
            otlp_endpoint=self.settings.otlp_endpoint,
        )

    async def _registry_images(self, namespace: str) -> dict[str, enforce.RegistryImages]:
        """enforceServers: the images the namespace's enforcing registries list, read from their
        ConfigMap sources (GET: user ConfigMaps are not watched; nothing is read without an enforcing
        registry). A ConfigMap edit is seen at the server's next pass (resync, or any change)."""
        registries = list(self.store.models(MCPRegistry.KIND, namespace))
        contents: dict[enforce.Read, bytes | str] = {}
        for registry, index, source in enforce.to_read(registries, local=False):
            assert source.config_map_ref is not None
            ref = source.config_map_ref
            try:
                found = await self.api.get("v1", "ConfigMap", namespace, ref.name)
            except Exception as exc:  # unreachable API: the server is refused naming why, and retried
                contents[(registry.name, index)] = f"ConfigMap {ref.name} not read ({exc})"
                continue
            data = (found or {}).get("data") or {}
            if found is None:
                contents[(registry.name, index)] = f"ConfigMap {ref.name} not found"
            elif ref.key not in data:
                contents[(registry.name, index)] = f"ConfigMap {ref.name} has no key {ref.key}"
            else:
                contents[(registry.name, index)] = str(data[ref.key]).encode()
        return enforce.gather(registries, contents, local=False)

    async def _profile_documents(self, namespace: str, server: Any) -> dict[tuple[str, str], str]:
        """The ConfigMap key a `permissionProfile` of type configmap names (GET, as for enforceServers:
        user ConfigMaps are not watched; an edit is seen at the server's next pass). A missing key is
        left out: the server is then Failed naming it."""
        ref = server.spec.permission_profile
        if ref is None or ref.type != "configmap" or ref.key is None:
            return {}
        try:
            found = await self.api.get("v1", "ConfigMap", namespace, ref.name)
        except Exception as exc:  # unreachable API: refused naming why, and retried at the next pass
            log.warning("ConfigMap %s/%s not read: %s", namespace, ref.name, exc)
            return {}
        data = (found or {}).get("data") or {}
        return {(ref.name, ref.key): str(data[ref.key])} if ref.key in data else {}

    async def _reconcile_workload(self, key: ObjKey, entry: Entry) -> None:
        kind, namespace, name = key
        if entry.model is None:
            await self._invalid_workload(entry)
            return
        model: Any = entry.model
        world = self.world(namespace)
        if kind in ENFORCED:
            world = replace(world, registry_images=await self._registry_images(namespace))
        if kind == MCPServer.KIND:
            world = replace(world, profile_documents=await self._profile_documents(namespace, model))
        plan = kinds.plan(model, world)
        rejected = None
        if not plan.problems and not entry.deleting:
            rejected = await self._apply(key, entry, plan)
        workload = child_name(kind, name)
        deployment = self.store.child(("apps/v1", "Deployment", namespace, workload))
        service = self.store.child(("v1", "Service", namespace, workload))
        observation = observe(plan, deployment, service, terminating=entry.deleting)
        look_again: float | None = None
        if rejected is not None:
            observation = replace(observation, failed=True, failure_message=rejected)
        elif (
            deployment is not None
            and not entry.deleting
            and not plan.problems
            and not observation.failed
            and observation.ready_replicas < plan.replicas
        ):
            # Still not ready: the cause, if any, is in the pods (operator/pods.py).
            stuck, look_again = await stuck_reason(self.api, namespace, plan, deployment)
            if stuck is not None:
                observation = replace(observation, failed=True, failure_message=stuck)
        status = kinds.status(
            model.status, model, plan, observation, world, self._now() if self._now else None
        )
        if self._defer_first_status(key, entry, status):
            return
        if look_again is not None:
            self.queue.add_after(key, look_again)
        if await self._write_status(entry, status):
            await self._workload_event(entry, plan, status, observation, rejected)

    async def _apply(self, key: ObjKey, entry: Entry, plan: WorkloadPlan) -> str | None:
        """Apply the plan's children and track them; the API server's reason when it refuses one."""
        kind, namespace, name = key
        desired = render(plan, Owner(kind, name, namespace, entry.uid), self.settings.images)
        try:
            result = await apply_children(
                self.api, desired, self.store.child, self.store.owned(key, entry.uid)
            )
        except ApiError as exc:
            if exc.code in (400, 422):
                # The API server refuses a child rendered from this spec: retrying cannot help,
                # the object is Failed until its spec changes.
                return f"the API server refused a child: {exc.message}"
            if exc.code != 409:
                await self._event(entry, "ApplyFailed", f"applying children failed: {exc.message}", "Warning")
            raise
        for applied in result.applied.values():
            self.store.put_child(applied)
        wanted = {(m["apiVersion"], m["kind"], namespace, m["metadata"]["name"]) for m in desired}
        for gone in set(self.store.owned(key, entry.uid)) - wanted:
            child = self.store.child(gone)
            if child is not None:
                self.store.remove_child(child)
        for reason, names in (
            ("Created", result.created),
            ("Updated", result.updated),
            ("Deleted", result.deleted),
        ):
            if names:
                await self._event(entry, reason, f"{reason.lower()} " + ", ".join(names))
        return None

    async def _workload_event(
        self,
        entry: Entry,
        plan: WorkloadPlan,
        status: ApiModel,
        observation: WorkloadObservation,
        rejected: str | None,
    ) -> None:
        """The Warning event that goes with a status just written, if any."""
        problems = "; ".join(plan.problems)
        if rejected is not None:
            await self._event(entry, "ApplyFailed", rejected, "Warning")
        elif plan.problems and (entry.raw.get("status") or {}).get("message") != problems:
            await self._event(entry, "InvalidSpec", problems, "Warning")
        elif getattr(status, "phase", None) == "Failed" and observation.failure_message:
            await self._event(entry, "WorkloadFailed", observation.failure_message, "Warning")
        # Once per generation (its first status): the superseded fields the object sets.
        if (entry.raw.get("status") or {}).get("observedGeneration") != entry.generation and entry.model:
            version = str(entry.raw.get("apiVersion", "")).rpartition("/")[2]
            warnings = superseded_warnings(entry.raw, type(entry.model).version_changes, version)
            if warnings:
                await self._event(entry, SUPERSEDED_FIELD, "; ".join(warnings), "Warning")

    def _defer_first_status(self, key: ObjKey, entry: Entry, status: ApiModel) -> bool:
        """Hold back a new workload's first status while it is Pending, up to the grace period.

        Most workloads are Running a moment after their children exist; writing Pending first would
        cost every one of them a second status write. The pass is re-run when the grace period ends
        (or earlier, on any change), and a workload still starting then shows Pending.
        """
        grace = self.settings.pending_grace_seconds
        if grace > 0 and not entry.raw.get("status") and getattr(status, "phase", None) == "Pending":
            first = self._first_seen.setdefault(entry.uid, time.monotonic())
            remaining = first + grace - time.monotonic()
            if remaining > 0:
                self.queue.add_after(key, remaining)
                return True
        if self._first_seen.pop(entry.uid, None) is not None:
            self.queue.cancel_after(key)  # the status is written now: the look-again is moot
        return False

    async def _invalid_workload(self, entry: Entry) -> None:
        """A spec the models refuse (the CRD schema let it through): Failed, naming the field."""
        message = entry.error or "invalid spec"
        from mcpfleet.api.meta import set_condition

        raw_status = entry.raw.get("status") or {}
        try:
            # The shared fields only: a kind's own status fields (hashes, gateway counts) are not kept.
            previous = WorkloadStatus.model_validate(
                {k: v for k, v in raw_status.items() if to_snake(k) in WorkloadStatus.model_fields}
            )
        except ValueError:
            previous = WorkloadStatus()
        conditions = set_condition(
            list(previous.conditions),
            type="Ready",
            status="False",
            reason="InvalidSpec",
            message=message,
            observed_generation=entry.generation,
            now=self._now() if self._now else None,
        )
        status = WorkloadStatus(
            phase="Failed",
            message=message,
            url=None,
            ready_replicas=previous.ready_replicas or 0,
            observed_generation=entry.generation,
            conditions=conditions,
        )
        if await self._write_status(entry, status):
            await self._event(entry, "InvalidSpec", message, "Warning")

    async def _reconcile_group(self, key: ObjKey, entry: Entry) -> None:
        if entry.model is None:
            return
        world = self.world(key[1])
        group: Any = entry.model
        status = mcpgroup.status(group.status, group, world, now=self._now() if self._now else None)
        await self._write_status(entry, status)

    async def _reconcile_entry(self, key: ObjKey, entry: Entry) -> None:
        """An MCPServerEntry: only a status (it runs nothing); a spec the models refuse is Failed."""
        now = self._now() if self._now else None
        if entry.model is None:
            message = entry.error or "invalid spec"
            status = MCPServerEntryStatus(
                phase="Failed", message=message, observed_generation=entry.generation
            )
            if await self._write_status(entry, status):
                await self._event(entry, "InvalidSpec", message, "Warning")
            return
        model: Any = entry.model
        world = self.world(key[1])
        await self._write_status(entry, mcpserverentry.status(model.status, model, world, now))

    async def _reconcile_config(self, key: ObjKey, entry: Entry) -> None:
        namespace = key[1]
        now = self._now() if self._now else None
        if entry.model is None:
            status = kinds.invalid_config_status(
                key[0],
                entry.raw.get("status") or {},
                generation=entry.generation,
                message=entry.error or "invalid spec",
                now=now,
            )
            if await self._write_status(entry, status):
                await self._event(entry, "InvalidSpec", entry.error or "invalid spec", "Warning")
            return
        world = self.world(namespace)
        config: Any = entry.model
        status = kinds.config_status(config.status, config, world, deleting=entry.deleting, now=now)
        refs = status.referencing_workloads
        finalizers = list(entry.raw["metadata"].get("finalizers") or [])
        held = configkinds.FINALIZER in finalizers
        if configkinds.needs_finalizer(refs) and not held and not entry.deleting:
            await self._set_finalizers(entry, [*finalizers, configkinds.FINALIZER])
            entry = self.store.get(key) or entry
        if await self._write_status(entry, status) and entry.deleting and refs:
            await self._event(
                entry, "DeletionBlocked", f"still referenced by {configkinds.describe(refs)}", "Warning"
            )
        entry = self.store.get(key) or entry
        if held and not configkinds.needs_finalizer(refs):
            await self._set_finalizers(entry, [f for f in finalizers if f != configkinds.FINALIZER])

    async def _set_finalizers(self, entry: Entry, finalizers: list[str]) -> None:
        meta = entry.raw["metadata"]
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}}
        fresh = await self.api.patch(
            STORAGE_API_VERSION, entry.raw["kind"], meta["namespace"], meta["name"], body
        )
        fresh.setdefault("kind", entry.raw["kind"])
        fresh.setdefault("apiVersion", STORAGE_API_VERSION)
        self.on_object("MODIFIED", fresh)

    async def _write_status(self, entry: Entry, status: ApiModel) -> bool:
        """Patch the status subresource when it differs; conditioned on resourceVersion (409 = re-read)."""
        current = entry.raw.get("status") or {}
        wanted = status.dump()
        if wanted == current:
            return False
        body: dict[str, Any] = {k: v for k, v in wanted.items()}
        for stale in current.keys() - wanted.keys():
            body[stale] = None  # merge patch: null removes a field we no longer set (e.g. url)
        meta = entry.raw["metadata"]
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": body}
        fresh = await self.api.patch(
            STORAGE_API_VERSION,
            entry.raw["kind"],
            meta["namespace"],
            meta["name"],
            patch,
            subresource="status",
        )
        fresh.setdefault("kind", entry.raw["kind"])
        fresh.setdefault("apiVersion", STORAGE_API_VERSION)
        # Through the event intake: a changed url must reach the VirtualMCPServers of the group.
        self.on_object("MODIFIED", fresh)
        return True
