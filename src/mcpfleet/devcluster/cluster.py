"""Orchestrates the dev cluster: `up`, `down` and `status` over one state dir.

Owns: the state dir layout (state.json with ports and node count, pki/, kubeconfigs, etcd data,
run/ pid files, logs/), each component's command line, the readiness waits, and the fake Node objects.

What runs (all on 127.0.0.1, ports chosen free at `up` and kept while still free so a kubeconfig
stays valid across restarts): etcd -> kube-apiserver -> (kube-controller-manager, kube-scheduler,
kwok) in parallel. kwok manages every Node (`--manage-all-nodes`): it marks our fake nodes Ready,
renews their leases, and plays pods through Running/Ready and deletion. No kubelet, no containers.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import os
import shutil
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from mcpfleet.devcluster import pki as pkimod
from mcpfleet.devcluster import rollback
from mcpfleet.devcluster.build import BuildLayout, binaries_present, build_all, default_cache_root
from mcpfleet.devcluster.commands import ControlPlaneCommands, component_kubeconfig
from mcpfleet.devcluster.processes import ProcessDir, ProcessRecord, is_running, stop

if TYPE_CHECKING:
    from mcpfleet.devcluster.realnode import RealNode

Progress = Callable[[str], None]

# Start order; `down` stops in reverse.
COMPONENTS: tuple[str, ...] = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "conversion-webhook",
)
BINARY_COMPONENTS: tuple[str, ...] = COMPONENTS[:-1]
"""The components built from Go modules; the conversion webhook is mcpfleet's own Python code."""
PORT_NAMES: tuple[str, ...] = (
    "etcd",
    "etcd-peer",
    "apiserver",
    "controller-manager",
    "scheduler",
    "kwok",
    "conversion",
)
DEFAULT_GOGC = "400"
"""GOGC of the control-plane processes unless the environment sets one (see `_up_locked`)."""
NODE_PREFIX = "kwok-node-"
STATE_FILE = "state.json"
TEST_OWNER_FILE = "started-by-tests"


