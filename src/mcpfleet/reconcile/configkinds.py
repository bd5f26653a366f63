"""Rules shared by the configuration kinds (MCPToolConfig, MCPExternalAuthConfig).

A configuration object is valid once it parsed (the models hold every rule), carries `configHash`
(sha256 of its spec, which referencing workloads copy into their rendered config so a change rolls
them), lists the workloads that reference it, and cannot be deleted while referenced: the platform
keeps a finalizer on it while `referencingWorkloads` is non-empty, and the status says by whom.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from mcpfleet.api.kinds import descriptor
from mcpfleet.api.mcpremoteproxy import MCPRemoteProxy
from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.meta import (
    AuthServerRef,
    ConfigStatus,
    LocalObjectReference,
    WorkloadReference,
    set_condition,
)
from mcpfleet.api.references import names_at
from mcpfleet.api.resource import Resource
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.reconcile.common import sha256_of
from mcpfleet.reconcile.model import World

CONDITION_VALID = "Valid"
CONDITION_DELETION_BLOCKED = "DeletionBlocked"
FINALIZER = "mcpfleet.dev/in-use"


def config_hash(obj: Resource) -> str:
    """sha256 over the spec as written on the wire (camelCase, unset fields left out)."""
    spec = getattr(obj, "spec")  # noqa: B009 - every config kind has a spec
    return sha256_of(spec.dump())


def missing_refs(
    tool_config: LocalObjectReference | None, external_auth: LocalObjectReference | None, world: World
) -> list[str]:
    """Problems naming a workload's `toolConfigRef` / `externalAuthConfigRef` that name no object."""
    problems: list[str] = []
    if tool_config is not None and tool_config.name not in world.tool_configs:
        problems.append(f"toolConfigRef: MCPToolConfig {tool_config.name} not found")
    if external_auth is not None and external_auth.name not in world.external_auth_configs:
        problems.append(f"externalAuthConfigRef: MCPExternalAuthConfig {external_auth.name} not found")
    return problems


def run_config_refs(
    tool_config: LocalObjectReference | None, external_auth: LocalObjectReference | None, world: World
) -> dict[str, object]:
    """The run config's `toolConfig` (the spec the proxy enforces) and `externalAuthConfig` entries."""
    entries: dict[str, object] = {}
    if tool_config is not None and tool_config.name in world.tool_configs:
        found = world.tool_configs[tool_config.name]
        entries["toolConfig"] = {
            "name": found.name,
            "configHash": config_hash(found),
            "spec": found.spec.dump(),
        }
    if external_auth is not None and external_auth.name in world.external_auth_configs:
        auth = world.external_auth_configs[external_auth.name]
        # Only the hash and the type: the spec names Secrets, their values never reach a ConfigMap.
        entries["externalAuthConfig"] = {
            "name": auth.name,
            "type": auth.spec.type,
            "configHash": config_hash(auth),
        }
    return entries


def referencing(
    name: str,
    world: World,
    member_ref: Callable[[Any], LocalObjectReference | AuthServerRef | None],
    gateway_uses: Callable[[VirtualMCPServer], bool],
) -> list[WorkloadReference]:
    """Sorted references to the workloads using configuration object `name`: the MCPServers and
    MCPRemoteProxies whose `member_ref(spec)` names it, the VirtualMCPServers `gateway_uses`."""
    found: set[tuple[str, str]] = set()
    members: tuple[MCPServer | MCPRemoteProxy, ...] = (*world.servers, *world.remote_proxies)
    for member in members:
        ref = member_ref(member.spec)
        if ref is not None and ref.name == name:
            found.add((member.kind, member.name))
    found |= {("VirtualMCPServer", v.name) for v in world.virtual_servers if gateway_uses(v)}
    return [WorkloadReference(kind=k, name=n) for k, n in sorted(found)]


def describe(refs: list[WorkloadReference]) -> str:
    return ", ".join(f"{r.kind}/{r.name}" for r in refs)


def config_status(
    previous: ConfigStatus,
    *,
    obj: Resource,
    refs: list[WorkloadReference],
    deleting: bool,
    now: str | None = None,
) -> ConfigStatus:
    """Status of a valid configuration object; equal to `previous` when nothing changed."""
    generation = obj.generation
    conditions = set_condition(
        list(previous.conditions),
        type=CONDITION_VALID,
        status="True",
        reason="Valid",
        message="the spec is valid",
        observed_generation=generation,
        now=now,
    )
    if deleting and refs:
        conditions = set_condition(
            conditions,
            type=CONDITION_DELETION_BLOCKED,
            status="True",
            reason="StillReferenced",
            message=f"deletion waits until no workload references it; referenced by {describe(refs)}",
            observed_generation=generation,
            now=now,
        )
    elif any(c.type == CONDITION_DELETION_BLOCKED for c in conditions):
        conditions = set_condition(
            conditions,
            type=CONDITION_DELETION_BLOCKED,
            status="False",
            reason="NotReferenced",
            message="no workload references it",
            observed_generation=generation,
            now=now,
        )
    return ConfigStatus(
        observed_generation=generation,
        config_hash=config_hash(obj),
        referencing_workloads=refs,
        conditions=conditions,
    )


def invalid_config_status(
    previous: ConfigStatus, *, generation: int, message: str, now: str | None = None
) -> ConfigStatus:
    """Status of a configuration object whose spec does not validate: Valid=False naming the field."""
    conditions = set_condition(
        list(previous.conditions),
        type=CONDITION_VALID,
        status="False",
        reason="InvalidSpec",
        message=message,
        observed_generation=generation,
        now=now,
    )
    return ConfigStatus(
        observed_generation=generation,
        config_hash=None,
        referencing_workloads=list(previous.referencing_workloads),
        conditions=conditions,
    )


def needs_finalizer(refs: list[WorkloadReference]) -> bool:
    """A finalizer is held only while something references the object (deletion is then blocked)."""
    return bool(refs)


RefGetter = Callable[[Resource], Iterable[str]]


def referencing_by_marks(kind: str, name: str, world: World) -> list[WorkloadReference]:
    """Sorted references to the workloads (servers, remote proxies, gateways) whose spec names
    `name` at one of the fields their model marks as a reference to `kind` (`api.references`).

    The kinds ToolHive added are referenced by fields of the workloads' wire form (`oidcConfigRef`,
    `incomingAuth.authzConfigRef`, `telemetryConfigRef`, ...): the paths come from the models, so a
    new reference field counts once it is marked."""
    found: set[tuple[str, str]] = set()
    workloads: tuple[MCPServer | MCPRemoteProxy | VirtualMCPServer, ...] = (
        *world.servers,
        *world.remote_proxies,
        *world.virtual_servers,
    )
    for workload in workloads:
        paths = [ref.path for ref in descriptor(workload.kind).references if ref.kind == kind]
        if not paths:
            continue
        spec = workload.spec.dump()
        if any(name in names_at(spec, path) for path in paths):
            found.add((workload.kind, workload.name))
    return [WorkloadReference(kind=k, name=n) for k, n in sorted(found)]


ConfigStatusRule = Callable[..., ConfigStatus]


def status_rule(referencing_workloads: Callable[[str, World], list[WorkloadReference]]) -> ConfigStatusRule:
    """The status rule of a configuration kind whose references `referencing_workloads` finds."""

    def status(
        previous: ConfigStatus, obj: Resource, world: World, *, deleting: bool, now: str | None = None
    ) -> ConfigStatus:
        refs = referencing_workloads(obj.name, world)
        return config_status(previous, obj=obj, refs=refs, deleting=deleting, now=now)

    return status
