"""What a VirtualMCPServer becomes on Kubernetes (its plan: `mcpfleet.reconcile.virtualmcpserver`).

A ConfigMap with `vmcp.yaml`; a ServiceAccount, Role and RoleBinding (the gateway watches its group
and patches its own status); a Deployment of the vMCP image, secrets as secretKeyRef env, shared
OIDC settings as a projected ConfigMap volume; a Service in front of the gateway.
"""

from __future__ import annotations

from mcpfleet.platform.kubernetes.render.objects import Manifest, Owner, workload
from mcpfleet.reconcile.model import Images, WorkloadPlan


def render(plan: WorkloadPlan, owner: Owner, images: Images) -> list[Manifest]:
    return workload(plan, owner, images.vmcp)
