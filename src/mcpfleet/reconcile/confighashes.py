"""The `*ConfigHash` status fields (ToolHive's): which version of each referenced configuration a
workload was last reconciled with.

A workload that names a configuration object by reference (`toolConfigRef`, `externalAuthConfigRef`,
`authServerRef`, `oidcConfigRef`, `authzConfigRef`, `telemetryConfigRef`, `webhookConfigRef`; a
VirtualMCPServer's `incomingAuth.oidcConfigRef` / `authzConfigRef` and `telemetryConfigRef`) reports
the sha256 of that object's spec (`configkinds.config_hash`, the same value as the object's own
`status.configHash`) in the matching field; a field is unset when its reference is, or names no
object. Both platforms compute it from the same world, so a reader can tell whether a workload has
picked up an edit of a shared configuration: its hash equals the configuration's `configHash`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcpfleet.api.resource import Resource
from mcpfleet.reconcile.configkinds import config_hash
from mcpfleet.reconcile.model import World


def _hash(ref: Any, table: Mapping[str, Resource]) -> str | None:
    name = getattr(ref, "name", None) if ref is not None else None
    found = table.get(name) if isinstance(name, str) else None
    return config_hash(found) if found is not None else None


def proxy_hashes(spec: Any, world: World) -> dict[str, str | None]:
    """The hash fields of an MCPServer or MCPRemoteProxy (snake_case field names)."""
    return {
        "tool_config_hash": _hash(spec.tool_config_ref, world.tool_configs),
        "external_auth_config_hash": _hash(spec.external_auth_config_ref, world.external_auth_configs),
        "auth_server_config_hash": _hash(spec.auth_server_ref, world.external_auth_configs),
        "oidc_config_hash": _hash(spec.oidc_config_ref, world.oidc_configs),
        "authz_config_hash": _hash(spec.authz_config_ref, world.authz_configs),
        "telemetry_config_hash": _hash(spec.telemetry_config_ref, world.telemetry_configs),
        "webhook_config_hash": _hash(spec.webhook_config_ref, world.webhook_configs),
    }


def gateway_hashes(spec: Any, world: World) -> dict[str, str | None]:
    """The hash fields of a VirtualMCPServer (snake_case field names)."""
    incoming = spec.incoming_auth
    return {
        "oidc_config_hash": _hash(incoming.oidc_config_ref, world.oidc_configs),
        "authz_config_hash": _hash(incoming.authz_config_ref, world.authz_configs),
        "telemetry_config_hash": _hash(spec.telemetry_config_ref, world.telemetry_configs),
    }
