"""The one per-kind table of reconcile rules (`RULES`): which rule plans a kind, which computes its
status, and where the rules of other kinds find its objects in the `World`.

Both platforms dispatch through it (the operator's controller and the local runner), so they cannot
disagree on which rule a kind follows. A new kind is its model and descriptor row (`api.kinds`), one
row here and its `reconcile/<kind>.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic.alias_generators import to_snake

from mcpfleet.api import kinds as api_kinds
from mcpfleet.api.embeddingserver import EmbeddingServer
from mcpfleet.api.kinds import KindDescriptor
from mcpfleet.api.mcpauthzconfig import MCPAuthzConfig
from mcpfleet.api.mcpexternalauthconfig import MCPExternalAuthConfig
from mcpfleet.api.mcpgroup import MCPGroup
from mcpfleet.api.mcpoidcconfig import MCPOIDCConfig
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.api.mcpremoteproxy import MCPRemoteProxy
from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.mcpserverentry import MCPServerEntry
from mcpfleet.api.mcptelemetryconfig import MCPTelemetryConfig
from mcpfleet.api.mcptoolconfig import MCPToolConfig
from mcpfleet.api.mcpwebhookconfig import MCPWebhookConfig
from mcpfleet.api.meta import ApiModel, ConfigStatus, ProxyWorkloadStatus, WorkloadStatus
from mcpfleet.api.resource import Resource
from mcpfleet.api.virtualmcpcompositetooldefinition import VirtualMCPCompositeToolDefinition
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.reconcile import (
    confighashes,
    configkinds,
    embeddingserver,
    mcpauthzconfig,
    mcpexternalauthconfig,
    mcpoidcconfig,
    mcpregistry,
    mcpremoteproxy,
    mcpserver,
    mcptelemetryconfig,
    mcptoolconfig,
    mcpwebhookconfig,
    virtualmcpcompositetooldefinition,
    virtualmcpserver,
)
from mcpfleet.reconcile.model import WorkloadObservation, WorkloadPlan, World
from mcpfleet.reconcile.status import workload_status

StatusRule = Callable[[Any, Any, WorkloadPlan, WorkloadObservation | None, World, str | None], ApiModel]
"""(previous status, object, plan, observation, world, now) -> the new status."""


def _flat(prev: Any, obj: Any, plan: WorkloadPlan, seen: Any, world: World, now: str | None) -> ApiModel:
    """The shared flat workload status (MCPServer, MCPRemoteProxy) and the referenced configurations'
    hashes (`confighashes`)."""
    flat = workload_status(prev, plan, seen, obj.generation, now)
    fields = {name: getattr(flat, name) for name in WorkloadStatus.model_fields}
    return ProxyWorkloadStatus(**fields, **confighashes.proxy_hashes(obj.spec, world))


@dataclass(frozen=True)
class KindRules:
    """The reconcile-level facts of a kind, beside its model-level descriptor (`api.kinds`)."""

    model: type[Resource]
    plan: Callable[[Any, World], WorkloadPlan] | None = None
    """Workloads: what should run."""
    status: StatusRule | None = None
    """Workloads: the new status from the plan and what was observed."""
    config_status: Callable[..., ConfigStatus] | None = None
    """Configuration kinds: referencing workloads, hash, deletion guard."""
    own_status_fields: Callable[[ConfigStatus], ConfigStatus] | None = None
    """Configuration kinds whose status has fields of their own, derived from the shared status."""
    world_field: str | None = None
    """The `World` field holding the kind's objects, for the rules of other kinds to read."""
    world_by_name: bool = False
    """Whether `world_field` is a dict by name (configurations) or a tuple (workloads, members)."""

    @property
    def kind(self) -> str:
        return self.model.KIND

    @property
    def descriptor(self) -> KindDescriptor:
        return api_kinds.descriptor(self.kind)


