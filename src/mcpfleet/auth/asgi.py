"""An ASGI guard that enforces incoming auth in front of any app, plus the shared 401 answer.

Every HTTP path except the open ones (`/health`) needs a valid token; a missing or bad one gets
`401` with `WWW-Authenticate: Bearer realm="mcp", resource_metadata=..., error=...` and a JSON-RPC
error body, and the wrapped app never sees the request. With OIDC the guard serves the RFC 9728
protected-resource metadata at `/.well-known/oauth-protected-resource` (and under the path-suffixed
form `/.well-known/oauth-protected-resource/mcp` that MCP clients try first). A streamable-HTTP
session (`Mcp-Session-Id`, or a legacy SSE `?session_id=`) opened through the guard is bound to the
token's subject; a request naming a session bound to another subject, or one the guard never bound,
gets `404 Session not found`, and one naming its session twice gets `400` (`auth.binding`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from mcpfleet.auth.binding import (
    AmbiguousSession,
    SessionBindings,
    binding_send,
    request_sessions,
    subject_of,
)
from mcpfleet.auth.oidc import (
    AnonymousAuthenticator,
    Authenticator,
    AuthError,
    IncomingAuthSettings,
    make_authenticator,
    protected_resource_metadata,
)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]

WELL_KNOWN = "/.well-known/oauth-protected-resource"
UNAUTHORIZED = -32011
"""The JSON-RPC error code of a 401 body (the same the vMCP gateway has always used)."""
IDENTITY_SCOPE_KEY = "mcpfleet.identity"
"""Where `AuthGuard` (and the vMCP gateway's own auth) leaves the caller's `Identity` in the ASGI
scope, for the hooks after it: rate limits read the subject, authorization and audit the claims."""


@dataclass(frozen=True, slots=True)
class Identity:
    """The authenticated caller: its subject (issuer + sub, the session-binding and rate-limit key)
    and the validated token's claims (None for both when anonymous)."""

    subject: str | None
    claims: dict[str, Any] | None


def scope_subject(scope: Mapping[str, Any]) -> str | None:
    """The caller's subject from the scope (None for anonymous callers / no guard)."""
    identity = scope.get(IDENTITY_SCOPE_KEY)
    return identity.subject if isinstance(identity, Identity) else None


def scope_claims(scope: Mapping[str, Any]) -> dict[str, Any] | None:
    """The caller's validated claims from the scope (None for anonymous callers / no guard)."""
    identity = scope.get(IDENTITY_SCOPE_KEY)
    return identity.claims if isinstance(identity, Identity) else None


def unauthorized(
    auth: Authenticator, error: AuthError, resource_metadata: str | None = None
) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Headers and body of the 401 answer to a request that failed `auth`."""
    message = str(error) or None
    body = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": UNAUTHORIZED, "message": message or "authentication required"},
        }
    )
    challenge = auth.challenge(message, resource_metadata).encode("latin-1", "replace")
    return [(b"content-type", b"application/json"), (b"www-authenticate", challenge)], body


class AuthGuard:
    """Wraps an ASGI app: authenticates every request except `open_paths` (exact paths).

    `mcp_path` is the endpoint advertised as the protected resource when the config names none;
    the base URL is `public_url`, else taken from the request's Host header. With
    `forward_authorization` off, the validated `Authorization` header is removed before the request
    reaches the app (a reverse proxy must not pass a token meant for itself upstream).
    """

    def __init__(
        self,
        app: ASGIApp,
        config: IncomingAuthSettings,
        *,
        open_paths: Iterable[str] = ("/health",),
        mcp_path: str = "/mcp",
        public_url: str | None = None,
        forward_authorization: bool = True,
        authenticator: Authenticator | None = None,
    ) -> None:
        self.app = app
        self.config = config
        self.auth = authenticator or make_authenticator(config)
        self.anonymous = isinstance(self.auth, AnonymousAuthenticator)
        self.open_paths = frozenset(open_paths)
        self.mcp_path = mcp_path
        self.public_url = public_url.rstrip("/") if public_url else None
        self.forward_authorization = forward_authorization
        self.bindings = SessionBindings()

    async def aclose(self) -> None:
        closer = getattr(self.auth, "close", None)
        if closer is not None:
            await closer()

    def _base(self, scope: Scope) -> str:
        if self.public_url:
            return self.public_url
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
        if not host:
            server = scope.get("server") or ("localhost", None)
            host = f"{server[0]}:{server[1]}" if server[1] else str(server[0])
        return f"{scope.get('scheme', 'http')}://{host}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._closing(send))
            return
        if scope["type"] != "http" or self.anonymous:
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path in self.open_paths:
            await self.app(scope, receive, send)
            return
        if path == WELL_KNOWN or path.startswith(WELL_KNOWN + "/"):
            assert self.config.oidc is not None
            document = protected_resource_metadata(self.config.oidc, self._base(scope) + self.mcp_path)
            await _respond(send, 200, [(b"content-type", b"application/json")], orjson.dumps(document))
            return
        authorization = next(
            (v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None
        )
        try:
            claims = await self.auth.authenticate(authorization)
        except AuthError as exc:
            headers, body = unauthorized(self.auth, exc, self._base(scope) + WELL_KNOWN)
            await _drain(receive)
            await _respond(send, 401, headers, body)
            return
        # Sessions are bound to the subject that opened them (auth/binding.py): another subject's
        # valid token gets the answer of an unknown session.
        subject = subject_of(claims, (authorization or "").partition(" ")[2].strip())
        try:
            sessions = request_sessions(scope["headers"], scope.get("query_string", b""))
        except AmbiguousSession as exc:
            await _drain(receive)
            await _respond(send, 400, [(b"content-type", b"application/json")], _error(f"Bad request: {exc}"))
            return
        if not all(self.bindings.allows(s, subject) for s in sessions):
            await _drain(receive)
            await _respond(send, 404, [(b"content-type", b"application/json")], _error("Session not found"))
            return
        send = binding_send(send, self.bindings, subject, scope.get("method", ""), sessions)
        scope = {**scope, IDENTITY_SCOPE_KEY: Identity(subject=subject, claims=claims)}
        if not self.forward_authorization:
            scope["headers"] = [(k, v) for k, v in scope["headers"] if k != b"authorization"]
        await self.app(scope, receive, send)

    def _closing(self, send: Send) -> Send:
        """Close the authenticator's HTTP session when the app finishes its lifespan shutdown."""

        async def wrapped(message: dict[str, Any]) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                await self.aclose()
            await send(message)

        return wrapped


def _error(message: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}})


async def _drain(receive: Receive) -> None:
    """Read the request body so the connection can be reused after the 401."""
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            return


async def _respond(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
