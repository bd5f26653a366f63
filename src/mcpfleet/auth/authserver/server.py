"""The authorization server's HTTP endpoints (an ASGI app the proxy mounts before its auth guard).

* `GET /.well-known/oauth-authorization-server` and `/.well-known/openid-configuration` (RFC 8414 /
  OIDC discovery, also under a path suffix), `GET /.well-known/jwks.json`;
* `POST /oauth/register`: RFC 7591 dynamic client registration; public clients (`none`) unless
  `allowConfidentialClientRegistration` (then a secret is minted once, stored only as a hash);
* `GET /oauth/authorize`: OAuth 2.1 authorization request, PKCE S256 required; the user is sent to
  the upstream identity provider (with our own PKCE, state and nonce);
* `GET /oauth/callback`: the provider's answer; the user's upstream tokens are kept in a session and
  a one-time code goes to the client's registered redirect URI (exact match);
* `POST /oauth/token`: `authorization_code` (PKCE verified, code redeemed once; a replayed code ends
  its session) and `refresh_token` (rotated on every use; a rotated token presented again revokes
  its whole family, i.e. the login session); access tokens are JWTs signed by `keys`.

Hostile input: bodies are bounded (`MAX_BODY_BYTES`), every parameter's length and shape checked,
repeated parameters refused, and every failure is an RFC 6749 JSON error with a 4xx status (or an
error redirect once the redirect URI is known to be the client's); the store or the upstream failing
gives `temporarily_unavailable` / `server_error` as a 4xx / redirect, never a 5xx or a traceback.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import re
import secrets
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import httpx
import orjson

from mcpfleet.auth.authserver.config import AuthServerSettings
from mcpfleet.auth.authserver.keys import KeySet, new_opaque_token
from mcpfleet.auth.authserver.storage import MemoryStorage, RedisStorage, Storage, StorageError
from mcpfleet.auth.authserver.upstream import UpstreamClient, UpstreamError, pkce_challenge

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

MAX_BODY_BYTES = 64 * 1024
MAX_PARAMS = 32
MAX_URI = 2048
MAX_STATE = 1024
MAX_SCOPE = 1024
MAX_REDIRECT_URIS = 10
PENDING_TTL = 600.0
CLIENT_TTL = 30 * 24 * 3600.0
"""A registered client unused for 30 days is forgotten and must register again (as ToolHive does)."""
PKCE = re.compile(r"^[A-Za-z0-9\-._~]{43,128}$")
CLIENT_ID = re.compile(r"^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]{1,2048}$")
SCOPE_TOKEN = re.compile(r"^[\x21\x23-\x5B\x5D-\x7E]{1,256}$")
FORBIDDEN_SCHEMES = frozenset({"javascript", "data", "file", "vbscript", "about", "blob"})
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
UNKNOWN_CLIENT = "unknown client_id"

WELL_KNOWN_AS = "/.well-known/oauth-authorization-server"
WELL_KNOWN_OIDC = "/.well-known/openid-configuration"
JWKS_PATH = "/.well-known/jwks.json"


class OAuthError(Exception):
    """An RFC 6749 error: `error` code, a description safe to show, the HTTP status."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status


class RedirectError(OAuthError):
    """An error reported to the client through its (already validated) redirect URI."""

    def __init__(self, error: str, description: str, redirect_uri: str, state: str | None) -> None:
        super().__init__(error, description)
        self.redirect_uri = redirect_uri
        self.state = state


def _is_loopback(host: str | None) -> bool:
    return (host or "").lower() in LOOPBACK


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _params(raw: bytes, where: str) -> dict[str, str]:
    """Form / query parameters: each at most once (RFC 6749 3.1), bounded in number."""
    try:
        text = raw.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_PARAMS, strict_parsing=False)
    except (UnicodeDecodeError, ValueError) as exc:
        raise OAuthError("invalid_request", f"{where}: malformed parameters") from exc
    found: dict[str, str] = {}
    for name, value in pairs:
        if name in found:
            raise OAuthError("invalid_request", f"{name}: given more than once")
        found[name] = value
    return found


