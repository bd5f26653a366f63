"""Reconcile rules of MCPServerEntry: its status, and the backends it gives its group's gateways.

An entry runs nothing. It is Valid when its group and MCPExternalAuthConfig exist and its URL is
allowed: on Kubernetes loopback, link-local, cloud-metadata and kubernetes.default endpoints are
always refused, private ones (RFC 1918, unique-local, *.cluster.local) need `allowPrivateEndpoint`;
on the local platform everything runs on this machine, so loopback and private endpoints need
`allowPrivateEndpoint` and link-local / metadata stay refused. Pending while the group is missing.

A VirtualMCPServer over the group renders each Valid entry as a backend (`metadata.kind:
MCPServerEntry`) with its URL and transport; `headerForward` becomes backend headers (secret values as
secretKeyRef env named in the config), `externalAuthConfigRef` the backend's outgoing auth (applied by
the gateway itself: no proxy stands in between), `caBundleRef` a mounted ConfigMap key (Kubernetes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mcpfleet.api.mcpserverentry import MCPServerEntry, MCPServerEntryStatus
from mcpfleet.api.meta import ConfigMapKeyRef, SecretKeyRef, set_condition
from mcpfleet.reconcile import endpoints
from mcpfleet.reconcile.model import KUBERNETES_CONFIGMAP_DIR, ConfigMapFile, Platform, World

CONDITION_VALID = "Valid"
CONDITION_GROUP = "GroupRefValidated"


def ca_file_name(entry: str) -> str:
    return f"entry-{entry}-ca.crt"


def endpoint_problem(entry: MCPServerEntry, platform: Platform) -> str | None:
    """Why `spec.remoteUrl` may not be used (naming the field), else None."""
    return endpoints.endpoint_problem(
        entry.spec.remote_url,
        entry.spec.allow_private_endpoint,
        platform,
        field="spec.remoteUrl",
        allow_field="spec.allowPrivateEndpoint",
        local_private=True,
    )


def problems(entry: MCPServerEntry, world: World) -> list[str]:
    """What keeps the entry from being used (Failed), the missing group aside (Pending)."""
    found: list[str] = []
    endpoint = endpoint_problem(entry, world.platform)
    if endpoint is not None:
        found.append(endpoint)
    ref = entry.spec.external_auth_config_ref
    if ref is not None and ref.name not in world.external_auth_configs:
        found.append(f"spec.externalAuthConfigRef: MCPExternalAuthConfig {ref.name} not found")
    if entry.spec.ca_bundle_ref is not None and world.platform != "kubernetes":
        found.append(
            "spec.caBundleRef: a CA bundle from a ConfigMap needs Kubernetes (no ConfigMaps locally)"
        )
    return found


def usable(entry: MCPServerEntry, world: World) -> bool:
    return entry.spec.group_ref.name in world.groups and not problems(entry, world)


def status(
    previous: MCPServerEntryStatus, entry: MCPServerEntry, world: World, now: str | None = None
) -> MCPServerEntryStatus:
    """Valid / Pending / Failed; equal to `previous` when nothing changed (so no write)."""
    generation = entry.generation
    group = entry.spec.group_ref.name
    group_ok = group in world.groups
    conditions = set_condition(
        list(previous.conditions),
        type=CONDITION_GROUP,
        status="True" if group_ok else "False",
        reason="GroupFound" if group_ok else "GroupNotFound",
        message=f"MCPGroup {group} {'found' if group_ok else 'not found'}",
        observed_generation=generation,
        now=now,
    )
    found = problems(entry, world)
    if found:
        phase, valid, reason, message = "Failed", "False", "InvalidSpec", "; ".join(found)
    elif not group_ok:
        phase, valid, reason = "Pending", "False", "GroupNotFound"
        message = f"spec.groupRef: MCPGroup {group} not found"
    else:
        phase, valid, reason = "Valid", "True", "Valid"
        message = f"gateways of group {group} connect to {entry.spec.transport} endpoint"
    conditions = set_condition(
        conditions,
        type=CONDITION_VALID,
        status=valid,  # type: ignore[arg-type]
        reason=reason,
        message=message,
        observed_generation=generation,
        now=now,
    )
    return MCPServerEntryStatus(
        phase=phase,
        message=message,
        observed_generation=generation,
        conditions=conditions,
    )


@dataclass
class EntryBackends:
    """What a gateway's rendered config gets from its group's entries."""

    backends: list[dict[str, object]] = field(default_factory=list)
    """vMCP config `backends` items (the gateway's `Backend` model, wire form)."""
    auth_refs: dict[str, str] = field(default_factory=dict)
    """Backend name -> MCPExternalAuthConfig name."""
    config_map_files: list[ConfigMapFile] = field(default_factory=list)


def gateway_backends(group: str, world: World, add_secret: Callable[[SecretKeyRef], str]) -> EntryBackends:
    """The usable entries of `group` as gateway backends, sorted by name; `add_secret` names the env
    variable that carries a Secret key's value."""
    result = EntryBackends()
    for entry in sorted(world.server_entries, key=lambda e: e.name):
        if entry.spec.group_ref.name != group or not usable(entry, world):
            continue
        spec = entry.spec
        headers: list[dict[str, str]] = []
        forward = spec.header_forward
        for name, value in sorted((forward.add_plaintext_headers or {}).items()) if forward else ():
            headers.append({"headerName": name, "headerValue": value})
        for item in (forward.add_headers_from_secret or ()) if forward else ():
            ref = item.value_secret_ref
            env = add_secret(SecretKeyRef(name=ref.name, key=ref.key))
            headers.append({"headerName": item.header_name, "headerValueEnv": env})
        backend: dict[str, object] = {
            "name": entry.name,
            "url": spec.remote_url,
            "transport": spec.transport,
            "metadata": {"kind": "MCPServerEntry"},
        }
        if headers:
            backend["headers"] = headers
        ca = spec.ca_bundle_ref.config_map_ref if spec.ca_bundle_ref else None
        if ca is not None:
            filename = ca_file_name(entry.name)
            result.config_map_files.append(
                ConfigMapFile(filename, ConfigMapKeyRef(name=ca.name or entry.name, key=ca.key))
            )
            backend["caFile"] = f"{KUBERNETES_CONFIGMAP_DIR}/{filename}"
        if spec.external_auth_config_ref is not None:
            result.auth_refs[entry.name] = spec.external_auth_config_ref.name
        result.backends.append(backend)
    return result
