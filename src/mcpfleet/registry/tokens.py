"""Registry tokens: the short-lived publish tokens this registry signs itself (issue 32 item 7).

The official registry does not let publishers call it with their identity provider's tokens: its
`/v0.1/auth/*` endpoints check a proof of identity (a GitHub token, an OIDC ID token, a DNS or HTTP
signature, or nothing for `none`) and answer a *registry token* of its own — an Ed25519-signed JWT
(`EdDSA`) valid five minutes, whose claims carry what it may do: `auth_method`, `auth_method_sub` and
`permissions`, a list of `{action, resource}` (`publish` or `edit`, a name pattern). `mcp-publisher`
stores that token and sends it to `POST /v0/publish`. This module owns those tokens here: the signing
key (a configured Ed25519 seed, else one generated per process), issuing them with the same claim
names and lifetime, and verifying them on every write — signature by our key only (`EdDSA` only),
issuer, expiry required, and permissions of the expected shape.

Kept free of the HTTP and store layers; PyJWT and cryptography are imported on the first token issued
or checked (the publishing API's warm-up loads them in a worker thread), never on the read path or
by a start: a start only reads the seed file, so a bad one still stops it.
"""

from __future__ import annotations

import base64
import binascii
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from mcpfleet.registry.errors import RegistryError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ISSUER = "mcp-registry"
"""The `iss` of registry tokens: the official registry's value."""
ALGORITHM = "EdDSA"
LIFETIME_SECONDS = 5 * 60
"""How long a registry token is valid: the official registry's five minutes."""
LEEWAY_SECONDS = 5
"""Clock difference tolerated between the replica that issued a token and the one checking it."""
MAX_TOKEN_CHARS = 16 * 1024
MAX_PERMISSIONS = 100
"""Distinct (action, pattern) pairs one registry token may carry (the token must stay a header)."""
MAX_PATTERN_CHARS = 256
SEED_BYTES = 32
ACTIONS = ("publish", "edit")
ANONYMOUS_PATTERN = "io.modelcontextprotocol.anonymous/*"
"""What `POST /v0.1/auth/none` grants, publish and edit: the official registry's anonymous namespace."""

METHOD_OIDC = "oidc"
METHOD_NONE = "none"

Permission = tuple[str, str]
"""(action, pattern): `publish` or `edit`, and `*`, a server name or a prefix ending in `*`."""


class RegistryTokenError(RegistryError):
    """A registry token that is not one we issued, or no longer valid; the message says why."""


class SigningKeyError(RegistryError):
    """The configured signing key file cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class RegistryIdentity:
    """What a verified registry token says: how its holder logged in, as whom, and may do."""

    method: str
    subject: str
    permissions: list[Permission]
    expires_at: int


def looks_like_registry_token(token: str) -> bool:
    """True when the token's (unverified) header says `EdDSA`: ours, or a forgery of ours — either
    way checked here, never by the external issuer's authenticator (which verifies RS256 / ES256)."""
    head = token.split(".", 1)[0]
    if not head or len(head) > 1024:
        return False
    try:
        header = orjson.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, binascii.Error):
        return False
    return isinstance(header, dict) and header.get("alg") == ALGORITHM


