"""Binding MCP sessions to the subject that opened them (shared by the vMCP gateway and the proxy).

The MCP specification's security best practices: servers must not use session IDs for
authentication, and should bind them to user-specific information so that a session ID obtained
by someone else cannot be used with their own (valid) credentials. A session created with
subject A's token answers `404 Session not found` to subject B's token - the same answer as a
session that does not exist, so nothing is revealed.

The subject is the token's issuer + `sub` (stable across token refreshes), else its `client_id`
(introspection answers without `sub`), else a hash of the token itself.

A request is checked against every session it names (`request_sessions`): its `Mcp-Session-Id` and,
for the legacy HTTP+SSE transport, its `?session_id=` query. The query is read exactly as the MCP
SDK's `SseServerTransport` reads it (Starlette's query parsing, last value, `UUID(hex=...)`), so
every spelling the transport routes to a session (upper case, braces, `urn:uuid:`, percent-encoded
names) is checked as that session; a name given twice is refused (`AmbiguousSession`, a 400), and a
session this table never bound is refused like another subject's (fail closed).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import QueryParams

# The proxy's bindings table (session id -> subject) keeps at most this many entries (oldest go first).
MAX_BINDINGS = 100_000


def subject_of(claims: Mapping[str, Any] | None, token: str | None) -> str | None:
    """Who the caller is, for session binding; None for anonymous callers."""
    if claims is None:
        return None
    iss = str(claims.get("iss") or "")
    sub = claims.get("sub")
    if isinstance(sub, str) and sub:
        return f"{iss}|sub:{sub}"
    cid = claims.get("client_id")
    if isinstance(cid, str) and cid:
        return f"{iss}|client:{cid}"
    if token:
        return "token:" + hashlib.sha256(token.encode()).hexdigest()
    return None


class SessionBindings:
    """Session id -> subject, for a front that does not own the session table (the proxy).

    Bounded: past `max_entries` the oldest binding is dropped (a session ID is an unguessable
    UUID; the binding is defence in depth, not the only lock).
    """

    def __init__(self, max_entries: int = MAX_BINDINGS) -> None:
        self._max = max_entries
        self._subjects: collections.OrderedDict[str, str | None] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._subjects)

    def bind(self, session_id: str, subject: str | None) -> None:
        self._subjects[session_id] = subject
        self._subjects.move_to_end(session_id)
        while len(self._subjects) > self._max:
            self._subjects.popitem(last=False)

    def allows(self, session_id: str, subject: str | None) -> bool:
        """True only when the session was bound here, to this subject: an id this table does not
        know (never opened through this front, a spelling it does not hold, or one evicted past
        `max_entries`) is refused, never passed on to a transport that might route it."""
        return session_id in self._subjects and self._subjects[session_id] == subject

    def forget(self, session_id: str) -> None:
        self._subjects.pop(session_id, None)


Send = Callable[[dict[str, Any]], Awaitable[None]]
SESSION_HEADER = b"mcp-session-id"


SESSION_PARAM = "session_id"
"""The legacy HTTP+SSE transport's query parameter naming the session a POST goes to."""

# The legacy HTTP+SSE transport names its session in the stream's first event
# (`event: endpoint` / `data: /messages/?session_id=ID`) and in the query of every POST after it.
_ENDPOINT_EVENT = re.compile(rb"event: ?endpoint\r?\ndata: ?([^\r\n]{1,4096})")


class AmbiguousSession(ValueError):
    """A request naming its session more than once (a repeated `session_id` query parameter or
    `Mcp-Session-Id` header): which one a transport uses is its own choice, so none is taken."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} given more than once")
        self.name = name


def canonical_session(value: str) -> str:
    """The key a session id is bound under: the SDK's SSE transport parses `?session_id=` with
    `UUID(hex=...)` (which takes any case, braces, `urn:uuid:`, dashes anywhere), so every spelling
    that parses is its 32 lower-case hex digits; anything else is kept as it is (a non-UUID session
    of a remote server behind `--remote`: only that exact spelling was bound)."""
    try:
        return uuid.UUID(hex=value).hex
    except ValueError:
        return value


def query_session(query_string: bytes) -> str | None:
    """The legacy SSE session a query names, canonical; None when it names none.

    Parsed as the SDK transport parses it (Starlette's `QueryParams`: percent-decoding of names and
    values, `+` as space, blank values kept); raises `AmbiguousSession` when the parameter is
    repeated (the transport would take the last one, an earlier check might have read the first).
    """
    values = QueryParams(query_string).getlist(SESSION_PARAM)
    if len(values) > 1:
        raise AmbiguousSession(f"query parameter {SESSION_PARAM}")
    return canonical_session(values[0]) if values else None


def request_sessions(headers: Iterable[tuple[bytes, bytes]], query_string: bytes = b"") -> list[str]:
    """Every session an ASGI request names: its `Mcp-Session-Id` and (legacy SSE) `?session_id=`.

    Raises `AmbiguousSession` when either is given twice."""
    named = [v.decode("latin-1") for k, v in headers if k == SESSION_HEADER]
    if len(named) > 1:
        raise AmbiguousSession("header Mcp-Session-Id")
    in_query = query_session(query_string)
    return named + ([in_query] if in_query is not None else [])


def request_session(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The session a response's headers open (its first `Mcp-Session-Id`)."""
    return next((v.decode("latin-1") for k, v in headers if k == SESSION_HEADER), None)


def binding_send(
    send: Send, bindings: SessionBindings, subject: str | None, method: str, sessions: list[str]
) -> Send:
    """Wrap an ASGI `send`: a session the response opens is bound to `subject`; a successful DELETE
    of the request's session forgets its binding."""

    session_id = sessions[0] if sessions else None
    # A GET that opens a legacy SSE stream announces its session in the body: bound on the first match.
    sse_pending = method == "GET" and not sessions

    async def wrapped(message: dict[str, Any]) -> None:
        nonlocal sse_pending
        if message["type"] == "http.response.start":
            status = int(message.get("status", 0))
            opened = request_session(message.get("headers") or ())
            if opened is not None and opened != session_id and status < 400:
                bindings.bind(opened, subject)
            elif method == "DELETE" and session_id is not None and 200 <= status < 300:
                bindings.forget(session_id)
            sse_pending = sse_pending and status < 400
        elif sse_pending and message["type"] == "http.response.body":
            found = _ENDPOINT_EVENT.search(message.get("body") or b"")
            if found is not None:
                sse_pending = False
                # Read as the POSTs to that URL will be read; a URL naming no single session binds
                # nothing, so every POST naming one is refused.
                with contextlib.suppress(AmbiguousSession):
                    announced = query_session(urlsplit(found.group(1)).query)
                    if announced is not None:
                        bindings.bind(announced, subject)
        await send(message)

    return wrapped
