"""The registry read API as a plain ASGI handler: the hot path, kept free of framework overhead.

Routes (also under `/v0`): `GET /v0.1/servers`, `GET /v0.1/servers/{serverName}/versions`,
`GET /v0.1/servers/{serverName}/versions/{version}`. Routing works on the raw (still percent-encoded)
path so that `com.example%2Fserver` is one segment; an unencoded `com.example/server` is accepted too.
Every answer carries an ETag; `If-None-Match` gets a 304.

Errors are answered as the official registry (huma) answers them: `application/problem+json`
`{title, status, detail[, errors]}`. An empty value (`limit=`) is no value. A parameter that fails its
schema (limit outside 1..100 or not an integer, include_deleted not a boolean, search shorter than 3
characters once trimmed) is a 422 listing every bad parameter in `errors` (`{message, location,
value}`); an unparsable `updated_since`, `updated_since` with `include_deleted=false` or a NUL
(`%00`) in the query is a 400; an unknown server or version a 404. A cursor that is not one of ours is
a position after the name it spells (200, as the official). A path with a trailing slash is
redirected (308) to the path without it. Nothing here answers 5xx.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote

import orjson

from mcpfleet.registry.catalogue import SEARCH_NAME, SEARCH_TEXT, BadRequest, Catalogue, Page
from mcpfleet.registry.metrics import RegistryMetrics

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

PREFIXES = (b"/v0.1/servers", b"/v0/servers")
DEFAULT_LIMIT = 30
MAX_LIMIT = 100
MIN_SEARCH = 3
_JSON_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-cache")]
_PROBLEM_HEADERS = [(b"content-type", b"application/problem+json"), (b"cache-control", b"no-cache")]
_TITLES = {
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    422: "Unprocessable Entity",
    503: "Service Unavailable",
}
# Go's strconv.ParseBool, which the official registry's framework uses for boolean parameters.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
_SEARCH_FIELDS = frozenset({"name", "title", "description"})

Answer = tuple[str, int, list[tuple[bytes, bytes]], bytes]


def problem(status: int, detail: str, errors: list[dict[str, Any]] | None = None) -> bytes:
    """An RFC 9457 problem document in the official registry's shape."""
    doc: dict[str, Any] = {"title": _TITLES.get(status, "Error"), "status": status, "detail": detail}
    if errors:
        doc["errors"] = errors
    return orjson.dumps(doc)


class _Invalid(Exception):
    """One or more parameters failed their schema: a 422 listing each one."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__("validation failed")
        self.errors = errors


WRITE_PREFIXES = (b"/v0.1/", b"/v0/")


def is_write(scope: Scope) -> bool:
    """A request for the publishing API (`mcpfleet.registry.publish`): a write method on a `/v0.1/`
    (or `/v0/`) path. Reads never are."""
    if scope["method"] in ("GET", "HEAD"):
        return False
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    return raw.startswith(WRITE_PREFIXES)


def is_api_path(raw_path: bytes) -> bool:
    for prefix in PREFIXES:
        if raw_path.startswith(prefix) and (len(raw_path) == len(prefix) or raw_path[len(prefix)] in b"/?"):
            return True
    return False


class _Params:
    """The query string, parsed and checked; schema failures are collected, not raised one by one."""

    def __init__(self, query: bytes) -> None:
        self.values: dict[str, str] = {}
        for key, value in parse_qsl(
            query.decode("latin-1"), keep_blank_values=True, encoding="utf-8", errors="replace"
        ):
            self.values.setdefault(key, value)
        self.errors: list[dict[str, Any]] = []

    def get(self, name: str) -> str | None:
        # An empty value is no value (`limit=`, `search=`, `include_deleted=`), as on the official.
        return self.values.get(name) or None

    def invalid(self, name: str, message: str, value: Any) -> None:
        self.errors.append({"message": message, "location": f"query.{name}", "value": value})

    def boolean(self, name: str) -> bool | None:
        value = self.get(name)
        if value is None:
            return None
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        self.invalid(name, "invalid boolean value", value)
        return None

    def limit(self) -> int:
        raw = self.get("limit")
        if raw is None:
            return DEFAULT_LIMIT
        limit = int(raw) if _INTEGER.fullmatch(raw) else None
        if limit is None:
            self.invalid("limit", "invalid integer", raw)
            return DEFAULT_LIMIT
        if limit < 1:
            self.invalid("limit", "expected number >= 1", limit)
        elif limit > MAX_LIMIT:
            self.invalid("limit", f"expected number <= {MAX_LIMIT}", limit)
        return limit

    def search(self) -> str | None:
        value = self.get("search")
        # Counted after trimming, as the official counts it: a search of spaces is too short.
        if value is not None and len(value.strip()) < MIN_SEARCH:
            self.invalid("search", f"expected length >= {MIN_SEARCH}", value)
        return value

    def search_fields(self) -> str:
        """`search_fields` (an mcpfleet extension): a comma-separated subset of name, title,
        description; the default, `name`, is the official registry's behaviour."""
        raw = self.get("search_fields")
        if raw is None:
            return SEARCH_NAME
        fields = {f.strip() for f in raw.split(",")}
        if not fields <= _SEARCH_FIELDS or "name" not in fields:
            self.invalid(
                "search_fields",
                "expected a comma-separated list of name, title, description including name",
                raw,
            )
            return SEARCH_NAME
        return SEARCH_NAME if fields == {"name"} else SEARCH_TEXT

    def check(self) -> None:
        if self.errors:
            raise _Invalid(self.errors)