def read_seed(path: Path) -> bytes:
    """The 32-byte Ed25519 seed in `path`: 64 hex characters (surrounding whitespace ignored)."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SigningKeyError(f"publish.tokenSigningKeyFile {path}: cannot read it ({exc})") from None
    try:
        seed = bytes.fromhex(text)
    except ValueError:
        raise SigningKeyError(
            f"publish.tokenSigningKeyFile {path}: expected {SEED_BYTES * 2} hex characters"
        ) from None
    if len(seed) != SEED_BYTES:
        raise SigningKeyError(
            f"publish.tokenSigningKeyFile {path}: expected a {SEED_BYTES}-byte Ed25519 seed "
            f"({SEED_BYTES * 2} hex characters), got {len(seed)} bytes"
        )
    return seed


def _permission_claims(permissions: list[Permission]) -> list[dict[str, str]]:
    return [{"action": action, "resource": pattern} for action, pattern in permissions]


def _permissions_of(value: Any) -> list[Permission]:
    if not isinstance(value, list) or len(value) > MAX_PERMISSIONS:
        raise RegistryTokenError("malformed token: permissions must be a list")
    out: list[Permission] = []
    for item in value:
        if not isinstance(item, dict):
            raise RegistryTokenError("malformed token: a permission must be an object")
        action, resource = item.get("action"), item.get("resource")
        if action not in ACTIONS or not isinstance(resource, str) or len(resource) > MAX_PATTERN_CHARS:
            raise RegistryTokenError("malformed token: a permission needs an action and a resource")
        out.append((str(action), resource))
    return out


class RegistryTokens:
    """Issues and verifies registry tokens with one Ed25519 key (from `seed`, else generated)."""

    def __init__(self, seed: bytes | None = None) -> None:
        if seed is not None and len(seed) != SEED_BYTES:
            raise SigningKeyError(f"an Ed25519 seed is {SEED_BYTES} bytes, got {len(seed)}")
        self._seed = seed
        self._keys: tuple[Ed25519PrivateKey, Ed25519PublicKey] | None = None

    def prepare(self) -> None:
        """Load cryptography and build the key now (the publishing API's warm-up, in a worker
        thread), rather than on the event loop at the first login."""
        self._key_pair()

    @property
    def _private(self) -> Ed25519PrivateKey:
        return self._key_pair()[0]

    def _key_pair(self) -> tuple[Ed25519PrivateKey, Ed25519PublicKey]:
        if self._keys is None:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

            private = (
                Ed25519PrivateKey.from_private_bytes(self._seed)
                if self._seed is not None
                else Ed25519PrivateKey.generate()
            )
            self._keys = (private, private.public_key())
        return self._keys

    @classmethod
    def from_file(cls, path: Path | None) -> RegistryTokens:
        """With the seed of `path`, or a key of its own when there is no file."""
        return cls(read_seed(path) if path is not None else None)

    def issue(
        self, method: str, subject: str, permissions: list[Permission], now: float | None = None
    ) -> tuple[str, int]:
        """(token, expires_at in Unix seconds) for a holder who logged in with `method` as `subject`."""
        import jwt

        issued = int(now if now is not None else time.time())
        expires = issued + LIFETIME_SECONDS
        claims = {
            "iss": ISSUER,
            "iat": issued,
            "nbf": issued,
            "exp": expires,
            "auth_method": method,
            "auth_method_sub": subject,
            "permissions": _permission_claims(permissions),
        }
        return jwt.encode(claims, self._private, algorithm=ALGORITHM), expires

    def verify(self, token: str) -> RegistryIdentity:
        """The identity a token of ours carries; `RegistryTokenError` for anything else (a foreign
        or forged signature, another algorithm, expired or not yet valid, malformed claims)."""
        import jwt

        if len(token) > MAX_TOKEN_CHARS:
            raise RegistryTokenError(f"token too large (over {MAX_TOKEN_CHARS} characters)")
        try:
            claims = jwt.decode(
                token,
                key=self._key_pair()[1],
                algorithms=[ALGORITHM],
                issuer=ISSUER,
                options={"require": ["exp", "iss"], "verify_aud": False},
                leeway=LEEWAY_SECONDS,
            )
        except jwt.PyJWTError as exc:
            raise RegistryTokenError(str(exc)[:200] or type(exc).__name__) from None
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise RegistryTokenError(f"malformed token: {str(exc)[:200] or type(exc).__name__}") from None
        method, subject = claims.get("auth_method"), claims.get("auth_method_sub")
        if not isinstance(method, str) or not isinstance(subject, str):
            raise RegistryTokenError("malformed token: auth_method and auth_method_sub must be strings")
        exp = claims["exp"]
        if not isinstance(exp, int):
            raise RegistryTokenError("malformed token: exp must be an integer")
        return RegistryIdentity(method, subject, _permissions_of(claims.get("permissions")), exp)