RULES: tuple[KindRules, ...] = (
    KindRules(MCPServer, mcpserver.plan, _flat, world_field="servers"),
    KindRules(MCPGroup, world_field="groups", world_by_name=True),
    KindRules(
        MCPRegistry,
        mcpregistry.plan,
        lambda prev, obj, plan, seen, world, now: mcpregistry.status(prev, obj, plan, seen, now),
    ),
    KindRules(
        VirtualMCPServer,
        virtualmcpserver.plan,
        lambda prev, obj, plan, seen, world, now: virtualmcpserver.status(prev, obj, plan, seen, world, now),
        world_field="virtual_servers",
    ),
    KindRules(
        MCPToolConfig, config_status=mcptoolconfig.status, world_field="tool_configs", world_by_name=True
    ),
    KindRules(
        MCPExternalAuthConfig,
        config_status=mcpexternalauthconfig.status,
        world_field="external_auth_configs",
        world_by_name=True,
    ),
    KindRules(MCPRemoteProxy, mcpremoteproxy.plan, _flat, world_field="remote_proxies"),
    KindRules(
        MCPOIDCConfig, config_status=mcpoidcconfig.status, world_field="oidc_configs", world_by_name=True
    ),
    KindRules(
        MCPTelemetryConfig,
        config_status=mcptelemetryconfig.status,
        world_field="telemetry_configs",
        world_by_name=True,
    ),
    KindRules(
        MCPAuthzConfig, config_status=mcpauthzconfig.status, world_field="authz_configs", world_by_name=True
    ),
    KindRules(
        MCPWebhookConfig,
        config_status=mcpwebhookconfig.status,
        world_field="webhook_configs",
        world_by_name=True,
    ),
    KindRules(
        VirtualMCPCompositeToolDefinition,
        config_status=virtualmcpcompositetooldefinition.status,
        own_status_fields=virtualmcpcompositetooldefinition.with_toolhive_fields,
        world_field="composite_tool_definitions",
        world_by_name=True,
    ),
    KindRules(MCPServerEntry, world_field="server_entries"),
    KindRules(
        EmbeddingServer,
        embeddingserver.plan,
        lambda prev, obj, plan, seen, world, now: embeddingserver.status(prev, obj, plan, seen, now),
    ),
)
"""One row per kind (the same kinds as `api.kinds.DESCRIPTORS`; a test holds them equal)."""

RULES_BY_KIND: dict[str, KindRules] = {r.kind: r for r in RULES}

MEMBERS = api_kinds.MEMBER_KINDS
"""Kinds that join an MCPGroup (a VirtualMCPServer's backends) and run something."""

ENTRIES = api_kinds.ENTRY_KINDS
"""Kinds that join an MCPGroup without running anything (status rule: `mcpserverentry.status`)."""


def rules_of(kind: str) -> KindRules:
    """The rules of a kind by its name (KeyError for an unknown kind)."""
    return RULES_BY_KIND[kind]


def plan(obj: Any, world: World) -> WorkloadPlan:
    """What should run for a workload object."""
    rules = RULES_BY_KIND.get(obj.kind)
    if rules is None or rules.plan is None:
        raise TypeError(f"{obj.kind} is not a workload kind")
    return rules.plan(obj, world)


def status(
    previous: Any,
    obj: Any,
    plan: WorkloadPlan,
    observation: WorkloadObservation | None,
    world: World,
    now: str | None = None,
) -> ApiModel:
    """The new status of a workload object; equal to `previous` when nothing changed."""
    rule = RULES_BY_KIND[obj.kind].status
    assert rule is not None, f"{obj.kind} is not a workload kind"
    return rule(previous, obj, plan, observation, world, now)


def config_status(
    previous: ConfigStatus, obj: Any, world: World, *, deleting: bool, now: str | None = None
) -> ConfigStatus:
    """The new status of a configuration object."""
    rule = RULES_BY_KIND[obj.kind].config_status
    assert rule is not None, f"{obj.kind} is not a configuration kind"
    return rule(previous, obj, world, deleting=deleting, now=now)


def parse_config_status(raw_status: dict[str, Any]) -> ConfigStatus:
    """The shared part of a configuration object's stored status (a kind's own fields left out; an
    unreadable one is empty: it is recomputed)."""
    try:
        return ConfigStatus.model_validate(
            {k: v for k, v in raw_status.items() if to_snake(k) in ConfigStatus.model_fields}
        )
    except ValueError:
        return ConfigStatus()


def invalid_config_status(
    kind: str, raw_status: dict[str, Any], *, generation: int, message: str, now: str | None = None
) -> ConfigStatus:
    """The status of a configuration object whose spec the models refuse (`raw_status`: what the
    object holds now): Valid=False naming the field, in the kind's own status shape."""
    previous = parse_config_status(raw_status)
    status = configkinds.invalid_config_status(previous, generation=generation, message=message, now=now)
    finish = RULES_BY_KIND[kind].own_status_fields
    return finish(status) if finish is not None else status
