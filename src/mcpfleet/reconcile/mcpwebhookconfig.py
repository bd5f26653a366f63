"""Reconcile rules of MCPWebhookConfig: status (Valid, configHash, referencing MCPServers).

A workload names it in `spec.webhookConfigRef`; `resolve` gives the webhook lists a renderer writes
into the workload's run config, the Secret values (HMAC keys, TLS material) only as references.
"""

from __future__ import annotations

from typing import Any

from mcpfleet.api.meta import WorkloadReference
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import World

MEMBER_PATHS: tuple[configkinds.RefPath, ...] = (("webhookConfigRef",),)


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """MCPServers and MCPRemoteProxies whose `spec.webhookConfigRef` names it."""
    return configkinds.referencing_by_paths(name, world, MEMBER_PATHS, ())


status = configkinds.status_rule(referencing_workloads)
"""Valid, configHash, referencingWorkloads, DeletionBlocked (`configkinds.config_status`)."""


def resolve(name: str, world: World) -> dict[str, Any] | None:
    """The webhooks of MCPWebhookConfig `name` with its configHash, or None when it does not exist."""
    found = world.webhook_configs.get(name)
    if found is None:
        return None
    return {"name": name, "configHash": config_hash(found), **found.spec.dump()}


config_hash = configkinds.config_hash