def _required(params: dict[str, str], name: str, max_length: int = MAX_URI) -> str:
    value = params.get(name)
    if not value:
        raise OAuthError("invalid_request", f"{name}: required")
    if len(value) > max_length:
        raise OAuthError("invalid_request", f"{name}: longer than {max_length} characters")
    return value


def _optional(params: dict[str, str], name: str, max_length: int) -> str | None:
    value = params.get(name) or None
    if value is not None and len(value) > max_length:
        raise OAuthError("invalid_request", f"{name}: longer than {max_length} characters")
    return value


def validate_redirect_uri(uri: object, where: str) -> str:
    """A redirect URI a client may register: absolute, no fragment, https, http on a loopback host,
    or a private-use scheme (native apps, RFC 8252 7.1); never javascript:, data:, file:."""
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI:
        raise OAuthError("invalid_redirect_uri", f"{where}: a URI of at most {MAX_URI} characters")
    try:
        parts = urlsplit(uri)
        host = parts.hostname
    except ValueError as exc:
        raise OAuthError("invalid_redirect_uri", f"{where}: not a URI") from exc
    if any(c in uri for c in ' \t\r\n<>"\\') or parts.fragment or "#" in uri:
        raise OAuthError("invalid_redirect_uri", f"{where}: must not contain a fragment or spaces")
    scheme = parts.scheme.lower()
    if not scheme or scheme in FORBIDDEN_SCHEMES:
        raise OAuthError("invalid_redirect_uri", f"{where}: scheme {scheme or '(none)'} is not allowed")
    if scheme == "http" and not _is_loopback(host):
        raise OAuthError("invalid_redirect_uri", f"{where}: http is allowed for loopback hosts only")
    if scheme in {"http", "https"} and not host:
        raise OAuthError("invalid_redirect_uri", f"{where}: no host")
    return uri