CLIENT_STOP_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL at `down` for every component but etcd."""


class ClusterError(RuntimeError):
    """The cluster could not be started or inspected; `component` names the failing process."""

    def __init__(self, message: str, component: str | None = None, log_tail: str = "") -> None:
        super().__init__(message)
        self.component = component
        self.log_tail = log_tail

    def __str__(self) -> str:
        base = super().__str__()
        if self.component and self.log_tail:
            return f"{base}\n--- last lines of {self.component} log ---\n{self.log_tail}"
        return base


def default_state_dir() -> Path:
    return default_cache_root() / "dev-cluster"


@dataclass(frozen=True)
class ClusterInfo:
    """How to reach a running cluster (what `up` returns and the test fixture hands out)."""

    state_dir: Path
    kubeconfig: Path
    kubectl: Path
    server: str
    ca_cert: Path
    client_cert: Path
    client_key: Path
    nodes: int
    ports: dict[str, int] = field(default_factory=dict)

    def ssl_context(self) -> ssl.SSLContext:
        """TLS context trusting the cluster CA and presenting the admin client certificate."""
        ctx = ssl.create_default_context(cafile=str(self.ca_cert))
        ctx.load_cert_chain(str(self.client_cert), str(self.client_key))
        return ctx


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    running: bool
    pid: int | None
    log: Path


@dataclass(frozen=True)
class ClusterStatus:
    state_dir: Path
    components: tuple[ComponentStatus, ...]
    ready: bool
    ready_detail: str
    nodes_ready: int
    kubeconfig: Path | None
    server: str | None
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def all_running(self) -> bool:
        return all(c.running for c in self.components)


class DevCluster:
    """The dev cluster of one state dir. Methods are safe to call from several processes (file lock)."""

    def __init__(self, state_dir: Path, layout: BuildLayout | None = None) -> None:
        self.state_dir = state_dir.expanduser().resolve()
        self.layout = layout or BuildLayout(default_cache_root())
        self.procs = ProcessDir(self.state_dir)
        self.pki = pkimod.Pki(self.state_dir / "pki")

    # ---- files --------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    def _component_kubeconfig(self, client: str) -> Path:
        return component_kubeconfig(self.state_dir, client)

    def _read_state(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads((self.state_dir / STATE_FILE).read_text())
            return data
        except (FileNotFoundError, ValueError):
            return {}

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self.state_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_dir / STATE_FILE)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive lock over the state dir: concurrent `up`s serialise, the second is a no-op."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / ".lock", "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def info(self) -> ClusterInfo:
        state = self._read_state()
        ports = {k: int(v) for k, v in state.get("ports", {}).items()}
        if "apiserver" not in ports:
            raise ClusterError(f"no dev cluster state in {self.state_dir} (run `mcpfleet dev-cluster up`)")
        return ClusterInfo(
            state_dir=self.state_dir,
            kubeconfig=self.kubeconfig,
            kubectl=self.layout.binary("kubectl"),
            server=f"https://127.0.0.1:{ports['apiserver']}",
            ca_cert=self.pki.ca_cert,
            client_cert=self.pki.client_cert("admin"),
            client_key=self.pki.client_key("admin"),
            nodes=int(state.get("nodes", 0)),
            ports=ports,
        )

    # ---- ports --------------------------------------------------------------------------------
    @staticmethod
    def _port_free(port: int) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
            return True

    def _choose_ports(self, previous: dict[str, int]) -> dict[str, int]:
        """Keeps each previously recorded port while free (stable kubeconfig), else asks the OS."""
        ports: dict[str, int] = {}
        held: list[socket.socket] = []
        try:
            for name in PORT_NAMES:
                old = previous.get(name)
                if old and old not in ports.values() and self._port_free(old):
                    ports[name] = old
                    continue
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind(("127.0.0.1", 0))
                held.append(s)  # held open so the next request cannot return the same port
                ports[name] = s.getsockname()[1]
        finally:
            for s in held:
                s.close()
        return ports

    # ---- command lines ------------------------------------------------------------------------
    def _argv(self, component: str, ports: dict[str, int]) -> list[str]:
        commands = ControlPlaneCommands(self.layout, self.pki, self.state_dir)
        builders = {
            "etcd": commands.etcd,
            "kube-apiserver": commands.apiserver,
            "kube-controller-manager": commands.controller_manager,
            "kube-scheduler": commands.scheduler,
            "kwok": commands.kwok,
            "conversion-webhook": commands.conversion_webhook,
        }
        if component not in builders:
            raise ValueError(f"component: unknown {component!r}")
        return builders[component](ports)

    # ---- API access ---------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _client(self, ports: dict[str, int]) -> AsyncIterator[httpx.AsyncClient]:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.client_cert("admin")), str(self.pki.client_key("admin")))
        async with httpx.AsyncClient(
            base_url=f"https://127.0.0.1:{ports['apiserver']}", verify=ctx, timeout=5.0
        ) as client:
            yield client

    def _fail(self, component: str, message: str) -> ClusterError:
        return ClusterError(message, component, self.procs.log_tail(component))

    async def _wait(
        self,
        component: str,
        what: str,
        check: Callable[[], Any],
        record: ProcessRecord | None,
        ready_timeout: float,
    ) -> None:
        """Polls async `check` until truthy or ready_timeout; fails fast if the process died."""
        deadline = time.monotonic() + ready_timeout
        last_error = ""
        while True:
            if record is not None and not is_running(record):
                raise self._fail(component, f"{component} exited while waiting for {what}")
            try:
                if await check():
                    return
            except (httpx.HTTPError, OSError, ValueError) as exc:
                last_error = f" (last error: {exc!r})"
            if time.monotonic() > deadline:
                raise self._fail(
                    component, f"timed out after {ready_timeout:.0f}s waiting for {what}{last_error}"
                )
            await asyncio.sleep(0.1)

    # ---- up -----------------------------------------------------------------------------------
    async def up(
        self,
        nodes: int = 3,
        progress: Progress = lambda _m: None,
        ready_timeout: float = 120.0,
        real_node: bool = False,
    ) -> ClusterInfo:
        """Builds binaries if needed and starts the cluster; a no-op if it is already running.

        `real_node` also attaches a real node (kubelet + containerd, see realnode.py): needs root.
        """
        if nodes < 1:
            raise ValueError(f"nodes: must be >= 1, got {nodes}")
        if real_node:
            from mcpfleet.devcluster import realnode

            # Fail before starting anything: root and the Debian tools are preconditions.
            realnode.require_root()
            realnode.check_tools()
        if not binaries_present(self.layout):
            await build_all(self.layout, progress)
        with self.lock():
            before = rollback.running(self)
            try:
                info = await self._up_locked(nodes, progress, ready_timeout)
                if real_node:
                    await self.real_node().up(progress, ready_timeout)
            except BaseException:
                # A failed `up` leaves nothing it started running, and says what it stopped.
                await rollback.roll_back(self, before, progress)
                raise
            return info

    async def _up_locked(self, nodes: int, progress: Progress, ready_timeout: float) -> ClusterInfo:
        status = await self.status()
        if status.all_running and status.ready:
            progress(f"dev cluster already running ({self.state_dir})")
            info = self.info()
            await self._ensure_nodes(info.ports, nodes, ready_timeout)
            if nodes > info.nodes:
                self._write_state(self._read_state() | {"nodes": nodes})
            return self.info()
        if any(c.running for c in status.components):
            progress("dev cluster partly running: restarting it")
            await self._stop_all()
        try:
            return await self._start(nodes, progress, ready_timeout)
        except ClusterError as exc:
            # Another program may grab a port between our choice and the component's bind (the
            # machine is shared): retry once on fresh ports rather than fail the whole test run.
            if "address already in use" not in exc.log_tail:
                raise
            progress(f"{exc.component}: port taken meanwhile; retrying on new ports")
            self._write_state(self._read_state() | {"ports": {}})
            return await self._start(nodes, progress, ready_timeout)

    async def _start(self, nodes: int, progress: Progress, ready_timeout: float) -> ClusterInfo:
        started = time.monotonic()
        self._check_binaries()
        ports, server = self._prepare_state(nodes)
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        # A dev cluster trades memory for CPU: the Go collector runs at a quarter of its default
        # frequency (the API server spent ~15 % of its CPU in GC while 1,000 servers converged).
        # An explicit GOGC in the environment wins.
        env.setdefault("GOGC", DEFAULT_GOGC)
        try:
            await self._start_processes(ports, env, nodes, progress, ready_timeout, started)
        except BaseException:
            # Never leave half a cluster behind: the next `up` starts from a clean process table.
            stopped = await self._stop_all()
            progress(f"control plane start failed: stopped {', '.join(stopped) or 'nothing (none ran)'}")
            raise
        progress(f"dev cluster ready in {time.monotonic() - started:.1f}s: {nodes} nodes, {server}")
        return self.info()

    def _check_binaries(self) -> None:
        for name in (
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
            "kubectl",
        ):
            if not self.layout.binary(name).is_file():
                raise ClusterError(
                    f"binary missing: {self.layout.binary(name)} (run `mcpfleet dev-cluster build`)"
                )

    def _prepare_state(self, nodes: int) -> tuple[dict[str, int], str]:
        """Choose the ports, write the PKI, the kubeconfigs and the state file; the ports and API URL."""
        state = self._read_state()
        ports = self._choose_ports({k: int(v) for k, v in state.get("ports", {}).items()})
        pki = pkimod.ensure_pki(self.state_dir / "pki")
        server = f"https://127.0.0.1:{ports['apiserver']}"
        (self.state_dir / "kubeconfigs").mkdir(exist_ok=True)
        for client in ("controller-manager", "scheduler", "kwok"):
            pkimod.write_private(
                self._component_kubeconfig(client), pkimod.render_kubeconfig(pki, server, client)
            )
        pkimod.write_private(self.kubeconfig, pkimod.render_kubeconfig(pki, server, "admin"))
        self._write_state(
            {
                "ports": ports,
                "nodes": nodes,
                "kube_version": self.layout.kube_version,
                "etcd_version": self.layout.etcd_version,
                "bin": {c: str(self.layout.binary(c)) for c in (*BINARY_COMPONENTS, "kubectl")},
                "started_at": time.time(),
            }
        )
        return ports, server

    async def _start_processes(
        self,
        ports: dict[str, int],
        env: dict[str, str],
        nodes: int,
        progress: Progress,
        ready_timeout: float,
        started: float,
    ) -> None:
        progress(f"starting etcd on 127.0.0.1:{ports['etcd']}")
        etcd = self.procs.start("etcd", self._argv("etcd", ports), env=env, cwd=self.state_dir)

        async def etcd_healthy() -> bool:
            async with httpx.AsyncClient(timeout=2.0) as c:
                r = await c.get(f"http://127.0.0.1:{ports['etcd']}/health")
                return r.status_code == 200 and r.json().get("health") == "true"

        await self._wait("etcd", "etcd /health", etcd_healthy, etcd, 30)

        progress(f"starting kube-apiserver on https://127.0.0.1:{ports['apiserver']}")
        apiserver = self.procs.start(
            "kube-apiserver", self._argv("kube-apiserver", ports), env=env, cwd=self.state_dir
        )
        async with self._client(ports) as api:

            async def readyz() -> bool:
                r = await api.get("/readyz")
                return r.status_code == 200

            await self._wait("kube-apiserver", "kube-apiserver /readyz", readyz, apiserver, ready_timeout)
            progress(f"kube-apiserver ready after {time.monotonic() - started:.1f}s")

            records = {
                c: self.procs.start(c, self._argv(c, ports), env=env, cwd=self.state_dir)
                for c in ("kube-controller-manager", "kube-scheduler", "kwok", "conversion-webhook")
            }
            await self._create_nodes(api, nodes)
            await self._wait_control_loops(api, ports, records, nodes, ready_timeout)

    async def _wait_control_loops(
        self,
        api: httpx.AsyncClient,
        ports: dict[str, int],
        records: dict[str, ProcessRecord],
        nodes: int,
        ready_timeout: float,
    ) -> None:
        """Wait until the controller manager, scheduler, kwok, webhook and nodes are all ready."""

        async def healthz(port: int) -> bool:
            # Served with our own certificate (SAN 127.0.0.1), so verify against the CA.
            r = await api.get(f"https://127.0.0.1:{port}/healthz")
            return r.status_code == 200

        async def kwok_healthy() -> bool:
            # kwok serves /healthz only after its node and pod controllers have started.
            r = await api.get(f"http://127.0.0.1:{ports['kwok']}/healthz")
            return r.status_code == 200

        async def nodes_ready() -> bool:
            return await self._count_ready_nodes(api) >= nodes

        async def default_sa() -> bool:
            # The serviceaccount controller has run: pods can be created in new namespaces.
            r = await api.get("/api/v1/namespaces/default/serviceaccounts/default")
            return r.status_code == 200

        def served(component: str, port: str, label: str) -> Awaitable[None]:
            check = functools.partial(healthz, ports[port])
            return self._wait(component, f"{label} /healthz", check, records[component], ready_timeout)

        await asyncio.gather(
            served("kube-controller-manager", "controller-manager", "kube-controller-manager"),
            served("kube-scheduler", "scheduler", "kube-scheduler"),
            self._wait("kwok", "kwok /healthz", kwok_healthy, records["kwok"], ready_timeout),
            served("conversion-webhook", "conversion", "conversion webhook"),
            self._wait("kwok", f"{nodes} Ready nodes", nodes_ready, records["kwok"], ready_timeout),
            self._wait(
                "kube-controller-manager",
                "the default service account",
                default_sa,
                records["kube-controller-manager"],
                ready_timeout,
            ),
        )

    @staticmethod
    def _node_body(name: str) -> dict[str, Any]:
        # Nothing really runs, so capacity is only a scheduling limit: make it large enough that
        # several test suites sharing one cluster (hundreds of simulated pods) never see Pending pods.
        resources = {"cpu": "1000", "memory": "4Ti", "pods": "1000", "ephemeral-storage": "10Ti"}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                },
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            # No taints: ordinary pods schedule here without tolerations.
            "spec": {},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": "fake",
                    "kubeProxyVersion": "fake",
                },
            },
        }

    async def _create_nodes(self, api: httpx.AsyncClient, nodes: int) -> None:
        for i in range(nodes):
            r = await api.post("/api/v1/nodes", json=self._node_body(f"{NODE_PREFIX}{i}"))
            if r.status_code not in (201, 409):
                raise ClusterError(f"creating node {NODE_PREFIX}{i}: HTTP {r.status_code} {r.text[:500]}")

    async def _ensure_nodes(self, ports: dict[str, int], nodes: int, ready_timeout: float) -> None:
        async with self._client(ports) as api:
            await self._create_nodes(api, nodes)

            async def ready() -> bool:
                return await self._count_ready_nodes(api) >= nodes

            await self._wait("kwok", f"{nodes} Ready nodes", ready, self.procs.read("kwok"), ready_timeout)

    @staticmethod
    async def _count_ready_nodes(api: httpx.AsyncClient) -> int:
        r = await api.get("/api/v1/nodes")
        if r.status_code != 200:
            return 0
        count = 0
        for node in r.json().get("items", []):
            conds = node.get("status", {}).get("conditions", [])
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
                count += 1
        return count

    def real_node(self) -> RealNode:
        """The real node of this cluster's state dir (attached or not)."""
        from mcpfleet.devcluster.realnode import RealNode  # realnode imports this module

        return RealNode(self)

    # ---- down / status ------------------------------------------------------------------------
    async def _stop_all(self) -> list[str]:
        """Stops every recorded process: clients first, then the apiserver, then etcd."""
        stopped: list[str] = []
        node = self.real_node()
        if node.attached() or any(s.running for s in node.component_states()):
            # First, while the API server still runs: the node drains its pods through it.
            stopped += [a for a in await node.down() if a.startswith("stopped ")]
        records = {r.name: r for r in self.procs.records()}

        async def stop_one(name: str) -> None:
            rec = records.get(name)
            # Every component but etcd keeps its state in etcd: a short grace loses nothing. The
            # API server stays alive until every open watch (an operator still running) is gone,
            # and the controllers wait on their leases; without it `down` took 11 s, not ~2.
            grace = 10.0 if name == "etcd" else CLIENT_STOP_GRACE
            if rec is not None and await stop(rec, grace):
                stopped.append(name)
            self.procs.pid_file(name).unlink(missing_ok=True)

        await asyncio.gather(
            *(
                stop_one(n)
                for n in ("conversion-webhook", "kwok", "kube-scheduler", "kube-controller-manager")
            )
        )
        await stop_one("kube-apiserver")
        await stop_one("etcd")
        for name in set(records) - set(COMPONENTS):
            await stop_one(name)
        return stopped

    async def down(self, purge: bool = False) -> list[str]:
        """Stops every process this state dir started (by pid); `purge` also deletes the state dir."""
        if not self.state_dir.exists():
            return []
        with self.lock():
            return await self._down_locked(purge)

    async def _down_locked(self, purge: bool) -> list[str]:
        stopped = await self._stop_all()
        if purge:
            looks_like_ours = (self.state_dir / STATE_FILE).exists() or (self.state_dir / "run").exists()
            if not looks_like_ours and any(p.name != ".lock" for p in self.state_dir.iterdir()):
                raise ClusterError(f"refusing to purge {self.state_dir}: not a dev-cluster state dir")
            for child in self.state_dir.iterdir():
                if child.name == ".lock":
                    continue  # still held by us; removing it would let another process lock a new file
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        return stopped

    async def status(self) -> ClusterStatus:
        comps: list[ComponentStatus] = []
        for name in COMPONENTS:
            rec = self.procs.read(name)
            running = rec is not None and is_running(rec)
            comps.append(ComponentStatus(name, running, rec.pid if rec else None, self.procs.log_file(name)))
        ready, detail, nodes_ready = False, "not running", 0
        server: str | None = None
        state = self._read_state()
        ports = {k: int(v) for k, v in state.get("ports", {}).items()}
        if "apiserver" in ports:
            server = f"https://127.0.0.1:{ports['apiserver']}"
        if (
            server
            and any(c.running for c in comps if c.name == "kube-apiserver")
            and self.pki.ca_cert.exists()
        ):
            try:
                async with self._client(ports) as api:
                    r = await api.get("/readyz")
                    ready = r.status_code == 200
                    detail = "readyz ok" if ready else f"readyz HTTP {r.status_code}"
                    if ready:
                        nodes_ready = await self._count_ready_nodes(api)
            except (httpx.HTTPError, OSError, ssl.SSLError) as exc:
                detail = f"apiserver unreachable: {exc!r}"
        return ClusterStatus(
            state_dir=self.state_dir,
            components=tuple(comps),
            ready=ready,
            ready_detail=detail,
            nodes_ready=nodes_ready,
            kubeconfig=self.kubeconfig if self.kubeconfig.exists() else None,
            server=server,
            ports=ports,
        )


