"""What a publish (and its dry run, `POST /v0.1/validate`) checks, beyond the server.json schema that
synced entries are held to: the official registry's publish-time rules (issue 32 item 6, issue 27).

Owns the request body reader of the publishing API (`read_json`: Content-Type, size, JSON, and no
integer beyond 64 bits — orjson would read it as a float and the registry would serve a different
number than was published) and `publish_problem`, the rules:

- `$schema` present and the schema this registry validates against;
- no top-level field the schema does not define (the removed `status` included);
- `_meta` holds only `io.modelcontextprotocol.registry/publisher-provided`, at most 4 KB serialised:
  the `io.modelcontextprotocol.registry/official` block is the registry's own, never a publisher's;
- the name does not end in `.` (neither part);
- a non-blank `title`;
- `websiteUrl`, icon `src` and remote URLs are `https://` (the schema's own rule for icons), and a
  remote is not on a loopback or unspecified address;
- every `{variable}` of a remote URL is one of its `variables`; of a package transport URL, one of
  the package's argument names / value hints or environment variable names;
- a repository on a known forge (`github`, `gitlab`) has a URL on that forge's host;
- package versions are versions, not ranges.

Every failure is a `Problem` naming the field (`body.<path>`). Kept free of the store and the
token stack so the dry run loads neither.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import orjson

from mcpfleet.registry.api import problem
from mcpfleet.registry.entry import OFFICIAL_META, PUBLISHER_META, Entry
from mcpfleet.registry.formats.upstream import (
    SERVER_SCHEMA_URL,
    server_schema,
    validation_problem,
    version_error,
)

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

MAX_PUBLISHER_META = 4096
"""Bytes of the publisher-provided `_meta` block, serialised (the official limit)."""
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
"""The integers orjson reads exactly (signed and unsigned 64 bits); beyond, it reads a float."""
_FORGES = {"github": "github.com", "gitlab": "gitlab.com"}
_TEMPLATE = re.compile(r"\{([^{}]*)\}")


class Problem(Exception):
    """An answer other than success: status, detail, optional per-field errors and headers."""

    def __init__(
        self,
        status: int,
        detail: str,
        location: str | None = None,
        value: Any = None,
        headers: Headers | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = [{"message": detail, "location": location, "value": value}] if location else None
        self.headers = headers or []


async def send_answer(send: Send, answer: Awaitable[tuple[int, bytes]]) -> None:
    """Send `answer`'s (status, JSON body), or the problem document of the `Problem` it raised; the
    publishing operations' answers are never cached."""
    try:
        status, body = await answer
        headers: Headers = [(b"content-type", b"application/json")]
    except Problem as exc:
        status, body = exc.status, problem(exc.status, exc.detail, exc.errors)
        headers = [(b"content-type", b"application/problem+json"), *exc.headers]
    headers += [(b"cache-control", b"no-cache"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def read_json(scope: dict[str, Any], receive: Receive, limit: int) -> Any:
    """The request's JSON body: 415 for another content type, 413 over `limit` bytes, 400 when it
    is not JSON, 422 for an integer orjson cannot hold (naming where it is)."""
    content_type = b""
    length: int | None = None
    for key, value in scope["headers"]:
        if key == b"content-type":
            content_type = value.split(b";", 1)[0].strip().lower()
        elif key == b"content-length":
            length = int(value) if value.isdigit() else None
    if content_type and content_type != b"application/json" and not content_type.endswith(b"+json"):
        raise Problem(
            415,
            "Expected a JSON body (Content-Type: application/json)",
            "header.Content-Type",
            content_type.decode("latin-1"),
        )
    too_large = f"The body is larger than {limit} bytes"
    if length is not None and length > limit:
        raise Problem(413, too_large, "body", length)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Problem(400, "The client went away before sending the body", "body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Problem(413, too_large, "body", size)
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    return parse_body(b"".join(chunks))


def parse_body(body: bytes) -> Any:
    """A request body as JSON: 400 when it is not JSON, 422 for an integer beyond 64 bits (orjson
    would read it as a float, and the registry would serve a number nobody published)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        # An integer too large even for a double is a JSON error to orjson: name it like the others.
        _refuse_huge_integer(body)
        raise Problem(400, f"The body is not valid JSON: {exc}", "body") from None
    if _has_float(document):  # only then can an integer have been read as one (rare in server.json)
        _refuse_huge_integer(body)
    return document


def _refuse_huge_integer(body: bytes) -> None:
    where = _huge_integer(body)
    if where is not None:
        raise Problem(
            422,
            f"{where or 'body'}: integer out of range (at most 64 bits)",
            f"body.{where}" if where else "body",
        )


class _Huge(str):
    """An integer literal beyond 64 bits, as `_huge_integer` parses it."""


def _parse_int(text: str) -> int | str:
    # Length first: int() of a huge literal is slow (and refused past 4300 digits).
    if len(text) > 21:
        return _Huge(text)
    value = int(text)
    return value if _INT_MIN <= value <= _INT_MAX else _Huge(text)


def _has_float(document: Any) -> bool:
    return any(isinstance(value, float) for _path, value in _walk(document))


def _huge_integer(body: bytes) -> str | None:
    """The path of the first integer beyond 64 bits in `body` (`` for the document itself)."""
    try:
        document = json.loads(body, parse_int=_parse_int)
    except (ValueError, RecursionError):
        return None  # orjson read it; whatever the standard parser dislikes is not a huge integer
    return next((path for path, value in _walk(document) if isinstance(value, _Huge)), None)


def _walk(document: Any) -> Iterator[tuple[str, Any]]:
    """(path, value) of every value in `document`, depth first, without recursion."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        path, value = stack.pop()
        yield path, value
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))


def entry_of(document: Any) -> Entry:
    """The entry a publish adds, or the first `Problem` with it (schema, then the publish rules)."""
    if not isinstance(document, dict):
        raise Problem(422, "The body must be a server.json object", "body")
    found = validation_problem(document)
    if found is not None:
        path, message = found
        raise Problem(422, f"server.json: {message}", f"body.{path}" if path else "body", _at(document, path))
    problem = publish_problem(document)
    if problem is not None:
        path, message = problem
        raise Problem(422, f"server.json: {path}: {message}", f"body.{path}", _at(document, path))
    return Entry(document["name"], document["version"], document)


@functools.cache  # (was read and parsed from the package at every publish: ~1 ms each)
def _top_level_fields() -> frozenset[str]:
    return frozenset(server_schema()["definitions"]["ServerDetail"]["properties"])


def publish_problem(document: dict[str, Any]) -> tuple[str, str] | None:
    """(path, message) of the first publish rule `document` (schema-valid) breaks, else None."""
    for check in (_schema_and_fields, _meta_problem, _name_and_title, _url_problem, _package_problem):
        found = check(document)
        if found is not None:
            return found
    return None


def _schema_and_fields(document: dict[str, Any]) -> tuple[str, str] | None:
    schema = document.get("$schema")
    if schema is None:
        return "$schema", f"required: the server.json schema URL ({SERVER_SCHEMA_URL})"
    if schema != SERVER_SCHEMA_URL:
        return "$schema", f"unknown schema: this registry validates against {SERVER_SCHEMA_URL}"
    allowed = _top_level_fields()
    unknown = sorted(key for key in document if key not in allowed)
    if unknown:
        return unknown[0], "unknown field (not part of the server.json schema)"
    return None


def _meta_problem(document: dict[str, Any]) -> tuple[str, str] | None:
    meta = document.get("_meta")
    if meta is None:
        return None
    for key in sorted(meta):
        if key == OFFICIAL_META:
            return f"_meta.{key}", "is the registry's own metadata: a publisher may not set it"
        if key != PUBLISHER_META:
            return f"_meta.{key}", f"unknown key: only {PUBLISHER_META} may be published"
    provided = meta.get(PUBLISHER_META)
    if provided is not None and len(orjson.dumps(provided)) > MAX_PUBLISHER_META:
        return f"_meta.{PUBLISHER_META}", f"larger than {MAX_PUBLISHER_META} bytes"
    return None


def _name_and_title(document: dict[str, Any]) -> tuple[str, str] | None:
    name: str = document["name"]
    if any(part.endswith(".") for part in name.split("/")):
        return "name", "must not end in '.'"
    title = document.get("title")
    if isinstance(title, str) and not title.strip():
        return "title", "must not be blank"
    return None


def _loopback(host: str) -> bool:
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _url_problem(document: dict[str, Any]) -> tuple[str, str] | None:
    urls: list[tuple[str, Any]] = [("websiteUrl", document.get("websiteUrl"))]
    urls += [(f"icons[{i}].src", icon.get("src")) for i, icon in enumerate(document.get("icons") or [])]
    for path, url in urls:
        if isinstance(url, str) and not url.lower().startswith("https://"):
            return path, "must be an https:// URL"
    for i, remote in enumerate(document.get("remotes") or []):
        path, url = f"remotes[{i}].url", remote.get("url", "")
        if not url.lower().startswith("https://"):
            return path, "must be an https:// URL"
        if _loopback(urlsplit(_TEMPLATE.sub("x", url)).hostname or ""):
            return path, "must not point at a loopback or unspecified address"
        undefined = _undefined(url, set(remote.get("variables") or {}))
        if undefined is not None:
            return path, f"uses the undefined variable {{{undefined}}} (not in its variables)"
    repository = document.get("repository")
    if isinstance(repository, dict):
        host = _FORGES.get(str(repository.get("source", "")).lower())
        url = repository.get("url")
        if host is not None and isinstance(url, str) and (urlsplit(url).hostname or "").lower() != host:
            return "repository.url", f"must be on {host} for source {repository['source']!r}"
    return None


def _undefined(url: str, defined: set[str]) -> str | None:
    return next((name for name in _TEMPLATE.findall(url) if name not in defined), None)


def _package_names(package: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for key in ("environmentVariables", "packageArguments", "runtimeArguments"):
        for item in package.get(key) or []:
            for field in ("name", "valueHint"):
                if isinstance(item.get(field), str):
                    names.add(item[field])
    return names


def _package_problem(document: dict[str, Any]) -> tuple[str, str] | None:
    for i, package in enumerate(document.get("packages") or []):
        version = package.get("version")
        if isinstance(version, str):
            message = version_error(version)
            if message is not None:
                return f"packages[{i}].version", message.removeprefix("version: ")
        url = (package.get("transport") or {}).get("url")
        if isinstance(url, str):
            undefined = _undefined(url, _package_names(package))
            if undefined is not None:
                return (
                    f"packages[{i}].transport.url",
                    f"uses the undefined variable {{{undefined}}} (no argument or environment "
                    "variable of the package has that name)",
                )
    return None


def _at(document: Any, path: str) -> Any:
    """The value at a path (`packages[0].version`), None when absent; only scalars are echoed back."""
    value = document
    for part in re.findall(r"[^.\[\]]+", path):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    if isinstance(value, dict | list):
        return None
    return value


async def validate(scope: dict[str, Any], receive: Receive, limit: int) -> tuple[int, bytes]:
    """`POST /v0.1/validate`, the publish dry run: the same checks as a publish (body, schema, the
    publish rules), nothing stored, no token needed. 200 `{"valid": true, "name", "version"}`, or
    the 4xx a publish of that body would get. Namespace grants and duplicate versions are the
    publish's own to check (they depend on the caller and on the stored catalogue)."""
    if scope["method"] != "POST":
        raise Problem(405, "Method not allowed", headers=[(b"allow", b"POST")])
    entry = entry_of(await read_json(scope, receive, limit))
    return 200, orjson.dumps({"valid": True, "name": entry.name, "version": entry.version})