class AuthServer:
    """The endpoints (`handles(path)` says which paths are ours) and the token checks of the guard."""

    def __init__(
        self,
        settings: AuthServerSettings,
        *,
        resource: str,
        storage: Storage | None = None,
        http: httpx.AsyncClient | None = None,
        cimd_verify: ssl.SSLContext | bool = True,
    ) -> None:
        """`http` calls the upstream identity provider; CIMD documents are fetched by a client of
        their own, behind the request-forgery guard (`cimd_verify`: how their TLS is verified)."""
        self.settings = settings
        self.issuer = settings.issuer
        self.resource = resource
        self.keys = KeySet(settings.signing_key_files, settings.hmac_secret_files)
        if storage is None:
            if settings.storage == "redis":
                assert settings.redis is not None
                storage = RedisStorage(settings.redis)
            else:
                storage = MemoryStorage()
        self.storage = storage
        self.http = http or httpx.AsyncClient(timeout=10.0, follow_redirects=False)
        self.upstream = UpstreamClient(settings.upstream, self.http, self.issuer + "/oauth/callback")
        self.scopes_supported = sorted(
            {
                *settings.baseline_client_scopes,
                *settings.upstream.requested_scopes,
                "openid",
                "offline_access",
            }
        )
        self._routes: dict[
            str, Callable[[Scope, Receive], Awaitable[tuple[int, list[tuple[bytes, bytes]], bytes]]]
        ] = {
            "/oauth/register": self._register,
            "/oauth/authorize": self._authorize,
            "/oauth/callback": self._callback,
            "/oauth/token": self._token,
            JWKS_PATH: self._jwks,
        }
        self.cimd = None
        if settings.cimd_enabled:
            from mcpfleet.auth.authserver.cimd import CIMDResolver

            self.cimd = CIMDResolver(
                settings.cimd_cache_ttl,
                settings.cimd_cache_max_size,
                allow_private=settings.cimd_allow_private_ip,
                verify=cimd_verify,
            )

    # -- routing ---------------------------------------------------------------------------------

    def handles(self, path: str) -> bool:
        return (
            path in self._routes
            or path == WELL_KNOWN_AS
            or path.startswith(WELL_KNOWN_AS + "/")
            or path == WELL_KNOWN_OIDC
            or path.startswith(WELL_KNOWN_OIDC + "/")
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        try:
            if path.startswith("/.well-known/oauth-authorization-server") or path.startswith(WELL_KNOWN_OIDC):
                self._method(scope, "GET")
                status, headers, body = 200, _JSON, orjson.dumps(self.metadata())
            else:
                status, headers, body = await self._routes[path](scope, receive)
        except RedirectError as exc:
            query = {"error": exc.error, "error_description": exc.description, "iss": self.issuer}
            if exc.state is not None:
                query["state"] = exc.state
            status, headers, body = 302, [(b"location", _with_query(exc.redirect_uri, query).encode())], b""
        except OAuthError as exc:
            status, headers, body = (
                exc.status,
                _NO_STORE,
                orjson.dumps({"error": exc.error, "error_description": exc.description}),
            )
            if exc.status == 401:
                headers = [*headers, (b"www-authenticate", b'Basic realm="oauth"')]
        except StorageError as exc:
            log.warning("authorization server: store unavailable: %s", exc)
            status, headers, body = (
                503,
                _NO_STORE,
                orjson.dumps(
                    {
                        "error": "temporarily_unavailable",
                        "error_description": "the session store is unavailable",
                    }
                ),
            )
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _method(self, scope: Scope, *allowed: str) -> None:
        if scope.get("method") not in allowed:
            raise OAuthError("invalid_request", f"method {scope.get('method')} not allowed here", 405)

    # -- discovery -------------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """RFC 8414 metadata (also served as the OIDC discovery document)."""
        base = self.settings.authorization_endpoint_base_url or self.issuer
        methods = ["none"]
        if self.settings.allow_confidential_client_registration:
            methods += ["client_secret_basic", "client_secret_post"]
        document: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": base + "/oauth/authorize",
            "token_endpoint": self.issuer + "/oauth/token",
            "registration_endpoint": self.issuer + "/oauth/register",
            "jwks_uri": self.issuer + JWKS_PATH,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": methods,
            "scopes_supported": self.scopes_supported,
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": sorted({k.algorithm for k in self.keys.signing}),
            "authorization_response_iss_parameter_supported": True,
        }
        if self.cimd is not None:
            document["client_id_metadata_document_supported"] = True
        return document

    async def _jwks(self, scope: Scope, receive: Receive) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        self._method(scope, "GET")
        return 200, _JSON, orjson.dumps(self.keys.jwks())

    # -- registration ----------------------------------------------------------------------------

    async def _register(self, scope: Scope, receive: Receive) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        self._method(scope, "POST")
        body = await _body(scope, receive)
        if not _content_type(scope).startswith("application/json"):
            raise OAuthError("invalid_client_metadata", "content-type must be application/json")
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise OAuthError("invalid_client_metadata", "the body is not JSON") from exc
        if not isinstance(request, dict):
            raise OAuthError("invalid_client_metadata", "the body must be a JSON object")
        client = self._client_metadata(request)
        client_id = secrets.token_urlsafe(24)
        secret: str | None = None
        if client["token_endpoint_auth_method"] != "none":
            secret = secrets.token_urlsafe(32)
            client["secret_hash"] = _secret_hash(secret)
        client["client_id"] = client_id
        client["client_id_issued_at"] = int(time.time())
        await self.storage.put("client", client_id, client, CLIENT_TTL)
        answer = {k: v for k, v in client.items() if k != "secret_hash"}
        answer["scope"] = " ".join(client["scope"])
        if secret is not None:
            answer["client_secret"] = secret
            answer["client_secret_expires_at"] = 0
        return 201, _NO_STORE, orjson.dumps(answer)

    def _auth_method(self, request: dict[str, Any], redirect_uris: list[str]) -> str:
        """`none`, or a confidential method when allowed (https, non-loopback redirect URIs only)."""
        method = request.get("token_endpoint_auth_method") or "none"
        allowed = {"none"}
        if self.settings.allow_confidential_client_registration:
            allowed |= {"client_secret_basic", "client_secret_post"}
        if method not in allowed:
            raise OAuthError(
                "invalid_client_metadata",
                f"token_endpoint_auth_method: one of {', '.join(sorted(allowed))}",
            )
        if set(redirect_uris) & set(self.settings.force_confidential_redirect_uris):
            method = "client_secret_post"
        if method != "none":
            for uri in redirect_uris:
                parts = urlsplit(uri)
                if parts.scheme != "https" or _is_loopback(parts.hostname):
                    raise OAuthError(
                        "invalid_redirect_uri",
                        "a confidential client needs https redirect URIs on a non-loopback host",
                    )
        return str(method)

    def _client_metadata(self, request: dict[str, Any]) -> dict[str, Any]:
        uris = request.get("redirect_uris")
        if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
            raise OAuthError(
                "invalid_redirect_uri", f"redirect_uris: a list of 1 to {MAX_REDIRECT_URIS} URIs"
            )
        redirect_uris = [validate_redirect_uri(u, f"redirect_uris[{i}]") for i, u in enumerate(uris)]
        method = self._auth_method(request, redirect_uris)
        grants = request.get("grant_types") or ["authorization_code", "refresh_token"]
        if (
            not isinstance(grants, list)
            or not set(grants) <= {"authorization_code", "refresh_token"}
            or not grants
        ):
            raise OAuthError(
                "invalid_client_metadata", "grant_types: authorization_code and refresh_token only"
            )
        responses = request.get("response_types") or ["code"]
        if responses != ["code"]:
            raise OAuthError("invalid_client_metadata", 'response_types: only ["code"]')
        name = request.get("client_name")
        if name is not None and (not isinstance(name, str) or len(name) > 256):
            raise OAuthError("invalid_client_metadata", "client_name: a string of at most 256 characters")
        scope = request.get("scope")
        if scope is not None and (not isinstance(scope, str) or len(scope) > MAX_SCOPE):
            raise OAuthError("invalid_client_metadata", f"scope: a string of at most {MAX_SCOPE} characters")
        requested = scope.split() if scope else list(self.scopes_supported)
        unknown = [s for s in requested if s not in self.scopes_supported]
        if unknown:
            raise OAuthError("invalid_client_metadata", f"scope: not supported: {' '.join(unknown[:5])}")
        scopes = sorted({*requested, *self.settings.baseline_client_scopes})
        client: dict[str, Any] = {
            "redirect_uris": redirect_uris,
            "token_endpoint_auth_method": method,
            "grant_types": grants,
            "response_types": ["code"],
            "scope": scopes,
        }
        if name is not None:
            client["client_name"] = name
        return client

    async def _client(self, client_id: str) -> dict[str, Any] | None:
        if not CLIENT_ID.match(client_id):
            return None
        if self.cimd is not None and client_id.startswith("https://"):
            try:
                document = await self.cimd.resolve(client_id)
            except OAuthError:
                raise
            return {
                **self._client_metadata({**document, "token_endpoint_auth_method": "none"}),
                "client_id": client_id,
            }
        client = await self.storage.get("client", client_id)
        if client is not None:
            await self.storage.put("client", client_id, client, CLIENT_TTL)  # 30 days from the last use
        return client

    # -- authorization ---------------------------------------------------------------------------

    async def _authorize_target(self, params: dict[str, str]) -> tuple[str, dict[str, Any], str, str | None]:
        """The client, its redirect URI (exactly a registered one) and state: until these are known
        good, errors are answered directly, never redirected."""
        client_id = _required(params, "client_id")
        client = await self._client(client_id)
        if client is None:
            raise OAuthError("invalid_client", UNKNOWN_CLIENT, 401)
        redirect_uri = params.get("redirect_uri")
        if redirect_uri is None:
            if len(client["redirect_uris"]) != 1:
                raise OAuthError("invalid_request", "redirect_uri: required (the client registered several)")
            redirect_uri = client["redirect_uris"][0]
        elif redirect_uri not in client["redirect_uris"]:
            raise OAuthError("invalid_request", "redirect_uri: does not exactly match a registered one")
        state = params.get("state")
        if state is not None and len(state) > MAX_STATE:
            raise OAuthError("invalid_request", f"state: longer than {MAX_STATE} characters")
        return client_id, client, redirect_uri, state

    async def _authorize(
        self, scope: Scope, receive: Receive
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        self._method(scope, "GET")
        params = _params(scope.get("query_string", b""), "query")
        client_id, client, redirect_uri, state = await self._authorize_target(params)

        def fail(error: str, description: str) -> RedirectError:
            return RedirectError(error, description, redirect_uri, state)

        if params.get("response_type") != "code":
            raise fail("unsupported_response_type", "response_type: only code")
        challenge = params.get("code_challenge") or ""
        if not PKCE.match(challenge):
            raise fail(
                "invalid_request", "code_challenge: required, 43 to 128 characters of [A-Za-z0-9-._~] (PKCE)"
            )
        if params.get("code_challenge_method") != "S256":
            raise fail("invalid_request", "code_challenge_method: S256 required")
        requested = (params.get("scope") or "").split()
        if len(params.get("scope") or "") > MAX_SCOPE or not all(SCOPE_TOKEN.match(s) for s in requested):
            raise fail("invalid_scope", "scope: malformed")
        granted = requested or list(client["scope"])
        outside = [s for s in granted if s not in client["scope"]]
        if outside:
            raise fail("invalid_scope", f"scope: not registered for this client: {' '.join(outside[:5])}")
        resource = params.get("resource")
        if resource is not None and (
            len(resource) > MAX_URI or "#" in resource or not urlsplit(resource).scheme
        ):
            raise fail("invalid_target", "resource: an absolute URI without fragment")
        upstream_state = secrets.token_urlsafe(32)
        verifier = secrets.token_urlsafe(48)
        nonce = secrets.token_urlsafe(24)
        try:
            location = await self.upstream.authorize_url(state=upstream_state, verifier=verifier, nonce=nonce)
        except UpstreamError as exc:
            log.warning("authorization server: upstream %s: %s", self.settings.upstream.name, exc)
            raise fail("temporarily_unavailable", "the identity provider is unavailable") from exc
        pending = {
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": challenge,
            "scope": granted,
            "resource": resource,
            "verifier": verifier,
            "nonce": nonce,
        }
        await self.storage.put("pending", self.keys.token_keys(upstream_state)[0], pending, PENDING_TTL)
        return 302, [(b"location", location.encode()), (b"cache-control", b"no-store")], b""

    async def _callback(self, scope: Scope, receive: Receive) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        self._method(scope, "GET")
        params = _params(scope.get("query_string", b""), "query")
        upstream_state = _required(params, "state", 256)
        pending = await self._take("pending", upstream_state)
        if pending is None:
            raise OAuthError("invalid_request", "state: unknown or expired (start again at /oauth/authorize)")

        def fail(error: str, description: str) -> RedirectError:
            return RedirectError(error, description, pending["redirect_uri"], pending["state"])

        if "error" in params:
            raise fail("access_denied", "the identity provider refused the login")
        code = _required(params, "code", 4096)
        try:
            tokens = await self.upstream.exchange(code, pending["verifier"])
            identity = await self.upstream.identity(tokens, pending["nonce"])
        except UpstreamError as exc:
            log.warning("authorization server: upstream %s: %s", self.settings.upstream.name, exc)
            raise fail("server_error", "the identity provider's answer could not be used") from exc
        tokens.pop("raw", None)
        sid = secrets.token_urlsafe(24)
        session = {
            "upstream": tokens,
            "sub": identity.subject,
            "name": identity.name,
            "email": identity.email,
            "client_id": pending["client_id"],
        }
        await self.storage.put("session", sid, session, self.settings.refresh_token_lifespan)
        ours = new_opaque_token()
        grant = {
            "client_id": pending["client_id"],
            "redirect_uri": pending["redirect_uri"],
            "code_challenge": pending["code_challenge"],
            "scope": pending["scope"],
            "resource": pending["resource"],
            "sid": sid,
        }
        await self.storage.put("code", self.keys.token_keys(ours)[0], grant, self.settings.auth_code_lifespan)
        query = {"code": ours, "iss": self.issuer}
        if pending["state"] is not None:
            query["state"] = pending["state"]
        return (
            302,
            [
                (b"location", _with_query(pending["redirect_uri"], query).encode()),
                (b"cache-control", b"no-store"),
            ],
            b"",
        )

    async def _take(self, kind: Any, token: str) -> dict[str, Any] | None:
        for key in self.keys.token_keys(token):
            found = await self.storage.take(kind, key)
            if found is not None:
                return found
        return None

    # -- token -----------------------------------------------------------------------------------

    async def _token(self, scope: Scope, receive: Receive) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        self._method(scope, "POST")
        body = await _body(scope, receive)
        if not _content_type(scope).startswith("application/x-www-form-urlencoded"):
            raise OAuthError("invalid_request", "content-type must be application/x-www-form-urlencoded")
        params = _params(body, "body")
        client = await self._authenticate_client(scope, params)
        grant_type = params.get("grant_type")
        if grant_type not in client["grant_types"]:
            raise OAuthError(
                "unsupported_grant_type"
                if grant_type not in {"authorization_code", "refresh_token"}
                else "unauthorized_client",
                f"grant_type: {str(grant_type)[:64]!r} not allowed",
            )
        if grant_type == "authorization_code":
            return await self._code_grant(client, params)
        refresh = _required(params, "refresh_token", 256)
        held = await self._take("refresh", refresh)
        if held is None:
            await self._revoke_family_on_reuse(refresh)
            raise OAuthError("invalid_grant", "refresh_token: unknown, expired or already used")
        # Remembered before anything else can fail: a second use of this token from now on is a replay.
        await self.storage.put(
            "rotated",
            self.keys.token_keys(refresh)[0],
            {"sid": held["sid"]},
            self.settings.refresh_token_lifespan,
        )
        if held["client_id"] != client["client_id"]:
            raise OAuthError("invalid_grant", "refresh_token: unknown, expired or already used")
        scopes = held["scope"]
        if params.get("scope"):
            narrowed = params["scope"].split()
            if not set(narrowed) <= set(scopes):
                raise OAuthError("invalid_scope", "scope: wider than the original grant")
            scopes = narrowed
        return await self._issue(client, held["sid"], scopes, held.get("resource"))

    async def _revoke_family_on_reuse(self, refresh: str) -> None:
        """A refresh token already rotated out is presented again: either its legitimate client or an
        attacker holds a copy. The whole family (every token descending from that login, i.e. its
        session) is revoked (OAuth 2.1 section 4.3.1, RFC 9700 section 4.14.2)."""
        for key in self.keys.token_keys(refresh):
            rotated = await self.storage.get("rotated", key)
            if rotated is not None:
                log.warning(
                    "authorization server: a rotated refresh token was replayed; its login is revoked"
                )
                await self.storage.delete("session", rotated["sid"])
                return

    async def _code_grant(
        self, client: dict[str, Any], params: dict[str, str]
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """authorization_code: one redemption per code, same client and redirect URI, PKCE S256."""
        code = _required(params, "code", 256)
        verifier = params.get("code_verifier") or ""
        redirect_uri = _optional(params, "redirect_uri", MAX_URI)
        if not PKCE.match(verifier):
            raise OAuthError(
                "invalid_request", "code_verifier: required, 43 to 128 characters of [A-Za-z0-9-._~]"
            )
        grant = await self._take("code", code)
        if grant is None:
            used = await self._take("code", "used:" + code)
            if used is not None:
                # A replayed code: the login it started is revoked (RFC 6749 4.1.2).
                await self.storage.delete("session", used["sid"])
            raise OAuthError("invalid_grant", "code: unknown, expired or already used")
        await self.storage.put(
            "code",
            self.keys.token_keys("used:" + code)[0],
            {"sid": grant["sid"]},
            self.settings.auth_code_lifespan,
        )
        if grant["client_id"] != client["client_id"]:
            raise OAuthError("invalid_grant", "code: issued to another client")
        if redirect_uri is not None and redirect_uri != grant["redirect_uri"]:
            raise OAuthError("invalid_grant", "redirect_uri: differs from the authorization request's")
        if not hmac.compare_digest(pkce_challenge(verifier), grant["code_challenge"]):
            raise OAuthError("invalid_grant", "code_verifier: does not match the code_challenge")
        return await self._issue(client, grant["sid"], grant["scope"], grant["resource"])

    async def _authenticate_client(self, scope: Scope, params: dict[str, str]) -> dict[str, Any]:
        authorization = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), "")
        secret: str | None = None
        client_id = params.get("client_id")
        if authorization.lower().startswith("basic "):
            try:
                decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode()
                basic_id, _, basic_secret = decoded.partition(":")
            except (ValueError, UnicodeDecodeError) as exc:
                raise OAuthError("invalid_client", "malformed Basic credentials", 401) from exc
            basic_id, basic_secret = unquote(basic_id), unquote(basic_secret)
            if client_id is not None and client_id != basic_id:
                raise OAuthError("invalid_request", "client_id: differs from the Basic credentials")
            client_id, secret = basic_id, basic_secret
        elif "client_secret" in params:
            secret = params["client_secret"]
        if not client_id or len(client_id) > MAX_URI:
            raise OAuthError("invalid_client", "client_id: required", 401)
        client = await self._client(client_id)
        if client is None:
            raise OAuthError("invalid_client", UNKNOWN_CLIENT, 401)
        stored = client.get("secret_hash")
        if stored is not None:
            if secret is None or not hmac.compare_digest(_secret_hash(secret), stored):
                raise OAuthError("invalid_client", "client authentication failed", 401)
        elif secret is not None:
            raise OAuthError("invalid_client", "a public client has no secret", 401)
        return client

    async def _issue(
        self, client: dict[str, Any], sid: str, scopes: list[str], resource: str | None
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        session = await self.storage.get("session", sid)
        if session is None:
            raise OAuthError("invalid_grant", "the login session ended (log in again)")
        now = int(time.time())
        lifespan = int(self.settings.access_token_lifespan)
        claims = {
            "iss": self.issuer,
            "sub": session["sub"],
            "aud": self.resource,
            "iat": now,
            "nbf": now,
            "exp": now + lifespan,
            "jti": _b64url(secrets.token_bytes(16)),
            "client_id": client["client_id"],
            "scope": " ".join(scopes),
            "tsid": sid,
        }
        for extra in ("name", "email"):
            if session.get(extra):
                claims[extra] = session[extra]
        refresh = new_opaque_token()
        held = {"client_id": client["client_id"], "sid": sid, "scope": scopes, "resource": resource}
        await self.storage.put(
            "refresh", self.keys.token_keys(refresh)[0], held, self.settings.refresh_token_lifespan
        )
        answer = {
            "access_token": self.keys.sign(claims),
            "token_type": "Bearer",
            "expires_in": lifespan,
            "refresh_token": refresh,
            "scope": " ".join(scopes),
        }
        return 200, _NO_STORE, orjson.dumps(answer)

    # -- what the proxy's guard uses -------------------------------------------------------------

    async def upstream_access_token(self, sid: str) -> str | None:
        """The upstream access token of login session `sid`, refreshed when it expired (None: gone)."""
        session = await self.storage.get("session", sid)
        if session is None:
            return None
        tokens = session["upstream"]
        expires_at = tokens.get("expires_at")
        if expires_at is not None and expires_at - 30 <= time.time() and tokens.get("refresh_token"):
            try:
                fresh = await self.upstream.refresh(tokens["refresh_token"])
            except UpstreamError as exc:
                log.warning("authorization server: upstream refresh failed: %s", exc)
                return None
            fresh.pop("raw", None)
            fresh["refresh_token"] = fresh.get("refresh_token") or tokens["refresh_token"]
            session["upstream"] = fresh
            await self.storage.put("session", sid, session, self.settings.refresh_token_lifespan)
            tokens = fresh
        token = tokens.get("access_token")
        return token if isinstance(token, str) else None

    async def aclose(self) -> None:
        await self.http.aclose()
        if self.cimd is not None:
            await self.cimd.aclose()
        await self.storage.close()


_JSON = [(b"content-type", b"application/json")]
_NO_STORE = [*_JSON, (b"cache-control", b"no-store"), (b"pragma", b"no-cache")]


def _content_type(scope: Scope) -> str:
    return next((v.decode("latin-1").lower() for k, v in scope["headers"] if k == b"content-type"), "")


async def _body(scope: Scope, receive: Receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise OAuthError("invalid_request", "the client went away")
        body += bytes(message.get("body", b""))
        if len(body) > MAX_BODY_BYTES:
            raise OAuthError("invalid_request", f"body larger than {MAX_BODY_BYTES} bytes", 413)
        if not message.get("more_body"):
            return body


def _with_query(uri: str, params: dict[str, str]) -> str:
    separator = "&" if urlsplit(uri).query else ("" if uri.endswith("?") else "?")
    return uri + separator + urlencode(params)
