"""What an MCPServer becomes on Kubernetes (its plan: `mcpfleet.reconcile.mcpserver`).

A ConfigMap with the proxy's run config (and `auth.json` with incoming auth) when the proxy reads it
(`toolConfigRef`, `rateLimiting`, auth, authorization, audit: see `objects.reads_config`); a ServiceAccount,
Role and RoleBinding only when the plan calls the API (an OCI stdio server: the runner attaches to
the server's pod); a Deployment of the runner image (the proxy, and the server unless it is a
container image of its own); a Service in front of the proxy port.
"""

from __future__ import annotations

from mcpfleet.platform.kubernetes.render.objects import Manifest, Owner, workload
from mcpfleet.reconcile.model import Images, WorkloadPlan


def render(plan: WorkloadPlan, owner: Owner, images: Images) -> list[Manifest]:
    return workload(plan, owner, images.runner)
