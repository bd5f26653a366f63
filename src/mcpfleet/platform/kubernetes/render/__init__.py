"""Render a WorkloadPlan into Kubernetes manifests: one module per kind says what the kind becomes.

`objects.py` builds each Kubernetes object from a plan; `<kind>.py` (mirroring `reconcile/<kind>.py`)
lists the objects of that kind. Every manifest is stamped with its applied hash here.
"""

from __future__ import annotations

from collections.abc import Callable

from mcpfleet.api.embeddingserver import EmbeddingServer
from mcpfleet.api.kinds import KIND_BY_NAME
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.api.mcpremoteproxy import MCPRemoteProxy
from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.resource import Resource
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
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

Renderer = Callable[[WorkloadPlan, Owner, Images], list[Manifest]]

RENDERERS: dict[type[Resource], Renderer] = {
    MCPServer: mcpserver.render,
    MCPRemoteProxy: mcpremoteproxy.render,
    VirtualMCPServer: virtualmcpserver.render,
    MCPRegistry: mcpregistry.render,
    EmbeddingServer: embeddingserver.render,
}
"""Each workload kind's renderer (the platform's part of a kind's row: `api` and `reconcile` cannot
name a Kubernetes renderer; a test holds this table equal to the workload kinds)."""


def render(plan: WorkloadPlan, owner: Owner, images: Images) -> list[Manifest]:
    """The children of a plan, in apply order (config and identity before the Deployment)."""
    return [stamp(m) for m in RENDERERS[KIND_BY_NAME[plan.kind]](plan, owner, images)]


__all__ = ["ANNOTATION_APPLIED_HASH", "Owner", "manifest_key", "render", "url_of"]
