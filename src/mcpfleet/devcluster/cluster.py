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
import json
import os
import shutil
import socket
import ssl
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from mcpfleet.devcluster import pki as pkimod
from mcpfleet.devcluster import rollback
from mcpfleet.devcluster.build import BuildLayout, binaries_present, build_all, default_cache_root
from mcpfleet.devcluster.processes import ProcessDir, ProcessRecord, is_running, stop

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
SERVICE_CIDR = "10.0.0.0/16"
POD_CIDR = "10.244.0.0/16"
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
        return self.state_dir / "kubeconfigs" / f"{client}.kubeconfig"

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
        b = self.layout.binary
        p = self.pki
        host = "127.0.0.1"
        if component == "etcd":
            peer = f"http://{host}:{ports['etcd-peer']}"
            client = f"http://{host}:{ports['etcd']}"
            return [
                str(b("etcd")),
                "--name=dev",
                f"--data-dir={self.state_dir / 'etcd-data'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=dev={peer}",
                # A throwaway dev store: skipping fsync makes every write (and so every test) faster.
                "--unsafe-no-fsync=true",
                "--auto-compaction-retention=1",
                "--quota-backend-bytes=2147483648",
                "--log-level=warn",
            ]
        if component == "kube-apiserver":
            return [
                str(b("kube-apiserver")),
                f"--etcd-servers=http://{host}:{ports['etcd']}",
                f"--bind-address={host}",
                # Required where the machine has no default route; also the `kubernetes` endpoint.
                f"--advertise-address={host}",
                f"--secure-port={ports['apiserver']}",
                f"--cert-dir={self.state_dir / 'pki' / 'generated'}",
                f"--tls-cert-file={p.serving_cert}",
                f"--tls-private-key-file={p.serving_key}",
                f"--client-ca-file={p.ca_cert}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # The `kubernetes` Endpoints may not hold a loopback address, and nothing in-cluster
                # could use it (pods are simulated): don't reconcile it rather than log an error every 10s.
                "--endpoint-reconciler-type=none",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={p.sa_pub}",
                f"--service-account-signing-key-file={p.sa_key}",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                # One user, a few clients: API priority and fairness only costs start time and memory.
                "--enable-priority-and-fairness=false",
                "--max-requests-inflight=0",
                "--max-mutating-requests-inflight=0",
                # Aggregation layer / requestheader authn: without these every component logs
                # "missing content for CA bundle ...requestheader-client-ca-file" forever.
                f"--requestheader-client-ca-file={p.ca_cert}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--requestheader-allowed-names=front-proxy-client",
                f"--proxy-client-cert-file={p.client_cert('front-proxy')}",
                f"--proxy-client-key-file={p.client_key('front-proxy')}",
                "--profiling=false",
                # `kubectl logs/exec/port-forward` to a real node: reach its kubelet by node IP (the
                # node name does not resolve here) and authenticate with the admin client certificate.
                "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-client-certificate={p.client_cert('admin')}",
                f"--kubelet-client-key={p.client_key('admin')}",
            ]
        if component in ("kube-controller-manager", "kube-scheduler"):
            client = "controller-manager" if component == "kube-controller-manager" else "scheduler"
            kc = self._component_kubeconfig(client)
            port = ports[client]
            common = [
                str(b(component)),
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                f"--bind-address={host}",
                f"--secure-port={port}",
                f"--tls-cert-file={p.serving_cert}",
                f"--tls-private-key-file={p.serving_key}",
                "--leader-elect=false",
                "--profiling=false",
            ]
            if component == "kube-scheduler":
                # The default client limit (50 requests/s) caps binding at ~25 pods/s (a binding and
                # an event each): lift it like the controller manager's below.
                return [*common, "--kube-api-qps=500", "--kube-api-burst=1000"]
            return [
                *common,
                # '*' = every on-by-default controller: deployment, replicaset, garbage collector,
                # namespace, serviceaccount(+token), endpoints, node lifecycle, ...
                "--controllers=*",
                f"--root-ca-file={p.ca_cert}",
                f"--service-account-private-key-file={p.sa_key}",
                f"--cluster-signing-cert-file={p.ca_cert}",
                f"--cluster-signing-key-file={p.ca_key}",
                # Several test suites share one cluster: more workers keep the queues short.
                "--concurrent-deployment-syncs=20",
                "--concurrent-replicaset-syncs=20",
                "--kube-api-qps=500",
                "--kube-api-burst=1000",
            ]
        if component == "kwok":
            return [
                str(b("kwok")),
                f"--kubeconfig={self._component_kubeconfig('kwok')}",
                f"--config={self.layout.kwok_stages}",
                # Only the fake nodes: a real node (`up --real-node`) belongs to its kubelet, and kwok
                # managing it too would fight the kubelet over node and pod status.
                "--manage-nodes-with-label-selector=type=kwok",
                f"--server-address={host}:{ports['kwok']}",
                f"--node-ip={host}",
                f"--node-port={ports['kwok']}",
                f"--tls-cert-file={p.serving_cert}",
                f"--tls-private-key-file={p.serving_key}",
                f"--cidr={POD_CIDR}",
                # Leases renewed every ~10 s keep the node lifecycle controller from tainting nodes.
                "--node-lease-duration-seconds=40",
            ]
        if component == "conversion-webhook":
            # The CRDs' conversion webhook (mcpfleet.api.conversion), part of the dev control plane
            # so objects of every served version are readable with or without an operator running;
            # `ClusterHandle.apply_crds` points the CRDs at it. Same serving certificate as the rest.
            return [
                sys.executable,
                "-m",
                "mcpfleet.api.conversion",
                f"--host={host}",
                f"--port={ports['conversion']}",
                f"--cert={p.serving_cert}",
                f"--key={p.serving_key}",
            ]
        raise ValueError(f"component: unknown {component!r}")

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
                    from mcpfleet.devcluster.realnode import RealNode

                    await RealNode(self).up(progress, ready_timeout)
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
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        # A dev cluster trades memory for CPU: the Go collector runs at a quarter of its default
        # frequency (the API server spent ~15 % of its CPU in GC while 1,000 servers converged).
        # An explicit GOGC in the environment wins.
        env.setdefault("GOGC", DEFAULT_GOGC)

        try:
            progress(f"starting etcd on 127.0.0.1:{ports['etcd']}")
            etcd = self.procs.start("etcd", self._argv("etcd", ports), env=env, cwd=self.state_dir)

            async def etcd_healthy() -> bool:
                async with httpx.AsyncClient(timeout=2.0) as c:
                    r = await c.get(f"http://127.0.0.1:{ports['etcd']}/health")
                    return r.status_code == 200 and r.json().get("health") == "true"

            await self._wait("etcd", "etcd /health", etcd_healthy, etcd, 30)

            progress(f"starting kube-apiserver on {server}")
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

                await asyncio.gather(
                    self._wait(
                        "kube-controller-manager",
                        "kube-controller-manager /healthz",
                        lambda: healthz(ports["controller-manager"]),
                        records["kube-controller-manager"],
                        ready_timeout,
                    ),
                    self._wait(
                        "kube-scheduler",
                        "kube-scheduler /healthz",
                        lambda: healthz(ports["scheduler"]),
                        records["kube-scheduler"],
                        ready_timeout,
                    ),
                    self._wait("kwok", "kwok /healthz", kwok_healthy, records["kwok"], ready_timeout),
                    self._wait(
                        "conversion-webhook",
                        "conversion webhook /healthz",
                        lambda: healthz(ports["conversion"]),
                        records["conversion-webhook"],
                        ready_timeout,
                    ),
                    self._wait("kwok", f"{nodes} Ready nodes", nodes_ready, records["kwok"], ready_timeout),
                    self._wait(
                        "kube-controller-manager",
                        "the default service account",
                        default_sa,
                        records["kube-controller-manager"],
                        ready_timeout,
                    ),
                )
        except BaseException:
            # Never leave half a cluster behind: the next `up` starts from a clean process table.
            stopped = await self._stop_all()
            progress(f"control plane start failed: stopped {', '.join(stopped) or 'nothing (none ran)'}")
            raise
        progress(f"dev cluster ready in {time.monotonic() - started:.1f}s: {nodes} nodes, {server}")
        return self.info()

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

    # ---- down / status ------------------------------------------------------------------------
    async def _stop_all(self) -> list[str]:
        """Stops every recorded process: clients first, then the apiserver, then etcd."""
        stopped: list[str] = []
        from mcpfleet.devcluster.realnode import RealNode

        node = RealNode(self)
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