def _timestamp(value: str) -> str:
    """RFC 3339 → the store's fixed-width UTC form, or BadRequest."""
    message = "Invalid updated_since format: expected RFC3339 timestamp (e.g., 2025-08-07T13:15:04.280Z)"
    text = value.strip()
    if len(text) < 20 or text[10] not in "Tt ":
        raise BadRequest(message, "query.updated_since", value)
    try:
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1] in "zZ" else text)
        if parsed.tzinfo is None:
            raise ValueError("no offset")
        return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (ValueError, OverflowError):
        raise BadRequest(message, "query.updated_since", value) from None


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

    def _answer(self, scope: Scope, path: bytes) -> Answer:
        prefix = PREFIXES[0] if path.startswith(PREFIXES[0]) else PREFIXES[1]
        if path.endswith(b"/"):
            return _redirect(scope, path)
        rest = path[len(prefix) :].strip(b"/")
        segments = [unquote(s.decode("latin-1"), errors="replace") for s in rest.split(b"/")] if rest else []
        route, target = _route(segments)
        if route == "unknown":
            return route, 404, list(_PROBLEM_HEADERS), problem(404, "Not found")
        if scope["method"] not in ("GET", "HEAD"):
            headers = [*_PROBLEM_HEADERS, (b"allow", b"GET, HEAD")]
            return route, 405, headers, problem(405, "Method not allowed")
        query: bytes = scope.get("query_string", b"")
        if b"\0" in query or b"%00" in query.lower():
            # A NUL is never part of a name, a cursor or a search: refused, as the official does.
            return (
                route,
                400,
                list(_PROBLEM_HEADERS),
                problem(400, "The query string holds a NUL character (%00)"),
            )
        params = _Params(query)
        catalogue = self._catalogue()
        page: Page | None
        try:
            include_deleted = params.boolean("include_deleted")
            if route == "list":
                page = _list_page(catalogue, params, include_deleted)
            else:
                params.check()
                if route == "versions":
                    page = catalogue.versions_page(target[0], bool(include_deleted))
                else:
                    page = catalogue.get(target[0], target[1], bool(include_deleted))
        except _Invalid as exc:
            return route, 422, list(_PROBLEM_HEADERS), problem(422, "validation failed", exc.errors)
        except BadRequest as exc:
            return route, 400, list(_PROBLEM_HEADERS), problem(400, str(exc))
        if page is None:
            message = "Server not found" if route == "versions" else "Server version not found"
            return route, 404, list(_PROBLEM_HEADERS), problem(404, message)
        headers = [*_JSON_HEADERS, (b"etag", page.etag.encode())]
        if _etag_matches(_header(scope, b"if-none-match"), page.etag):
            return route, 304, headers, b""
        return route, 200, headers, page.body


def _list_page(catalogue: Catalogue, params: _Params, include_deleted: bool | None) -> Page:
    limit = params.limit()
    search = params.search()
    fields = params.search_fields()
    params.check()
    since = params.get("updated_since")
    if since is not None:
        if include_deleted is False:
            raise BadRequest(
                "updated_since always includes deleted servers: drop include_deleted=false",
                "query.include_deleted",
                False,
            )
        # The upstream API: deletions are always reported to incremental readers.
        include_deleted = True
    return catalogue.list_page(
        params.get("cursor"),
        limit,
        search,
        _timestamp(since) if since is not None else None,
        params.get("version"),
        bool(include_deleted),
        fields,
    )


def _redirect(scope: Scope, path: bytes) -> Answer:
    """308 to the same path without its trailing slash(es), query kept (method and body kept too)."""
    location = path.rstrip(b"/")
    query = scope.get("query_string", b"")
    if query:
        location += b"?" + query
    return "redirect", 308, [(b"location", location), (b"cache-control", b"no-cache")], b""


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
