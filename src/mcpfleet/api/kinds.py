"""The list of mcpfleet kinds and parsing of manifests into their models."""

from __future__ import annotations

import difflib
import types
import typing
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

ALL_KINDS: tuple[type[Resource], ...] = (
    MCPServer,
    MCPGroup,
    MCPRegistry,
    VirtualMCPServer,
    MCPToolConfig,
    MCPExternalAuthConfig,
    MCPRemoteProxy,
    MCPOIDCConfig,
    MCPTelemetryConfig,
    MCPAuthzConfig,
    MCPWebhookConfig,
    VirtualMCPCompositeToolDefinition,
    MCPServerEntry,
    EmbeddingServer,
)
KIND_BY_NAME: dict[str, type[Resource]] = {k.info.kind: k for k in ALL_KINDS}
KIND_BY_PLURAL: dict[str, type[Resource]] = {k.info.plural: k for k in ALL_KINDS}


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
