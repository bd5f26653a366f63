"""The local reconcile loop: manifests folder in, supervised processes and statuses out.

Level-triggered like the operator: every pass reads the whole desired state (the manifests) and the
whole observed state (the supervisor), asks the shared rules in `mcpfleet.reconcile` what should run
(`plan(obj, world)`), applies the difference (start, restart on change, stop) and writes each status
through the same status rules as Kubernetes. A pass runs when a manifest changes (watchfiles), when a
process changes state, when a vMCP gateway rewrote its report file (a `stat` every 0.1 s), and once a
second anyway.

How a plan becomes processes (what the platform, not the rule, decides):
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
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mcpfleet.api.mcpgroup import MCPGroup, MCPGroupStatus
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.mcpserverentry import MCPServerEntry, MCPServerEntryStatus
from mcpfleet.api.meta import SecretKeyRef, now_rfc3339
from mcpfleet.api.resource import Resource
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.platform.local import containers, rules
from mcpfleet.platform.local.hosted import DATAPLANE_MODULE, hostable
from mcpfleet.platform.local.launch import base_env, fleet_id, own_config, server_env
from mcpfleet.platform.local.loader import YAML_SUFFIXES, Loaded, LoadError, load_dir
from mcpfleet.platform.local.paths import PathEscapeError, file_signature, safe_join, write_file
from mcpfleet.platform.local.ports import DEFAULT_RANGE, PortAllocator, preferred_port
from mcpfleet.platform.local.reaper import FLEET_ENV, RUN_ENV, end_containers, end_tagged
from mcpfleet.platform.local.sandbox import (
    SandboxError,
    package_cache,
    profile_documents,
    sandbox_argv,
    sandbox_cache_root,
)
from mcpfleet.platform.local.snapshot import META_LOAD_ERRORS, WORKLOAD_KINDS, StoredObject
from mcpfleet.platform.local.state import State
from mcpfleet.platform.local.supervisor import ProcessSpec, Supervisor
from mcpfleet.platform.local.volumes import CLAIMS_DIR, VolumeError, write_volumes
from mcpfleet.proxy.config import CONFIG_FILE as PROXY_CONFIG_FILE
from mcpfleet.proxy.config import ProxyConfig, ProxyConfigError, load_proxy_config
from mcpfleet.reconcile import enforce, kinds, mcpserverentry
from mcpfleet.reconcile.model import (
    LOCAL_SECRET_DIR,
    LOCAL_VOLUME_DIR,
    Container,
    SecretEnv,
    VolumeFiles,
    WorkloadObservation,
    WorkloadPlan,
    World,
    config_map_volume,
)
from mcpfleet.reconcile.world import build_world, refresh
from mcpfleet.yamlread import ManifestLimits

log = logging.getLogger(__name__)

WORKLOAD_ORDER = WORKLOAD_KINDS
RESYNC_SECONDS = 1.0
REPORT_POLL_SECONDS = 0.1
"""How often the gateways' report files are looked at (`_watch_reports`)."""
RELOAD_SECONDS = 10.0
"""Manifests are re-read at least this often even without a file event (events can be missed)."""
LOOPBACK = "127.0.0.1"
KEPT_ERROR_CHARS = 4000
"""The error reported on a kept object is cut to this (a condition message holds at most 32768)."""
MANIFEST_CONDITION = "ManifestApplied"
"""Local only: False while the object runs its last valid manifest because the current one is invalid."""

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


def mcpfleet_argv() -> list[str]:
    """How to run `mcpfleet` itself: the script beside this interpreter, else `python -m`."""
    script = Path(sys.executable).parent / "mcpfleet"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mcpfleet.cli.main"]


