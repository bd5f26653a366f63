"""Which fields of a kind name which other kinds, derived from the typed models.

A reference field carries `RefersTo(kind)` in its annotation (`api.meta`). `references(model)` walks
the model's `spec` through nested models, lists and maps and returns each marked field as a
`Reference`: the referenced kind and the wire (camelCase) path to the field, `*` standing for every
item of a list or value of a map. `names_at` reads the names at such a path in a wire-form document,
so a caller holding raw objects (the operator's store) follows the same paths the models declare.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from mcpfleet.api.meta import RefersTo

RefPath = tuple[str, ...]
"""Wire-form keys from `spec` down to a reference field; `*` walks every list item or map value."""

EACH = "*"


@dataclass(frozen=True)
class Reference:
    """A field of a kind's spec that names an object of `kind` in the same namespace."""

    kind: str
    path: RefPath


def references(model: type[BaseModel]) -> tuple[Reference, ...]:
    """Every reference field of `model`'s spec (a Resource: its `spec` field's model), in field order."""
    spec = model.model_fields.get("spec")
    if spec is None:
        return ()
    found: list[Reference] = []
    for spec_model, prefix in _models_in(spec.annotation, ()):
        _walk(spec_model, prefix, found, seen=frozenset())
    return tuple(found)


def _walk(model: type[BaseModel], prefix: RefPath, found: list[Reference], seen: frozenset[type]) -> None:
    if model in seen:  # a recursive model (workflow steps): its references are already listed
        return
    for field_name, info in model.model_fields.items():
        path = (*prefix, info.alias or field_name)
        marks = [m for m in info.metadata if isinstance(m, RefersTo)]
        if marks:
            found += [Reference(mark.kind, (*path, *_items(info.annotation))) for mark in marks]
            continue
        for nested, inner in _models_in(info.annotation, path):
            _walk(nested, inner, found, seen | {model})


def _items(annotation: Any) -> RefPath:
    """`*` when the annotation is a list or map of references (e.g. `compositeToolRefs`)."""
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, dict):
        return (EACH,)
    if origin is typing.Union or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                return _items(arg)
    return ()


def _models_in(annotation: Any, path: RefPath) -> list[tuple[type[BaseModel], RefPath]]:
    """The models an annotation can hold, each with the path to it (through Optional, list, map)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, path)]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _models_in(args[0], path)
    if origin in (list, tuple):
        return [m for arg in args if arg is not Ellipsis for m in _models_in(arg, (*path, EACH))]
    if origin is dict:
        return _models_in(args[1], (*path, EACH)) if len(args) == 2 else []
    if origin is typing.Union or isinstance(annotation, types.UnionType):
        return [m for arg in args for m in _models_in(arg, path)]
    return []


def names_at(document: Any, path: RefPath) -> list[str]:
    """The names found at `path` in a wire-form document: a `{name: ...}` object's name, or a string."""
    if not path:
        if isinstance(document, str):
            return [document] if document else []
        name = document.get("name") if isinstance(document, dict) else None
        return [name] if isinstance(name, str) and name else []
    head, rest = path[0], path[1:]
    if head == EACH:
        if isinstance(document, dict):
            items = list(document.values())
        elif isinstance(document, list):
            items = document
        else:
            return []
        return [n for item in items for n in names_at(item, rest)]
    if not isinstance(document, dict) or head not in document:
        return []
    return names_at(document[head], rest)
