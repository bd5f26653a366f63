"""The command lines of the dev cluster's control-plane components (etcd, the Kubernetes control plane,
kwok and the CRDs' conversion webhook), each with why a flag is set where it is not obvious.

`DevCluster` starts the processes; this module only says how each one is invoked, from the cluster's
state dir, its binaries, its PKI and the ports it chose.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from mcpfleet.devcluster import pki as pkimod
from mcpfleet.devcluster.build import BuildLayout

SERVICE_CIDR = "10.0.0.0/16"
POD_CIDR = "10.244.0.0/16"


def component_kubeconfig(state_dir: Path, client: str) -> Path:
    """The kubeconfig a control-plane client (controller-manager, scheduler, kwok) uses."""
    return state_dir / "kubeconfigs" / f"{client}.kubeconfig"


@dataclass(frozen=True)
class ControlPlaneCommands:
    """argv of each component, given the ports chosen for this start."""

    layout: BuildLayout
    pki: pkimod.Pki
    state_dir: Path

    def kubeconfig(self, client: str) -> Path:
        return component_kubeconfig(self.state_dir, client)

    def etcd(self, ports: dict[str, int]) -> list[str]:
        b = self.layout.binary
        host = "127.0.0.1"
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

    def apiserver(self, ports: dict[str, int]) -> list[str]:
        b = self.layout.binary
        p = self.pki
        host = "127.0.0.1"
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

    def controller_manager(self, ports: dict[str, int]) -> list[str]:
        p = self.pki
        return [
            *self._control_loop("kube-controller-manager", "controller-manager", ports),
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

    def scheduler(self, ports: dict[str, int]) -> list[str]:
        # The default client limit (50 requests/s) caps binding at ~25 pods/s (a binding and an event
        # each): lift it like the controller manager's.
        return [
            *self._control_loop("kube-scheduler", "scheduler", ports),
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
        ]

    def _control_loop(self, component: str, client: str, ports: dict[str, int]) -> list[str]:
        """What the controller manager and the scheduler share: their kubeconfig and serving port."""
        p = self.pki
        kc = self.kubeconfig(client)
        return [
            str(self.layout.binary(component)),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports[client]}",
            f"--tls-cert-file={p.serving_cert}",
            f"--tls-private-key-file={p.serving_key}",
            "--leader-elect=false",
            "--profiling=false",
        ]

    def kwok(self, ports: dict[str, int]) -> list[str]:
        b = self.layout.binary
        p = self.pki
        host = "127.0.0.1"
        return [
            str(b("kwok")),
            f"--kubeconfig={self.kubeconfig('kwok')}",
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

    def conversion_webhook(self, ports: dict[str, int]) -> list[str]:
        p = self.pki
        host = "127.0.0.1"
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
