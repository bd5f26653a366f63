"""Signing keys of the issued JWTs and HMAC keys of the opaque tokens (codes, refresh tokens).

JWTs are signed with PyJWT (already the proxy's JWT library) using the first configured PEM key (RSA:
RS256, EC P-256: ES256); every configured key is published in the JWKS, so a retired key still
verifies tokens it signed while clients hold them. Without keys an ephemeral P-256 key is generated
with a warning (tokens die with the process and differ between replicas).

Opaque tokens are 256-bit random strings; storage keys them by HMAC-SHA256 under the first HMAC
secret, so neither a memory dump nor a Redis read yields a usable code or refresh token. Lookups try
every configured secret (rotation). Without secrets an ephemeral one is generated, with a warning.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from mcpfleet.auth.authserver.config import AuthServerConfigError, read_secret

log = logging.getLogger(__name__)

MIN_HMAC_BYTES = 32


@dataclass(frozen=True)
class SigningKey:
    kid: str
    algorithm: str
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        if isinstance(public, rsa.RSAPublicKey):
            found = RSAAlgorithm.to_jwk(public, as_dict=True)
        else:
            found = ECAlgorithm.to_jwk(public, as_dict=True)
        return {**found, "kid": self.kid, "alg": self.algorithm, "use": "sig"}


def _kid(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> str:
    """A stable key id: the hash of the public key (the same key gives the same kid on every replica)."""
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()[:16]).rstrip(b"=").decode()


def signing_key(private: ec.EllipticCurvePrivateKey) -> SigningKey:
    """An ES256 signing key (P-256) with its stable kid (also the local issuer's, platform/local/issuer)."""
    return SigningKey(_kid(private), "ES256", private)


def _load_key(path: str) -> SigningKey:
    try:
        key = serialization.load_pem_private_key(read_secret(path), password=None)
    except (ValueError, TypeError) as exc:
        raise AuthServerConfigError(f"{path}: not an unencrypted PEM private key") from exc
    if isinstance(key, rsa.RSAPrivateKey):
        if key.key_size < 2048:
            raise AuthServerConfigError(f"{path}: RSA keys need at least 2048 bits")
        return SigningKey(_kid(key), "RS256", key)
    if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
        return SigningKey(_kid(key), "ES256", key)
    raise AuthServerConfigError(f"{path}: only RSA and EC P-256 signing keys are supported")


class KeySet:
    """The signing keys (first signs) and the HMAC secrets (first keys new tokens)."""

    def __init__(self, signing_key_files: list[str], hmac_secret_files: list[str]) -> None:
        self.signing = [_load_key(p) for p in signing_key_files]
        if not self.signing:
            log.warning(
                "authorization server: no signingKeySecretRefs, using an ephemeral key: issued tokens"
                " are invalid after a restart and on other replicas (development only)"
            )
            key = ec.generate_private_key(ec.SECP256R1())
            self.signing = [SigningKey(_kid(key), "ES256", key)]
        self.hmac: list[bytes] = []
        for index, path in enumerate(hmac_secret_files):
            value = read_secret(path).strip()
            if index == 0 and len(value) < MIN_HMAC_BYTES:
                raise AuthServerConfigError(
                    f"{path}: the current HMAC secret needs at least {MIN_HMAC_BYTES} bytes"
                )
            self.hmac.append(value)
        if not self.hmac:
            log.warning(
                "authorization server: no hmacSecretRefs, using an ephemeral secret: codes and refresh"
                " tokens are invalid after a restart and on other replicas (development only)"
            )
            self.hmac = [secrets.token_bytes(32)]

    def jwks(self) -> dict[str, Any]:
        return {"keys": [k.jwk() for k in self.signing]}

    def sign(self, claims: dict[str, Any]) -> str:
        key = self.signing[0]
        return jwt.encode(
            claims, key.private, algorithm=key.algorithm, headers={"kid": key.kid, "typ": "at+jwt"}
        )

    def verify(self, token: str, *, issuer: str, audiences: list[str]) -> dict[str, Any]:
        """The claims of a token this server signed; raises jwt.PyJWTError."""
        header = jwt.get_unverified_header(token)
        key = next((k for k in self.signing if k.kid == header.get("kid")), None)
        if key is None:
            raise jwt.InvalidTokenError("unknown signing key")
        claims: dict[str, Any] = jwt.decode(
            token,
            key.private.public_key(),
            algorithms=[key.algorithm],
            issuer=issuer,
            audience=audiences,
            options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            leeway=30,
        )
        return claims

    def token_keys(self, token: str) -> list[str]:
        """Storage keys under which `token` may have been stored (one per HMAC secret, current first)."""
        raw = token.encode("utf-8", "replace")
        return [hmac.new(secret, raw, hashlib.sha256).hexdigest() for secret in self.hmac]


def new_opaque_token() -> str:
    """A fresh 256-bit code or refresh token (base64url, 43 characters)."""
    return secrets.token_urlsafe(32)