def _secret_env_name(name: str, key: str) -> str:
    return "MCPFLEET_SECRET_" + re.sub(r"[^A-Za-z0-9]", "_", f"{name}_{key}").upper()


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
        self.port_notices: list[str] = []
        """Ports that moved off their preferred number (and why), for the `up` terminal; append-only."""
        self._noticed: dict[str, str] = {}
        self.kept: dict[Key, str] = {}
        """Objects running their last valid manifest, with the error that keeps the new one out."""
        self._loaded: dict[Key, Loaded] = {}
        self._reload = True
        self.passes = 0
        """Completed passes: the progress display waits for the first one."""
        self._dirty = asyncio.Event()
        self._ports = PortAllocator(
            state.ports,
            state.save_port,
            state.release_port,
            port_range=port_range or DEFAULT_RANGE,
        )
        self.supervisor = Supervisor(
            safe_join(self.state_dir, "logs"), self._mark_dirty, self._on_spawn, self._on_exit
        )
        self._written: dict[Path, str] = {}
        self.fleet = fleet_id(self.state_dir)
        self.run_id = uuid.uuid4().hex[:16]
        """This run of `up`: its watchdog ends the processes of this run only (`reaper`)."""
        self._base_env = base_env(os.environ, fleet=self.fleet, run=self.run_id, state_dir=self.state_dir)
        self._runtime: tuple[containers.Runtime | None, str] | None = None

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
        watcher = asyncio.create_task(self._watch(stop), name="watch manifests")
        reports = asyncio.create_task(self._watch_reports(stop), name="watch gateway reports")
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

    async def _watch_reports(self, stop: asyncio.Event) -> None:
        """A pass as soon as a gateway rewrote its report (seen within REPORT_POLL_SECONDS): the
        report is how its backends' health reaches the status, and `up` counts a gateway ready
        only once it has reported every backend. One `stat` per gateway and poll."""
        seen: dict[Path, tuple[int, int, int] | None] = {}
        paths: dict[Key, Path] = {}
        while not stop.is_set():
            for key in [k for k in self._loaded if k[0] == "VirtualMCPServer"]:
                if key not in paths:
                    try:
                        paths[key] = self.status_file(key[1], key[2])
                    except PathEscapeError:
                        continue
                path = paths[key]
                signature = file_signature(path)
                if path not in seen or seen[path] != signature:
                    self._dirty.set()  # also at the first look: a report written since the last pass
                seen[path] = signature
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), REPORT_POLL_SECONDS)

    async def _watch(self, stop: asyncio.Event) -> None:
        """File events trigger a reload at once; a slow periodic re-read covers missed events."""
        from watchfiles import awatch

        root = self.manifests if self.manifests.is_dir() else self.manifests.parent
        while not stop.is_set():
            try:
                async for _changes in awatch(
                    root,
                    watch_filter=lambda _change, path: is_manifest_path(root, path),
                    stop_event=stop,
                    debounce=300,
                    step=50,
                    rust_timeout=int(RELOAD_SECONDS * 1000),
                    yield_on_timeout=True,  # an empty batch every RELOAD_SECONDS: the periodic re-read
                ):
                    self.manifests_changed()
            except Exception as exc:  # e.g. the folder was removed: keep the last state, retry
                log.warning("watching %s failed (%s); retrying", root, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), RELOAD_SECONDS)
                self.manifests_changed()

    async def shutdown(self) -> None:
        """Stop every process `up` started (children of children included), then mark the workloads."""
        await self.supervisor.stop_all()
        for obj in await self.state.objects():
            if obj.kind in WORKLOAD_ORDER and obj.status:
                status = dict(obj.status)
                status.pop("url", None)
                status["phase"] = "Stopped" if obj.kind in ("MCPServer", "MCPRemoteProxy") else "Pending"
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
            await self._ports.release(process)
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
        loaded = {item.key: item for item in result.objects}
        kept: dict[Key, str] = {}
        errors = list(result.errors)
        for error in result.errors:
            for key, item in previous.items():
                if key in kept:
                    continue
                # A file that cannot be read keeps every object it held; like a rejected `kubectl
                # apply`, an object whose new version is invalid keeps running as it was.
                whole_file = error.document is None and item.file == error.file
                if not (whole_file or (error.kind, error.name) == (key[0], key[2])):
                    continue
                newcomer = loaded.get(key)
                if newcomer is not None and newcomer.file == item.file:
                    continue  # loaded again from its own file: nothing to keep
                if newcomer is not None:
                    # Defined elsewhere too, while its own file is broken: the running one stays.
                    errors.append(_duplicate_of(newcomer, item))
                loaded[key] = item
                kept[key] = str(error)[:KEPT_ERROR_CHARS]
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
            secrets = safe_join(self.config_dir(kind, namespace, name), LOCAL_SECRET_DIR)
        except PathEscapeError as exc:
            log.warning("not removing secrets of %s/%s: %s", kind, name, exc)
        else:
            shutil.rmtree(secrets, ignore_errors=True)
        if self.on_status is not None:
            self.on_status(kind, namespace, name, {})

    def _mark_kept(self, key: Key, status: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
        """Report (or clear) the invalid manifest on an object that keeps running its last valid one."""
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != MANIFEST_CONDITION]
        error = self.kept.get(key)
        if error is None:
            if "conditions" in status:
                status["conditions"] = conditions
            return status
        before = next(
            (c for c in previous.get("conditions") or [] if c.get("type") == MANIFEST_CONDITION), None
        )
        conditions.append(
            {
                "type": MANIFEST_CONDITION,
                "status": "False",
                "reason": "InvalidManifest",
                "message": error,
                "lastTransitionTime": (before or {}).get("lastTransitionTime") or now_rfc3339(),
            }
        )
        status["conditions"] = conditions
        if key[0] in WORKLOAD_ORDER:  # only the workload statuses have a message (the others: the condition)
            message = status.get("message")
            kept = f"the last valid manifest keeps running; the current one is invalid: {error}"
            status["message"] = f"{message}; {kept}" if message else kept
        return status

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

    def config_dir(self, kind: str, namespace: str, name: str) -> Path:
        """STATE/config/KIND/NAMESPACE/NAME, checked to stay inside the state dir (PathEscapeError)."""
        return safe_join(self.state_dir, "config", kind.lower(), namespace, name)

    def status_file(self, namespace: str, name: str) -> Path:
        return safe_join(self.config_dir("VirtualMCPServer", namespace, name), "status.json")

    def _write_plan_files(self, plan: WorkloadPlan) -> tuple[Path, Path]:
        """The plan's config, secret and volume files written; its config and data folders."""
        try:
            config_dir = self.config_dir(plan.kind, plan.namespace, plan.name)
            data_dir = safe_join(self.state_dir, "data", plan.kind.lower(), plan.namespace, plan.name)
            config_paths = [(safe_join(config_dir, c.filename), c.content) for c in plan.config_files]
        except PathEscapeError as exc:
            raise LocalRunError(f"refused to write outside the state dir: {exc}") from exc
        config_dir.mkdir(parents=True, exist_ok=True)  # also the processes' working directory
        for path, content in config_paths:
            self._write(path, content)
        self._write_secret_files(config_dir, plan)
        # The user's ConfigMap keys a pod would mount (e.g. OIDC settings) are volumes here too.
        volumes = plan.volume_files + tuple(
            VolumeFiles(
                config_map_volume(f.filename),
                config_map=f.config_map.name,
                items=((f.config_map.key, f.filename),),
            )
            for f in plan.config_map_files
        )
        if volumes or safe_join(config_dir, LOCAL_VOLUME_DIR).exists():
            try:
                write_volumes(
                    config_dir,
                    self.state_dir,
                    volumes,
                    lambda name, key: self._secret(SecretEnv(key, SecretKeyRef(name=name, key=key))),
                )
            except VolumeError as exc:
                raise LocalRunError(str(exc)) from exc
        if plan.data_dir:
            data_dir.mkdir(parents=True, exist_ok=True)
        return config_dir, data_dir

    async def _apply(self, resource: Resource, desired: Desired) -> None:
        plan = desired.plan
        config_dir, data_dir = self._write_plan_files(plan)
        base = workload_key(plan.kind, plan.namespace, plan.name)
        single = len(plan.containers) == 1 and plan.replicas <= 1
        for replica in range(plan.replicas):
            keys: list[str] = []
            for container in plan.containers:
                key = f"{base}/{container.name}/{replica}"
                pinned = resource.metadata.annotations.get(LOCAL_PORT_ANNOTATION) if replica == 0 else None
                port = await self._port(
                    key, container, pinned if container.name == plan.serving_container else None
                )
                argv, env = self._launch(container, plan, port, config_dir, data_dir)
                proxy = self._proxy_config(container, plan, argv, port, config_dir)
                serving = container.name == plan.serving_container
                health = probe = None
                if serving and port is not None:
                    health = (
                        f"http://{LOOPBACK}:{port}{plan.health_path}"
                        if plan.health_path
                        else f"tcp://{LOOPBACK}:{port}"
                    )
                    if replica == 0:
                        desired.serving_port = port
                    if (
                        plan.kind == "MCPServer"
                        and plan.health_path == "/health"
                        and proxy is not None
                        and proxy.auth_config is None
                        and proxy.authserver_config is None
                    ):
                        # A stdio server behind `mcpfleet proxy`: Running means it answers MCP
                        # (not probed through incoming auth / the embedded authorization server:
                        # the probe holds no token).
                        probe = f"http://{LOOPBACK}:{port}/mcp"
                log_name = plan.name if single else f"{plan.name}-{container.name}-{replica}"
                if plan.kind != "MCPServer":
                    log_name = f"{plan.kind.lower()}-{log_name}"
                hosted = hostable(container.command, bool(container.env or container.secret_env), proxy)
                fingerprint = hashlib.sha256(
                    json.dumps([argv, sorted(env.items()), restart_checksum(plan)]).encode()
                ).hexdigest()
                await self.supervisor.ensure(
                    ProcessSpec(
                        key=key,
                        kind=plan.kind,
                        name=plan.name,
                        log_name=log_name,
                        argv=tuple(argv),
                        env=env,
                        cwd=config_dir,
                        port=port,
                        health_url=health,
                        fingerprint=fingerprint,
                        mcp_probe_url=probe,
                        hosted=hosted,
                        proxy=proxy if hosted else None,
                    )
                )
                keys.append(key)
            desired.keys[replica] = keys

    @staticmethod
    def _proxy_config(
        container: Container, plan: WorkloadPlan, argv: list[str], port: int | None, config_dir: Path
    ) -> ProxyConfig | None:
        """A proxy container's configuration: the rendered file, served on this platform's address
        and `port`, its server the command after `--` (as launched: in its sandbox or container)."""
        if tuple(container.command[:2]) != ("mcpfleet", "proxy"):
            return None
        if not any(f.filename == PROXY_CONFIG_FILE for f in plan.config_files):
            raise LocalRunError(
                f"container {container.name}: the proxy's {PROXY_CONFIG_FILE} is not rendered"
            )
        overrides: dict[str, Any] = {"host": LOOPBACK, "port": port or 0}
        if "--" in argv:
            overrides["command"] = argv[argv.index("--") + 1 :]
        try:
            return load_proxy_config(safe_join(config_dir, PROXY_CONFIG_FILE), overrides)
        except ProxyConfigError as exc:
            raise LocalRunError(f"proxy config: {exc}") from exc

    def _write(self, path: Path, content: str) -> None:
        if self._written.get(path) == content:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or not path.exists() or path.read_text() != content:
            write_file(path, content)
        self._written[path] = content

    async def _port(self, key: str, container: Container, pinned: str | None = None) -> int | None:
        if container.port is None:
            return None
        if container.fixed_port and not any("{port}" in part for part in container.command):
            return container.port  # the server binds it itself; nothing to choose
        if pinned is not None:
            if pinned.isdigit() and 1024 <= int(pinned) <= 65535:
                return int(pinned)  # the user's choice: a busy port fails the process, with the bind error
            self._notice(
                key,
                f"annotation {LOCAL_PORT_ANNOTATION}: expected a port 1024-65535, got {pinned!r}; ignored",
            )
        port = await self._ports.allocate(key, self.supervisor.ports_in_use())
        preferred = preferred_port(key, self._ports.low, self._ports.high)
        if port != preferred:
            self._notice(
                key,
                f"{key.rsplit('/', 2)[0]}: port {preferred} is taken by another program, so it listens on "
                f"{port} this time (its URL changed). It goes back to {preferred} at the next `mcpfleet up` "
                f"once that port is free; to pin a port, annotate the object with "
                f'{LOCAL_PORT_ANNOTATION}: "{port}"',
            )
        return port

    def _notice(self, key: str, text: str) -> None:
        """A message for the `up` terminal, once per key and text."""
        if self._noticed.get(key) != text:
            self._noticed[key] = text
            self.port_notices.append(text)
            log.warning("%s", text)

    def _argv(
        self, container: Container, plan: WorkloadPlan, port: int | None, config_dir: Path, data_dir: Path
    ) -> list[str]:
        if not container.command:
            raise LocalRunError(f"container {container.name}: a container image cannot run locally")
        values = {"{port}": str(port), "{config_dir}": str(config_dir), "{data_dir}": str(data_dir)}
        argv = []
        for part in container.command:
            for placeholder, value in values.items():
                part = part.replace(placeholder, value)
            argv.append(part)
        if plan.data_dir:
            argv = [
                part.replace(plan.data_dir, str(data_dir)) if part.startswith(plan.data_dir) else part
                for part in argv
            ]
        for index in range(len(argv) - 1):
            if argv[index] == "--host" and argv[index + 1] in ("0.0.0.0", "::"):
                argv[index + 1] = LOOPBACK
        if argv[0] != "mcpfleet":
            return argv
        if argv[1:3] in (["vmcp", "serve"], ["registry", "serve"]):
            extra = ["--state-dir", str(self.state_dir), "--namespace", plan.namespace]
            if argv[1] == "vmcp":
                extra += ["--status-file", str(self.status_file(plan.namespace, plan.name))]
            return [sys.executable, "-m", "mcpfleet.platform.local.dataplane", argv[1], *extra, *argv[3:]]
        return [*mcpfleet_argv(), *argv[1:]]

    def _sandboxed(
        self, argv: list[str], container: Container, env: dict[str, str], plan: WorkloadPlan
    ) -> list[str]:
        """`argv` with the server inside its sandbox (`sandbox.py`): a proxy's child after `--`, or
        the whole command of a server run directly. LocalRunError (the workload Failed) when the
        sandbox cannot be set up: never run without it."""
        if container.permission_profile is None:
            return argv
        start = argv.index("--") + 1 if tuple(container.command[:2]) == ("mcpfleet", "proxy") else 0
        try:
            work_dir = safe_join(self.state_dir, "sandbox", plan.namespace, plan.name)
            cache = package_cache(sandbox_cache_root(), argv[start:], container.permission_profile)
            wrapped = sandbox_argv(
                argv[start:], env, container.permission_profile, work_dir, cache, container.host_volumes
            )
        except (PathEscapeError, SandboxError) as exc:
            raise LocalRunError(f"sandbox: {exc}") from exc
        return [*argv[:start], *wrapped]

    def _launch(
        self, container: Container, plan: WorkloadPlan, port: int | None, config_dir: Path, data_dir: Path
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment of one container's process: its server in a container of the
        runtime (an image), else inside its sandbox."""
        if container.local_image is not None:
            # A proxy whose child is the image, or (no command) the image itself, an http server.
            argv = self._argv(container, plan, port, config_dir, data_dir) if container.command else []
            return self._in_container(argv, container, plan, config_dir, None if container.command else port)
        argv = self._argv(container, plan, port, config_dir, data_dir)
        env = self._env(container, plan, argv)
        return self._sandboxed(argv, container, env, plan), env

    def _in_container(
        self, argv: list[str], container: Container, plan: WorkloadPlan, config_dir: Path, publish: int | None
    ) -> tuple[list[str], dict[str, str]]:
        """A proxy whose child is a container image (`containers.py`): the runtime's `run` after
        `--`, the image's declared environment in a mode-0600 env file, and the environment of the
        proxy and the runtime's client: the base with the user's HOME (the runtime's image store)
        and the proxy's own secrets, never the image's variables (a manifest must not configure the
        runtime, e.g. `CONTAINERS_CONF`)."""
        runtime = self.runtime
        profile = container.permission_profile
        if runtime is None or container.local_image is None or profile is None:
            raise LocalRunError("no container runtime (podman or docker) on this machine")
        declared = dict(container.env)
        for secret in container.secret_env:
            declared[secret.env_name] = self._secret(secret)
        inside = {k: v for k, v in declared.items() if k in container.local_image_env}
        outside = {k: v for k, v in declared.items() if k not in container.local_image_env}
        # The fleet's tag inside too: `down` finds the container's processes in /proc as well.
        inside.update({FLEET_ENV: self.fleet, RUN_ENV: self.run_id})
        try:
            folder = safe_join(config_dir, "container")
            env_file = safe_join(folder, "env")
            folder.mkdir(mode=0o700, exist_ok=True)
            folder.chmod(0o700)
            content = containers.env_file_text(inside)
            if self._written.get(env_file) != content:
                write_file(env_file, content, 0o600)
                self._written[env_file] = content
            run = containers.run_argv(
                runtime,
                image=container.local_image,
                args=container.args,
                entrypoint=container.local_entrypoint,
                profile=profile,
                env_file=env_file,
                publish=publish,
                name=containers.container_name(self.fleet, plan.namespace, plan.name),
                labels=containers.fleet_labels(self.fleet, self.run_id, plan.namespace, plan.name),
                volumes=container.host_volumes,
            )
        except PathEscapeError as exc:
            raise LocalRunError(f"refused a path outside the state dir: {exc}") from exc
        except containers.ContainerError as exc:
            raise LocalRunError(f"container: {exc}") from exc
        env = containers.client_env(os.environ, self._base_env)
        env.update({k: v for k, v in outside.items() if k not in env})
        # A changed env file restarts the server like a changed environment does (the fingerprint).
        env[CONTAINER_ENV_DIGEST] = hashlib.sha256(content.encode()).hexdigest()
        start = argv.index("--") + 1 if "--" in argv else 0
        return [*argv[:start], *run], env

    def _env(self, container: Container, plan: WorkloadPlan, argv: list[str]) -> dict[str, str]:
        """The process's whole environment (`launch.server_env`): the base, a private HOME in the
        workload's work folder, its declared `env` and secrets; mcpfleet's own gateway and registry
        also get mcpfleet's settings (`launch.own_config`)."""
        declared = dict(container.env)
        for secret in container.secret_env:
            declared[secret.env_name] = self._secret(secret)
        if DATAPLANE_MODULE in argv:
            declared = {**own_config(os.environ), **declared}
        try:
            home = safe_join(self.state_dir, "work", plan.kind.lower(), plan.namespace, plan.name, "home")
        except PathEscapeError as exc:
            raise LocalRunError(f"refused a work folder outside the state dir: {exc}") from exc
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        return server_env(self._base_env, home, declared)

    def _write_secret_files(self, config_dir: Path, plan: WorkloadPlan) -> None:
        """The plan's SecretFiles as mode-0600 files in a mode-0700 folder; stale ones removed."""
        try:
            folder = safe_join(config_dir, LOCAL_SECRET_DIR)
            paths = {f.filename: safe_join(folder, f.filename) for f in plan.secret_files}
        except PathEscapeError as exc:
            raise LocalRunError(f"refused to write a secret outside the state dir: {exc}") from exc
        wanted = {f.filename for f in plan.secret_files}
        if folder.is_dir():
            for stale in folder.iterdir():
                if stale.name in wanted:
                    continue
                if stale.is_dir() and not stale.is_symlink():
                    shutil.rmtree(stale)  # inside the checked folder: a leftover folder, not a secret
                else:
                    stale.unlink(missing_ok=True)  # a symlink is removed itself, never its target
        if not plan.secret_files:
            return
        folder.mkdir(mode=0o700, exist_ok=True)
        folder.chmod(0o700)
        for secret_file in plan.secret_files:
            path = paths[secret_file.filename]
            try:
                value = self._secret(SecretEnv(secret_file.filename, secret_file.secret))
            except LocalRunError:
                if not secret_file.optional:
                    raise
                path.unlink(missing_ok=True)  # an optional Secret that is gone: no file, as on Kubernetes
                continue
            with contextlib.suppress(OSError):
                if not path.is_symlink() and path.read_text() == value:
                    continue
            # Created 0600 (not chmod-ed after the write): the value is never readable by others.
            # Replaced atomically: the service reads the new value at its next use, as with a Secret volume.
            write_file(path, value, 0o600)

    def _secret(self, secret: SecretEnv) -> str:
        name, key = secret.secret.name, secret.secret.key
        variable = _secret_env_name(name, key)
        if variable in os.environ:
            return os.environ[variable]
        try:
            path = safe_join(self.state_dir, "secrets", name, key)
        except PathEscapeError as exc:
            raise LocalRunError(f"secret {name} key {key}: not a usable file name ({exc})") from exc
        if path.is_file():
            return path.read_text().rstrip("\n")
        raise LocalRunError(f"secret {name} key {key}: not found locally; set ${variable} or write {path}")

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
            report = json.loads(self.status_file(resource.namespace, resource.name).read_text())
        except (OSError, ValueError):  # PathEscapeError is a ValueError
            return None
        return report if isinstance(report, dict) else None

    # -- groups and configuration kinds -------------------------------------------------------

    async def _reconcile_other(self, resource: Resource, world: World, stored: StoredObject) -> None:
        status: dict[str, Any] | None = None
        if isinstance(resource, MCPGroup):
            previous = MCPGroupStatus.model_validate(stored.status or {})
            status = rules.group_status(previous, resource, world).dump()
        elif resource.kind in kinds.CONFIGS:
            previous_config = kinds.parse_config_status(stored.status or {})
            status = rules.config_status(previous_config, resource, world).dump()
        elif isinstance(resource, MCPServerEntry):
            previous_entry = MCPServerEntryStatus.model_validate(stored.status or {})
            status = mcpserverentry.status(previous_entry, resource, world).dump()
        if status is not None:
            status = self._mark_kept(
                (resource.kind, resource.namespace, resource.name), status, stored.status
            )
        if status is not None and await self.state.set_status(
            resource.kind, resource.namespace, resource.name, status
        ):
            if self.on_status is not None:
                self.on_status(resource.kind, resource.namespace, resource.name, status)


CONTAINER_ENV_DIGEST = "MCPFLEET_CONTAINER_ENV_DIGEST"
"""In the runtime client's environment: the digest of its container's env file."""
STOPPED_MESSAGE = "mcpfleet up is not running"
LOCAL_PORT_ANNOTATION = "mcpfleet.dev/local-port"
"""Pins the port of a workload's serving process under `mcpfleet up` (ignored on Kubernetes)."""


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


def _duplicate_of(newcomer: Loaded, running: Loaded) -> LoadError:
    document = int(newcomer.source.rpartition("#")[2])
    reason = f"duplicate of {running.source}, which keeps running; this document is ignored"
    kind, name = newcomer.resource.kind, newcomer.resource.name
    return LoadError(newcomer.file, document, kind, name, (("metadata.name", reason),))


def backend_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """`backend NAME STATUS` for each backend of a gateway's status whose health changed (a
    report of the gateway reached the status): when the gateway connected to each backend."""
    old = {b.get("name"): b.get("status") for b in before.get("discoveredBackends") or []}
    return [
        f"backend {b.get('name')} {b.get('status')}"
        for b in after.get("discoveredBackends") or []
        if b.get("status") != old.get(b.get("name"))
    ]


def is_manifest_path(root: Path, path: str) -> bool:
    """Whether a file event under `root` can change the manifests (the state dir inside DIR cannot)."""
    try:
        relative = Path(path).relative_to(root)
    except ValueError:
        return False
    if any(part.startswith(".") for part in relative.parts):
        return False  # hidden: editor swap files, .git, a .mcpfleet state dir inside DIR
    return relative.suffix in YAML_SUFFIXES or relative.suffix == ""  # a YAML file, or a folder


def restart_checksum(plan: WorkloadPlan) -> str:
    """The config checksum whose change restarts the processes: the plan's rollout checksum (the
    local gateway follows the group live from the state, `discovery.LocalBackendSource`)."""
    return plan.rollout_checksum


class LocalRunError(Exception):
    """A plan this machine cannot run as asked (a missing local secret, a container image)."""


def _statuses(namespace: str, stored: dict[Key, StoredObject]) -> dict[tuple[str, str], dict[str, Any]]:
    """The statuses of one namespace's stored objects, by (kind, name)."""
    return {(kind, name): obj.status for (kind, ns, name), obj in stored.items() if ns == namespace}
