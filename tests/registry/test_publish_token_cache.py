"""A publisher's token is verified once, then remembered briefly (`Publisher._verified_claims`)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from mcpfleet.auth.oidc import AuthError
from mcpfleet.registry.config import Publish
from mcpfleet.registry.publish import Publisher
from mcpfleet.registry.publishcheck import Problem


class CountingIssuer:
    """Stands in for the issuer's authenticator: counts verifications; `bad` tokens are refused."""

    def __init__(self, exp: float, introspection_url: str | None = None) -> None:
        self.calls = 0
        self.exp = exp
        self.cfg = type("Cfg", (), {"introspection_url": introspection_url})()

    async def authenticate(self, authorization: str | None) -> dict[str, Any] | None:
        self.calls += 1
        if authorization != "Bearer good":
            raise AuthError("bad signature")
        return {"sub": "alice", "exp": self.exp, "scope": "mcp-registry:publish"}

    def challenge(self, error: str | None, resource_metadata: str | None = None) -> str:
        return "Bearer"


def scope(token: str) -> dict[str, Any]:
    return {"headers": [(b"authorization", f"Bearer {token}".encode())]}


def publisher(issuer: CountingIssuer) -> Publisher:
    config = Publish.model_validate(
        {
            "auth": {"type": "oidc", "oidc": {"issuer": "https://id.example.com", "audience": "registry"}},
            "grants": [{"claims": {"sub": "alice"}, "publish": ["com.example/*"]}],
        }
    )
    return Publisher(config, service=None, authenticator=issuer)


async def test_a_token_is_verified_once_while_valid() -> None:
    issuer = CountingIssuer(exp=time.time() + 3600)
    p = publisher(issuer)
    for _ in range(5):
        claims, perms = await p._authenticate(scope("good"))
        assert claims["sub"] == "alice" and perms == [("publish", "com.example/*")]
    assert issuer.calls == 1
    # A refused token is never remembered: each try is verified (and refused) again.
    for _ in range(2):
        with pytest.raises(Problem) as refused:
            await p._authenticate(scope("forged"))
        assert refused.value.status == 401
    assert issuer.calls == 3


async def test_not_past_its_expiry(monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    issuer = CountingIssuer(exp=now + 5)
    p = publisher(issuer)
    await p._authenticate(scope("good"))
    monkeypatch.setattr(time, "time", lambda: now + 6)  # past exp: verified again (the issuer decides)
    await p._authenticate(scope("good"))
    assert issuer.calls == 2


async def test_not_longer_than_thirty_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    issuer = CountingIssuer(exp=now + 3600)
    p = publisher(issuer)
    await p._authenticate(scope("good"))
    monkeypatch.setattr(time, "time", lambda: now + 31)
    await p._authenticate(scope("good"))
    assert issuer.calls == 2


async def test_introspected_tokens_are_asked_every_time() -> None:
    issuer = CountingIssuer(exp=time.time() + 3600, introspection_url="https://id.example.com/introspect")
    p = publisher(issuer)
    for _ in range(3):
        await p._authenticate(scope("good"))
    assert issuer.calls == 3
