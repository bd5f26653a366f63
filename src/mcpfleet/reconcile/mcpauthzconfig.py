"""Reconcile rules of MCPAuthzConfig: status (Valid, configHash, referencing workloads) and `resolve`.

`resolve` returns what a workload's `authzConfigRef` stands for: the object's `{type, config}` (e.g.
`{"type": "cedarv1", "config": {"policies": [...], "entities_json": "[]"}}`), exactly what the data
plane's authorizer evaluates for an inline authorization config. Its `configHash` is in the status
only: an edit reaches the workloads as a live policy file, without a roll.

`document` / `policy` are what the workload reconcilers use: a `cedarv1` MCPAuthzConfig becomes the
inline `authzConfig` with the same policies, entities and claim settings, so it renders the same
`AuthzDocument` (`reconcile/policy.py`) and applies like an inline policy edit (a live file, no roll).
What the data plane cannot enforce (`httpv1`, `primary_upstream_provider`) is a problem naming the
field: the workload does not run without the authorization it asks for.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mcpfleet.api.meta import LocalObjectReference, WorkloadReference
from mcpfleet.api.policy import AuditConfig, AuthzConfig
from mcpfleet.policy.config import AuthzDocument
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import ConfigMapFile, World
from mcpfleet.reconcile.policy import PolicyPlan, authz_document, policy_plan


class AuthzRefError(LookupError):
    """An `authzConfigRef` naming no MCPAuthzConfig; the message names the field."""


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """Servers, remote proxies (`spec.authzConfigRef`) and gateways (`spec.incomingAuth.authzConfigRef`)."""
    return configkinds.referencing_by_marks("MCPAuthzConfig", name, world)


status = configkinds.status_rule(referencing_workloads)
"""Valid, configHash, referencingWorkloads, DeletionBlocked (`configkinds.config_status`)."""


def resolve(name: str, world: World, *, field: str = "spec.authzConfigRef") -> dict[str, Any]:
    """`{type, config}` of MCPAuthzConfig `name` (a deep copy: callers may not alter the world)."""
    found = world.authz_configs.get(name)
    if found is None:
        raise AuthzRefError(f"{field}: MCPAuthzConfig {name} not found")
    spec = found.spec.dump()
    return {"type": spec["type"], "config": spec["config"]}


def as_inline(name: str, world: World, *, field: str) -> AuthzConfig:
    """The inline `authzConfig` equivalent to MCPAuthzConfig `name`; AuthzRefError names what cannot be."""
    resolved = resolve(name, world, field=field)
    config = resolved["config"]
    if resolved["type"] != "cedarv1":
        raise AuthzRefError(
            f"{field}: MCPAuthzConfig {name} has type {resolved['type']}; mcpfleet's data plane enforces cedarv1 only"
        )
    if config.get("primary_upstream_provider"):
        raise AuthzRefError(
            f"{field}: MCPAuthzConfig {name} config.primary_upstream_provider needs ToolHive's embedded"
            " authorization server, which mcpfleet has not; leave it unset"
        )
    return AuthzConfig.model_validate(
        {
            "type": "inline",
            "inline": {"policies": config["policies"], "entitiesJson": config.get("entities_json", "[]")},
            "groupClaimName": config.get("group_claim_name"),
            "roleClaimName": config.get("role_claim_name"),
            "groupEntityType": config.get("group_entity_type"),
        }
    )


def document(
    authz: AuthzConfig | None, ref: LocalObjectReference | None, world: World, *, where: str = "spec"
) -> tuple[AuthzDocument | None, tuple[ConfigMapFile, ...], tuple[str, ...]]:
    """`authz_document` of a workload's `authzConfig`, or of the MCPAuthzConfig its `authzConfigRef` names."""
    if ref is None:
        return authz_document(authz, world.platform, f"{where}.authzConfig")
    field = f"{where}.authzConfigRef"
    try:
        inline = as_inline(ref.name, world, field=field)
    except AuthzRefError as exc:
        return None, (), (str(exc),)
    return authz_document(inline, world.platform, f"{field} (MCPAuthzConfig {ref.name})")


def policy(
    authz: AuthzConfig | None,
    ref: LocalObjectReference | None,
    audit: AuditConfig | None,
    world: World,
    *,
    where: str = "spec",
) -> PolicyPlan:
    """`policy_plan` of a proxy-fronted workload, its policies inline or from its `authzConfigRef`."""
    if ref is None:
        return policy_plan(authz, audit, world.platform, f"{where}.authzConfig")
    found, files, problems = document(authz, ref, world, where=where)
    return dataclasses.replace(
        policy_plan(None, audit, world.platform), document=found, config_map_files=files, problems=problems
    )
