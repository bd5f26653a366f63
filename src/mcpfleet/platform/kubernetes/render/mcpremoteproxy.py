"""What an MCPRemoteProxy becomes on Kubernetes (its plan: `mcpfleet.reconcile.mcpremoteproxy`).

A ConfigMap with the proxy's config (run config, `auth.json`); a Deployment of the runner image
running `mcpfleet proxy` toward the remote URL, header Secrets as secretKeyRef env; a Service in
front of it. It never calls the API, so it gets no ServiceAccount of its own.
"""

from __future__ import annotations

from mcpfleet.platform.kubernetes.render.objects import Manifest, Owner, workload
from mcpfleet.reconcile.model import Images, WorkloadPlan


def render(plan: WorkloadPlan, owner: Owner, images: Images) -> list[Manifest]:
    return workload(plan, owner, images.runner)
