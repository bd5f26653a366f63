"""The registry read API as a plain ASGI handler: the hot path, kept free of framework overhead.

Routes (also under `/v0`): `GET /v0.1/servers`, `GET /v0.1/servers/{serverName}/versions`,
`GET /v0.1/servers/{serverName}/versions/{version}`. Routing works on the raw (still percent-encoded)
path so that `com.example%2Fserver` is one segment; an unencoded `com.example/server` is accepted too.
Every answer carries an ETag; `If-None-Match` gets a 304. Bad parameters get 400 `{error}`, unknown
servers 404 `{error}`; nothing here answers 5xx.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote

import orjson

from mcpfleet.registry.catalogue import BadRequest, Catalogue, Page
from mcpfleet.registry.metrics import RegistryMetrics

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

PREFIXES = (b"/v0.1/servers", b"/v0/servers")
DEFAULT_LIMIT = 30
MAX_LIMIT = 100
_JSON_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-cache")]


def is_api_path(raw_path: bytes) -> bool:
    for prefix in PREFIXES:
        if raw_path.startswith(prefix) and (len(raw_path) == len(prefix) or raw_path[len(prefix)] in b"/?"):
            return True
    return False


def _bool(params: dict[str, str], name: str) -> bool:
    value = params.get(name)
    if value is None:
        return False
    # Strict on purpose: anything but the two JSON literals is a client error, not a guess.
    if value == "true":
        return True
    if value == "false":
        return False
    raise BadRequest(f"{name}: expected true or false")


def _timestamp(value: str) -> str:
    """RFC 3339 → the store's fixed-width UTC form, or BadRequest."""
    text = value.strip()
    if len(text) < 20 or text[10] not in "Tt ":
        raise BadRequest("updated_since: expected an RFC 3339 timestamp such as 2025-08-07T13:15:04Z")
    try:
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1] in "zZ" else text)
        if parsed.tzinfo is None:
            raise ValueError("no offset")
        return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (ValueError, OverflowError):
        raise BadRequest(
            "updated_since: expected an RFC 3339 timestamp such as 2025-08-07T13:15:04Z"
        ) from None


def _limit(params: dict[str, str]) -> int:
    raw = params.get("limit")
    if raw is None:
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except ValueError:
        raise BadRequest(f"limit: expected an integer between 1 and {MAX_LIMIT}") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit: must be between 1 and {MAX_LIMIT}")
    return limit


def _etag_matches(header: bytes | None, etag: str) -> bool:
    if header is None:
        return False
    text = header.decode("latin-1")
    if text.strip() == "*":
        return True
    bare = etag.strip('"')
    return any(tag.strip().removeprefix("W/").strip('"') == bare for tag in text.split(","))


class RegistryApi:
    """Answers the read routes from the current `Catalogue` (swapped atomically by the service)."""

    def __init__(self, catalogue: Callable[[], Catalogue], metrics: RegistryMetrics) -> None:
        self._catalogue = catalogue
        self._metrics = metrics
        self._children: dict[tuple[str, int], Any] = {}
        self._timers: dict[str, Any] = {}

    def _observe(self, route: str, code: int, started: float) -> None:
        child = self._children.get((route, code))
        if child is None:
            child = self._children[(route, code)] = self._metrics.requests.labels(route, str(code))
        child.inc()
        timer = self._timers.get(route)
        if timer is None:
            timer = self._timers[route] = self._metrics.request_seconds.labels(route)
        timer.observe(time.perf_counter() - started)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        raw = scope.get("raw_path") or scope["path"].encode()
        path = raw.split(b"?", 1)[0]
        route, status, headers, body = self._answer(scope, path)
        if status == 304:
            # No Content-Length: in a 304 it would have to be the length of the 200 body (RFC 9110),
            # and the server would then wait for that many bytes.
            body = b""
        else:
            # HEAD: the length GET would send, and no body.
            headers.append((b"content-length", str(len(body)).encode()))
            if scope["method"] == "HEAD":
                body = b""
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        self._observe(route, status, started)

    def _answer(self, scope: Scope, path: bytes) -> tuple[str, int, list[tuple[bytes, bytes]], bytes]:
        prefix = PREFIXES[0] if path.startswith(PREFIXES[0]) else PREFIXES[1]
        rest = path[len(prefix) :].strip(b"/")
        segments = [unquote(s.decode("latin-1"), errors="replace") for s in rest.split(b"/")] if rest else []
        route, target = _route(segments)
        if route == "unknown":
            return route, 404, list(_JSON_HEADERS), orjson.dumps({"error": "Not found"})
        if scope["method"] not in ("GET", "HEAD"):
            headers = [*_JSON_HEADERS, (b"allow", b"GET, HEAD")]
            return (
                route,
                405,
                headers,
                orjson.dumps({"error": "Method not allowed: this registry is read-only"}),
            )
        query = scope.get("query_string", b"").decode("latin-1")
        params: dict[str, str] = {}
        for key, value in parse_qsl(query, keep_blank_values=True, encoding="utf-8", errors="replace"):
            params.setdefault(key, value)
        catalogue = self._catalogue()
        page: Page | None
        try:
            include_deleted = _bool(params, "include_deleted")
            if route == "list":
                since = params.get("updated_since")
                page = catalogue.list_page(
                    params.get("cursor") or None,
                    _limit(params),
                    params.get("search") or None,
                    _timestamp(since) if since is not None else None,
                    params.get("version") or None,
                    include_deleted,
                )
            elif route == "versions":
                page = catalogue.versions_page(target[0], include_deleted)
            else:
                page = catalogue.get(target[0], target[1], include_deleted)
        except BadRequest as exc:
            return route, 400, list(_JSON_HEADERS), orjson.dumps({"error": str(exc)})
        if page is None:
            message = "Server not found" if route == "versions" else "Server version not found"
            return route, 404, list(_JSON_HEADERS), orjson.dumps({"error": message})
        headers = [*_JSON_HEADERS, (b"etag", page.etag.encode())]
        if _etag_matches(_header(scope, b"if-none-match"), page.etag):
            return route, 304, headers, b""
        return route, 200, headers, page.body


_TEMPLATES = {
    "list": "/servers",
    "versions": "/servers/{serverName}/versions",
    "get": "/servers/{serverName}/versions/{version}",
}


def route_template(raw_path: bytes) -> str | None:
    """The route template of an API path (`/v0.1/servers/{serverName}/versions`), None if unknown."""
    path = raw_path.split(b"?", 1)[0]
    prefix = PREFIXES[0] if path.startswith(PREFIXES[0]) else PREFIXES[1]
    rest = path[len(prefix) :].strip(b"/")
    segments = [unquote(s.decode("latin-1"), errors="replace") for s in rest.split(b"/")] if rest else []
    route, _ = _route(segments)
    template = _TEMPLATES.get(route)
    return prefix[: -len(b"/servers")].decode() + template if template is not None else None


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def _route(segments: list[str]) -> tuple[str, tuple[str, ...]]:
    """("list" | "versions" | "get" | "unknown", (name[, version]))."""
    n = len(segments)
    if n == 0:
        return "list", ()
    if n == 2 and segments[1] == "versions":
        return "versions", (segments[0],)
    if n == 3 and segments[2] == "versions":
        return "versions", (f"{segments[0]}/{segments[1]}",)
    if n == 3 and segments[1] == "versions":
        return "get", (segments[0], segments[2])
    if n == 4 and segments[2] == "versions":
        return "get", (f"{segments[0]}/{segments[1]}", segments[3])
    return "unknown", ()
