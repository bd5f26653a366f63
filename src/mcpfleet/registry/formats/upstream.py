"""The upstream format: server.json documents (2025-12-11 schema), alone, in a list, in the wrapper file
`{"$schema", "version", "meta", "data": {"servers": [...]}}`, or as an API `ServerList` page.

Validation uses a compiled validator (fastjsonschema) because the reference validator costs ~1 ms per
entry, which alone would blow the 2 s budget for a 10,000-entry sync.
"""

from __future__ import annotations

import functools
import json
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


def validation_error(server: Any) -> str | None:
    """None when `server` is a valid server.json document, else a message naming the bad field."""
    try:
        _validator()(server)
    except fastjsonschema.JsonSchemaValueException as exc:
        return str(exc.message).replace("data.", "", 1).replace("data ", "document ", 1)
    return None


def _items(doc: Any) -> list[Any] | str:
    """The list of entries in any accepted layout, or an error message for the whole document."""
    if isinstance(doc, list):
        return doc
    if not isinstance(doc, dict):
        return "expected a JSON object or array"
    if "data" in doc:
        data = doc["data"]
        if not isinstance(data, dict) or not isinstance(data.get("servers"), list):
            return "data.servers: expected an array"
        return list(data["servers"])
    if "servers" in doc:
        if not isinstance(doc["servers"], list):
            return "servers: expected an array"
        return list(doc["servers"])
    # Anything else is taken as one server.json document, so its problems are reported field by field.
    return [doc]


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
