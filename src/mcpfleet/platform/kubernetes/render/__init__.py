"""Render a WorkloadPlan into Kubernetes manifests: one module per kind says what the kind becomes.

`objects.py` builds each Kubernetes object from a plan; `<kind>.py` (mirroring `reconcile/<kind>.py`)
lists the objects of that kind. Every manifest is stamped with its applied hash here.
"""

from __future__ import annotations

from collections.abc import Callable

from mcpfleet.platform.kubernetes.render import (
    embeddingserver,
    mcpregistry,
    mcpremoteproxy,
    mcpserver,
    virtualmcpserver,
)
from mcpfleet.platform.kubernetes.render.objects import (
    ANNOTATION_APPLIED_HASH,
    Manifest,
    Owner,
    manifest_key,
    stamp,
    url_of,
)
from mcpfleet.reconcile.model import Images, WorkloadPlan

RENDERERS: dict[str, Callable[[WorkloadPlan, Owner, Images], list[Manifest]]] = {
    "MCPServer": mcpserver.render,
    "MCPRemoteProxy": mcpremoteproxy.render,
    "VirtualMCPServer": virtualmcpserver.render,
    "MCPRegistry": mcpregistry.render,
    "EmbeddingServer": embeddingserver.render,
}


def render(plan: WorkloadPlan, owner: Owner, images: Images) -> list[Manifest]:
    """The children of a plan, in apply order (config and identity before the Deployment)."""
    return [stamp(m) for m in RENDERERS[plan.kind](plan, owner, images)]


__all__ = ["ANNOTATION_APPLIED_HASH", "Owner", "manifest_key", "render", "url_of"]
