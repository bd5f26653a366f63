"""API versions: which are served, which is stored, and how an object converts between them.

The pydantic models are written once, in the *hub* shape (`v1alpha1`, the shape the reconcile code
reads). Every other served version is the hub plus a short, declarative list of `Change`s on the
kind (`Resource.version_changes`), each of which knows three things at once:

- how to convert an object up (hub → version) and down (version → hub), losslessly;
- how to rewrite the hub's generated OpenAPI schema into that version's schema (so `crdgen` emits
  a multi-version CRD from the same models, with no second set of models to keep in step);
- how to name a field of the version when local validation of the hub finds it wrong.

A kind whose shape is the same in every version (every kind without changes) needs nothing: it is
served at every version, converts by changing `apiVersion`, and its schema is the same in both.

The API server converts with the conversion webhook (`mcpfleet.api.conversion`), which calls
`convert` below; `mcpfleet up` calls it directly. So both platforms share one conversion.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Protocol

from mcpfleet.api.meta import GROUP

HUB_VERSION = "v1alpha1"
"""The shape of the pydantic models (what the reconcile code reads)."""
STORAGE_VERSION = "v1beta1"
"""The version the API server writes to etcd: ToolHive's current shapes."""
STORAGE_API_VERSION = f"{GROUP}/{STORAGE_VERSION}"
"""What the operator reads, watches and writes (and names in owner references): the API server
serves it from etcd as stored, without calling the conversion webhook."""
SERVED_VERSIONS: tuple[str, ...] = ("v1alpha1", "v1beta1")
SERVED_API_VERSIONS: tuple[str, ...] = tuple(f"{GROUP}/{v}" for v in SERVED_VERSIONS)


class ConversionError(ValueError):
    """An object that cannot be converted: `path` names the field (in the source version)."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class Change(Protocol):
    """One difference between the hub shape and a newer version's shape."""

    def up(self, obj: dict[str, Any]) -> None:
        """Hub → version, in place."""

    def down(self, obj: dict[str, Any]) -> None:
        """Version → hub, in place; raises ConversionError naming the field when the shape is wrong."""

    def schema(self, root: dict[str, Any]) -> None:
        """Rewrite the hub's OpenAPI schema (the CRD's openAPIV3Schema) into the version's, in place."""

    def field_path(self, hub_path: str) -> str:
        """The version's name for a field path of the hub (for error messages)."""


def _split(path: str) -> list[str]:
    return path.split(".")


def _parent(obj: dict[str, Any], parts: list[str], create: bool = False) -> dict[str, Any] | None:
    node: Any = obj
    for part in parts[:-1]:
        if not isinstance(node, dict):
            return None
        if part not in node and create:
            node[part] = {}
        node = node.get(part)
    return node if isinstance(node, dict) else None


def _schema_node(root: dict[str, Any], parts: list[str]) -> dict[str, Any]:
    node = root
    for part in parts:
        node = node["properties"][part]
    return node


def _rules_mention(node: dict[str, Any], name: str) -> bool:
    return any(f"self.{name}" in rule.get("rule", "") for rule in node.get("x-kubernetes-validations", ()))


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


@dataclass(frozen=True)
class NameRef:
    """A string naming another object in the hub becomes `{name: ...}` (ToolHive's `groupRef`)."""

    path: str

    def up(self, obj: dict[str, Any]) -> None:
        parts = _split(self.path)
        parent = _parent(obj, parts)
        if parent is not None and isinstance(parent.get(parts[-1]), str):
            parent[parts[-1]] = {"name": parent[parts[-1]]}

    def down(self, obj: dict[str, Any]) -> None:
        parts = _split(self.path)
        parent = _parent(obj, parts)
        if parent is None or parts[-1] not in parent:
            return
        value = parent[parts[-1]]
        if not isinstance(value, dict):
            raise ConversionError(self.path, "must be an object with `name`")
        extra = sorted(set(value) - {"name"})
        if extra:
            raise ConversionError(f"{self.path}.{extra[0]}", "unknown field")
        if not isinstance(value.get("name"), str):
            raise ConversionError(f"{self.path}.name", "required string")
        parent[parts[-1]] = value["name"]

    def schema(self, root: dict[str, Any]) -> None:
        parts = _split(self.path)
        parent = _schema_node(root, parts[:-1])
        hub = parent["properties"][parts[-1]]
        name = {k: v for k, v in hub.items() if k not in ("description", "default")}
        name["description"] = "Name of the referenced object."
        parent["properties"][parts[-1]] = {
            "type": "object",
            "description": hub.get("description", ""),
            "properties": {"name": name},
            "required": ["name"],
        }

    def field_path(self, hub_path: str) -> str:
        return f"{self.path}.name" if hub_path == self.path else hub_path


