"""An MCP server's permission profile on Kubernetes: its container's securityContext and a NetworkPolicy.

The container that runs the server (the plan's container carrying `permission_profile`) gets a
restricted securityContext: non-root (user 10001, the runner image's user, unless the pod template
says otherwise), no privilege escalation, every capability dropped, the runtime's default seccomp
profile. Its root filesystem is read-only when it is a user's image (an emptyDir at /tmp for
scratch); the runner image (uvx / npx packages) keeps a writable root filesystem because uv and npm
write their package caches under its HOME, warmed in the image for offline starts (docs/security.md).

The pod gets a NetworkPolicy for egress when the profile does not open the network: `none` allows
no egress at all; `allow_port` alone allows those TCP ports (and DNS, to resolve names). A
NetworkPolicy cannot name hosts, so with `allow_host` the server gets an egress proxy of its own
(`egress_proxy`: a Deployment of the runner image running `platform/local/egress.py serve`, which
checks hosts and ports, a Service, and a NetworkPolicy letting only the server's pods in); the
server's pods may then reach that proxy and DNS only, and get HTTP(S)_PROXY pointing at it
(`reconcile/permissions.py`). A NetworkPolicy covers the whole pod, so a runner that attaches to an
OCI stdio server through the API server keeps egress to ports 443 and 6443. The profile's `read` /
`write` host paths are not mounted on Kubernetes: a pod sees its image and its volumes only.
"""

from __future__ import annotations

import copy
from typing import Any

from mcpfleet.api.meta import LABEL_INSTANCE
from mcpfleet.api.permissions import PermissionProfile
from mcpfleet.reconcile.common import LABEL_KIND
from mcpfleet.reconcile.model import Container, WorkloadPlan
from mcpfleet.reconcile.permissions import EGRESS_PORT, egress_name

RUNNER_USER = 10001
"""The runner image's unprivileged user (Dockerfile, devcluster/image.py)."""
SCRATCH_VOLUME = "mcp-tmp"
API_SERVER_PORTS = (443, 6443)


def security_context(container: Container) -> dict[str, Any] | None:
    """The restricted securityContext of a container with a permission profile; None without one."""
    if container.permission_profile is None:
        return None
    return {
        "runAsNonRoot": True,
        "runAsUser": RUNNER_USER,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": read_only_root(container),
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def read_only_root(container: Container) -> bool:
    """A user's image runs read-only (scratch on an emptyDir); the runner image writes its caches."""
    return container.permission_profile is not None and container.image is not None


def scratch_mounts(container: Container) -> list[dict[str, Any]]:
    return [{"name": SCRATCH_VOLUME, "mountPath": "/tmp"}] if read_only_root(container) else []


def scratch_volumes(plan: WorkloadPlan) -> list[dict[str, Any]]:
    if any(read_only_root(c) for c in plan.containers):
        return [{"name": SCRATCH_VOLUME, "emptyDir": {}}]
    return []


def _profile(plan: WorkloadPlan) -> PermissionProfile | None:
    for container in plan.containers:
        if container.permission_profile is not None:
            return container.permission_profile
    return None


def network_policy_spec(plan: WorkloadPlan, pod_selector: dict[str, str]) -> dict[str, Any] | None:
    """The NetworkPolicy spec limiting the pod's egress to the profile; None when egress is open."""
    profile = _profile(plan)
    if profile is None or profile.network_mode == "all":
        return None
    egress: list[dict[str, Any]] = []
    dns = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    if profile.outbound.allow_host:
        # Only the server's own egress proxy (which checks hosts and ports), and DNS to find it.
        proxy = {"podSelector": {"matchLabels": egress_labels(plan)}}
        egress.append({"to": [proxy], "ports": [{"protocol": "TCP", "port": EGRESS_PORT}]})
        egress.append({"ports": dns})
    elif profile.network_mode == "restricted":
        ports = [{"protocol": "TCP", "port": p} for p in profile.outbound.allow_port]
        egress.append({"ports": ports + dns})
    if plan.rbac:
        # The runner attaches to the server's pod through the API server (pods/attach).
        egress.append({"ports": [{"protocol": "TCP", "port": p} for p in API_SERVER_PORTS]})
    return {"podSelector": {"matchLabels": pod_selector}, "policyTypes": ["Egress"], "egress": egress}


def egress_labels(plan: WorkloadPlan) -> dict[str, str]:
    """The egress proxy's pods: a kind label no object kind has, so no workload's Service selects them."""
    return {LABEL_INSTANCE: plan.name, LABEL_KIND: "mcpserver-egress"}


def egress_proxy(
    plan: WorkloadPlan, metadata: dict[str, Any], image: str, server_pods: dict[str, str]
) -> list[dict[str, Any]]:
    """Deployment, Service and ingress NetworkPolicy of a server's egress proxy (profiles with
    allow_host); `metadata` is the server's children's metadata, renamed here."""
    profile = _profile(plan)
    if profile is None or not profile.outbound.allow_host:
        return []
    name = egress_name(plan.name)

    def meta() -> dict[str, Any]:
        """A metadata of its own per object: `stamp` annotates each one."""
        fresh = copy.deepcopy(metadata)
        fresh.update(name=name, labels={**metadata.get("labels", {}), **egress_labels(plan)})
        return fresh

    outbound = profile.outbound
    command = [
        "python",
        "-I",
        "-m",
        "mcpfleet.platform.local.egress",
        "serve",
        f"--listen=0.0.0.0:{EGRESS_PORT}",
    ]
    command += [f"--allow-host={h}" for h in outbound.allow_host]
    command += [f"--allow-port={p}" for p in outbound.allow_port]
    container = {
        "name": "egress",
        "image": image,
        "command": command,
        "ports": [{"name": "proxy", "containerPort": EGRESS_PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": EGRESS_PORT}, "periodSeconds": 2},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUNNER_USER,
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    pod = {
        "metadata": {"labels": egress_labels(plan)},
        "spec": {"automountServiceAccountToken": False, "containers": [container]},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(),
        "spec": {"replicas": 1, "selector": {"matchLabels": egress_labels(plan)}, "template": pod},
    }
    port = {"name": "proxy", "port": EGRESS_PORT, "targetPort": EGRESS_PORT, "protocol": "TCP"}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(),
        "spec": {"selector": egress_labels(plan), "ports": [port]},
    }
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(),
        "spec": {
            "podSelector": {"matchLabels": egress_labels(plan)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"podSelector": {"matchLabels": server_pods}}],
                    "ports": [{"protocol": "TCP", "port": EGRESS_PORT}],
                }
            ],
        },
    }
    return [deployment, service, ingress]
