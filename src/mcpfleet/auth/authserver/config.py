"""The embedded authorization server's runtime document (`--authserver-config FILE`).

The reconciler renders it from an MCPExternalAuthConfig `embeddedAuthServer`: every secret is a file
path (a mounted Secret on Kubernetes, a 0600 file under the config dir locally, relative to the
document), never a value, so the document itself may sit in a ConfigMap. Durations are seconds here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from mcpfleet.configfile import error_location, read_bounded

MAX_SECRET_FILE_BYTES = 64 * 1024
MAX_CONFIG_BYTES = 1024 * 1024


class _Doc(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class UserInfoFetch(_Doc):
    """A userinfo request: where (unset: the discovered `userinfo_endpoint`), how, and which fields."""

    url: str | None = None
    method: Literal["GET", "POST"] = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    subject_fields: list[str] = Field(default_factory=lambda: ["sub"])
    name_fields: list[str] = Field(default_factory=lambda: ["name"])
    email_fields: list[str] = Field(default_factory=lambda: ["email"])


class Upstream(_Doc):
    """The identity provider: OIDC (endpoints by discovery from `issuerUrl`) or OAuth 2.0 (explicit)."""

    name: str
    type: Literal["oidc", "oauth2"]
    issuer_url: str | None = None
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    client_id: str
    client_secret_file: str | None = None
    redirect_uri: str | None = None
    scopes: list[str] | None = None
    additional_authorization_params: dict[str, str] = Field(default_factory=dict)
    subject_claim: str = "sub"
    subject_path: str | None = None
    name_path: str | None = None
    email_path: str | None = None
    access_token_path: str | None = None
    expires_in_path: str | None = None
    refresh_token_path: str | None = None
    scope_path: str | None = None
    userinfo: UserInfoFetch | None = None
    """Read the userinfo endpoint after the login (oauth2: who the user is; oidc: name and email)."""

    @property
    def requested_scopes(self) -> list[str]:
        if self.scopes is not None:
            return self.scopes
        return ["openid", "offline_access"] if self.type == "oidc" else []


class RedisTLSFiles(_Doc):
    ca_file: str | None = None
    insecure_skip_verify: bool = False


class RedisSettings(_Doc):
    """A standalone Redis (`addr`) or a Sentinel-monitored master."""

    addr: str | None = None
    sentinel_addrs: list[str] = Field(default_factory=list)
    master_name: str | None = None
    db: int = 0
    username_file: str | None = None
    password_file: str | None = None
    dial_timeout: float = 5.0
    read_timeout: float = 3.0
    write_timeout: float = 3.0
    tls: RedisTLSFiles | None = None
    sentinel_tls: RedisTLSFiles | None = None
    key_prefix: str = "mcpfleet:authserver:"


class AuthServerSettings(_Doc):
    """Everything the server needs; see `EmbeddedAuthServerConfig` for what each setting means."""

    issuer: str
    authorization_endpoint_base_url: str | None = None
    upstream: Upstream
    signing_key_files: list[str] = Field(default_factory=list)
    hmac_secret_files: list[str] = Field(default_factory=list)
    access_token_lifespan: float = 3600.0
    refresh_token_lifespan: float = 7 * 24 * 3600.0
    auth_code_lifespan: float = 600.0
    storage: Literal["memory", "redis"] = "memory"
    redis: RedisSettings | None = None
    allow_confidential_client_registration: bool = False
    force_confidential_redirect_uris: list[str] = Field(default_factory=list)
    baseline_client_scopes: list[str] = Field(default_factory=list)
    cimd_enabled: bool = False
    cimd_cache_ttl: float = 300.0
    cimd_cache_max_size: int = 256
    cimd_allow_private_ip: bool = False
    disable_upstream_token_injection: bool = False
    insecure_allow_http: bool = False
    config_hash: str | None = None

    def dump(self) -> dict[str, object]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    def resolved(self, base: Path) -> AuthServerSettings:
        """Relative file paths (the local platform's `secrets/...`) made absolute against `base`, the
        document's folder."""

        def at(path: str | None) -> str | None:
            return None if path is None else str(base / path)

        upstream = self.upstream.model_copy(
            update={"client_secret_file": at(self.upstream.client_secret_file)}
        )
        redis = self.redis
        if redis is not None:
            tls = {
                name: tls.model_copy(update={"ca_file": at(tls.ca_file)})
                for name, tls in (("tls", redis.tls), ("sentinel_tls", redis.sentinel_tls))
                if tls is not None
            }
            redis = redis.model_copy(
                update={
                    "username_file": at(redis.username_file),
                    "password_file": at(redis.password_file),
                    **tls,
                }
            )
        return self.model_copy(
            update={
                "upstream": upstream,
                "redis": redis,
                "signing_key_files": [str(base / p) for p in self.signing_key_files],
                "hmac_secret_files": [str(base / p) for p in self.hmac_secret_files],
            }
        )


class AuthServerConfigError(ValueError):
    """The document or a secret file it names is missing or invalid."""


def load_settings(path: str) -> AuthServerSettings:
    """The document at `path`, validated (the error names the field)."""
    raw = read_bounded(Path(path), MAX_CONFIG_BYTES, "authorization server config", AuthServerConfigError)
    try:
        return AuthServerSettings.model_validate(orjson.loads(raw)).resolved(Path(path).parent.resolve())
    except orjson.JSONDecodeError as exc:
        raise AuthServerConfigError(f"{path}: not JSON: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        raise AuthServerConfigError(f"{path}: {error_location(first)}: {first['msg']}") from exc


def read_secret(path: str) -> bytes:
    """A secret file's bytes (bounded; surrounding whitespace kept: keys and HMAC secrets are exact)."""
    return read_bounded(Path(path), MAX_SECRET_FILE_BYTES, "secret file", AuthServerConfigError)


def read_secret_text(path: str) -> str:
    """A secret file as text, a trailing newline removed (`echo secret > file` is common)."""
    return read_secret(path).decode("utf-8", "strict").rstrip("\r\n")
