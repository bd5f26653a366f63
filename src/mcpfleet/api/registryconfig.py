"""ToolHive's registry-server `config.yaml`, as MCPRegistry `spec.configYAML` holds it: parsed and checked.

ToolHive's operator copies `configYAML` into a ConfigMap unread; mcpfleet parses it with this model when
the manifest is validated, so a bad configuration is refused at `kubectl apply` time by the operator
(status `InvalidSpec`) and by `mcpfleet up`, naming the key inside it
(`spec.configYAML: sources[0].git.repository: …`). The shape follows
github.com/stacklok/toolhive-registry-server `internal/config/config.go`: named `sources`
(file / git / api / kubernetes), `registries` that list them, `database` (PostgreSQL) and `auth`
(`anonymous` or `oauth`). Where a concept already has a model in the typed MCPRegistry spec (sync
policy, filters, the git reference, kubernetes discovery, the upstream API endpoint) the same class is
used, so there is one model per concept; `reconcile/mcpregistry.py` translates the result into the
registry server's own config file.

Refused on purpose, each with the key named:
* credentials written inline (`database.password`, `database.migrationPassword`, `api.headers`,
  provider `clientSecret`): a ConfigMap is no place for them. Files (`passwordFile`,
  `clientSecretFile`, mounted from Secrets through `spec.volumes`) and `spec.pgpassSecretRef` are the
  ways in, as ToolHive's CRD says;
* what this registry server does not implement: `managed` sources (publishing is `spec.publish` of
  the typed form), several `registries` (one catalogue per server), per-source `claims`
  (authorization), `database.dynamicAuth` (AWS RDS IAM), `telemetry` / `audit` blocks (the operator
  wires tracing itself).
* several OAuth providers: the registry's reader authentication takes one issuer.

The text is parsed with the bounded YAML reader (`mcpfleet.yamlread`): at most 64 KiB, 32 levels and
5,000 nodes after alias expansion.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from mcpfleet.api.duration import Duration
from mcpfleet.api.meta import DNS_LABEL_PATTERN, ApiModel, location
from mcpfleet.api.registrysource import Source
from mcpfleet.api.registrysource import refuse as _refuse
from mcpfleet.api.registrysourcebase import GIT_REPOSITORY_PATTERN as GIT_URL
from mcpfleet.yamlread import ManifestLimits, ManifestTooLarge, load_documents

MAX_CONFIG_YAML_BYTES = 64 * 1024
"""Largest `configYAML` accepted (the CRD's maxLength too); ToolHive's examples are under 2 KiB."""
LIMITS = ManifestLimits(max_file_bytes=MAX_CONFIG_YAML_BYTES, max_depth=32, max_nodes=5_000)

INLINE_CREDENTIAL = (
    "inline credentials are refused (configYAML is stored in a ConfigMap): mount a Secret with "
    "spec.volumes / spec.volumeMounts and name the file{hint}"
)


def _absolute(value: str) -> str:
    if not value.startswith("/") or "\x00" in value or ".." in value.split("/"):
        raise ValueError(f"{value!r}: expected an absolute path without '..'")
    return posixpath.normpath(value)


CONFIG_YAML_KINDS = ("file", "git", "api", "kubernetes")
"""The source kinds of ToolHive's registry server (`url` and `configMap` are the typed spec's)."""


class RegistryEntryConfig(ApiModel):
    """A registry served from named sources; on a server name conflict the first source listed wins."""

    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)
    """Name of the registry; ToolHive serves it under /registry/<name>/v0.1, mcpfleet at /v0.1 too."""
    sources: list[str] = Field(min_length=1, max_length=32)
    """Names of `sources`, in precedence order."""

    @model_validator(mode="before")
    @classmethod
    def _no_claims(cls, data: Any) -> Any:
        return _refuse(data, {"claims": "per-registry authorization claims are not supported"})


SSLMode = Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]


class DatabaseSettings(ApiModel):
    """PostgreSQL. Passwords come from `passwordFile` / `migrationPasswordFile` or a pgpass file
    (`spec.pgpassSecretRef`), never from this text."""

    host: str = Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9.:\[\]-]+$")
    port: int = Field(default=5432, ge=1, le=65535)
    user: str = Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9_.-]+$")
    """User the registry serves with."""
    migration_user: str | None = Field(
        default=None, min_length=1, max_length=63, pattern=r"^[A-Za-z0-9_.-]+$"
    )
    """User the schema migrations run as (the serving user when unset)."""
    database: str = Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9_.-]+$")
    ssl_mode: SSLMode = "prefer"
    max_open_conns: int | None = Field(default=None, ge=1, le=1000)
    """Largest number of open connections (the pool's size plus overflow)."""
    max_idle_conns: int | None = Field(default=None, ge=0, le=1000)
    """Connections kept open while idle (the pool's size)."""
    conn_max_lifetime: Duration | None = None
    """Connections older than this are recycled."""
    password_file: str | None = Field(default=None, min_length=1, max_length=4096)
    """A mounted file holding the serving user's password (else the pgpass file)."""
    migration_password_file: str | None = Field(default=None, min_length=1, max_length=4096)
    """A mounted file holding the migration user's password (else the pgpass file)."""

    _files = field_validator("password_file", "migration_password_file")(
        lambda v: None if v is None else _absolute(v)
    )

    @model_validator(mode="before")
    @classmethod
    def _no_inline_password(cls, data: Any) -> Any:
        refused = {
            key: INLINE_CREDENTIAL.format(hint=f" in {key}File, or use spec.pgpassSecretRef")
            for key in ("password", "migrationPassword")
        }
        refused["dynamicAuth"] = "cloud IAM database authentication is not supported"
        return _refuse(data, refused)


class OAuthProvider(ApiModel):
    """An OIDC issuer whose access tokens may read the registry."""

    name: str = Field(min_length=1, max_length=63)
    issuer_url: str = Field(min_length=1, max_length=2048, pattern=r"^https?://[^\s]+$")
    audience: str = Field(min_length=1, max_length=2048)
    """The `aud` a token must carry."""
    jwks_url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://[^\s]+$")
    """The key set URL, skipping OIDC discovery."""
    client_id: str | None = Field(default=None, max_length=256)
    client_secret_file: str | None = Field(default=None, max_length=4096)
    """A mounted file holding the client secret (token introspection)."""
    ca_cert_path: str | None = Field(default=None, max_length=4096)
    """A mounted CA bundle that verifies the issuer's endpoints."""
    auth_token_file: str | None = Field(default=None, max_length=4096)
    """A bearer token file sent with discovery / JWKS requests (e.g. a service-account token)."""
    introspection_url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://[^\s]+$")
    """RFC 7662 introspection endpoint for opaque tokens."""
    allow_private_ip: bool = False
    """Let discovery / JWKS / introspection reach private addresses (refused by default; an issuer on a
    loopback host is allowed for development)."""

    _files = field_validator("client_secret_file", "ca_cert_path", "auth_token_file")(
        lambda v: None if v is None else _absolute(v)
    )

    @model_validator(mode="before")
    @classmethod
    def _no_inline_secret(cls, data: Any) -> Any:
        return _refuse(data, {"clientSecret": INLINE_CREDENTIAL.format(hint=" in clientSecretFile")})

    @field_validator("issuer_url", "jwks_url", "introspection_url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        # ToolHive's rule: https, except on a loopback host (development).
        if value is None or value.startswith("https://"):
            return value
        host = value.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)[0]
        if host not in ("localhost", "127.0.0.1", "[::1]"):
            raise ValueError(f"{value!r}: must use https (http only on a loopback host)")
        return value


class OAuthSettings(ApiModel):
    """OAuth 2.0 protected-resource settings of the registry API."""

    resource_url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://[^\s]+$")
    """The registry's public URL, advertised in the RFC 9728 metadata (and the audience fallback)."""
    realm: str | None = Field(default=None, max_length=256)
    """Accepted for compatibility (ToolHive's WWW-Authenticate realm); not sent."""
    scopes_supported: list[str] = Field(default_factory=list, max_length=50)
    """Scopes advertised in the RFC 9728 metadata."""
    providers: list[OAuthProvider] = Field(min_length=1, max_length=1)
    """The token issuer (one: the registry's reader authentication validates one issuer)."""


class AuthSettings(ApiModel):
    """Who may read the registry: `anonymous`, or `oauth` (a bearer token of the provider)."""

    mode: Literal["anonymous", "oauth"] = "oauth"
    """oauth (ToolHive's default) or anonymous."""
    public_paths: list[str] = Field(default_factory=list, max_length=50)
    """Paths served without a token besides /health, /readiness and /version."""
    oauth: OAuthSettings | None = None

    @field_validator("public_paths")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not path.startswith("/") or len(path) > 256 or any(c.isspace() for c in path):
                raise ValueError(f"{path!r}: expected an absolute URL path")
        return paths

    @model_validator(mode="before")
    @classmethod
    def _no_authz(cls, data: Any) -> Any:
        return _refuse(data, {"authz": "role-based authorization of the registry API is not supported"})

    @model_validator(mode="after")
    def _oauth_needs_settings(self) -> AuthSettings:
        if self.mode == "oauth" and self.oauth is None:
            raise ValueError("oauth: required when mode is oauth")
        return self


class RegistryServerConfig(ApiModel):
    """The whole `config.yaml` of ToolHive's registry server, as mcpfleet serves it."""

    sources: list[Source] = Field(min_length=1, max_length=32)
    """The one source model of the registry server (`mcpfleet.api.registrysource`), of ToolHive's kinds."""
    registries: list[RegistryEntryConfig] = Field(min_length=1, max_length=1)
    """One registry (this server serves one catalogue) naming the sources it merges."""
    database: DatabaseSettings | None = None
    """PostgreSQL; without it the registry keeps its state in SQLite (ToolHive requires it)."""
    auth: AuthSettings
    """Required, as by ToolHive's server: say `mode: anonymous` for an open registry."""

    @model_validator(mode="before")
    @classmethod
    def _not_implemented(cls, data: Any) -> Any:
        why = "not supported in configYAML (tracing is configured by the operator / the OTEL_* variables of mcpfleet up)"
        sources = data.get("sources") if isinstance(data, dict) else None
        for index, source in enumerate(sources if isinstance(sources, list) else ()):
            api = source.get("api") if isinstance(source, dict) else None
            # The server's own config may carry headers (a local file); a ConfigMap may not.
            if isinstance(api, dict) and "headers" in api:
                raise ValueError(f"sources[{index}].api.headers: {INLINE_CREDENTIAL.format(hint='')}")
        return _refuse(data, {"telemetry": why, "audit": why})

    @field_validator("sources")
    @classmethod
    def _toolhive_sources(cls, sources: list[Source]) -> list[Source]:
        """What configYAML holds its sources to beyond the server's own config: ToolHive's kinds, a
        repository URL (a pod has no local path to clone) and absolute paths of mounted files."""
        for index, source in enumerate(sources):
            if source.kind not in CONFIG_YAML_KINDS:
                raise ValueError(
                    f"[{index}].{source.kind}: not a source kind of ToolHive's registry server "
                    f"(set one of {', '.join(CONFIG_YAML_KINDS)})"
                )
            if source.git is not None and not re.match(GIT_URL, source.git.repository):
                raise ValueError(f"[{index}].git.repository: expected a URL matching {GIT_URL!r}")
            files = [("file.path", source.file.path if source.file else None)]
            if source.git is not None and source.git.auth is not None:
                files.append(("git.auth.passwordFile", source.git.auth.password_file))
            for key, path in files:
                if path is not None:
                    try:
                        _absolute(path)
                    except ValueError as exc:
                        raise ValueError(f"[{index}].{key}: {exc}") from None
        return sources

    @model_validator(mode="after")
    def _references(self) -> RegistryServerConfig:
        names: set[str] = set()
        for index, source in enumerate(self.sources):
            if source.name in names:
                raise ValueError(f"sources[{index}].name: duplicate source name {source.name!r}")
            names.add(source.name)
        for index, registry in enumerate(self.registries):
            for position, name in enumerate(registry.sources):
                if name not in names:
                    raise ValueError(f"registries[{index}].sources[{position}]: unknown source {name!r}")
            if len(set(registry.sources)) != len(registry.sources):
                raise ValueError(f"registries[{index}].sources: a source is listed twice")
        return self

    def served_sources(self) -> list[Source]:
        """The sources of the registry, in its precedence order."""
        by_name = {s.name: s for s in self.sources}
        return [by_name[name] for name in self.registries[0].sources]

    def files(self) -> list[tuple[str, str]]:
        """(key inside configYAML, absolute path) of every file the server reads."""
        out: list[tuple[str, str]] = []
        for index, source in enumerate(self.sources):
            if source.file is not None:
                out.append((f"sources[{index}].file.path", source.file.path))
            if source.git is not None and source.git.auth is not None:
                out.append((f"sources[{index}].git.auth.passwordFile", source.git.auth.password_file))
        if self.database is not None:
            for key in ("password_file", "migration_password_file"):
                value = getattr(self.database, key)
                if value is not None:
                    out.append((f"database.{_camel(key)}", value))
        if self.auth.oauth is not None:
            for index, provider in enumerate(self.auth.oauth.providers):
                for key in ("client_secret_file", "ca_cert_path", "auth_token_file"):
                    value = getattr(provider, key)
                    if value is not None:
                        out.append((f"auth.oauth.providers[{index}].{_camel(key)}", value))
        return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class ConfigYAMLError(ValueError):
    """configYAML cannot be read or is invalid; the message names each key inside it."""


def parse_config_yaml(text: str) -> RegistryServerConfig:
    """Parse and validate `spec.configYAML`, bounded in size, depth and nodes."""
    if len(text.encode()) > MAX_CONFIG_YAML_BYTES:
        raise ConfigYAMLError(f"larger than {MAX_CONFIG_YAML_BYTES} bytes")
    try:
        documents = load_documents(text, LIMITS)
    except ManifestTooLarge as exc:
        raise ConfigYAMLError(str(exc).split(" (set $", 1)[0]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigYAMLError(f"not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    documents = [d for d in documents if d is not None]
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise ConfigYAMLError("expected one YAML mapping (sources, registries, database, auth)")
    try:
        return RegistryServerConfig.model_validate(documents[0], by_alias=True, by_name=False)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            message = str(error["msg"]).removeprefix("Value error, ")
            path = location(tuple(error["loc"]))
            if (
                ": " in message
                and not message.startswith(("'", '"'))
                and " " not in message.split(": ", 1)[0]
            ):
                # A validator naming a key below its own ("password: inline …", "sources[0].name: …").
                sub, message = message.split(": ", 1)
                path = f"{path}.{sub}" if path and not sub.startswith("[") else f"{path}{sub}"
            problems.append(f"{path or '(root)'}: {message}")
        raise ConfigYAMLError("; ".join(problems)) from None
