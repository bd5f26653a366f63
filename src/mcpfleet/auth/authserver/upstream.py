"""The upstream identity provider users log in with: its endpoints (OIDC discovery or explicit OAuth
2.0 endpoints), the authorize URL (PKCE S256, state, nonce), the code exchange and refresh at its
token endpoint (httpx), and who the user is (the validated ID token, or a path in the token
response, or the userinfo endpoint's answer, or a subject derived from the access token). Responses are bounded (1 MiB) and time-boxed.
"""

from __future__ import annotations

import base64
import hashlib
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt

from mcpfleet.auth.authserver.config import Upstream, read_secret_text
from mcpfleet.httplimits import IDENTITY, BodyTooLarge, BodyUnreadable, read_capped

MAX_RESPONSE_BYTES = 1024 * 1024
DISCOVERY_TTL = 3600.0
ID_TOKEN_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]


class UpstreamError(Exception):
    """The identity provider failed or answered something unusable (the message is safe to show)."""


@dataclass(frozen=True)
class Endpoints:
    authorization_endpoint: str
    token_endpoint: str
    issuer: str | None = None
    jwks_uri: str | None = None
    basic_auth: bool = False
    userinfo_endpoint: str | None = None


@dataclass(frozen=True)
class UpstreamIdentity:
    subject: str
    name: str | None = None
    email: str | None = None


def _first(document: dict[str, Any], fields: list[str]) -> str | None:
    """The first of `fields` (dot-notation paths) with a non-empty string or number value, as text."""
    for field in fields:
        value = dotted(document, field)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
    return None


def pkce_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def dotted(document: Any, path: str) -> Any:
    """The value at a dot-notation path (`authed_user.access_token`), None when absent."""
    for part in path.split("."):
        if not isinstance(document, dict):
            return None
        document = document.get(part)
    return document


