"""What an EmbeddingServer becomes on Kubernetes (its plan: `mcpfleet.reconcile.embeddingserver`).

A PersistentVolumeClaim for the model cache (when enabled), a Deployment of the user's image with
the PodTemplateSpec merged on, and a Service on its port. It never calls the API: no ServiceAccount.
"""

from __future__ import annotations

from mcpfleet.platform.kubernetes.render.objects import Manifest, Owner, workload
from mcpfleet.reconcile.model import Images, WorkloadPlan


def render(plan: WorkloadPlan, owner: Owner, images: Images) -> list[Manifest]:
    # Every container names its own image; `runner` is never used.
    return workload(plan, owner, images.runner)
