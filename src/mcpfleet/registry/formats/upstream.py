"""The upstream format: server.json documents (2025-12-11 schema), alone, in a list, in the wrapper file
`{"$schema", "version", "meta", "data": {"servers": [...]}}`, or as an API `ServerList` page.

Validation uses a compiled validator (fastjsonschema) because the reference validator costs ~1 ms per
entry, which alone would blow the 2 s budget for a 10,000-entry sync. Beyond the schema, an entry is
refused when it nests deeper than `MAX_DEPTH` (the catalogue is served with orjson, which writes at
most 255 levels) or when its version is not one version: empty, `latest` (a path segment of the API)
or a range (`^1.2`, `>=1`, `1.x` — the schema's own description says ranges are rejected).

Structure (see docs/registry.md, "Bad input"): the container of the entries must be there and be an
array — an empty one (or an empty object, which some serialisers write for an empty list) is a
legitimately empty registry; anything else is a structural error that fails the sync.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from importlib import resources
from typing import Any

import fastjsonschema
import orjson

from mcpfleet.registry.entry import (
    OFFICIAL_META,
    STATUS_ACTIVE,
    STATUS_DELETED,
    STATUS_DEPRECATED,
    Entry,
    EntryError,
    ParseResult,
)

SERVER_SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
MAX_DEPTH = 64
"""Deepest nesting of arrays / objects accepted in one entry (server.json needs about 6)."""
_RANGE = re.compile(r"^\s*(\^|~|[<>]=?|=)|\|\||\s-\s|(^|\.)[xX*](\.|$)")
"""What marks a version range rather than a version (npm / semver range syntax)."""


def server_schema() -> dict[str, Any]:
    """The shipped copy of the upstream server.json schema (2025-12-11)."""
    text = resources.files("mcpfleet.registry.schemas").joinpath("server.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.cache
def _validator() -> Callable[[Any], Any]:
    # Compiled once per process: the schema is package data, so this is a pure function of the install.
    # use_default=False: validation must never write schema defaults into the documents it checks.
    validate: Callable[[Any], Any] = fastjsonschema.compile(server_schema(), use_default=False)
    return validate


def depth(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        level += 1
        if level > deepest:
            deepest = level
            if deepest > MAX_DEPTH:
                return deepest  # enough to refuse it; no need to walk the rest
        stack.extend((child, level) for child in children)
    return deepest


def version_error(version: str) -> str | None:
    """Why `version` is not one version, or None."""
    if not version.strip():
        return "version: must not be empty"
    if version.strip() != version or any(ord(c) < 32 for c in version):
        return "version: must not hold spaces around it or control characters"
    if version == "latest":
        return "version: 'latest' is not a version (it names the newest one in the API)"
    if _RANGE.search(version):
        return f"version: {version!r} is a version range, not a version"
    return None


def validation_problem(server: Any) -> tuple[str, str] | None:
    """None when `server` is a valid server.json document, else (the bad field's path, e.g.
    `packages[0].version` or `` for the document itself, a message naming it)."""
    if depth(server) > MAX_DEPTH:
        return "", f"document: nested deeper than {MAX_DEPTH} levels"
    try:
        _validator()(server)
    except fastjsonschema.JsonSchemaValueException as exc:
        path = str(exc.name or "data").removeprefix("data").removeprefix(".")
        return path, str(exc.message).replace("data.", "", 1).replace("data ", "document ", 1)
    message = version_error(server["version"])
    return ("version", message) if message is not None else None


def validation_error(server: Any) -> str | None:
    """None when `server` is a valid server.json document, else a message naming the bad field."""
    problem = validation_problem(server)
    return problem[1] if problem is not None else None


def _items(doc: Any) -> list[Any] | str:
    """The list of entries in any accepted layout, or an error message for the whole document."""
    if isinstance(doc, list):
        return doc
    if not isinstance(doc, dict):
        return "expected a JSON object or array"
    if "data" in doc:
        data = doc["data"]
        if not isinstance(data, dict):
            return f"data: expected an object with servers[], got {json_type(data)}"
        return _array(data, "servers", "data.servers")
    if "servers" in doc:
        return _array(doc, "servers", "servers")
    # Anything else is taken as one server.json document, so its problems are reported field by field.
    return [doc]


def json_type(value: Any) -> str:
    """The JSON type name of a parsed value, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _array(holder: dict[str, Any], key: str, where: str) -> list[Any] | str:
    """`holder[key]` as the list of entries; an empty object counts as an empty list."""
    if key not in holder:
        return f"{where}: required"
    value = holder[key]
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict) and not value:
        return []
    return f"{where}: expected an array, got {json_type(value)}"


def entries_from_items(source: str, items: list[Any], result: ParseResult) -> None:
    """Validate items (server.json or `{server, _meta}`) into `result`, one error per bad entry."""
    seen: dict[tuple[str, str], int] = {}
    for index, item in enumerate(items):
        status = STATUS_ACTIVE
        server = item
        if isinstance(item, dict) and isinstance(item.get("server"), dict):
            server = item["server"]
            meta = item.get("_meta")
            official = meta.get(OFFICIAL_META) if isinstance(meta, dict) else None
            if isinstance(official, dict) and official.get("status") in (STATUS_DEPRECATED, STATUS_DELETED):
                status = official["status"]
        name = server.get("name") if isinstance(server, dict) else None
        label = name if isinstance(name, str) else None
        if not isinstance(server, dict):
            result.errors.append(EntryError(source, index, None, "entry is not a JSON object"))
            continue
        message = validation_error(server)
        if message is not None:
            result.errors.append(EntryError(source, index, label, f"schema violation: {message}"))
            continue
        if status == STATUS_DELETED:
            continue
        key = (server["name"], server["version"])
        if key in seen:
            result.errors.append(
                EntryError(
                    source,
                    index,
                    key[0],
                    f"duplicate entry {key[0]}@{key[1]} (first at index {seen[key]}); later one ignored",
                )
            )
            continue
        seen[key] = index
        result.entries.append(Entry(key[0], key[1], server, status))


def parse_upstream(source: str, content: bytes) -> ParseResult:
    result = ParseResult()
    try:
        doc = orjson.loads(content)
    except orjson.JSONDecodeError as exc:
        result.errors.append(EntryError(source, None, None, f"invalid JSON: {exc}"))
        return result
    items = _items(doc)
    if isinstance(items, str):
        result.errors.append(EntryError(source, None, None, items))
        return result
    entries_from_items(source, items, result)
    return result