async def _json(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        body = await read_capped(response, MAX_RESPONSE_BYTES)
    except BodyTooLarge:
        raise UpstreamError(f"{what}: response larger than {MAX_RESPONSE_BYTES} bytes") from None
    except BodyUnreadable as exc:
        raise UpstreamError(f"{what}: {exc}") from None
    try:
        import orjson

        value = orjson.loads(body)
    except ValueError as exc:
        raise UpstreamError(f"{what}: answered HTTP {response.status_code} without JSON") from exc
    if not isinstance(value, dict):
        raise UpstreamError(f"{what}: answered JSON that is not an object")
    return value


class UpstreamClient:
    def __init__(self, cfg: Upstream, http: httpx.AsyncClient, callback_url: str) -> None:
        self.cfg = cfg
        self.http = http
        self.redirect_uri = cfg.redirect_uri or callback_url
        self.client_secret = read_secret_text(cfg.client_secret_file) if cfg.client_secret_file else None
        self._endpoints: tuple[float, Endpoints] | None = None
        self._jwks: tuple[float, dict[str, Any]] | None = None

    async def _get_json(self, url: str, what: str) -> dict[str, Any]:
        try:
            async with self.http.stream(
                "GET", url, headers={"accept": "application/json", **IDENTITY}
            ) as response:
                if response.status_code != 200:
                    raise UpstreamError(f"{what}: HTTP {response.status_code}")
                return await _json(response, what)
        except httpx.HTTPError as exc:
            raise UpstreamError(f"{what}: {type(exc).__name__}") from exc

    async def endpoints(self) -> Endpoints:
        cfg = self.cfg
        if cfg.type == "oauth2":
            assert cfg.authorization_endpoint and cfg.token_endpoint
            return Endpoints(cfg.authorization_endpoint, cfg.token_endpoint)
        now = time.monotonic()
        if self._endpoints is not None and self._endpoints[0] > now:
            return self._endpoints[1]
        assert cfg.issuer_url
        doc = await self._get_json(
            cfg.issuer_url.rstrip("/") + "/.well-known/openid-configuration", "discovery"
        )
        if doc.get("issuer") != cfg.issuer_url:
            raise UpstreamError("discovery: the document names another issuer")
        authorize, token = doc.get("authorization_endpoint"), doc.get("token_endpoint")
        if not isinstance(authorize, str) or not isinstance(token, str):
            raise UpstreamError("discovery: no authorization_endpoint / token_endpoint")
        methods = doc.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        found = Endpoints(
            authorize,
            token,
            issuer=cfg.issuer_url,
            jwks_uri=doc.get("jwks_uri") if isinstance(doc.get("jwks_uri"), str) else None,
            basic_auth="client_secret_basic" in methods,
            userinfo_endpoint=doc.get("userinfo_endpoint")
            if isinstance(doc.get("userinfo_endpoint"), str)
            else None,
        )
        self._endpoints = (now + DISCOVERY_TTL, found)
        return found

    async def authorize_url(self, *, state: str, verifier: str, nonce: str) -> str:
        endpoints = await self.endpoints()
        params = {
            **self.cfg.additional_authorization_params,
            "response_type": "code",
            "client_id": self.cfg.client_id,
            "redirect_uri": self.redirect_uri,
            "state": state,
            "code_challenge": pkce_challenge(verifier),
            "code_challenge_method": "S256",
        }
        if self.cfg.requested_scopes:
            params["scope"] = " ".join(self.cfg.requested_scopes)
        if self.cfg.type == "oidc":
            params["nonce"] = nonce
        separator = "&" if "?" in endpoints.authorization_endpoint else "?"
        return endpoints.authorization_endpoint + separator + urlencode(params)

    async def _token_request(self, form: dict[str, str]) -> dict[str, Any]:
        endpoints = await self.endpoints()
        form = {**form, "client_id": self.cfg.client_id}
        auth: httpx.BasicAuth | None = None
        if self.client_secret is not None:
            if endpoints.basic_auth:
                from urllib.parse import quote

                # RFC 6749 2.3.1: both parts form-urlencoded before Basic encoding.
                auth = httpx.BasicAuth(quote(self.cfg.client_id, safe=""), quote(self.client_secret, safe=""))
            else:
                form["client_secret"] = self.client_secret
        try:
            async with self.http.stream(
                "POST",
                endpoints.token_endpoint,
                data=form,
                auth=auth,
                headers={"accept": "application/json", **IDENTITY},
            ) as response:
                body = await _json(response, "upstream token endpoint")
                if response.status_code != 200:
                    error = body.get("error")
                    raise UpstreamError(
                        f"upstream token endpoint: {error if isinstance(error, str) else response.status_code}"
                    )
        except httpx.HTTPError as exc:
            raise UpstreamError(f"upstream token endpoint: {type(exc).__name__}") from exc
        return self._normalized(body)

    def _normalized(self, body: dict[str, Any]) -> dict[str, Any]:
        """The standard token fields, from the configured paths when the response nests them."""
        cfg = self.cfg
        access = dotted(body, cfg.access_token_path) if cfg.access_token_path else body.get("access_token")
        if not isinstance(access, str) or not access:
            raise UpstreamError("upstream token endpoint: no access_token")
        expires = dotted(body, cfg.expires_in_path or "expires_in")
        refresh = dotted(body, cfg.refresh_token_path or "refresh_token")
        scope = dotted(body, cfg.scope_path or "scope")
        return {
            "access_token": access,
            "refresh_token": refresh if isinstance(refresh, str) else None,
            "expires_at": time.time() + float(expires)
            if isinstance(expires, int | float) and expires > 0
            else None,
            "scope": scope if isinstance(scope, str) else None,
            "id_token": body.get("id_token") if isinstance(body.get("id_token"), str) else None,
            "raw": body if cfg.subject_path else None,
        }

    async def exchange(self, code: str, verifier: str) -> dict[str, Any]:
        return await self._token_request(
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": self.redirect_uri,
                "code_verifier": verifier,
            }
        )

    async def refresh(self, refresh_token: str) -> dict[str, Any]:
        return await self._token_request({"grant_type": "refresh_token", "refresh_token": refresh_token})

    async def identity(self, tokens: dict[str, Any], nonce: str) -> UpstreamIdentity:
        cfg = self.cfg
        if cfg.type == "oidc":
            claims = await self._id_token_claims(tokens.get("id_token"), nonce)
            subject = claims.get(cfg.subject_claim)
            if not isinstance(subject, str) or not subject:
                raise UpstreamError(f"upstream ID token: no {cfg.subject_claim} claim")
            name, email = claims.get("name"), claims.get("email")
            if cfg.userinfo is not None:
                # userInfoOverride: name and email from the userinfo answer; the subject stays the
                # ID token's, and an answer about someone else fails the login (OIDC Core 5.3.2).
                info = await self._userinfo(tokens["access_token"])
                other = _first(info, cfg.userinfo.subject_fields)
                if other is not None and other != subject:
                    raise UpstreamError(
                        "upstream userinfo: the answer names another subject than the ID token"
                    )
                name = _first(info, cfg.userinfo.name_fields) or name
                email = _first(info, cfg.userinfo.email_fields) or email
            return UpstreamIdentity(
                subject, name if isinstance(name, str) else None, email if isinstance(email, str) else None
            )
        if cfg.subject_path:
            raw = tokens.get("raw") or {}
            subject = dotted(raw, cfg.subject_path)
            if not isinstance(subject, str | int) or subject == "":
                raise UpstreamError(f"upstream token response: nothing at {cfg.subject_path}")
            name = dotted(raw, cfg.name_path) if cfg.name_path else None
            email = dotted(raw, cfg.email_path) if cfg.email_path else None
            return UpstreamIdentity(
                str(subject),
                name if isinstance(name, str) else None,
                email if isinstance(email, str) else None,
            )
        if cfg.userinfo is not None:
            info = await self._userinfo(tokens["access_token"])
            found = _first(info, cfg.userinfo.subject_fields)
            if found is None:
                raise UpstreamError(f"upstream userinfo: none of {', '.join(cfg.userinfo.subject_fields)}")
            return UpstreamIdentity(
                found, _first(info, cfg.userinfo.name_fields), _first(info, cfg.userinfo.email_fields)
            )
        # Synthesis: a stable, non-PII subject for upstreams that say nothing about the user.
        digest = hashlib.sha256(tokens["access_token"].encode()).hexdigest()[:32]
        return UpstreamIdentity(f"{cfg.name}:{digest}")

    async def _userinfo(self, access_token: str) -> dict[str, Any]:
        """The userinfo answer for `access_token` (bounded like every upstream answer)."""
        fetch = self.cfg.userinfo
        assert fetch is not None
        url = fetch.url or (await self.endpoints()).userinfo_endpoint
        if not url:
            raise UpstreamError("upstream userinfo: no endpoint (set endpointUrl; discovery names none)")
        headers = {
            **fetch.headers,
            "authorization": f"Bearer {access_token}",
            "accept": "application/json",
            **IDENTITY,
        }
        try:
            async with self.http.stream(fetch.method, url, headers=headers) as response:
                if response.status_code != 200:
                    raise UpstreamError(f"upstream userinfo: HTTP {response.status_code}")
                return await _json(response, "upstream userinfo")
        except httpx.HTTPError as exc:
            raise UpstreamError(f"upstream userinfo: {type(exc).__name__}") from exc

    async def _id_token_claims(self, id_token: object, nonce: str) -> dict[str, Any]:
        if not isinstance(id_token, str):
            raise UpstreamError("upstream token endpoint: no id_token (is the openid scope requested?)")
        endpoints = await self.endpoints()
        if endpoints.jwks_uri is None:
            raise UpstreamError("discovery: no jwks_uri")
        try:
            kid = jwt.get_unverified_header(id_token).get("kid")
            key = await self._key(endpoints.jwks_uri, kid)
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key.key,
                algorithms=[key.algorithm_name]
                if key.algorithm_name in ID_TOKEN_ALGORITHMS
                else ID_TOKEN_ALGORITHMS,
                audience=self.cfg.client_id,
                issuer=endpoints.issuer,
                options={"require": ["exp", "iat", "iss", "aud"]},
                leeway=60,
            )
        except jwt.PyJWTError as exc:
            raise UpstreamError(f"upstream ID token: {exc}") from exc
        if claims.get("nonce") != nonce:
            raise UpstreamError("upstream ID token: nonce mismatch")
        return claims

    async def _key(self, jwks_uri: str, kid: object) -> jwt.PyJWK:
        for attempt in range(2):
            now = time.monotonic()
            if self._jwks is None or self._jwks[0] <= now or attempt == 1:
                self._jwks = (now + DISCOVERY_TTL, await self._get_json(jwks_uri, "upstream JWKS"))
            try:
                keys = jwt.PyJWKSet.from_dict(self._jwks[1]).keys
            except jwt.PyJWTError as exc:
                raise UpstreamError(f"upstream JWKS: {exc}") from exc
            for key in keys:
                if kid is None or key.key_id == kid:
                    return key
        raise UpstreamError("upstream ID token: signed with an unknown key")