@dataclass(frozen=True)
class Move:
    """A field that lives at `hub` in the hub shape and at `to` in the version (a rename or a move).

    `prune`: the hub parent of the field exists only to hold it in the version (VirtualMCPServer's
    `config`, required in the hub for `config.groupRef`): up drops it when the move empties it and
    the version's schema stops requiring it; down creates it again. `config: {}` and no `config`
    mean the same (every field defaulted), so this loses nothing.
    """

    hub: str
    to: str
    prune: bool = False

    def up(self, obj: dict[str, Any]) -> None:
        self._move(obj, self.hub, self.to)
        if self.prune:
            parts = _split(self.hub)[:-1]
            holder = _parent(obj, parts)
            if holder is not None and holder.get(parts[-1]) == {}:
                holder.pop(parts[-1])

    def down(self, obj: dict[str, Any]) -> None:
        self._move(obj, self.to, self.hub)

    @staticmethod
    def _move(obj: dict[str, Any], source: str, target: str) -> None:
        src_parts, dst_parts = _split(source), _split(target)
        src = _parent(obj, src_parts)
        if src is None or src_parts[-1] not in src:
            return
        dst = _parent(obj, dst_parts, create=True)
        if dst is None:
            raise ConversionError(".".join(dst_parts[:-1]), "must be an object")
        if dst_parts[-1] in dst:
            raise ConversionError(source, f"cannot be converted: {target} is set too")
        dst[dst_parts[-1]] = src.pop(src_parts[-1])

    def schema(self, root: dict[str, Any]) -> None:
        src_parts, dst_parts = _split(self.hub), _split(self.to)
        src = _schema_node(root, src_parts[:-1])
        dst = _schema_node(root, dst_parts[:-1])
        # A CEL rule of the old parent naming the field would no longer compile on the API server.
        if _rules_mention(src, src_parts[-1]):
            raise ValueError(f"{self.hub} is named by a CEL rule of its parent; it cannot move")
        node = src["properties"].pop(src_parts[-1])
        dst.setdefault("properties", {})[dst_parts[-1]] = node
        if src_parts[-1] in src.get("required", ()):
            src["required"] = [r for r in src["required"] if r != src_parts[-1]]
            if not src["required"]:
                src.pop("required")
            dst["required"] = [*dst.get("required", ()), dst_parts[-1]]
        if self.prune and len(src_parts) > 1:
            holder = _schema_node(root, src_parts[:-2])
            holder["required"] = [r for r in holder.get("required", ()) if r != src_parts[-2]]
            if not holder["required"]:
                holder.pop("required")

    def field_path(self, hub_path: str) -> str:
        if self.prune and hub_path == self.hub.rsplit(".", 1)[0]:
            # The pruned holder is missing: in the version, that is the moved field missing.
            return self.to
        if _under(hub_path, self.hub):
            return self.to + hub_path[len(self.hub) :]
        return hub_path


def convert(document: dict[str, Any], changes: tuple[Change, ...], to_version: str) -> dict[str, Any]:
    """`document` (any served version) as `to_version`; only the apiVersion changes for a kind without changes.

    Raises ConversionError (naming the field) for an unknown version or a shape the version forbids.
    """
    obj = copy.deepcopy(document)
    api_version = str(obj.get("apiVersion", ""))
    source = api_version.removeprefix(f"{GROUP}/")
    if api_version not in SERVED_API_VERSIONS:
        raise ConversionError("apiVersion", f"must be one of {', '.join(SERVED_API_VERSIONS)}")
    if to_version not in SERVED_VERSIONS:
        raise ConversionError("apiVersion", f"cannot convert to {to_version!r}")
    if source != to_version:
        # Every version converts through the hub: down from the source, up to the target.
        if source != HUB_VERSION:
            for change in reversed(changes):
                change.down(obj)
        if to_version != HUB_VERSION:
            for change in changes:
                change.up(obj)
    obj["apiVersion"] = f"{GROUP}/{to_version}"
    return obj


def version_schema(hub_schema: dict[str, Any], changes: tuple[Change, ...], version: str) -> dict[str, Any]:
    """The OpenAPI schema of `version`, derived from the hub's."""
    if version == HUB_VERSION:
        return hub_schema
    schema = copy.deepcopy(hub_schema)
    for change in changes:
        change.schema(schema)
    return schema


def version_field_path(hub_path: str, changes: tuple[Change, ...], version: str) -> str:
    """How `version` names a field path the hub's validation reported."""
    if version == HUB_VERSION:
        return hub_path
    path = hub_path
    for change in changes:
        path = change.field_path(path)
    return path


def version_json_path(json_path: str, changes: tuple[Change, ...], version: str) -> str:
    """A printer column's JSONPath (`.spec.x`) in `version`."""
    if not json_path.startswith(".spec."):
        return json_path
    return "." + version_field_path(json_path[1:], changes, version)
