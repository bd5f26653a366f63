"""The mcpfleet kinds: one descriptor per kind (`DESCRIPTORS`) and parsing manifests into their models.

A descriptor holds the model-level facts of a kind: its model (names, plural, short names), its role,
its group membership, its children's name prefix, its apply order and its references (derived from
the model's `RefersTo` marks). The reconcile rules of each kind are in `reconcile.kinds`. Code
outside `api/` and `reconcile/` asks these tables (or a model's `KIND`) rather than naming a kind.
"""

from __future__ import annotations

import difflib
import enum
import functools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from mcpfleet.api.embeddingserver import EmbeddingServer
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
from mcpfleet.api.meta import GROUP, location
from mcpfleet.api.references import Reference, references
from mcpfleet.api.resource import Resource
from mcpfleet.api.versions import (
    HUB_VERSION,
    SERVED_API_VERSIONS,
    ConversionError,
    convert,
    version_field_path,
)
from mcpfleet.api.virtualmcpcompositetooldefinition import VirtualMCPCompositeToolDefinition
from mcpfleet.api.virtualmcpserver import VirtualMCPServer


class Role(enum.Enum):
    """What a kind is for, which decides the rules it follows on both platforms."""

    WORKLOAD = "workload"
    """Runs something: a plan (`reconcile.<kind>.plan`), a status rule and a renderer."""
    CONFIG = "config"
    """Configuration other objects reference: a status rule (hash, referencing workloads)."""
    GROUP = "group"
    """MCPGroup: lists its members."""
    ENTRY = "entry"
    """Joins a group without running anything (a remote server's entry)."""


@dataclass(frozen=True)
class KindDescriptor:
    """Everything the model level knows about a kind; the reconcile level adds its rules
    (`reconcile.kinds.RULES`). Adding a kind = its model, its rules and one row in each table."""

    model: type[Resource]
    role: Role
    group_member: bool = False
    """Joins an MCPGroup (its `groupRef`) and so is a backend of the group's VirtualMCPServers."""
    published: bool = False
    """Clients connect to it: an MCPRegistry's Kubernetes source lists it, `mcpfleet clients` offers it."""
    child_prefix: str | None = None
    """Workloads: its Kubernetes children are named PREFIX-NAME (never colliding across kinds)."""
    apply_order: int | None = None
    """Workloads: the order of a local pass (earlier kinds give later ones their URLs at once)."""

    @property
    def kind(self) -> str:
        return self.model.info.kind

    @property
    def plural(self) -> str:
        return self.model.info.plural

    @property
    def short_names(self) -> tuple[str, ...]:
        return self.model.info.short_names

    @property
    def references(self) -> tuple[Reference, ...]:
        """The fields of the spec naming other objects (derived from the model's `RefersTo` marks)."""
        return _references(self.model)

    def references_in(self, api_version: str) -> tuple[Reference, ...]:
        """`references` with each path as a document of `api_version` (e.g. the storage version,
        where VirtualMCPServer's `config.groupRef` is `groupRef.name`) names it."""
        version = api_version.removeprefix(f"{GROUP}/")
        if version == HUB_VERSION or not self.model.version_changes:
            return self.references
        return tuple(
            Reference(
                ref.kind,
                tuple(
                    version_field_path(
                        ".".join(("spec", *ref.path)), self.model.version_changes, version
                    ).split(".")[1:]
                ),
            )
            for ref in self.references
        )


@functools.cache
def _references(model: type[Resource]) -> tuple[Reference, ...]:
    return references(model)


DESCRIPTORS: tuple[KindDescriptor, ...] = (
    KindDescriptor(
        MCPServer, Role.WORKLOAD, group_member=True, published=True, child_prefix="mcp", apply_order=1
    ),
    KindDescriptor(MCPGroup, Role.GROUP),
    KindDescriptor(MCPRegistry, Role.WORKLOAD, child_prefix="mcpreg", apply_order=4),
    KindDescriptor(VirtualMCPServer, Role.WORKLOAD, published=True, child_prefix="vmcp", apply_order=3),
    KindDescriptor(MCPToolConfig, Role.CONFIG),
    KindDescriptor(MCPExternalAuthConfig, Role.CONFIG),
    KindDescriptor(
        MCPRemoteProxy, Role.WORKLOAD, group_member=True, published=True, child_prefix="mcprp", apply_order=2
    ),
    KindDescriptor(MCPOIDCConfig, Role.CONFIG),
    KindDescriptor(MCPTelemetryConfig, Role.CONFIG),
    KindDescriptor(MCPAuthzConfig, Role.CONFIG),
    KindDescriptor(MCPWebhookConfig, Role.CONFIG),
    KindDescriptor(VirtualMCPCompositeToolDefinition, Role.CONFIG),
    KindDescriptor(MCPServerEntry, Role.ENTRY, group_member=True),
    KindDescriptor(EmbeddingServer, Role.WORKLOAD, child_prefix="emb", apply_order=0),
)
"""One row per kind, in the order the CRDs and the docs list them."""

