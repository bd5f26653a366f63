"""Outgoing auth: the headers the gateway adds to requests toward each backend.

Strategies (`outgoingAuth.default` / `outgoingAuth.backends[name]`):
* `unauthenticated`: nothing.
* `header_injection`: a fixed header whose value comes from `headerValue` or, better, from the
  environment variable `headerValueEnv` (how a Kubernetes Secret reaches the pod).
* `bearer_token`: `Authorization: Bearer <token>` with a static token from `token` or, better, from
  the environment variable `tokenEnv`.
* `token_exchange`: RFC 8693 - the client's incoming bearer token is exchanged at `tokenUrl` for
  a backend-scoped token, cached per subject token until shortly before it expires. Requests with
  no incoming token (health checks, anonymous clients) go without an Authorization header.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mcpfleet.auth.oidc import client_secret_basic
from mcpfleet.vmcp import lazyhttp
from mcpfleet.vmcp.config import BackendAuthStrategy, HeaderInjection, OutgoingAuthSettings, TokenExchange
from mcpfleet.vmcp.upstream import HeaderProvider, NoAuth

if TYPE_CHECKING:
    from mcpfleet.vmcp.upstream import Session

TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
_EXPIRY_SKEW = 30.0


class OutgoingAuthError(Exception):
    pass


def _from_env(name: str, where: str) -> str:
    """A secret value the renderer passed as an environment variable (from a Secret key)."""
    value = os.environ.get(name)
    if value is None:
        raise OutgoingAuthError(f"{where}: environment variable {name!r} is not set")
    return value


class HeaderInjectionAuth:
    def __init__(self, name: str, value: str) -> None:
        self._headers = {name: value}

    async def headers(self, subject_token: str | None) -> Mapping[str, str]:
        return self._headers


class TokenExchangeAuth:
    def __init__(self, backend: str, cfg: TokenExchange, http: Session) -> None:
        self.backend = backend
        self.cfg = cfg
        self._http = http
        self._secret = cfg.client_secret
        if cfg.client_secret_env:
            self._secret = os.environ.get(cfg.client_secret_env)
            if self._secret is None:
                raise OutgoingAuthError(
                    f"outgoingAuth[{backend}].tokenExchange.clientSecretEnv: environment variable "
                    f"{cfg.client_secret_env!r} is not set"
                )
        self._cache: dict[str, tuple[str, float]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.exchanges = 0  # how many times the token endpoint was called (tests, metrics)

    async def headers(self, subject_token: str | None) -> Mapping[str, str]:
        if not subject_token:
            return {}
        key = hashlib.sha256(subject_token.encode()).hexdigest()
        hit = self._cache.get(key)
        if hit is not None and hit[1] > time.monotonic():
            return {"authorization": f"Bearer {hit[0]}"}
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            hit = self._cache.get(key)
            if hit is None or hit[1] <= time.monotonic():
                hit = await self._exchange(subject_token)
                self._cache[key] = hit
        return {"authorization": f"Bearer {hit[0]}"}

    async def _exchange(self, subject_token: str) -> tuple[str, float]:
        form = {
            "grant_type": TOKEN_EXCHANGE_GRANT,
            "subject_token": subject_token,
            "subject_token_type": self.cfg.subject_token_type or ACCESS_TOKEN_TYPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
        }
        if self.cfg.audience:
            form["audience"] = self.cfg.audience
        if self.cfg.scopes:
            form["scope"] = " ".join(self.cfg.scopes)
        headers: dict[str, str] = {}
        if self.cfg.client_id and self._secret is not None:
            headers["authorization"] = client_secret_basic(self.cfg.client_id, self._secret)
        elif self.cfg.client_id:
            form["client_id"] = self.cfg.client_id
        self.exchanges += 1
        from mcpfleet.vmcp.upstream import BackendUnavailable

        try:
            async with self._http.post(self.cfg.token_url, data=form, headers=headers) as r:
                body = await r.json(content_type=None)
                if r.status != 200 or "access_token" not in body:
                    err = body.get("error") if isinstance(body, dict) else None
                    raise BackendUnavailable(
                        self.backend, f"token exchange failed: HTTP {r.status} {err or ''}"
                    )
        except lazyhttp.errors(ValueError) as exc:
            raise BackendUnavailable(self.backend, f"token exchange failed: {type(exc).__name__}") from None
        ttl = float(body.get("expires_in") or 300)
        return str(body["access_token"]), time.monotonic() + max(ttl - _EXPIRY_SKEW, ttl / 2)


class OutgoingAuthFactory:
    def __init__(self, cfg: OutgoingAuthSettings) -> None:
        self.cfg = cfg
        self.providers: dict[str, HeaderProvider] = {}

    def for_backend(self, name: str, http: Session) -> HeaderProvider:
        strategy: BackendAuthStrategy = self.cfg.for_backend(name)
        where = f"outgoingAuth.backends[{name}]" if name in self.cfg.backends else "outgoingAuth.default"
        provider: HeaderProvider
        if strategy.type == "header_injection":
            hi = strategy.header_injection
            if hi is None:
                raise OutgoingAuthError(f"{where}.headerInjection: required for type header_injection")
            value = hi.header_value
            if hi.header_value_env:
                value = _from_env(hi.header_value_env, f"{where}.headerInjection.headerValueEnv")
            if value is None:
                raise OutgoingAuthError(f"{where}.headerInjection: set headerValue or headerValueEnv")
            provider = HeaderInjectionAuth(hi.header_name, value)
        elif strategy.type == "bearer_token":
            bt = strategy.bearer_token
            if bt is None:
                raise OutgoingAuthError(f"{where}.bearerToken: required for type bearer_token")
            token = bt.token
            if bt.token_env:
                token = _from_env(bt.token_env, f"{where}.bearerToken.tokenEnv")
            token = (token or "").strip()  # a Secret written with a trailing newline still works
            if not token:
                raise OutgoingAuthError(f"{where}.bearerToken: set token or tokenEnv (to a non-empty value)")
            provider = HeaderInjectionAuth("authorization", f"Bearer {token}")
        elif strategy.type == "token_exchange":
            if strategy.token_exchange is None:
                raise OutgoingAuthError(f"{where}.tokenExchange: required for type token_exchange")
            provider = TokenExchangeAuth(name, strategy.token_exchange, http)
        else:
            provider = NoAuth()
        self.providers[name] = provider
        return provider

    async def close(self) -> None:
        self.providers.clear()


def backend_headers(headers: list[HeaderInjection], backend: str) -> dict[str, str]:
    """A backend's own headers (an MCPServerEntry's `headerForward`), values read from the environment
    where the config names a variable; OutgoingAuthError naming the field when one is unset."""
    resolved: dict[str, str] = {}
    for index, header in enumerate(headers):
        value = header.header_value
        if header.header_value_env:
            value = _from_env(header.header_value_env, f"backends[{backend}].headers[{index}].headerValueEnv")
        if value is None:
            raise OutgoingAuthError(
                f"backends[{backend}].headers[{index}]: set headerValue or headerValueEnv"
            )
        resolved[header.header_name] = value
    return resolved


class WithHeaders:
    """Fixed headers under a backend's outgoing auth (the auth's headers win on a clash)."""

    def __init__(self, headers: Mapping[str, str], inner: HeaderProvider) -> None:
        self._headers = dict(headers)
        self._inner = inner

    async def headers(self, subject_token: str | None) -> Mapping[str, str]:
        return {**self._headers, **(await self._inner.headers(subject_token))}
