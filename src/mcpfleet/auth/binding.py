"""Binding MCP sessions to the subject that opened them (shared by the vMCP gateway and the proxy).

The MCP specification's security best practices: servers must not use session IDs for
authentication, and should bind them to user-specific information so that a session ID obtained
by someone else cannot be used with their own (valid) credentials. A session created with
subject A's token answers `404 Session not found` to subject B's token - the same answer as a
session that does not exist, so nothing is revealed.

The subject is the token's issuer + `sub` (stable across token refreshes), else its `client_id`
(introspection answers without `sub`), else a hash of the token itself.
"""

from __future__ import annotations

import collections
import hashlib
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

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
        """False only when the session is bound to another subject."""
        bound = self._subjects.get(session_id, subject)
        return bound == subject

    def forget(self, session_id: str) -> None:
        self._subjects.pop(session_id, None)


Send = Callable[[dict[str, Any]], Awaitable[None]]
SESSION_HEADER = b"mcp-session-id"


# The legacy HTTP+SSE transport names its session in the stream's first event
# (`event: endpoint` / `data: /messages/?session_id=ID`) and in the query of every POST after it.
_ENDPOINT_EVENT = re.compile(rb"event: ?endpoint\r?\ndata: ?[^\r\n]*[?&]session_id=([0-9A-Za-z_-]{1,128})")


def request_session(headers: Iterable[tuple[bytes, bytes]], query_string: bytes = b"") -> str | None:
    """The session an ASGI request names: its `Mcp-Session-Id`, else (legacy SSE) `?session_id=`."""
    for k, v in headers:
        if k == SESSION_HEADER:
            return v.decode("latin-1")
    if b"session_id=" in query_string:
        values = urllib.parse.parse_qs(query_string.decode("latin-1")).get("session_id")
        if values:
            return values[0]
    return None


def binding_send(
    send: Send, bindings: SessionBindings, subject: str | None, method: str, session_id: str | None
) -> Send:
    """Wrap an ASGI `send`: a session the response opens is bound to `subject`; a successful DELETE
    of `session_id` forgets its binding."""

    # A GET that opens a legacy SSE stream announces its session in the body: bound on the first match.
    sse_pending = method == "GET" and session_id is None

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
                bindings.bind(found.group(1).decode("ascii"), subject)
                sse_pending = False
        await send(message)

    return wrapped
