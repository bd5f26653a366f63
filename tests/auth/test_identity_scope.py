"""`AuthGuard` leaves one `Identity` in the ASGI scope; rate limits read its subject, policy its claims."""

from __future__ import annotations

import asyncio
from typing import Any

from mcpfleet.auth.asgi import IDENTITY_SCOPE_KEY, AuthGuard, Identity, scope_claims, scope_subject
from mcpfleet.auth.settings import IncomingAuthSettings

CLAIMS = {"iss": "https://issuer.example", "sub": "alice", "groups": ["dev"]}


class _FixedAuthenticator:
    async def authenticate(self, authorization: str | None) -> dict[str, Any] | None:
        return dict(CLAIMS)

    def challenge(self, error: str | None, resource_metadata: str | None = None) -> str:
        return "Bearer"


def test_guard_puts_one_identity_both_consumers_read() -> None:
    seen: list[dict[str, Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    guard = AuthGuard(app, IncomingAuthSettings(type="oidc"), authenticator=_FixedAuthenticator())
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"authorization", b"Bearer t")],
        "query_string": b"",
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    asyncio.run(guard(scope, receive, send))
    (inner,) = seen
    assert inner[IDENTITY_SCOPE_KEY] == Identity(subject="https://issuer.example|sub:alice", claims=CLAIMS)
    assert scope_subject(inner) == "https://issuer.example|sub:alice"
    assert scope_claims(inner) == CLAIMS
    # No guard (anonymous): neither consumer finds an identity.
    assert scope_subject(scope) is None
    assert scope_claims(scope) is None
