"""How a proxy with an embedded authorization server treats requests.

`build_app` puts the authorization server's endpoints in front of the proxy's `AuthGuard`, which
accepts only JWTs this server signed (`OwnTokenAuthenticator`: issuer, audience = the protected MCP
endpoint, signature by one of our keys, time window) and serves the RFC 9728 protected-resource
metadata naming our issuer. Behind the guard, `UpstreamTokenInjector` replaces the client's
credentials toward the backend: the user's upstream IdP access token as `Authorization: Bearer`
(refreshed when expired), or, with `disableUpstreamTokenInjection`, nothing at all (Authorization,
Cookie and Proxy-Authorization stripped).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import jwt
import orjson

from mcpfleet.auth.asgi import IDENTITY_SCOPE_KEY, AuthGuard, Identity
from mcpfleet.auth.authserver.server import AuthServer
from mcpfleet.auth.oidc import MAX_TOKEN_CHARS, AuthError
from mcpfleet.auth.settings import IncomingAuthSettings, OIDCSettings

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]

CREDENTIAL_HEADERS = frozenset({b"authorization", b"cookie", b"proxy-authorization"})


class OwnTokenAuthenticator:
    """Validates the access tokens `server` issued (no network: the keys are ours)."""

    def __init__(self, server: AuthServer, resource_metadata: str | None = None) -> None:
        self.server = server
        # The RFC 9728 document's URL named in every challenge (the vMCP gateway serves it itself).
        self.resource_metadata = resource_metadata

    async def authenticate(self, authorization: str | None) -> dict[str, Any] | None:
        if not authorization:
            raise AuthError("")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError("expected a Bearer token")
        if len(token) > MAX_TOKEN_CHARS:
            raise AuthError("token too large")
        try:
            return self.server.keys.verify(token, issuer=self.server.issuer, audiences=[self.server.resource])
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise AuthError(f"invalid token: {type(exc).__name__}") from exc

    def challenge(self, error: str | None, resource_metadata: str | None = None) -> str:
        parts = ['Bearer realm="mcp"']
        resource_metadata = resource_metadata or self.resource_metadata
        if resource_metadata:
            parts.append(f'resource_metadata="{resource_metadata}"')
        if error:
            parts.append('error="invalid_token"')
        return ", ".join(parts)

    async def close(self) -> None:
        await self.server.aclose()


class UpstreamTokenInjector:
    """Behind the guard: the backend gets the user's upstream token, or no credentials at all."""

    def __init__(self, app: ASGIApp, server: AuthServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope["headers"] if k not in CREDENTIAL_HEADERS]
        identity = scope.get(IDENTITY_SCOPE_KEY)
        # No identity: an open path (/health) the guard let through; nothing to inject.
        if not self.server.settings.disable_upstream_token_injection and isinstance(identity, Identity):
            sid = identity.claims.get("tsid") if identity.claims else None
            token = await self.server.upstream_access_token(sid) if isinstance(sid, str) else None
            if token is None:
                body = orjson.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": -32011, "message": "the login session ended: authorize again"},
                    }
                )
                challenge = f'Bearer realm="mcp", error="invalid_token", resource_metadata="{self.server.issuer}/.well-known/oauth-protected-resource"'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", challenge.encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
            headers.append((b"authorization", f"Bearer {token}".encode("latin-1", "replace")))
        await self.app({**scope, "headers": headers}, receive, send)


class AuthServerFront:
    """Routes the authorization server's paths to it, everything else to the guarded app."""

    def __init__(self, server: AuthServer, guarded: ASGIApp) -> None:
        self.server = server
        self.guarded = guarded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.server.handles(scope["path"]):
            await self.server(scope, receive, send)
            return
        await self.guarded(scope, receive, send)


def build_app(inner: ASGIApp, server: AuthServer, *, mcp_path: str) -> ASGIApp:
    """`inner` (the proxy, with its policy / limits / webhooks) behind the embedded server's guard."""
    incoming = IncomingAuthSettings(
        type="oidc",
        oidc=OIDCSettings(issuer=server.issuer, audience=server.resource, resource=server.resource),
    )
    guard = AuthGuard(
        UpstreamTokenInjector(inner, server),
        incoming,
        mcp_path=mcp_path,
        forward_authorization=False,
        authenticator=OwnTokenAuthenticator(server),
    )
    return AuthServerFront(server, guard)
