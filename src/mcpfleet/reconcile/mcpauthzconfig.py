"""Reconcile rules of MCPAuthzConfig: status (Valid, configHash, referencing workloads) and `resolve`.

`resolve` returns what a workload's `authzConfigRef` stands for: the object's `{type, config}` (e.g.
`{"type": "cedarv1", "config": {"policies": [...], "entities_json": "[]"}}`), exactly what the data
plane's authorizer evaluates for an inline authorization config, plus the `configHash` a renderer puts
into the workload's config so an edit rolls the workloads that enforce it.
"""

from __future__ import annotations

from typing import Any

from mcpfleet.api.meta import WorkloadReference
from mcpfleet.reconcile import configkinds
from mcpfleet.reconcile.model import World

MEMBER_PATHS: tuple[configkinds.RefPath, ...] = (("authzConfigRef",),)
GATEWAY_PATHS: tuple[configkinds.RefPath, ...] = (("incomingAuth", "authzConfigRef"), ("authzConfigRef",))


class AuthzRefError(LookupError):
    """An `authzConfigRef` naming no MCPAuthzConfig; the message names the field."""


def referencing_workloads(name: str, world: World) -> list[WorkloadReference]:
    """Servers, remote proxies (`spec.authzConfigRef`) and gateways (`spec.incomingAuth.authzConfigRef`)."""
    return configkinds.referencing_by_paths(name, world, MEMBER_PATHS, GATEWAY_PATHS)


status = configkinds.status_rule(referencing_workloads)
"""Valid, configHash, referencingWorkloads, DeletionBlocked (`configkinds.config_status`)."""


def resolve(name: str, world: World, *, field: str = "spec.authzConfigRef") -> dict[str, Any]:
    """`{type, config}` of MCPAuthzConfig `name` (a deep copy: callers may not alter the world)."""
    found = world.authz_configs.get(name)
    if found is None:
        raise AuthzRefError(f"{field}: MCPAuthzConfig {name} not found")
    spec = found.spec.dump()
    return {"type": spec["type"], "config": spec["config"]}


def resolved_with_hash(name: str, world: World, *, field: str = "spec.authzConfigRef") -> dict[str, Any]:
    """`resolve` plus `name` and `configHash` (what a rendered config carries so an edit rolls it)."""
    resolved = resolve(name, world, field=field)
    return {**resolved, "name": name, "configHash": config_hash(world.authz_configs[name])}


config_hash = configkinds.config_hash
