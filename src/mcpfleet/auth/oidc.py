"""Incoming auth: who may call a data-plane service (the proxy, the vMCP gateway, the registry's
publishing API).

This module owns the authenticators; the incoming-auth config they read (`IncomingAuthSettings`: the vMCP
config's `incomingAuth` block, the whole file `mcpfleet proxy --auth-config` reads, the registry's
`publish.auth`) is defined in `mcpfleet.auth.settings` and re-exported here.

`anonymous` lets everyone in. `oidc` requires `Authorization: Bearer <token>`:

* a JWT signed RS256/ES256 by a key of the issuer's JWKS, with the configured issuer and audience
  and a valid time window. The algorithm is taken from the key, never from the token: an RSA key
  verifies RS256 only, a P-256 key ES256 only, so a token cannot pick how it is checked (`alg:
  none`, HS256 keyed with a public key, an ES256 token naming an RSA `kid`: all 401). The audience
  is required (`audience`, or else `resource`): an MCP server accepts only tokens issued for
  itself (RFC 8707 / the MCP authorization spec), and a config without either is refused at
  start-up. The JWKS is cached (`jwksCacheSeconds`) and refetched at once, at most once a second,
  when a token names an unknown `kid` - that is how key rotation is followed without a restart.
  The JWKS URL is `jwksUrl`, or else found through the issuer's
  `/.well-known/openid-configuration`, whose `issuer` must equal the configured one (OIDC
  Discovery 4.3: a document for another issuer would hand us its keys). `jwksCaFile` /
  `jwksTokenFile` authenticate that fetch (Kubernetes service-account tokens: the API server's
  `/openid/v1/jwks`, read with the pod's own token and CA); `serviceAccountNamespace` /
  `serviceAccountName` restrict such tokens further.
* an opaque token, when `introspectionUrl` is set: RFC 7662 introspection, the client
  authenticating with `clientId` and the secret from the environment variable `clientSecretEnv`
  (secrets never sit in a config file; client_secret_basic, form-encoded as RFC 6749 2.3.1 says).
  The answer must say `active: true` and name our audience; `exp`, `nbf` and `iss` are checked
  when present.

Whatever the token holds, a failure is an `AuthError` (401 with `WWW-Authenticate`), never an
exception escaping to the server: tokens are bounded (`MAX_TOKEN_CHARS`) and every parse or
verification error of a hostile token maps to one.

`oidcFile` names a JSON (or YAML) file with the OIDC settings - a mounted ConfigMap key; the
fields given in `oidc` override it (the audience / scopes of an `oidcConfigRef`).
`IncomingAuthSettings.resolved()` merges the two when the service starts.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from mcpfleet.auth.settings import (
    AuthConfigError,
    IncomingAuthSettings,
    OIDCSettings,
    load_auth_config,
)

# The settings models live in a module of their own (pydantic only), so a config that merely holds an
# incoming-auth block (the registry's) does not import aiohttp and the JWT stack; re-exported here.
from mcpfleet.netguard import PrivateAddressError, guarded_socket_factory

__all__ = [
    "ALGORITHMS",
    "AnonymousAuthenticator",
    "AuthConfigError",
    "AuthError",
    "Authenticator",
    "IncomingAuthSettings",
    "OIDCAuthenticator",
    "OIDCSettings",
    "client_secret_basic",
    "load_auth_config",
    "make_authenticator",
    "protected_resource_metadata",
]

if TYPE_CHECKING:  # imported where used: the control plane imports this module for its models only
    import aiohttp

log = logging.getLogger(__name__)

ALGORITHMS = ["RS256", "ES256"]
LEEWAY_SECONDS = 30
MAX_TOKEN_CHARS = 16 * 1024
"""A bearer token longer than this is refused unparsed (real access tokens are a few KiB at most)."""
MAX_ANSWER_BYTES = 1024 * 1024
"""Largest discovery document, key set or introspection answer read from the issuer (decoded bytes)."""
IDENTITY = {"accept-encoding": "identity"}  # as httplimits.IDENTITY (not imported: it loads uvicorn)


async def _json_answer(r: aiohttp.ClientResponse) -> Any:
    """An issuer's JSON answer, read within `MAX_ANSWER_BYTES` (`httplimits.read_decoded`: a
    compressed answer is decoded a bounded step at a time; the request asked for none and turned
    aiohttp's own decoding off, which would inflate a whole chunk at once)."""
    from mcpfleet.httplimits import BodyTooLarge, read_decoded

    if r.content_length is not None and r.content_length > MAX_ANSWER_BYTES:
        raise BodyTooLarge(MAX_ANSWER_BYTES, r.content_length)
    encoding = r.headers.get("content-encoding", "")
    return orjson.loads(await read_decoded(r.content.iter_any(), encoding, MAX_ANSWER_BYTES))