ALL_KINDS: tuple[type[Resource], ...] = tuple(d.model for d in DESCRIPTORS)
KIND_BY_NAME: dict[str, type[Resource]] = {k.info.kind: k for k in ALL_KINDS}
KIND_BY_PLURAL: dict[str, type[Resource]] = {k.info.plural: k for k in ALL_KINDS}
DESCRIPTOR_BY_KIND: dict[str, KindDescriptor] = {d.kind: d for d in DESCRIPTORS}


def _kinds(wanted: Callable[[KindDescriptor], bool]) -> tuple[str, ...]:
    return tuple(d.kind for d in DESCRIPTORS if wanted(d))


WORKLOAD_KINDS: tuple[str, ...] = tuple(
    d.kind
    for d in sorted((d for d in DESCRIPTORS if d.role is Role.WORKLOAD), key=lambda d: d.apply_order or 0)
)
"""Kinds that run something, in apply order."""
CONFIG_KINDS = _kinds(lambda d: d.role is Role.CONFIG)
ENTRY_KINDS = _kinds(lambda d: d.role is Role.ENTRY)
MEMBER_KINDS = _kinds(lambda d: d.group_member and d.role is Role.WORKLOAD)
"""Kinds that join an MCPGroup and run something: their `status.url` is a backend's URL."""
PUBLISHED_KINDS = _kinds(lambda d: d.published)
GROUP_KIND = MCPGroup.KIND


def descriptor(kind: str) -> KindDescriptor:
    """The descriptor of a kind by its name (KeyError for an unknown kind)."""
    return DESCRIPTOR_BY_KIND[kind]


class ManifestError(ValueError):
    """A manifest that is not a valid mcpfleet object; `problems` are (field path, reason) pairs."""

    def __init__(self, kind: str, name: str, problems: list[tuple[str, str]]) -> None:
        self.kind = kind
        self.name = name
        self.problems = problems
        detail = "; ".join(f"{path}: {reason}" if path else reason for path, reason in problems)
        super().__init__(f"{kind}/{name}: {detail}")


def lookup_kind(name: str) -> type[Resource] | None:
    """Find a kind by kind name, plural, singular or short name (case-insensitive)."""
    wanted = name.lower()
    for kind in ALL_KINDS:
        info = kind.info
        if wanted in {info.kind.lower(), info.plural, info.singular, *info.short_names}:
            return kind
    return None


def parse_manifest(document: dict[str, Any]) -> Resource:
    """Validate one YAML document (any served version) as an mcpfleet object, raising ManifestError
    naming each bad field as the document's version names it.

    The result is always the hub model: a v1beta1 document is converted first, with the same
    conversion the API server's webhook runs.
    """
    kind_name = str(document.get("kind", ""))
    metadata = document.get("metadata")
    name = str(metadata.get("name", "<unnamed>")) if isinstance(metadata, dict) else "<unnamed>"
    api_version = document.get("apiVersion")
    if api_version not in SERVED_API_VERSIONS:
        raise ManifestError(
            kind_name or "?", name, [("apiVersion", f"must be {' or '.join(SERVED_API_VERSIONS)}")]
        )
    version = str(api_version).removeprefix(f"{GROUP}/")
    kind = KIND_BY_NAME.get(kind_name)
    if kind is None:
        known = ", ".join(KIND_BY_NAME)
        raise ManifestError(kind_name or "?", name, [("kind", f"unknown kind {kind_name!r}; known: {known}")])
    try:
        hub = convert(document, kind.version_changes, HUB_VERSION)
    except ConversionError as exc:
        raise ManifestError(kind_name, name, [(exc.path, str(exc).removeprefix(f"{exc.path}: "))]) from exc
    try:
        # Manifests must use the wire (camelCase) names; snake_case is for Python callers only.
        return kind.model_validate(hub, by_alias=True, by_name=False)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            message = str(error["msg"]).removeprefix("Value error, ")
            path = location(tuple(error["loc"]))
            # Cross-field rules carry their own field path in the message ("'.replicas: …'").
            if message.startswith(".") and ": " in message:
                sub, message = message.split(": ", 1)
                path = f"{path}{sub}"
            if error["type"] == "extra_forbidden":
                message += _did_you_mean(kind, tuple(error["loc"]))
            problems.append((version_field_path(path, kind.version_changes, version), message))
        raise ManifestError(kind_name, name, problems) from exc


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, list, dict, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin is not None or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            found += _models_in(arg)
    return found


def _did_you_mean(kind: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """` (did you mean `transport`?)` for an unknown field close to a sibling field's name."""
    models: list[type[BaseModel]] = [kind]
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        nested: list[type[BaseModel]] = []
        for model in models:
            for field_name, info in model.model_fields.items():
                if part in (info.alias, field_name):
                    nested += _models_in(info.annotation)
        models = nested or models
    siblings = {
        info.alias or field_name for model in models for field_name, info in model.model_fields.items()
    }
    close = difflib.get_close_matches(str(loc[-1]), sorted(siblings), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""
