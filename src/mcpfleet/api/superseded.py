"""Superseded fields: an old place of a field that a version still accepts, read as the current one.

ToolHive's v1beta1 VirtualMCPServer keeps fields its operator fills from newer ones (`spec.config.groupRef`
from `spec.groupRef`, `spec.config.name` from `metadata.name`). A ToolHive manifest that sets them must
apply here too, so each such field is a `Superseded` change of the kind (`mcpfleet.api.versions`): the
version's schema accepts it, converting down reads it as the current field, and

- a value that differs from the current field's is refused, naming both, by a CEL rule on the API server
  and by the conversion locally (the same words on both platforms);
- the current field may be left out when the old one is given (ToolHive's manifests do both);
- `warnings` lists each old field a document sets: `mcpfleet up` prints them, the operator posts them
  as a Warning event (reason SupersededField) on the object, once per generation.

The hub (the models) has only the current field, so converting up never writes the old one back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpfleet.api.versions import HUB_VERSION, Change, ConversionError

SUPERSEDED_FIELD = "SupersededField"
"""Reason of the operator's Warning event naming the superseded fields an object sets."""


def _get(obj: dict[str, Any], path: str) -> Any:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _set(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = obj
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConversionError(part, "must be an object")
        node = child
    node[parts[-1]] = value


def _pop(obj: dict[str, Any], path: str) -> None:
    parts = path.split(".")
    parent = _get(obj, ".".join(parts[:-1])) if len(parts) > 1 else obj
    if isinstance(parent, dict):
        parent.pop(parts[-1], None)


def _schema_at(root: dict[str, Any], path: str) -> dict[str, Any]:
    node = root
    for part in path.split(".") if path else ():
        node = node["properties"][part]
    return node


@dataclass(frozen=True)
class Superseded:
    """`old` (a path in the version) is accepted and read as `current` (a path in the same version).

    `node`: the old field's OpenAPI schema. `anchor`: the path (in the version) whose CEL rules see
    both fields; `cel`: the rule, true when they agree or one is unset, written relative to `anchor`.
    `optional`: the name of a required property under `anchor` that the old field may stand in for;
    `present`: the CEL test (relative to `anchor`) that one of the two is given. `compared`: for an
    object, the keys that must agree (a key the old one lacks takes its value from `defaults`, else
    is not compared; the current object may hold more, e.g. a password reference); empty: the
    whole values must be equal.
    """

    old: str
    current: str
    node: dict[str, Any]
    anchor: str
    cel: str
    optional: str | None = None
    present: str | None = None
    compared: tuple[str, ...] = ()
    defaults: tuple[tuple[str, Any], ...] = ()

    @property
    def conflict(self) -> str:
        return f"{self.old} and {self.current} differ: set only {self.current} ({self.old} is superseded)"

    def up(self, obj: dict[str, Any]) -> None:
        """The hub has only the current field: nothing to write back."""

    def down(self, obj: dict[str, Any]) -> None:
        old = _get(obj, self.old)
        if old is None:
            return
        current = _get(obj, self.current)
        if current is None:
            _set(obj, self.current, old)
        elif not self._agree(old, current):
            raise ConversionError(self.old, self.conflict)
        _pop(obj, self.old)

    def _agree(self, old: Any, current: Any) -> bool:
        if not self.compared:
            return bool(old == current)
        if not isinstance(old, dict) or not isinstance(current, dict):
            raise ConversionError(self.old, "must be an object")
        defaults = dict(self.defaults)
        return all(
            old.get(key, defaults.get(key)) == current.get(key, defaults.get(key))
            for key in self.compared
            if key in old or key in defaults
        )

    def schema(self, root: dict[str, Any]) -> None:
        parts = self.old.split(".")
        parent = _schema_at(root, ".".join(parts[:-1]))
        parent.setdefault("properties", {})[parts[-1]] = dict(self.node)
        anchor = _schema_at(root, self.anchor)
        rules = anchor.setdefault("x-kubernetes-validations", [])
        rules.append({"rule": self.cel, "message": self.conflict})
        if self.optional is not None and self.present is not None:
            anchor["required"] = [r for r in anchor.get("required", ()) if r != self.optional]
            if not anchor["required"]:
                anchor.pop("required")
            rules.append({"rule": self.present, "message": f"{self.current} is required"})

    def field_path(self, hub_path: str) -> str:
        return hub_path

    def warning(self) -> str:
        return f"{self.old} is superseded: read as {self.current}; set {self.current} instead"


@dataclass(frozen=True)
class Deprecated:
    """A field both versions have, still honoured, that ToolHive deprecates for `instead`: only warned
    about (a v1beta1 document that sets it)."""

    path: str
    instead: str

    def up(self, obj: dict[str, Any]) -> None:
        """Same shape in both versions."""

    def down(self, obj: dict[str, Any]) -> None:
        """Same shape in both versions."""

    def schema(self, root: dict[str, Any]) -> None:
        """Same schema in both versions."""

    def field_path(self, hub_path: str) -> str:
        return hub_path

    def warning(self) -> str:
        return f"{self.path} is deprecated: set {self.instead} instead"


def warnings(document: dict[str, Any], changes: tuple[Change, ...], version: str) -> list[str]:
    """Every superseded field `document` (a manifest of `version`) sets, as a warning to show its author."""
    if version == HUB_VERSION:
        return []
    found = []
    for change in changes:
        if isinstance(change, Superseded) and _get(document, change.old) is not None:
            found.append(change.warning())
        elif isinstance(change, Deprecated) and _get(document, change.path) is not None:
            found.append(change.warning())
    return found