class AuthError(Exception):
    """The request is not authenticated; `message` goes into WWW-Authenticate."""


class Authenticator(Protocol):
    async def authenticate(self, authorization: str | None) -> dict[str, Any] | None:
        """Claims of the caller (None for anonymous); raises AuthError."""
        ...

    def challenge(self, error: str | None, resource_metadata: str | None = None) -> str: ...


class AnonymousAuthenticator:
    async def authenticate(self, authorization: str | None) -> dict[str, Any] | None:
        return None

    def challenge(self, error: str | None, resource_metadata: str | None = None) -> str:
        return "Bearer"


def _refused_address(exc: BaseException) -> str | None:
    """The guard's message when `exc` is (or wraps) a refused non-public address."""
    seen: BaseException | None = exc
    for _ in range(8):  # a short chain: aiohttp's connector error holds the socket error
        if seen is None:
            break
        if isinstance(seen, PrivateAddressError):
            return str(seen)
        seen = getattr(seen, "os_error", None) or seen.__cause__ or seen.__context__
    return None


class OIDCAuthenticator:
    """Validates bearer tokens against an OIDC issuer. Without `http`, it opens (and `close()`s) its own
    aiohttp session on first use, inside the serving event loop."""

    def __init__(
        self,
        cfg: OIDCSettings,
        http: aiohttp.ClientSession | None = None,
        resource_metadata: str | None = None,
    ) -> None:
        problems = cfg.problems("oidc")
        if problems:
            raise AuthConfigError("; ".join(problems))
        assert cfg.issuer is not None
        self.cfg = cfg
        self.issuer: str = cfg.issuer
        self.audience: str | None = cfg.expected_audience
        self._http = http
        self._owns_http = http is None
        self._keys: dict[str, _Key] = {}
        self._fetched_at = 0.0
        self._lock = asyncio.Lock()
        self._jwks_url = cfg.jwks_url
        self._ssl: ssl.SSLContext | None = None
        self.resource_metadata = resource_metadata
        self.fetches = 0

    async def close(self) -> None:
        if self._owns_http and self._http is not None:
            await self._http.close()
            self._http = None

    def challenge(self, error: str | None, resource_metadata: str | None = None) -> str:
        parts = ['Bearer realm="mcp"']
        metadata = resource_metadata or self.resource_metadata
        if metadata:
            parts.append(f'resource_metadata="{_quotable(metadata)}"')
        if self.cfg.scopes:
            parts.append('scope="' + _quotable(" ".join(self.cfg.scopes)) + '"')
        if error:
            parts.append('error="invalid_token"')
            parts.append('error_description="' + _quotable(error) + '"')
        return ", ".join(parts)

    async def authenticate(self, authorization: str | None) -> dict[str, Any] | None:
        if not authorization:
            raise AuthError("")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError("expected a Bearer token")
        token = token.strip()
        if len(token) > MAX_TOKEN_CHARS:
            raise AuthError(f"token too large (over {MAX_TOKEN_CHARS} characters)")
        import jwt  # loaded by the first token (~35 ms with cryptography), not by every service start

        try:
            header = jwt.get_unverified_header(token)
        except (jwt.PyJWTError, ValueError, TypeError, RecursionError) as exc:
            if self.cfg.introspection_url:
                return self._restrict(await self._introspect(token))
            raise AuthError(f"malformed token: {_reason(exc)}") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in ALGORITHMS:
            raise AuthError(f"unsupported algorithm {_short(alg)} (accepted: {', '.join(ALGORITHMS)})")
        if kid is not None and not isinstance(kid, str):
            raise AuthError("malformed token: kid must be a string")
        key = await self._key(kid)
        if key.alg != alg:
            # The key decides the algorithm: an ES256 token naming an RSA key (or the reverse) is a
            # forgery attempt or a misconfigured client, never something to try to verify.
            raise AuthError(f"token algorithm {alg} does not match signing key {_short(kid)} ({key.alg})")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[key.alg],
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", "iss", "aud"]},
                leeway=LEEWAY_SECONDS,
            )
        except jwt.PyJWTError as exc:
            raise AuthError(_reason(exc)) from None
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            # PyJWT lets some hostile claim values through as plain exceptions (e.g. exp = 1e400).
            raise AuthError(f"malformed token: {_reason(exc)}") from None
        return self._restrict(claims)

    def _restrict(self, claims: dict[str, Any]) -> dict[str, Any]:
        """Kubernetes service-account tokens: `sub` is system:serviceaccount:NAMESPACE:NAME."""
        ns, name = self.cfg.service_account_namespace, self.cfg.service_account_name
        if ns is None and name is None:
            return claims
        parts = str(claims.get("sub", "")).split(":")
        if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
            raise AuthError("not a Kubernetes service-account token")
        if ns is not None and parts[2] != ns:
            raise AuthError(f"service-account tokens of namespace {ns!r} only")
        if name is not None and parts[3] != name:
            raise AuthError(f"tokens of service account {name!r} only")
        return claims

    def _session(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._http is None:
            # The request-forgery guard (mcpfleet.netguard): checked on each address connected to.
            connector = (
                None
                if self.cfg.private_addresses_allowed
                else aiohttp.TCPConnector(socket_factory=guarded_socket_factory())
            )
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10), connector=connector)
        return self._http

    def _fetch_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"auto_decompress": False, "headers": dict(IDENTITY)}
        if self.cfg.jwks_ca_file:
            if self._ssl is None:
                self._ssl = ssl.create_default_context(cafile=self.cfg.jwks_ca_file)
            options["ssl"] = self._ssl
        if self.cfg.jwks_token_file:
            with open(self.cfg.jwks_token_file) as f:
                options["headers"]["Authorization"] = "Bearer " + f.read().strip()
        return options

    async def _key(self, kid: str | None) -> _Key:
        stale = time.monotonic() - self._fetched_at > self.cfg.jwks_cache_seconds
        if stale or (kid not in self._keys and time.monotonic() - self._fetched_at > 1.0):
            async with self._lock:
                if time.monotonic() - self._fetched_at > 1.0 or not self._keys:
                    await self._refresh()
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        if kid is None or kid not in self._keys:
            raise AuthError(f"unknown signing key {_short(kid)}")
        return self._keys[kid]

    async def _refresh(self) -> None:
        import aiohttp

        http = self._session()
        try:
            options = self._fetch_options()
            if self._jwks_url is None:
                url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
                async with http.get(url, **options) as r:
                    r.raise_for_status()
                    document = await _json_answer(r)
                if document["issuer"] != self.issuer:
                    self._fetched_at = time.monotonic()
                    log.error(
                        "OIDC discovery at %s names issuer %r, configured %r: refusing its keys",
                        url,
                        document["issuer"],
                        self.issuer,
                    )
                    raise AuthError("the issuer's discovery document names another issuer")
                self._jwks_url = str(document["jwks_uri"])
            async with http.get(self._jwks_url, **options) as r:
                r.raise_for_status()
                data = await _json_answer(r)
        except (aiohttp.ClientError, OSError, ValueError, KeyError, TypeError) as exc:
            self._fetched_at = time.monotonic()
            if _refused_address(exc):
                log.error(
                    "OIDC keys not fetched: %s (set jwksAllowPrivateIP to allow it)", _refused_address(exc)
                )
            raise AuthError(f"cannot fetch the issuer's keys: {type(exc).__name__}") from None
        self.fetches += 1
        keys: dict[str, _Key] = {}
        for jwk in data.get("keys", []) if isinstance(data, dict) else []:
            key = _key_of(jwk) if isinstance(jwk, dict) else None
            if key is not None:
                keys[str(jwk.get("kid") or "")] = key
        self._keys = keys
        self._fetched_at = time.monotonic()

    async def _introspect(self, token: str) -> dict[str, Any]:
        import aiohttp

        """RFC 7662: ask the issuer whether an opaque token is active, and check what it says."""
        assert self.cfg.introspection_url is not None
        options = self._fetch_options()
        options["headers"] = dict(IDENTITY)  # not the key-set token
        if self.cfg.client_id:
            secret = os.environ.get(self.cfg.client_secret_env, "") if self.cfg.client_secret_env else ""
            if not secret and self.cfg.client_secret_file:
                secret = _read_secret_file(self.cfg.client_secret_file)  # re-read: a Secret rotates
            options["headers"]["Authorization"] = client_secret_basic(self.cfg.client_id, secret)
        form = {"token": token, "token_type_hint": "access_token"}
        try:
            async with self._session().post(self.cfg.introspection_url, data=form, **options) as r:
                r.raise_for_status()
                answer = await _json_answer(r)
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            if _refused_address(exc):
                log.error(
                    "token not introspected: %s (set jwksAllowPrivateIP to allow it)", _refused_address(exc)
                )
            raise AuthError(f"cannot introspect the token: {type(exc).__name__}") from None
        if not isinstance(answer, dict) or answer.get("active") is not True:
            raise AuthError("token is not active")
        now = time.time()
        exp, nbf = answer.get("exp"), answer.get("nbf")
        if isinstance(exp, int | float) and exp + LEEWAY_SECONDS < now:
            raise AuthError("token has expired")
        if isinstance(nbf, int | float) and nbf - LEEWAY_SECONDS > now:
            raise AuthError("token is not yet valid (nbf)")
        if "iss" in answer and answer["iss"] != self.issuer:
            raise AuthError("invalid issuer")
        aud = answer.get("aud")
        audiences = aud if isinstance(aud, list) else [aud]
        if self.audience not in audiences:
            # An active token of the issuer is not enough: it must have been issued for us.
            raise AuthError("token audience doesn't match" if aud is not None else "token has no audience")
        return answer


