"""A corpus of hostile bearer tokens for incoming auth: each must get 401 + `WWW-Authenticate`.

Built against a live `tests.oidc.Issuer` (RSA kid `r1`, P-256 kid `e1`), so the "almost right"
tokens are signed by the issuer's real keys and fail on exactly one point.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

import jwt
import orjson
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import RSAAlgorithm

from tests.oidc import Issuer


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def raw(header: Any, payload: Any, signature: bytes = b"sig") -> str:
    """A token from arbitrary JSON (or bytes) parts, signed by nothing."""

    def part(value: Any) -> str:
        return b64(value if isinstance(value, bytes) else orjson.dumps(value))

    return f"{part(header)}.{part(payload)}.{b64(signature)}"


def hs256(header: dict[str, Any], payload: dict[str, Any], secret: bytes) -> str:
    """HS256 by hand: PyJWT refuses to use a PEM public key as an HMAC secret, an attacker does not."""
    signing_input = f"{b64(orjson.dumps(header))}.{b64(orjson.dumps(payload))}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(mac)}"


def hostile_tokens(issuer: Issuer, audience: str) -> dict[str, str | None]:
    """`Authorization` header values (None: no header), by what is wrong with them."""
    now = int(time.time())
    good = {"iss": issuer.base, "aud": audience, "sub": "user-1", "exp": now + 300, "iat": now}
    _, rsa_key = issuer.keys["r1"]
    _, ec_key = issuer.keys["e1"]
    rsa_pem = rsa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    rsa_jwk = RSAAlgorithm.to_jwk(rsa_key.public_key()).encode()
    stranger_rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    stranger_ec = ec.generate_private_key(ec.SECP256R1())
    p384 = ec.generate_private_key(ec.SECP384R1())

    def signed(claims: dict[str, Any], kid: str = "r1", key: Any = None, alg: str | None = None) -> str:
        own_alg, own_key = issuer.keys[kid] if kid in issuer.keys else ("RS256", stranger_rsa)
        # JWS over raw bytes: PyJWT's encode() refuses the odd claim values the corpus needs.
        return jwt.PyJWS().encode(
            orjson.dumps(claims), key or own_key, algorithm=alg or own_alg, headers={"kid": kid}
        )

    def without(name: str) -> dict[str, Any]:
        return {k: v for k, v in good.items() if k != name}

    valid = signed(good)
    head, payload, signature = valid.split(".")
    headers: dict[str, str | None] = {
        # -- not a bearer token at all
        "missing header": None,
        "empty header": "",
        "scheme only": "Bearer",
        "scheme and spaces": "Bearer   ",
        "basic scheme": "Basic dXNlcjpwdw==",
        "token scheme": "Token " + valid,
        "no scheme": valid,
        "non-ascii token": "Bearer \u00e9" + valid,
    }
    tokens: dict[str, str] = {
        # -- not a JWT
        "garbage": "not-a-jwt",
        "two parts": f"{head}.{payload}",
        "four parts": f"{valid}.extra",
        "dots only": "...",
        "bad base64": "!!!.***.###",
        "header not json": f"{b64(b'not json')}.{payload}.{signature}",
        "header a json array": raw([1, 2], good),
        "header a json string": raw("RS256", good),
        "header null": raw(None, good),
        "payload not json": f"{head}.{b64(b'{oops')}.{signature}",
        "payload a json array": raw({"alg": "RS256", "kid": "r1"}, [good]),
        "header json bomb": raw(b"[" * 6000 + b"]" * 6000, good),
        "payload json bomb": raw({"alg": "RS256", "kid": "r1"}, b'{"a":' * 3000 + b"1" + b"}" * 3000),
        "claim json bomb": signed({**good, "x": orjson.loads(b"[" * 200 + b"]" * 200)}, key=stranger_rsa),
        "oversized token (64 KiB)": signed({**good, "pad": "x" * 64 * 1024}),
        "oversized kid": raw({"alg": "RS256", "kid": "k" * 40_000}, good),
        # -- algorithm games
        "alg missing": raw({"kid": "r1"}, good),
        "alg none": raw({"alg": "none", "kid": "r1"}, good, b""),
        "alg None": raw({"alg": "None", "kid": "r1"}, good, b""),
        "alg NONE, no signature": f"{b64(orjson.dumps({'alg': 'NONE'}))}.{payload}.",
        "alg a list": raw({"alg": ["RS256"], "kid": "r1"}, good),
        "alg a number": raw({"alg": 256, "kid": "r1"}, good),
        "HS256 keyed with the RSA public key PEM": hs256({"alg": "HS256", "kid": "r1"}, good, rsa_pem),
        "HS256 keyed with the RSA JWK": hs256({"alg": "HS256", "kid": "r1"}, good, rsa_jwk),
        "HS256 keyed with the kid": hs256({"alg": "HS256", "kid": "r1"}, good, b"r1"),
        "RS512": signed(good, alg="RS512"),
        "PS256": signed(good, alg="PS256"),
        "ES384 (P-384 key)": jwt.encode(good, p384, algorithm="ES384", headers={"kid": "e1"}),
        "ES256 token naming the RSA kid": jwt.encode(good, ec_key, algorithm="ES256", headers={"kid": "r1"}),
        "RS256 token naming the EC kid": jwt.encode(good, rsa_key, algorithm="RS256", headers={"kid": "e1"}),
        "ES256 header, RSA signature": raw({"alg": "ES256", "kid": "r1"}, good, b"\x00" * 256),
        "RS256 header, EC signature": raw({"alg": "RS256", "kid": "e1"}, good, b"\x00" * 64),
        # -- keys
        "unknown kid": jwt.encode(good, stranger_rsa, algorithm="RS256", headers={"kid": "nobody"}),
        "empty kid": jwt.encode(good, stranger_rsa, algorithm="RS256", headers={"kid": ""}),
        "no kid, several keys": jwt.encode(good, rsa_key, algorithm="RS256"),
        "kid a list": raw({"alg": "RS256", "kid": ["r1"]}, good),
        "kid an object": raw({"alg": "RS256", "kid": {"r1": 1}}, good),
        "kid a number": raw({"alg": "RS256", "kid": 1}, good),
        "known kid, stranger RSA key": signed(good, key=stranger_rsa),
        "known kid, stranger EC key": jwt.encode(good, stranger_ec, algorithm="ES256", headers={"kid": "e1"}),
        "embedded jwk header": jwt.encode(
            good,
            stranger_rsa,
            algorithm="RS256",
            headers={"kid": "attacker", "jwk": RSAAlgorithm.to_jwk(stranger_rsa.public_key(), as_dict=True)},
        ),
        "jku pointing elsewhere": jwt.encode(
            good, stranger_rsa, algorithm="RS256", headers={"kid": "r1", "jku": "https://evil.example/jwks"}
        ),
        "crit extension": jwt.encode(
            good, rsa_key, algorithm="RS256", headers={"kid": "r1", "crit": ["exp"]}
        ),
        # -- signature
        "signature stripped": f"{head}.{payload}.",
        "signature of another token": f"{head}.{payload}.{signed({**good, 'sub': 'other'}).split('.')[2]}",
        "payload swapped, signature kept": f"{head}.{b64(orjson.dumps({**good, 'sub': 'admin'}))}.{signature}",
        "signature truncated": f"{head}.{payload}.{signature[:-8]}",
        "signature bit flipped": f"{head}.{payload}.{signature[:-2]}{'A' if signature[-2] != 'A' else 'B'}{signature[-1]}",
        # -- claims
        "expired": signed({**good, "exp": now - 3600}),
        "expired beyond leeway": signed({**good, "exp": now - 120}),
        "not yet valid (nbf in 1 h)": signed({**good, "nbf": now + 3600}),
        "issued in the future (iat in 1 h)": signed({**good, "iat": now + 3600}),
        "wrong audience": signed({**good, "aud": "someone-else"}),
        "audience list without ours": signed({**good, "aud": ["a", "b"]}),
        "empty audience list": signed({**good, "aud": []}),
        "audience a number": signed({**good, "aud": 42}),
        "audience a prefix of ours": signed({**good, "aud": audience[:-1]}),
        "wrong issuer": signed({**good, "iss": "https://evil.example"}),
        "issuer with trailing slash": signed({**good, "iss": issuer.base + "/"}),
        "issuer a list": signed({**good, "iss": [issuer.base]}),
        "missing exp": signed(without("exp")),
        "missing iss": signed(without("iss")),
        "missing aud": signed(without("aud")),
        "exp a string": signed({**good, "exp": "tomorrow"}),
        "exp a bool": signed({**good, "exp": True}),
        "exp huge": raw({"alg": "RS256", "kid": "r1"}, b'{"exp": 1e400}'),
        "exp 5000 digits": raw({"alg": "RS256", "kid": "r1"}, b'{"exp": 1' + b"0" * 5000 + b"}"),
        "nbf a string": signed({**good, "nbf": "now"}),
        "iat a string": signed({**good, "iat": "now"}),
    }
    return {**headers, **{why: f"Bearer {token}" for why, token in tokens.items()}}
