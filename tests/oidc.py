"""A local OIDC issuer for the auth tests of the proxy and the vMCP gateway (an ASGI app; serve it with
the suite's in-process uvicorn helpers and set `base` to its URL)."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

import jwt
import orjson
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm


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
        if scope["path"] == "/introspect":
            body = b""
            while True:
                m = await receive()
                body += m.get("body", b"")
                if not m.get("more_body"):
                    break
            form = dict(urllib.parse.parse_qsl(body.decode()))
            self.introspection_auth.append(headers.get("authorization", ""))
            out = self.opaque.get(form.get("token", ""), {"active": False})
        elif self.require_token and headers.get("authorization") != f"Bearer {self.require_token}":
            self.fetch_authorization.append(headers.get("authorization", ""))
            status, out = 401, {"error": "unauthorized"}
        elif scope["path"] == "/.well-known/openid-configuration":
            out = {"issuer": self.advertised_issuer or self.base, "jwks_uri": self.base + "/jwks"}
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