@dataclass(frozen=True)
class _Key:
    """A verification key and the one algorithm it verifies."""

    alg: str
    key: Any


def _key_of(jwk: dict[str, Any]) -> _Key | None:
    """The key of a JWK we can use, or None: RSA keys verify RS256, P-256 keys ES256.

    A JWK that names another `alg`, or is not a signing key (`use` other than sig), is skipped.
    """
    import jwt
    from jwt.algorithms import ECAlgorithm, RSAAlgorithm

    kty, declared = jwk.get("kty"), jwk.get("alg")
    if jwk.get("use") not in (None, "sig"):
        return None
    try:
        if kty == "RSA" and declared in (None, "RS256"):
            return _Key("RS256", RSAAlgorithm.from_jwk(json.dumps(jwk)))
        if kty == "EC" and jwk.get("crv") == "P-256" and declared in (None, "ES256"):
            return _Key("ES256", ECAlgorithm.from_jwk(json.dumps(jwk)))
    except (jwt.PyJWTError, ValueError, KeyError, TypeError):
        return None
    return None


def _read_secret_file(path: str) -> str:
    """A small mounted file (a few bytes; a sync read like the token file's in `_fetch_options`)."""
    with open(path) as f:
        return f.read().strip()


def client_secret_basic(client_id: str, secret: str) -> str:
    """`Basic ...` for an OAuth client: RFC 6749 2.3.1 form-encodes id and secret before base64."""
    pair = f"{urllib.parse.quote_plus(client_id)}:{urllib.parse.quote_plus(secret)}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


