"""The local reconcile loop: manifests folder in, supervised processes and statuses out.

Level-triggered like the operator: every pass reads the whole desired state (the manifests) and the
whole observed state (the supervisor), asks the shared rules in `mcpfleet.reconcile` what should run
(`plan(obj, world)`), applies the difference (start, restart on change, stop) and writes each status
through the same status rules as Kubernetes. A pass runs when a manifest changes (watchfiles), when a
process changes state, when a vMCP gateway rewrote its report file (a `stat` every 0.1 s: `watching`),
and once a second anyway. Workloads are applied in the order of their kinds' descriptors
(`api.kinds.WORKLOAD_KINDS`); the other kinds' statuses come from `rules.other_status` by role.

How a plan becomes processes (what the platform, not the rule, decides; `processbuild` builds each
process's argv, environment and files, `ports.PortChooser` its port, `kept` the last valid manifests):
* each container with a port gets one from `ports` per replica; `{port}` and `{config_dir}` are
  substituted; config files are written to `STATE/config/<kind>/<namespace>/<name>/`;
* `--host 0.0.0.0` (all interfaces of a pod) becomes `--host 127.0.0.1`: nothing is exposed
  beyond this machine;
* `mcpfleet vmcp serve` / `mcpfleet registry serve` run through `platform.local.dataplane`, which
  gives them local discovery instead of the Kubernetes API (the local twin of their RBAC);
* a Secret key is read from `$MCPFLEET_SECRET_<NAME>_<KEY>` or `STATE/secrets/<name>/<key>`; it reaches
  the process as the environment variable the plan names (`secret_env`) or, for a `SecretFile`, as a
  mode-0600 file in `<config dir>/secrets/` (the twin of the projected Secret volume on Kubernetes);
* every path named from manifest values goes through `paths.safe_join`: nothing is written, read as
  a secret or removed outside the state dir, whatever the names or symlinks inside it;
* a file that cannot be loaded (YAML error, too large) keeps the objects it defined running as last
  loaded, and an invalid new version of an object keeps the old one: both carry the error in
  `status.message` and a `ManifestApplied=False` condition until the file is fixed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mcpfleet.api.kinds import MEMBER_KINDS, WORKLOAD_KINDS
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.meta import now_rfc3339
from mcpfleet.api.resource import Resource
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.platform.local import containers, rules
from mcpfleet.platform.local.kept import keep_running, mark_kept
from mcpfleet.platform.local.launch import base_env, fleet_id
from mcpfleet.platform.local.loader import Loaded, LoadError, load_dir
from mcpfleet.platform.local.paths import PathEscapeError, safe_join
from mcpfleet.platform.local.ports import DEFAULT_RANGE, LOCAL_PORT_ANNOTATION, PortAllocator, PortChooser
from mcpfleet.platform.local.processbuild import LOOPBACK, LocalRunError, ProcessBuilder, process_spec
from mcpfleet.platform.local.reaper import end_containers, end_tagged
from mcpfleet.platform.local.sandbox import (
    profile_documents,
)
from mcpfleet.platform.local.snapshot import META_LOAD_ERRORS, StoredObject
from mcpfleet.platform.local.state import State
from mcpfleet.platform.local.supervisor import ProcessSpec, Supervisor
from mcpfleet.platform.local.volumes import CLAIMS_DIR
from mcpfleet.platform.local.watching import watch_manifests, watch_reports
from mcpfleet.reconcile import enforce
from mcpfleet.reconcile.model import (
    LOCAL_SECRET_DIR,
    WorkloadObservation,
    WorkloadPlan,
    World,
)
from mcpfleet.reconcile.world import build_world, refresh
from mcpfleet.yamlread import ManifestLimits

log = logging.getLogger(__name__)

WORKLOAD_ORDER = WORKLOAD_KINDS
"""Kinds that run something; in this order a pass gives the gateway and registry the freshest URLs."""
RESYNC_SECONDS = 1.0

Key = tuple[str, str, str]
StatusCallback = Callable[[str, str, str, dict[str, Any]], None]


@dataclass
class Desired:
    """The processes one workload should have, by replica, and where it serves."""

    plan: WorkloadPlan
    keys: dict[int, list[str]] = field(default_factory=dict)
    serving_port: int | None = None
    problem: str | None = None


def workload_key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


class Runner:
    """Converges one manifests folder into running processes; `run()` until the stop event is set."""

    def __init__(
        self,
        manifests: Path,
        state: State,
        *,
        port_range: tuple[int, int] | None = None,
        on_status: StatusCallback | None = None,
        limits: ManifestLimits | None = None,
    ) -> None:
        self.manifests = manifests
        self.limits = limits or ManifestLimits()
        self.state = state
        self.state_dir = state.state_dir
        self.on_status = on_status
        self.load_errors: list[LoadError] = []
        self.load_warnings: list[str] = []
        """Superseded fields the manifests set (`up` prints them)."""
        self.kept: dict[Key, str] = {}
        """Objects running their last valid manifest, with the error that keeps the new one out."""
        self._loaded: dict[Key, Loaded] = {}
        self._reload = True
        self.passes = 0
        """Completed passes: the progress display waits for the first one."""
        self._dirty = asyncio.Event()
        self._ports = PortChooser(
            PortAllocator(
                state.ports, state.save_port, state.release_port, port_range=port_range or DEFAULT_RANGE
            ),
            lambda: self.supervisor.ports_in_use(),
        )
        self.port_notices = self._ports.notices
        """Ports that moved off their preferred number (and why), for the `up` terminal; append-only."""
        self.supervisor = Supervisor(
            safe_join(self.state_dir, "logs"), self._mark_dirty, self._on_spawn, self._on_exit
        )
        self.fleet = fleet_id(self.state_dir)
        self.run_id = uuid.uuid4().hex[:16]
        """This run of `up`: its watchdog ends the processes of this run only (`reaper`)."""
        self._base_env = base_env(os.environ, fleet=self.fleet, run=self.run_id, state_dir=self.state_dir)
        self._runtime: tuple[containers.Runtime | None, str] | None = None
        self.build = ProcessBuilder(
            self.state_dir,
            fleet=self.fleet,
            run_id=self.run_id,
            base_env=self._base_env,
            runtime=lambda: self.runtime,
        )

    @property
    def runtime(self) -> containers.Runtime | None:
        """The container runtime image servers run with (`containers.find_runtime`, looked up once)."""
        if self._runtime is None:
            self._runtime = containers.find_runtime(os.environ)
        return self._runtime[0]

    def runtime_env(self) -> dict[str, str]:
        """What the runtime's client needs from `up`'s environment (for the watchdog), no tag."""
        env = containers.client_env(os.environ, {"PATH": self._base_env["PATH"]})
        return env

    # -- events -------------------------------------------------------------------------------

    def _mark_dirty(self) -> None:
        self._dirty.set()

    def manifests_changed(self) -> None:
        self._reload = True
        self._dirty.set()

    async def _on_spawn(self, spec: ProcessSpec, pid: int, restarts: int) -> None:
        await self.state.record_process(
            spec.key,
            spec.kind,
            spec.name,
            pid,
            spec.port,
            str(self.supervisor.log_path(spec.key) or ""),
            restarts,
        )

    async def _on_exit(self, spec: ProcessSpec) -> None:
        await self.state.forget_process(spec.key)

    # -- lifecycle ----------------------------------------------------------------------------

    async def stop_leftovers(self) -> int:
        """End what an earlier `up` of this state dir left behind (it was killed, or its clean-up
        did not finish): every process carrying the fleet's tag, found in `/proc` (`reaper`), before
        this run starts any. Returns how many were ended."""
        runtime = self.runtime
        removed = await asyncio.to_thread(end_containers, runtime.path if runtime else None, self.fleet)
        ended, _alive = await asyncio.to_thread(end_tagged, self.fleet)
        for row in await self.state.processes():
            await self.state.forget_process(row.key)
        return len(ended) + len(removed)

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile until `stop` is set, re-running on manifest changes and process events."""
        root = self.manifests if self.manifests.is_dir() else self.manifests.parent
        watcher = asyncio.create_task(
            watch_manifests(root, stop, self.manifests_changed), name="watch manifests"
        )
        reports = asyncio.create_task(
            watch_reports(stop, self._report_files, self._dirty.set), name="watch gateway reports"
        )
        try:
            while not stop.is_set():
                self._dirty.clear()
                try:
                    await self.reconcile()
                except Exception:  # one bad pass must not end `up`: log it and converge on the next
                    log.exception("reconcile pass failed")
                waiter = asyncio.create_task(self._dirty.wait())
                stopper = asyncio.create_task(stop.wait())
                await asyncio.wait(
                    {waiter, stopper}, timeout=RESYNC_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
                for task in (waiter, stopper):
                    task.cancel()
        finally:
            for follower in (watcher, reports):
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower

    def _report_files(self) -> list[Path]:
        """The report file of each loaded gateway (one named outside the state dir is left out)."""
        files = []
        for kind, namespace, name in self._loaded:
            if kind == VirtualMCPServer.KIND:
                with contextlib.suppress(PathEscapeError):
                    files.append(self.build.status_file(namespace, name))
        return files

    async def shutdown(self) -> None:
        """Stop every process `up` started (children of children included), then mark the workloads."""
        await self.supervisor.stop_all()
        for obj in await self.state.objects():
            if obj.kind in WORKLOAD_ORDER and obj.status:
                status = dict(obj.status)
                status.pop("url", None)
                status["phase"] = "Stopped" if obj.kind in MEMBER_KINDS else "Pending"
                status["readyReplicas"] = 0
                status["message"] = STOPPED_MESSAGE
                status["conditions"] = _stopped_conditions(status.get("conditions"))
                await self.state.set_status(obj.kind, obj.namespace, obj.name, status)

    # -- one pass -----------------------------------------------------------------------------

    async def reconcile(self) -> None:
        if self._reload:
            self._reload = False
            await self._load()
        stored = {(o.kind, o.namespace, o.name): o for o in await self.state.objects()}
        resources: list[Resource] = []
        for key, loaded in self._loaded.items():
            obj = stored.get(key)
            if obj is None:
                continue
            # The local generation plays metadata.generation: the rules stamp it into observedGeneration.
            loaded.resource.metadata.generation = obj.generation
            loaded.resource.metadata.creation_timestamp = obj.created
            resources.append(loaded.resource)
        wanted: set[str] = set()
        for namespace in sorted({r.namespace for r in resources}):
            in_ns = [r for r in resources if r.namespace == namespace]
            world = self._world(namespace, in_ns, stored)
            for kind in WORKLOAD_ORDER:
                # Refreshed per kind from the statuses written so far in this pass: a server that just
                # became Running gives its URL to the gateway and registry at once, not a pass later.
                world = self._fresh(world, stored)
                for resource in (r for r in in_ns if r.kind == kind):
                    try:
                        wanted |= await self._reconcile_workload(resource, world, stored)
                    except Exception:
                        # One object's bug must not stall the others, nor stop what already runs for it.
                        log.exception("reconciling %s/%s failed", kind, resource.name)
                        prefix = workload_key(kind, namespace, resource.name) + "/"
                        wanted |= {k for k in self.supervisor.keys() if k.startswith(prefix)}
            world = self._fresh(world, stored)
            for resource in in_ns:
                try:
                    await self._reconcile_other(
                        resource, world, stored[(resource.kind, namespace, resource.name)]
                    )
                except Exception:
                    log.exception("reconciling %s/%s failed", resource.kind, resource.name)
        for process in self.supervisor.keys() - wanted:
            await self.supervisor.stop(process)
            await self._ports.allocator.release(process)
        self.passes += 1

    @property
    def reload_pending(self) -> bool:
        return self._reload

    @property
    def loaded_count(self) -> int:
        """Valid objects of the last load (0 with no manifest at all: `up` warns)."""
        return len(self._loaded)

    async def _load(self) -> None:
        previous = self._loaded
        owners = {key: item.file for key, item in previous.items()}
        result = await asyncio.to_thread(load_dir, self.manifests, self.limits, owners)
        loaded, kept, errors = keep_running(previous, result)
        self.load_errors = errors
        self.load_warnings = result.warnings
        self.kept = kept
        for error in result.errors:
            log.info("invalid manifest: %s", error)
        # `mcpfleet get` lists them too (another process: through the state file).
        await self.state.set_meta(META_LOAD_ERRORS, json.dumps([asdict(e) for e in self.load_errors]))
        for key, item in loaded.items():
            await self.state.upsert_object(*key, item.manifest, item.source)
        for obj in await self.state.objects():
            if (obj.kind, obj.namespace, obj.name) not in loaded:
                await self._forget(obj.kind, obj.namespace, obj.name)
        self._loaded = loaded

    async def _forget(self, kind: str, namespace: str, name: str) -> None:
        """An object whose manifest is gone: its state, and the secret values written for it (its
        other files, e.g. a catalogue, stay)."""
        await self.state.delete_object(kind, namespace, name)
        try:
            secrets = safe_join(self.build.config_dir(kind, namespace, name), LOCAL_SECRET_DIR)
        except PathEscapeError as exc:
            log.warning("not removing secrets of %s/%s: %s", kind, name, exc)
        else:
            shutil.rmtree(secrets, ignore_errors=True)
        if self.on_status is not None:
            self.on_status(kind, namespace, name, {})

    def _mark_kept(self, key: Key, status: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
        """Report (or clear) the invalid manifest on an object that keeps running its last valid one."""
        return mark_kept(status, previous, self.kept.get(key), workload=key[0] in WORKLOAD_ORDER)

    def _world(self, namespace: str, resources: list[Resource], stored: dict[Key, StoredObject]) -> World:
        world = build_world(
            "local",
            namespace,
            resources,
            _statuses(namespace, stored),
            registry_images=self._registry_images([r for r in resources if isinstance(r, MCPRegistry)]),
            profile_documents=profile_documents(
                self.state_dir, [r for r in resources if isinstance(r, MCPServer)]
            ),
        )
        # Image servers run through the machine's container runtime when there is one.
        runtime = self.runtime
        return replace(world, container_runtime=runtime.name if runtime is not None else None)

    @staticmethod
    def _fresh(world: World, stored: dict[Key, StoredObject]) -> World:
        """`world` with the parts that come from statuses re-read from `stored` (the pass' view)."""
        return refresh(world, _statuses(world.namespace, stored))

    def _registry_images(self, registries: list[MCPRegistry]) -> dict[str, enforce.RegistryImages]:
        """enforceServers: the images the enforcing registries list, read from the local ConfigMap
        source (`STATE/configmaps/<name>/<key>`) and claims (`STATE/persistentvolumeclaims/<claim>/`)."""
        contents: dict[enforce.Read, bytes | str] = {}
        for registry, index, source in enforce.to_read(registries, local=True):
            try:
                if source.config_map_ref is not None:
                    ref = source.config_map_ref
                    path = safe_join(self.state_dir, "configmaps", ref.name, ref.key)
                else:
                    assert source.pvc_ref is not None
                    claim = source.pvc_ref
                    path = safe_join(self.state_dir, CLAIMS_DIR, claim.claim_name, *claim.path.split("/"))
                with path.open("rb") as handle:
                    contents[(registry.name, index)] = handle.read(enforce.MAX_REGISTRY_BYTES + 1)
            except (OSError, PathEscapeError) as exc:
                contents[(registry.name, index)] = f"cannot read it locally ({exc})"
        return enforce.gather(registries, contents, local=True)

    # -- workloads ----------------------------------------------------------------------------

    async def _reconcile_workload(
        self, resource: Resource, world: World, objects: dict[Key, StoredObject]
    ) -> set[str]:
        """Converge one workload; its new status also replaces its entry in `objects` (the pass' view)."""
        key = (resource.kind, resource.namespace, resource.name)
        stored = objects[key]
        plan = rules.plan(resource, world)
        desired = Desired(plan)
        if not plan.problems:
            try:
                await self._apply(resource, desired)
            except LocalRunError as exc:
                desired.problem = str(exc)
        observation = self._observe(desired)
        report = self._vmcp_report(resource) if isinstance(resource, VirtualMCPServer) else None
        status = rules.status(resource, stored.status, plan, observation, world, report)
        status = self._mark_kept(key, status, stored.status)
        if await self.state.set_status(resource.kind, resource.namespace, resource.name, status):
            objects[key] = replace(stored, status=status)
            # The workload's timeline (supervisor docstring): phases, and the gateway's backend verdicts.
            events = backend_changes(stored.status or {}, status)
            if status.get("phase") != (stored.status or {}).get("phase"):
                events.append(f"status {status.get('phase')}")
            for process in desired.keys.get(0, []):
                for event in events:
                    self.supervisor.milestone(process, event)
            if self.on_status is not None:
                self.on_status(resource.kind, resource.namespace, resource.name, status)
        return {key for keys in desired.keys.values() for key in keys}

    async def _apply(self, resource: Resource, desired: Desired) -> None:
        """Write the plan's files and ensure one process per container and replica."""
        plan = desired.plan
        config_dir, data_dir = self.build.write_files(plan)
        base = workload_key(plan.kind, plan.namespace, plan.name)
        pinned = resource.metadata.annotations.get(LOCAL_PORT_ANNOTATION)
        for replica in range(plan.replicas):
            keys: list[str] = []
            for container in plan.containers:
                key = f"{base}/{container.name}/{replica}"
                serving = container.name == plan.serving_container
                port = await self._ports.choose(key, container, pinned if serving and replica == 0 else None)
                argv, env = self.build.launch(container, plan, port, config_dir, data_dir)
                if serving and replica == 0 and port is not None:
                    desired.serving_port = port
                spec = process_spec(key, plan, container, replica, argv, env, port, config_dir)
                await self.supervisor.ensure(spec)
                keys.append(key)
            desired.keys[replica] = keys

    def _observe(self, desired: Desired) -> WorkloadObservation:
        plan = desired.plan
        if desired.problem is not None:
            return WorkloadObservation(plan.replicas, 0, None, failed=True, failure_message=desired.problem)
        ready = 0
        failures: list[str] = []
        for keys in desired.keys.values():
            states = [self.supervisor.state(k) for k in keys]
            if states and all(s is not None and s.ready for s in states):
                ready += 1
            failures += [s.failure_message or "failed" for s in states if s is not None and s.failed]
        url = None
        if ready and desired.serving_port is not None:
            url = f"http://{LOOPBACK}:{desired.serving_port}{plan.url_path}"
        return WorkloadObservation(
            desired_replicas=plan.replicas,
            ready_replicas=ready,
            url=url,
            failed=bool(failures) and ready == 0,
            failure_message=failures[0] if failures else None,
        )

    def _vmcp_report(self, resource: Resource) -> dict[str, Any] | None:
        try:
            report = json.loads(self.build.status_file(resource.namespace, resource.name).read_text())
        except (OSError, ValueError):  # PathEscapeError is a ValueError
            return None
        return report if isinstance(report, dict) else None

    # -- groups and configuration kinds -------------------------------------------------------

    async def _reconcile_other(self, resource: Resource, world: World, stored: StoredObject) -> None:
        status = rules.other_status(resource, stored.status or {}, world)
        if status is None:
            return
        key = (resource.kind, resource.namespace, resource.name)
        status = self._mark_kept(key, status, stored.status)
        if await self.state.set_status(*key, status) and self.on_status is not None:
            self.on_status(*key, status)


STOPPED_MESSAGE = "mcpfleet up is not running"


def _stopped_conditions(conditions: Any) -> list[Any]:
    """The Ready condition after `up` stopped: False with the same message as the status (not the
    last failure, which would contradict the phase)."""
    result: list[Any] = []
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            condition = dict(condition)
            if condition.get("status") != "False":
                condition["lastTransitionTime"] = now_rfc3339()
            condition.update(status="False", reason="NotRunning", message=STOPPED_MESSAGE)
        result.append(condition)
    return result


def backend_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """`backend NAME STATUS` for each backend of a gateway's status whose health changed (a
    report of the gateway reached the status): when the gateway connected to each backend."""
    old = {b.get("name"): b.get("status") for b in before.get("discoveredBackends") or []}
    return [
        f"backend {b.get('name')} {b.get('status')}"
        for b in after.get("discoveredBackends") or []
        if b.get("status") != old.get(b.get("name"))
    ]


def _statuses(namespace: str, stored: dict[Key, StoredObject]) -> dict[tuple[str, str], dict[str, Any]]:
    """The statuses of one namespace's stored objects, by (kind, name)."""
    return {(kind, name): obj.status for (kind, ns, name), obj in stored.items() if ns == namespace}
