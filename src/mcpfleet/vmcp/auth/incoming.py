"""Incoming auth: who may call the gateway.

`anonymous` lets everyone in. `oidc` requires `Authorization: Bearer <JWT>` signed RS256/ES256
by a key of the issuer's JWKS, with the configured issuer and audience and a valid time window.
The JWKS is cached (`jwksCacheSeconds`) and refetched at once, at most once a second, when a
token names an unknown `kid` - that is how key rotation is followed without a restart. The JWKS
URL is `jwksUrl`, or else found through the issuer's `/.well-known/openid-configuration`.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Protocol

import aiohttp
import jwt
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from mcpfleet.vmcp.config import IncomingAuth, OIDCConfig

ALGORITHMS = ["RS256", "ES256"]


class AuthError(Exception):
    """The request is not authenticated; `message` goes into WWW-Authenticate."""


class Authenticator(Protocol):
    async def authenticate(self, authorization: str | None) -> dict[str, Any] | None:
        """Claims of the caller (None for anonymous); raises AuthError."""
        ...

    def challenge(self, error: str | None) -> str: ...


class AnonymousAuthenticator:
    async def authenticate(self, authorization: str | None) -> dict[str, Any] | None:
        return None

    def challenge(self, error: str | None) -> str:
        return "Bearer"


class OIDCAuthenticator:
    def __init__(
        self, cfg: OIDCConfig, http: aiohttp.ClientSession, resource_metadata: str | None = None
    ) -> None:
        self.cfg = cfg
        self._http = http
        self._keys: dict[str, Any] = {}
        self._fetched_at = 0.0
        self._lock = asyncio.Lock()
        self._jwks_url = cfg.jwks_url
        self.resource_metadata = resource_metadata
        self.fetches = 0

    def challenge(self, error: str | None) -> str:
        parts = ['Bearer realm="mcp"']
        if self.resource_metadata:
            parts.append(f'resource_metadata="{self.resource_metadata}"')
        if error:
            parts.append('error="invalid_token"')
            parts.append('error_description="' + error.replace('"', "'") + '"')
        return ", ".join(parts)

    async def authenticate(self, authorization: str | None) -> dict[str, Any] | None:
        if not authorization:
            raise AuthError("")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError("expected a Bearer token")
        token = token.strip()
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise AuthError(f"malformed token: {exc}") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise AuthError(f"unsupported algorithm {alg!r}")
        key = await self._key(header.get("kid"))
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=ALGORITHMS,
                audience=self.cfg.audience,
                issuer=self.cfg.issuer,
                options={"require": ["exp", "iss"], "verify_aud": self.cfg.audience is not None},
                leeway=30,
            )
        except jwt.PyJWTError as exc:
            raise AuthError(str(exc)) from None
        return claims

    async def _key(self, kid: str | None) -> Any:
        stale = time.monotonic() - self._fetched_at > self.cfg.jwks_cache_seconds
        if stale or (kid not in self._keys and time.monotonic() - self._fetched_at > 1.0):
            async with self._lock:
                if time.monotonic() - self._fetched_at > 1.0 or not self._keys:
                    await self._refresh()
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        if kid not in self._keys:
            raise AuthError(f"unknown signing key {kid!r}")
        return self._keys[kid]

    async def _refresh(self) -> None:
        try:
            if self._jwks_url is None:
                url = self.cfg.issuer.rstrip("/") + "/.well-known/openid-configuration"
                async with self._http.get(url) as r:
                    self._jwks_url = str((await r.json(content_type=None))["jwks_uri"])
            async with self._http.get(self._jwks_url) as r:
                data = await r.json(content_type=None)
        except (aiohttp.ClientError, OSError, ValueError, KeyError) as exc:
            self._fetched_at = time.monotonic()
            raise AuthError(f"cannot fetch the issuer's keys: {type(exc).__name__}") from None
        self.fetches += 1
        keys: dict[str, Any] = {}
        for jwk in data.get("keys", []):
            kty = jwk.get("kty")
            try:
                if kty == "RSA":
                    keys[jwk.get("kid") or ""] = RSAAlgorithm.from_jwk(json.dumps(jwk))
                elif kty == "EC":
                    keys[jwk.get("kid") or ""] = ECAlgorithm.from_jwk(json.dumps(jwk))
            except (jwt.PyJWTError, ValueError, KeyError):
                continue
        self._keys = keys
        self._fetched_at = time.monotonic()


def make_authenticator(
    cfg: IncomingAuth, http: aiohttp.ClientSession, resource_metadata: str | None = None
) -> Authenticator:
    if cfg.type == "oidc":
        assert cfg.oidc is not None
        return OIDCAuthenticator(cfg.oidc, http, resource_metadata)
    return AnonymousAuthenticator()
