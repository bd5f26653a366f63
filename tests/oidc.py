"""A local OIDC issuer for the auth tests of the proxy and the vMCP gateway (an ASGI app; serve it with
the suite's in-process uvicorn helpers and set `base` to its URL).

It is also a real (if minimal) upstream identity provider for the embedded authorization server's
tests: `/authorize` logs `login_subject` in at once (no consent page) and redirects with a code, and
`/token` redeems it (PKCE S256 checked, client authenticated by Basic or form secret) for an opaque
access token, a refresh token and an ID token signed by its first key (`nonce` echoed)."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
import urllib.parse
from typing import Any

import jwt
import orjson
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm


async def read_form(receive: Any) -> dict[str, str]:
    """A form-encoded request body (the test servers' token, introspection endpoints)."""
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            return dict(urllib.parse.parse_qsl(body.decode()))


class Issuer:
    """Discovery document + JWKS whose keys the test rotates, and an RFC 7662 introspection endpoint.

    With `require_token`, the JWKS and discovery answer 401 unless called with that bearer token
    (like a Kubernetes API server's `/openid/v1/jwks` read with a service-account token).
    """

    def __init__(self, require_token: str | None = None) -> None:
        self.keys: dict[str, Any] = {}
        self.base = ""
        self.jwks_hits = 0
        self.require_token = require_token
        self.fetch_authorization: list[str] = []
        self.opaque: dict[str, dict[str, Any]] = {}
        """Opaque tokens the introspection endpoint knows: token -> its introspection answer."""
        self.introspection_auth: list[str] = []
        self.advertised_issuer: str | None = None
        """What the discovery document names as `issuer` (default: `base`, as it must)."""
        self.clients: dict[str, str | None] = {}
        """Upstream OAuth clients: client_id -> secret (None: public)."""
        self.login_subject = "user-1"
        self.codes: dict[str, dict[str, Any]] = {}
        self.refresh_tokens: dict[str, str] = {}
        self.access_tokens: dict[str, str] = {}
        """Access tokens issued by /token -> the subject."""
        self.token_requests: list[dict[str, str]] = []
        self.access_token_lifetime = 3600
        self.userinfo_requests: list[tuple[str, dict[str, str]]] = []
        """(method, headers) of each /userinfo request."""
        self.userinfo_subject: str | None = None
        """What /userinfo says the `id` is (default: the access token's subject)."""

    def add_rsa(self, kid: str) -> Any:
        k = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.keys[kid] = ("RS256", k)
        return k

    def add_ec(self, kid: str) -> Any:
        k = ec.generate_private_key(ec.SECP256R1())
        self.keys[kid] = ("ES256", k)
        return k

    def token(
        self,
        kid: str,
        *,
        aud: str = "vmcp",
        exp: float | None = None,
        iss: str | None = None,
        sub: str = "user-1",
        extra: dict[str, Any] | None = None,
    ) -> str:
        alg, key = self.keys[kid]
        claims = {
            "iss": iss or self.base,
            "aud": aud,
            "sub": sub,
            "exp": int(exp or time.time() + 300),
            "iat": int(time.time()),
            **(extra or {}),
        }
        return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        status = 200
        if scope["path"] == "/authorize":
            await self._authorize(scope, send)
            return
        if scope["path"] == "/token":
            status, out = await self._token(headers, receive)
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": orjson.dumps(out)})
            return
        if scope["path"] == "/userinfo":
            # A non-standard userinfo answer (GitHub-like names), for userInfo.fieldMapping.
            self.userinfo_requests.append((scope["method"], headers))
            bearer = headers.get("authorization", "").removeprefix("Bearer ")
            sub = self.access_tokens.get(bearer)
            if sub is None:
                status, out = 401, {"error": "invalid_token"}
            else:
                subject = self.userinfo_subject or sub
                out = {
                    "id": subject,
                    "login": f"{subject}-login",
                    "mail": f"{subject}@example.com",
                    "sub": subject,
                }
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": orjson.dumps(out)})
            return
        if scope["path"] == "/introspect":
            form = await read_form(receive)
            self.introspection_auth.append(headers.get("authorization", ""))
            out = self.opaque.get(form.get("token", ""), {"active": False})
        elif self.require_token and headers.get("authorization") != f"Bearer {self.require_token}":
            self.fetch_authorization.append(headers.get("authorization", ""))
            status, out = 401, {"error": "unauthorized"}
        elif scope["path"] == "/.well-known/openid-configuration":
            out = {
                "issuer": self.advertised_issuer or self.base,
                "jwks_uri": self.base + "/jwks",
                "authorization_endpoint": self.base + "/authorize",
                "token_endpoint": self.base + "/token",
                "userinfo_endpoint": self.base + "/userinfo",
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            }
        else:
            self.fetch_authorization.append(headers.get("authorization", ""))
            self.jwks_hits += 1
            jwks = []
            for kid, (alg, key) in self.keys.items():
                algo = RSAAlgorithm if alg == "RS256" else ECAlgorithm
                jwk = algo.to_jwk(key.public_key(), as_dict=True)
                jwks.append({**jwk, "kid": kid, "alg": alg, "use": "sig"})
            out = {"keys": jwks}
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": orjson.dumps(out)})

    async def _authorize(self, scope: dict[str, Any], send: Any) -> None:
        query = dict(urllib.parse.parse_qsl(scope.get("query_string", b"").decode()))
        assert query.get("response_type") == "code" and query.get("code_challenge_method") == "S256", query
        assert query["client_id"] in self.clients, query
        code = secrets.token_urlsafe(16)
        self.codes[code] = {**query, "sub": self.login_subject}
        target = query["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": query["state"]})
        await send(
            {"type": "http.response.start", "status": 302, "headers": [(b"location", target.encode())]}
        )
        await send({"type": "http.response.body", "body": b""})

    async def _token(self, headers: dict[str, str], receive: Any) -> tuple[int, dict[str, Any]]:
        form = await read_form(receive)
        self.token_requests.append(form)
        client_id, secret = form.get("client_id"), form.get("client_secret")
        if headers.get("authorization", "").startswith("Basic "):
            decoded = base64.b64decode(headers["authorization"][6:]).decode()
            client_id, _, secret = (urllib.parse.unquote(p) for p in decoded.partition(":"))
        if client_id not in self.clients or self.clients[client_id] != secret:
            return 401, {"error": "invalid_client"}
        if form.get("grant_type") == "refresh_token":
            sub = self.refresh_tokens.pop(form.get("refresh_token", ""), None)
            if sub is None:
                return 400, {"error": "invalid_grant"}
            return 200, self._tokens(client_id, sub, None)
        grant = self.codes.pop(form.get("code", ""), None)
        if (
            grant is None
            or grant["client_id"] != client_id
            or grant["redirect_uri"] != form.get("redirect_uri")
        ):
            return 400, {"error": "invalid_grant"}
        digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != grant["code_challenge"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE"}
        return 200, self._tokens(client_id, grant["sub"], grant.get("nonce"))

    def _tokens(self, client_id: str, sub: str, nonce: str | None) -> dict[str, Any]:
        access, refresh = (
            "upstream-at-" + secrets.token_urlsafe(12),
            "upstream-rt-" + secrets.token_urlsafe(12),
        )
        self.access_tokens[access] = sub
        self.refresh_tokens[refresh] = sub
        out: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.access_token_lifetime,
            "refresh_token": refresh,
            "user": {"id": sub},
        }
        if self.keys:
            kid = next(iter(self.keys))
            out["id_token"] = self.token(
                kid, aud=client_id, sub=sub, extra={"nonce": nonce} if nonce else None
            )
        return out
