"""The legacy ToolHive registry file (`servers{}` + `remote_servers{}`) and its mapping to server.json.

Mapping (both directions, so every entry round-trips):
- key `fetch` → name `io.github.stacklok/fetch` (reverse-DNS, ToolHive's publisher namespace);
- container `image` → `packages[{registryType: oci, identifier: image, transport}]`, `env_vars` →
  `environmentVariables`, `args` → positional `packageArguments`;
- remote `url` + `transport` → `remotes[{type, url, headers}]`;
- `repository_url` → `repository{url, source}`; `description` → `description`;
- every other ToolHive field (tier, status, tools, tags, metadata, permissions, provenance, target_port,
  custom_metadata, oauth_config, ...) is kept verbatim under
  `_meta["io.modelcontextprotocol.registry/publisher-provided"]["io.github.stacklok"][<image or url>]`.

Structure (docs/registry.md, "Bad input"): the document is UTF-8 JSON, an object with `servers`
(`remote_servers` optional); an empty table (`{}`, or `[]` as some serialisers write an empty map) is
a legitimately empty registry; a missing `servers` or a table of another type fails the sync. The
fields the conversion reads are type-checked first, so a wrong type names its field.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from mcpfleet.registry.entry import (
    PUBLISHER_META,
    STATUS_ACTIVE,
    STATUS_DEPRECATED,
    TOOLHIVE_NAMESPACE,
    Entry,
    EntryError,
    ParseResult,
)
from mcpfleet.registry.formats.upstream import (
    MAX_DEPTH,
    SERVER_SCHEMA_URL,
    depth,
    json_type,
    validation_error,
)

NAME_PREFIX = f"{TOOLHIVE_NAMESPACE}/"
DEFAULT_VERSION = "1.0.0"
_DESCRIPTION_MAX = 100
_CONTAINER_NATIVE = ("description", "repository_url", "image", "env_vars", "args", "transport")
_REMOTE_NATIVE = ("description", "repository_url", "url", "headers", "transport")
_ENV_KEYS = (("name", "name"), ("description", "description"), ("required", "isRequired"))
_ENV_KEYS_MORE = (("secret", "isSecret"), ("default", "default"))


def _to_input(var: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for theirs, ours in (*_ENV_KEYS, *_ENV_KEYS_MORE):
        if theirs in var:
            out[ours] = var[theirs]
    return out


def _from_input(var: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for theirs, ours in (*_ENV_KEYS, *_ENV_KEYS_MORE):
        if ours in var:
            out[theirs] = var[ours]
    return out


def _image_version(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last or ":" not in last:
        return DEFAULT_VERSION
    tag = last.rsplit(":", 1)[1]
    return DEFAULT_VERSION if tag in ("", "latest") else tag


def _repository(url: str) -> dict[str, str]:
    host = urlsplit(url).hostname or ""
    parts = host.split(".")
    source = parts[-2] if len(parts) >= 2 else (host or "unknown")
    return {"url": url, "source": source}


def _description(text: str, ext: dict[str, Any]) -> str:
    if 1 <= len(text) <= _DESCRIPTION_MAX:
        return text
    # server.json caps descriptions at 100 characters; keep the original for the way back.
    ext["description"] = text
    return (text[: _DESCRIPTION_MAX - 3] + "...") if text else "(no description)"


def toolhive_to_upstream(key: str, entry: dict[str, Any], remote: bool) -> dict[str, Any]:
    """One ToolHive entry (container or remote) as a server.json document."""
    native = _REMOTE_NATIVE if remote else _CONTAINER_NATIVE
    ext = {k: v for k, v in entry.items() if k not in native}
    transport_type = entry.get("transport", "streamable-http" if remote else "stdio")
    server: dict[str, Any] = {
        "$schema": SERVER_SCHEMA_URL,
        "name": NAME_PREFIX + key,
        "title": key,
        "description": _description(str(entry.get("description", "")), ext),
    }
    if isinstance(entry.get("repository_url"), str) and entry["repository_url"]:
        server["repository"] = _repository(entry["repository_url"])
    if remote:
        identifier = str(entry.get("url", ""))
        server["version"] = DEFAULT_VERSION
        remote_doc: dict[str, Any] = {"type": transport_type, "url": identifier}
        if entry.get("headers"):
            remote_doc["headers"] = [_to_input(h) for h in entry["headers"]]
        server["remotes"] = [remote_doc]
    else:
        identifier = str(entry.get("image", ""))
        server["version"] = _image_version(identifier)
        transport: dict[str, Any] = {"type": transport_type}
        if transport_type != "stdio":
            port = entry.get("target_port") or 8080
            path = "sse" if transport_type == "sse" else "mcp"
            transport["url"] = f"http://localhost:{port}/{path}"
        package: dict[str, Any] = {"registryType": "oci", "identifier": identifier, "transport": transport}
        if entry.get("env_vars"):
            package["environmentVariables"] = [_to_input(v) for v in entry["env_vars"]]
        if "args" in entry:
            package["packageArguments"] = [{"type": "positional", "value": a} for a in entry["args"]]
        server["packages"] = [package]
    server["_meta"] = {PUBLISHER_META: {TOOLHIVE_NAMESPACE: {identifier: ext}}}
    return server


def upstream_to_toolhive(server: dict[str, Any]) -> tuple[str, dict[str, Any], bool]:
    """The inverse of `toolhive_to_upstream`: (key, ToolHive entry, is_remote)."""
    name: str = server["name"]
    key = name.split("/", 1)[1] if "/" in name else name
    remote = bool(server.get("remotes")) and not server.get("packages")
    identifier = server["remotes"][0]["url"] if remote else server["packages"][0]["identifier"]
    provided = server.get("_meta", {}).get(PUBLISHER_META, {}).get(TOOLHIVE_NAMESPACE, {})
    entry: dict[str, Any] = dict(provided.get(identifier, {}))
    entry.setdefault("description", server["description"])
    if "repository" in server:
        entry["repository_url"] = server["repository"]["url"]
    if remote:
        remote_doc = server["remotes"][0]
        entry["url"] = remote_doc["url"]
        entry["transport"] = remote_doc["type"]
        if remote_doc.get("headers"):
            entry["headers"] = [_from_input(h) for h in remote_doc["headers"]]
    else:
        package = server["packages"][0]
        entry["image"] = package["identifier"]
        entry["transport"] = package["transport"]["type"]
        if package.get("environmentVariables"):
            entry["env_vars"] = [_from_input(v) for v in package["environmentVariables"]]
        if "packageArguments" in package:
            entry["args"] = [a.get("value", "") for a in package["packageArguments"]]
    return key, entry, remote


class _Object(dict[str, Any]):
    """A JSON object that remembers keys it saw twice (plain dicts silently keep the last one)."""

    duplicates: list[str]


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    obj.duplicates = []
    for k, v in pairs:
        if k in obj:
            obj.duplicates.append(k)
        obj[k] = v
    return obj


_STRING_FIELDS = ("image", "url", "transport", "description", "repository_url")
_LIST_OF_OBJECTS = ("env_vars", "headers")


def _args_problem(where: str, args: Any) -> str | None:
    """`args` must be an array of strings."""
    if not isinstance(args, list):
        return f"{where}.args: expected an array of strings, got {json_type(args)}"
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            return f"{where}.args[{i}]: expected a string, got {json_type(arg)}"
    return None


def _field_problem(where: str, entry: dict[str, Any]) -> str | None:
    """The first field the conversion reads that has the wrong JSON type, named; else None."""
    for name in _STRING_FIELDS:
        if name in entry and not isinstance(entry[name], str):
            return f"{where}.{name}: expected a string, got {json_type(entry[name])}"
    for name in _LIST_OF_OBJECTS:
        if name in entry:
            value = entry[name]
            if not isinstance(value, list):
                return f"{where}.{name}: expected an array of objects, got {json_type(value)}"
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    return f"{where}.{name}[{i}]: expected an object, got {json_type(item)}"
    if "args" in entry and (problem := _args_problem(where, entry["args"])) is not None:
        return problem
    port = entry.get("target_port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        return f"{where}.target_port: expected a port number (1-65535), got {json.dumps(port)[:40]}"
    if depth(entry) > MAX_DEPTH:
        return f"{where}: nested deeper than {MAX_DEPTH} levels"
    return None


def _document(source: str, content: bytes, result: ParseResult) -> dict[str, Any] | None:
    """The top-level object, or None with the structural error recorded."""

    def fail(message: str) -> None:
        result.errors.append(EntryError(source, None, None, message))

    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"invalid JSON: not UTF-8 (byte {exc.start}: {content[exc.start : exc.start + 1]!r})")
        return None
    try:
        doc = json.loads(text, object_pairs_hook=_object)
    except ValueError as exc:
        fail(f"invalid JSON: {exc}")
        return None
    except RecursionError:
        fail("invalid JSON: nested too deeply")
        return None
    if not isinstance(doc, dict):
        fail(f"document: expected a JSON object with servers{{}}, got {json_type(doc)}")
        return None
    if "servers" not in doc:
        fail("servers: required (a ToolHive registry file is an object with servers{})")
        return None
    for section in ("servers", "remote_servers"):
        table = doc.get(section, {})
        if isinstance(table, list) and not table:
            doc[section] = {}  # an empty map some serialisers write as []
        elif not isinstance(table, dict):
            fail(f"{section}: expected an object of name -> entry, got {json_type(table)}")
            return None
    return doc


def parse_toolhive(source: str, content: bytes) -> ParseResult:
    result = ParseResult()
    doc = _document(source, content, result)
    if doc is None:
        return result
    seen: set[str] = set()
    index = 0
    for section, remote in (("servers", False), ("remote_servers", True)):
        table = doc.get(section, {})
        for key in getattr(table, "duplicates", []):
            result.errors.append(
                EntryError(source, None, key, f"{section}.{key}: duplicate name; the last one is used")
            )
        for key, entry in table.items():
            index += 1
            where = f"{section}.{key}"
            if key in seen:
                result.errors.append(
                    EntryError(source, index - 1, key, f"{where}: duplicate name (also in servers); ignored")
                )
                continue
            seen.add(key)
            if not isinstance(entry, dict):
                result.errors.append(EntryError(source, index - 1, key, f"{where}: expected an object"))
                continue
            required = "url" if remote else "image"
            problem = _field_problem(where, entry)
            if problem is None and not entry.get(required):
                problem = f"{where}.{required}: required"
            if problem is not None:
                result.errors.append(EntryError(source, index - 1, key, problem))
                continue
            server = toolhive_to_upstream(key, entry, remote)
            message = validation_error(server)
            if message is not None:
                result.errors.append(
                    EntryError(source, index - 1, key, f"{where}: not convertible ({message})")
                )
                continue
            status = (
                STATUS_DEPRECATED if str(entry.get("status", "")).lower() == "deprecated" else STATUS_ACTIVE
            )
            result.entries.append(Entry(server["name"], server["version"], server, status))
    return result
