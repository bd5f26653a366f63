"""The dev cluster's real node: containerd + runc + a CNI bridge, kubelet, kube-proxy and CoreDNS.

Owns: `<state>/realnode/` (configs, containerd root/state, kubelet root, CNI config and IPAM data,
pod logs, the host-change ledger), the node's processes (recorded in the cluster's run/ dir like
the control plane's), the pause image, and the `kubernetes` Service endpoints pods use.

Topology (see docs/dev-cluster.md, "A real node"): a bridge `mcpfleet0` with 10.88.0.1/24 is the
node IP (the kubelet refuses loopback) and the pods' gateway; the CNI bridge plugin attaches pods
to it with host-local IPAM. CoreDNS runs on the host at 10.88.0.1:53 (the kubelet's clusterDNS).
The API server stays on 127.0.0.1; a socat forwarder on 10.88.0.1:6443 reaches it, and the
`kubernetes` Service's endpoints point there, so in-cluster clients (the operator, the vMCP and
registry watching resources) work. kube-proxy (iptables mode) makes ClusterIPs work from host and pods.

kwok keeps managing only the nodes labelled `type=kwok`; this node is labelled
`mcpfleet.dev/node=real`, and while it is attached the kwok nodes carry the NoSchedule taint
`mcpfleet.dev/simulated` so that pods without a node choice (everything the operator renders) run
here; a test that wants a simulated pod selects `type=kwok` and tolerates the taint.

Every host change is recorded (hostchanges.HostLedger) before it is made and undone by `down`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import yaml

from mcpfleet.devcluster import nodeowner, ociimage
from mcpfleet.devcluster import pki as pkimod
from mcpfleet.devcluster.hostchanges import HostLedger
from mcpfleet.devcluster.nodebuild import NodeLayout, build_node_locked, node_binaries_present
from mcpfleet.devcluster.processes import ProcessRecord, is_running, stop

if TYPE_CHECKING:
    from mcpfleet.devcluster.cluster import DevCluster

Progress = Callable[[str], None]

NODE_NAME = "mcpfleet-real-node"
BRIDGE = "mcpfleet0"
NODE_IP = "10.88.0.1"
POD_SUBNET = "10.88.0.0/24"
APISERVER_FORWARD_PORT = 6443
CLUSTER_DOMAIN = "cluster.local"
REAL_LABEL = ("mcpfleet.dev/node", "real")
SIMULATED_TAINT = {"key": "mcpfleet.dev/simulated", "value": "true", "effect": "NoSchedule"}
# Start order; `down` stops in reverse.
COMPONENTS: tuple[str, ...] = ("containerd", "apiserver-forward", "coredns", "kubelet", "kube-proxy")
DEBIAN_TOOLS: tuple[str, ...] = (
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "ctr",
    "socat",
    "iptables",
    "ip6tables",
    "conntrack",
    "ip",
    "umoci",
)
CNI_BIN_DIR = Path("/usr/lib/cni")
PAUSE_NAME = "localhost/mcpfleet-pause"


class RealNodeError(RuntimeError):
    """The real node could not start; the message says why (and what to install or run)."""


def require_root() -> None:
    if os.geteuid() != 0:
        raise RealNodeError(
            "--real-node needs root: it runs containerd and the kubelet and changes the host's network "
            "(a bridge, iptables rules, sysctls). Run it as root (e.g. `sudo -E mcpfleet dev-cluster up --real-node`)."
        )


def check_tools() -> None:
    missing = [t for t in DEBIAN_TOOLS if shutil.which(t) is None]
    if not (CNI_BIN_DIR / "bridge").is_file():
        missing.append(f"{CNI_BIN_DIR}/bridge")
    if missing:
        raise RealNodeError(
            f"--real-node: missing {', '.join(missing)}; install the Debian packages with "
            "`apt-get install containerd runc containernetworking-plugins iptables conntrack socat iproute2 umoci`"
        )


@dataclass(frozen=True)
class ComponentState:
    name: str
    running: bool
    pid: int | None


class RealNode:
    """The real node attached to one DevCluster (state under `<cluster state>/realnode`)."""

    marker: nodeowner.BridgeMarker = nodeowner.BridgeMarker(BRIDGE)
    """Where the host says which state dir's node is attached (tests point it elsewhere)."""

    def __init__(self, cluster: DevCluster) -> None:
        self.cluster = cluster
        self.dir = cluster.state_dir / "realnode"
        self.layout = NodeLayout(cluster.layout)

    # ---- paths --------------------------------------------------------------------------------
    @property
    def containerd_socket(self) -> Path:
        return self.dir / "containerd" / "containerd.sock"

    @property
    def ledger_path(self) -> Path:
        return self.dir / "host-changes.json"

    def attached(self) -> bool:
        """True once `up` began attaching the node (its ledger exists): `down` has work to do."""
        return self.ledger_path.exists()

    def _kubeconfig(self, client: str) -> Path:
        return self.cluster.state_dir / "kubeconfigs" / f"{client}.kubeconfig"

    def pause_ref(self) -> str:
        return f"{PAUSE_NAME}:{self._pause_digest()[:16]}"

    def _pause_digest(self) -> str:
        import hashlib

        return hashlib.sha256(self.layout.binary("pause").read_bytes()).hexdigest()

    # ---- config files -------------------------------------------------------------------------
    def _write_configs(self, apiserver_port: int, ports: dict[str, int]) -> None:
        d = self.dir
        for sub in (
            "containerd/root",
            "containerd/state",
            "cni/net.d",
            "cni/ipam",
            "kubelet",
            "kubelet-pki",
            "pod-logs",
            "volume-plugins",
            "coredns",
        ):
            (d / sub).mkdir(parents=True, exist_ok=True)
        self._write_containerd_config()
        self._write_cni_config()
        self._write_kubelet_config(ports)
        self._write_kube_proxy_config(ports)
        self._write_corefile(ports)

    def _write_containerd_config(self) -> None:
        d = self.dir
        (d / "containerd" / "config.toml").write_text(
            f"""version = 2
root = "{d / "containerd/root"}"
state = "{d / "containerd/state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{self.containerd_socket}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{d / "containerd/opt"}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{self.pause_ref()}"
  # No CAP_SYS_RESOURCE on such hosts: without this every sandbox fails with
  # "failed to update /proc/self/oom_score_adj: Permission denied".
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{d / "cni/net.d"}"
"""
        )

    def _write_cni_config(self) -> None:
        d = self.dir
        cni = {
            "cniVersion": "0.4.0",
            "name": "mcpfleet",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(d / "cni/ipam"),
                    },
                }
            ],
        }
        (d / "cni/net.d/10-mcpfleet.conflist").write_text(json.dumps(cni, indent=2))
        # Pods resolve only cluster names (no upstream: pods have no internet here).
        (d / "resolv.conf").write_text(f"nameserver {NODE_IP}\n")

    def _write_kubelet_config(self, ports: dict[str, int]) -> None:
        d = self.dir
        pki = self.cluster.pki
        kubelet_cfg: dict[str, Any] = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # cgroup v1 hosts: kubelet 1.36 refuses to start on v1 unless told (a deprecation warning only).
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "address": NODE_IP,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": ports["kubelet-healthz"],
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(pki.ca_cert)},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "clusterDomain": CLUSTER_DOMAIN,
            "clusterDNS": [NODE_IP],
            "resolvConf": str(d / "resolv.conf"),
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "failSwapOn": False,
            "podLogsDir": str(d / "pod-logs"),
            "volumePluginDir": str(d / "volume-plugins"),
            "staticPodPath": "",
            "serializeImagePulls": False,
            # Images are imported, never pulled: never garbage-collect them, never evict for disk.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "maxPods": 110,
            "registerNode": True,
            "protectKernelDefaults": False,
            "nodeStatusReportFrequency": "10s",
        }
        (d / "kubelet-config.yaml").write_text(yaml.safe_dump(kubelet_cfg, sort_keys=False))

    def _write_kube_proxy_config(self, ports: dict[str, int]) -> None:
        d = self.dir
        proxy_cfg = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self._kubeconfig("realnode"))},
            "mode": "iptables",
            "hostnameOverride": NODE_NAME,
            "healthzBindAddress": f"127.0.0.1:{ports['kube-proxy-healthz']}",
            "metricsBindAddress": f"127.0.0.1:{ports['kube-proxy-metrics']}",
            "clusterCIDR": POD_SUBNET,
            # Not allowed to tune conntrack sysctls here: 0 means "leave them as they are".
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "iptables": {"masqueradeAll": True},
            # Only the bridge address: NodePorts on 127.0.0.1 would need route_localnet=1.
            "nodePortAddresses": [POD_SUBNET],
        }
        (d / "kube-proxy-config.yaml").write_text(yaml.safe_dump(proxy_cfg, sort_keys=False))

    def _write_corefile(self, ports: dict[str, int]) -> None:
        d = self.dir
        (d / "coredns" / "Corefile").write_text(
            f""".:53 {{
    bind {NODE_IP}
    ready 127.0.0.1:{ports["coredns-ready"]}
    health 127.0.0.1:{ports["coredns-health"]}
    errors
    cache 5
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {self._kubeconfig("realnode")}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
}}
"""
        )

    def _argv(self, component: str, apiserver_port: int) -> list[str]:
        d = self.dir
        if component == "containerd":
            return ["containerd", "--config", str(d / "containerd/config.toml")]
        if component == "apiserver-forward":
            return [
                "socat",
                f"TCP-LISTEN:{APISERVER_FORWARD_PORT},bind={NODE_IP},fork,reuseaddr",
                f"TCP:127.0.0.1:{apiserver_port}",
            ]
        if component == "coredns":
            return [str(self.layout.binary("coredns")), "-conf", str(d / "coredns/Corefile")]
        if component == "kubelet":
            return [
                str(self.layout.binary("kubelet")),
                f"--config={d / 'kubelet-config.yaml'}",
                f"--kubeconfig={self._kubeconfig('realnode')}",
                f"--root-dir={d / 'kubelet'}",
                f"--cert-dir={d / 'kubelet-pki'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={NODE_IP}",
                f"--node-labels={REAL_LABEL[0]}={REAL_LABEL[1]}",
                "--v=1",
            ]
        if component == "kube-proxy":
            return [
                str(self.layout.binary("kube-proxy")),
                f"--config={d / 'kube-proxy-config.yaml'}",
                "--v=1",
            ]
        raise ValueError(f"component: unknown {component!r}")

    # ---- up -----------------------------------------------------------------------------------
    async def up(self, progress: Progress, ready_timeout: float = 120.0) -> None:
        """Attaches the node to the running control plane (idempotent: a running node is kept)."""
        require_root()
        check_tools()
        if not node_binaries_present(self.layout):
            await build_node_locked(self.layout, progress)
        else:
            # Cheap when built (stamps compared), and rebuilds after a version change.
            await build_node_locked(self.layout, lambda _m: None)
        states = self.component_states()
        if all(s.running for s in states):
            progress(f"real node {NODE_NAME} already running")
            await self._wait_node_ready(ready_timeout)
            await self._taint_kwok_nodes(add=True)  # kwok nodes `up --nodes` may have just added
            return
        if any(s.running for s in states):
            progress("real node partly running: restarting it")
            await self.down(progress)
        await self.claim_host(progress)
        started = time.monotonic()
        info = self.cluster.info()
        api_port = info.ports["apiserver"]
        ports = _free_ports(
            ["kubelet-healthz", "kube-proxy-healthz", "kube-proxy-metrics", "coredns-ready", "coredns-health"]
        )
        self.dir.mkdir(parents=True, exist_ok=True)
        pkimod.ensure_client(self.cluster.pki, "realnode", f"system:node:{NODE_NAME}", "system:masters")
        pkimod.write_private(
            self._kubeconfig("realnode"), pkimod.render_kubeconfig(self.cluster.pki, info.server, "realnode")
        )
        # Record before the first change; an existing ledger (crash mid-up) is kept: it holds the
        # true "before" values, a new snapshot would record our own changes as the original state.
        ledger = HostLedger.load(self.ledger_path) or HostLedger.record(
            self.ledger_path, [str(self.dir), "/var/lib/kubelet"]
        )
        try:
            self._ensure_bridge(ledger)
            self._write_configs(api_port, ports)
            env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
            # containerd finds runc and the shim on PATH; iptables, ip and conntrack live in sbin.
            env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
            progress("starting containerd")
            rec = self._start("containerd", api_port, env)
            await self._wait_for("containerd", "its socket", lambda: self._socket_ok(), rec, 30)
            await asyncio.to_thread(self._import_pause)
            progress(f"starting the API server forwarder on {NODE_IP}:{APISERVER_FORWARD_PORT}")
            self._start("apiserver-forward", api_port, env)
            await self._publish_apiserver_endpoints()
            progress(f"starting CoreDNS on {NODE_IP}:53")
            dns = self._start("coredns", api_port, env)
            progress("starting kubelet and kube-proxy")
            kubelet = self._start("kubelet", api_port, env)
            proxy = self._start("kube-proxy", api_port, env)
            await asyncio.gather(
                self._wait_for(
                    "coredns",
                    "CoreDNS /ready",
                    lambda: _http_ok(f"http://127.0.0.1:{ports['coredns-ready']}/ready"),
                    dns,
                    ready_timeout,
                ),
                self._wait_for(
                    "kube-proxy",
                    "kube-proxy /healthz",
                    lambda: _http_ok(f"http://127.0.0.1:{ports['kube-proxy-healthz']}/healthz"),
                    proxy,
                    ready_timeout,
                ),
                self._wait_for(
                    "kubelet", f"node {NODE_NAME} Ready", self._node_ready, kubelet, ready_timeout
                ),
            )
            await self._taint_kwok_nodes(add=True)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.down(progress)
            raise
        progress(f"real node {NODE_NAME} Ready in {time.monotonic() - started:.1f}s (node IP {NODE_IP})")

    def _start(self, name: str, api_port: int, env: dict[str, str]) -> ProcessRecord:
        return self.cluster.procs.start(f"realnode-{name}", self._argv(name, api_port), env=env, cwd=self.dir)

    async def claim_host(self, progress: Progress) -> None:
        """One real node per host (bridge, node IP, kubelet port): refuse while another state dir's
        node lives; a marker whose owner is gone is stale: that owner's host changes are undone (its
        `down`) and the bridge removed, so this node starts from a clean host (nodeowner.py)."""
        from mcpfleet.devcluster.cluster import DevCluster

        owner = self.marker.owner()
        if owner is None or owner == self.dir:
            return
        other = DevCluster(owner.parent)
        names = [f"realnode-{c}" for c in COMPONENTS]
        with nodeowner.hold_if_stale(other.state_dir, names) as live:
            if live:
                raise RealNodeError(
                    f"a real node of another dev cluster is attached to this host ({owner}): "
                    f"{', '.join(live)} still running; stop it first: "
                    f"`mcpfleet dev-cluster down --state-dir {owner.parent}`"
                )
            progress(
                f"stale real-node marker: the bridge {BRIDGE} names {owner}, but none of its processes "
                "runs (no pid with its start time, no lock held): taking the host over"
            )
            await RealNode(other).down(progress)  # undoes what its ledger recorded, bridge included
            if self.marker.owner() is not None:
                self.marker.remove()
                progress(f"  removed the bridge {BRIDGE}")

    def _ensure_bridge(self, ledger: HostLedger) -> None:
        if not Path(f"/sys/class/net/{BRIDGE}").exists():
            ledger.add_link(BRIDGE)
            _ip("link", "add", BRIDGE, "type", "bridge")
            # The owner's state dir, on the link itself: gone with it, read by check_host_free.
            _ip("link", "set", BRIDGE, "alias", str(self.dir))
        addrs = subprocess.run(
            ["ip", "-o", "-4", "addr", "show", "dev", BRIDGE], capture_output=True, text=True
        ).stdout
        if f"{NODE_IP}/" not in addrs:
            _ip("addr", "add", f"{NODE_IP}/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")

    def _socket_ok(self) -> Any:
        async def check() -> bool:
            if not self.containerd_socket.exists():
                return False
            proc = await asyncio.create_subprocess_exec(
                "ctr",
                "--address",
                str(self.containerd_socket),
                "version",
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            return await proc.wait() == 0

        return check()

    def _import_pause(self) -> None:
        ref = self.pause_ref()
        if ociimage.image_present(ref, str(self.containerd_socket)):
            return
        cache = self.layout.pause_dir / "image"
        archive = cache / f"pause-{self._pause_digest()[:16]}.tar"
        if not archive.is_file():
            rootfs = cache / "rootfs"
            shutil.rmtree(rootfs, ignore_errors=True)
            rootfs.mkdir(parents=True)
            shutil.copy2(self.layout.binary("pause"), rootfs / "pause")
            ociimage.pack_rootfs(rootfs, archive, ref, entrypoint=["/pause"], user="65535")
        ociimage.import_archive(archive, str(self.containerd_socket))

    async def _wait_for(
        self, name: str, what: str, check: Callable[[], Any], rec: ProcessRecord, limit: float
    ) -> None:
        deadline = time.monotonic() + limit
        last = ""
        while True:
            if not is_running(rec):
                raise RealNodeError(
                    f"{name} exited while waiting for {what}\n--- last lines of its log ---\n"
                    + self.cluster.procs.log_tail(f"realnode-{name}")
                )
            try:
                if await check():
                    return
            except (httpx.HTTPError, OSError, ValueError) as exc:
                last = f" (last error: {exc!r})"
            if time.monotonic() > deadline:
                raise RealNodeError(
                    f"timed out after {limit:.0f}s waiting for {what}{last}\n--- last lines of {name} log ---\n"
                    + self.cluster.procs.log_tail(f"realnode-{name}")
                )
            await asyncio.sleep(0.2)

    # ---- API objects --------------------------------------------------------------------------
    def _api(self) -> httpx.AsyncClient:
        info = self.cluster.info()
        return httpx.AsyncClient(base_url=info.server, verify=info.ssl_context(), timeout=10.0)

    async def _node_ready(self) -> bool:
        async with self._api() as api:
            r = await api.get(f"/api/v1/nodes/{NODE_NAME}")
            if r.status_code != 200:
                return False
            conds = r.json().get("status", {}).get("conditions", [])
            return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)

    async def _wait_node_ready(self, limit: float) -> None:
        deadline = time.monotonic() + limit
        while not await self._node_ready():
            if time.monotonic() > deadline:
                raise RealNodeError(f"node {NODE_NAME} not Ready after {limit:.0f}s")
            await asyncio.sleep(0.5)

    async def _publish_apiserver_endpoints(self) -> None:
        """Points the `kubernetes` Service at the forwarder (the API server itself is on loopback)."""
        meta_labels = {
            "kubernetes.io/service-name": "kubernetes",
            "endpointslice.kubernetes.io/managed-by": "mcpfleet-dev-cluster",
        }
        slice_body = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": meta_labels},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [NODE_IP], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": APISERVER_FORWARD_PORT, "protocol": "TCP"}],
        }
        ep_body = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {
                "name": "kubernetes",
                "namespace": "default",
                # We publish the slice ourselves: the mirroring controller must not add a second one.
                "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
            },
            "subsets": [
                {
                    "addresses": [{"ip": NODE_IP}],
                    "ports": [{"name": "https", "port": APISERVER_FORWARD_PORT, "protocol": "TCP"}],
                }
            ],
        }
        async with self._api() as api:
            for path, body in (
                ("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", slice_body),
                ("/api/v1/namespaces/default/endpoints", ep_body),
            ):
                r = await api.put(f"{path}/kubernetes", json=body)
                if r.status_code == 404:
                    r = await api.post(path, json=body)
                if r.status_code >= 300:
                    raise RealNodeError(
                        f"publishing the kubernetes endpoints: HTTP {r.status_code} {r.text[:300]}"
                    )

    async def _taint_kwok_nodes(self, add: bool) -> None:
        async with self._api() as api:
            r = await api.get("/api/v1/nodes", params={"labelSelector": "type=kwok"})
            if r.status_code != 200:
                return
            for node in r.json().get("items", []):
                taints = [
                    t
                    for t in node.get("spec", {}).get("taints", []) or []
                    if t.get("key") != SIMULATED_TAINT["key"]
                ]
                if add:
                    taints.append(SIMULATED_TAINT)
                await api.patch(
                    f"/api/v1/nodes/{node['metadata']['name']}",
                    json={"spec": {"taints": taints}},
                    headers={"Content-Type": "application/merge-patch+json"},
                )

    # ---- down ---------------------------------------------------------------------------------
    def component_states(self) -> list[ComponentState]:
        out = []
        for name in COMPONENTS:
            rec = self.cluster.procs.read(f"realnode-{name}")
            out.append(ComponentState(name, rec is not None and is_running(rec), rec.pid if rec else None))
        return out

    async def down(self, progress: Progress = lambda _m: None) -> list[str]:
        """Stops the node's processes (by pid) and restores every recorded host change."""
        actions: list[str] = []
        if not self.attached() and not any(s.running for s in self.component_states()):
            return actions
        apiserver_up = self._apiserver_running()
        if apiserver_up:
            with contextlib.suppress(Exception):
                await self._drain(progress)
        # Stop in reverse start order; the kubelet first so it restarts nothing meanwhile.
        for name in reversed(COMPONENTS):
            rec = self.cluster.procs.read(f"realnode-{name}")
            if rec is not None and await stop(rec):
                actions.append(f"stopped {name} (pid {rec.pid})")
            self.cluster.procs.pid_file(f"realnode-{name}").unlink(missing_ok=True)
        actions += self._kill_shims()
        if apiserver_up:
            with contextlib.suppress(Exception):
                await self._taint_kwok_nodes(add=False)
            with contextlib.suppress(Exception):
                async with self._api() as api:
                    await api.delete(f"/api/v1/nodes/{NODE_NAME}")
        ledger = HostLedger.load(self.ledger_path)
        if ledger is not None:
            actions += ledger.restore()
            self.ledger_path.unlink()
        # Containers' rootfs snapshots, CNI state and pod dirs: nothing survives a detached node.
        for sub in ("containerd/state", "kubelet", "cni/ipam", "pod-logs"):
            shutil.rmtree(self.dir / sub, ignore_errors=True)
        for a in actions:
            progress(f"  {a}")
        return actions

    def _apiserver_running(self) -> bool:
        rec = self.cluster.procs.read("kube-apiserver")
        return rec is not None and is_running(rec)

    async def _drain(self, progress: Progress) -> None:
        """Cordons the node and deletes its pods so the kubelet tears sandboxes down (CNI DEL)."""
        kubelet = self.cluster.procs.read("realnode-kubelet")
        if kubelet is None or not is_running(kubelet):
            return
        async with self._api() as api:
            await api.patch(
                f"/api/v1/nodes/{NODE_NAME}",
                json={"spec": {"unschedulable": True}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            r = await api.get("/api/v1/pods", params={"fieldSelector": f"spec.nodeName={NODE_NAME}"})
            pods = r.json().get("items", []) if r.status_code == 200 else []
            if pods:
                progress(f"deleting the {len(pods)} pods on {NODE_NAME}")
            for p in pods:
                m = p["metadata"]
                await api.delete(
                    f"/api/v1/namespaces/{m['namespace']}/pods/{m['name']}",
                    params={"gracePeriodSeconds": "0"},
                )
        # Wait (bounded) until the kubelet has removed every sandbox.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            proc = await asyncio.create_subprocess_exec(
                "ctr",
                "--address",
                str(self.containerd_socket),
                "-n",
                "k8s.io",
                "tasks",
                "ls",
                "-q",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
            out, _ = await proc.communicate()
            if proc.returncode != 0 or not out.strip():
                return
            await asyncio.sleep(0.5)

    def _kill_shims(self) -> list[str]:
        """Kills containerd shims of OUR containerd (identified by its socket in their argv)."""
        done = []
        needle = str(self.containerd_socket).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"containerd-shim-runc-v2") and needle in argv:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)
                    done.append(f"killed containerd shim pid {entry.name}")
        if done:
            time.sleep(0.5)
        # Container processes left behind by a killed shim sit in the kubepods cgroups: kill them.
        for procs in Path("/sys/fs/cgroup").glob("*/kubepods/**/cgroup.procs"):
            with contextlib.suppress(OSError):
                for pid in procs.read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
        return done

    # ---- status -------------------------------------------------------------------------------
    async def node_summary(self) -> str:
        if not self.attached():
            return "not attached"
        try:
            ready = await self._node_ready()
        except (httpx.HTTPError, OSError) as exc:
            return f"{NODE_NAME}: apiserver unreachable ({exc!r})"
        return f"{NODE_NAME} ({NODE_IP}) {'Ready' if ready else 'NotReady'}"


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RealNodeError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")


def _free_ports(names: list[str]) -> dict[str, int]:
    held = []
    out = {}
    try:
        for n in names:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
            out[n] = s.getsockname()[1]
    finally:
        for s in held:
            s.close()
    return out


async def _http_ok(url: str) -> bool:
    async with httpx.AsyncClient(timeout=2.0) as c:
        r = await c.get(url)
        return r.status_code == 200