def _short(value: object, limit: int = 64) -> str:
    """A hostile header value, quoted and cut for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _reason(exc: BaseException) -> str:
    return str(exc)[:200] or type(exc).__name__


def _quotable(text: str) -> str:
    """Text safe inside a quoted-string of a header: printable ASCII, no quote or backslash."""
    cleaned = "".join(c if " " <= c <= "~" and c not in '"\\' else "'" if c == '"' else "?" for c in text)
    return cleaned[:300]


def make_authenticator(
    cfg: IncomingAuthSettings, http: aiohttp.ClientSession | None = None, resource_metadata: str | None = None
) -> Authenticator:
    """The authenticator for a resolved config (see `IncomingAuthSettings.resolved`)."""
    if cfg.type == "oidc":
        if cfg.oidc is None or cfg.oidc_file is not None:
            raise AuthConfigError("incoming auth: resolve oidcFile before building the authenticator")
        return OIDCAuthenticator(cfg.oidc, http, resource_metadata)
    return AnonymousAuthenticator()


def protected_resource_metadata(cfg: OIDCSettings, resource: str) -> dict[str, Any]:
    """The RFC 9728 document: which authorization server protects `resource` (cfg.resource wins)."""
    return {
        "resource": cfg.resource or resource,
        "authorization_servers": [cfg.issuer],
        "scopes_supported": cfg.scopes,
        "bearer_methods_supported": ["header"],
    }
