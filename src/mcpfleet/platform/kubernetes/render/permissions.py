"""An MCP server's permission profile on Kubernetes: its container's securityContext and a NetworkPolicy.

The container that runs the server (the plan's container carrying `permission_profile`) gets a
restricted securityContext: non-root (user 10001, the runner image's user, unless the pod template
says otherwise), no privilege escalation, every capability dropped, the runtime's default seccomp
profile. Its root filesystem is read-only when it is a user's image (an emptyDir at /tmp for
scratch); the runner image (uvx / npx packages) keeps a writable root filesystem because uv and npm
write their package caches under its HOME, warmed in the image for offline starts (docs/security.md).

The pod gets a NetworkPolicy for egress when the profile does not open the network: `none` allows
no egress at all; `allow_port` allows those TCP ports (and DNS, to resolve names). A NetworkPolicy
covers the whole pod, so a runner that attaches to an OCI stdio server through the API server keeps
egress to ports 443 and 6443; `allow_host` cannot be expressed (a plan problem, see
`reconcile/permissions.py`). The profile's `read` / `write` host paths are not mounted on Kubernetes:
a pod sees its image and its volumes only.
"""

from __future__ import annotations

from typing import Any

from mcpfleet.api.permissions import PermissionProfile
from mcpfleet.reconcile.model import Container, WorkloadPlan

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
    if profile.network_mode == "restricted":
        ports = [{"protocol": "TCP", "port": p} for p in profile.outbound.allow_port]
        dns = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
        egress.append({"ports": ports + dns})
    if plan.rbac:
        # The runner attaches to the server's pod through the API server (pods/attach).
        egress.append({"ports": [{"protocol": "TCP", "port": p} for p in API_SERVER_PORTS]})
    return {"podSelector": {"matchLabels": pod_selector}, "policyTypes": ["Egress"], "egress": egress}