# ---- shared use by test sessions ------------------------------------------------------------------
# Several pytest sessions (different engineers, CI jobs) may share one test state dir. Each registers
# its pid under users/; the cluster is stopped only by the last session to leave, and only if a test
# session (not a developer's `up`) started it.


def _users_dir(cluster: DevCluster) -> Path:
    return cluster.state_dir / "users"


def _live_users(cluster: DevCluster) -> list[Path]:
    out: list[Path] = []
    d = _users_dir(cluster)
    if not d.is_dir():
        return out
    for f in d.iterdir():
        try:
            pid = int(f.name)
            os.kill(pid, 0)
            out.append(f)
        except (ValueError, ProcessLookupError):
            f.unlink(missing_ok=True)
        except PermissionError:
            out.append(f)
    return out


async def acquire_for_tests(
    cluster: DevCluster, nodes: int, progress: Progress, ready_timeout: float = 120.0
) -> ClusterInfo:
    """Registers this process as a user of the cluster and starts it if it is not running."""
    if not binaries_present(cluster.layout):
        await build_all(cluster.layout, progress)
    with cluster.lock():
        status = await cluster.status()
        already = status.all_running and status.ready
        if not already:
            # A test cluster that is not running holds nothing worth keeping: start from empty data,
            # so a run never inherits objects or settings (e.g. an older Service range) of an earlier one.
            await cluster._down_locked(purge=True)
        info = await cluster._up_locked(nodes, progress, ready_timeout)
        if not already:
            (cluster.state_dir / TEST_OWNER_FILE).write_text(str(os.getpid()))
        _users_dir(cluster).mkdir(exist_ok=True)
        (_users_dir(cluster) / str(os.getpid())).write_text("")
    return info


async def release_for_tests(cluster: DevCluster, keep: bool) -> bool:
    """Unregisters this process; stops (and purges) the cluster if we were the last test user of a
    cluster that a test session started. Returns True if it stopped the cluster."""
    with cluster.lock():
        (_users_dir(cluster) / str(os.getpid())).unlink(missing_ok=True)
        if keep or _live_users(cluster) or not (cluster.state_dir / TEST_OWNER_FILE).exists():
            return False
        await cluster._down_locked(purge=True)
    return True
