"""The registry server's configuration file: its sources, database, listener, publishing and auth.

The operator (MCPRegistry controller) and the local platform build this model and write it out with
`RegistryConfig.dump()`; `mcpfleet registry serve --config FILE` reads it back with `load_config`.
A source is `mcpfleet.api.registrysource.Source`, the one model of a source, which MCPRegistry's
`configYAML` parses its sources with too (built on the spec's git reference, sync policy, filters and
Kubernetes discovery). Keys are camelCase on the wire (`registryName`, `syncPolicy`, `configMap`),
like ToolHive's registry server configuration. Every error names the offending key (e.g.
`sources[1].syncPolicy.interval`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from mcpfleet.api.duration import Duration, parse_duration
from mcpfleet.api.mcpregistry import PUBLISH_SCOPE, PublishGrant
from mcpfleet.api.meta import DNS_LABEL_PATTERN, ApiModel, location
from mcpfleet.api.registrysource import Source
from mcpfleet.auth.settings import IncomingAuthSettings
from mcpfleet.configfile import DocumentError, parse_json_or_yaml
from mcpfleet.httpsettings import HttpLimits
from mcpfleet.registry.entry import PUBLISHED
from mcpfleet.registry.errors import RegistryError


class Database(ApiModel):
    url: str | None = None
    """SQLAlchemy URL: `sqlite+aiosqlite:///PATH` or `postgresql+asyncpg://USER@HOST:PORT/DB`.
    Default: an SQLite file `<registryName>.db` beside the config file."""
    passwordFile: str | None = Field(default=None, alias="passwordFile")
    """File holding the database password (e.g. a mounted Secret), so it stays out of the config.
    Without it PostgreSQL passwords come from the pgpass file (`$PGPASSFILE`, else `~/.pgpass`)."""
    migrationUser: str | None = Field(default=None, min_length=1, alias="migrationUser")
    """PostgreSQL user the schema migrations run as (the URL's user when unset)."""
    migrationPasswordFile: str | None = Field(default=None, alias="migrationPasswordFile")
    """File holding the migration user's password (else the pgpass file)."""
    poolSize: int | None = Field(default=None, ge=1, le=1000, alias="poolSize")
    """Connections kept open (SQLAlchemy's default, 5, when unset)."""
    maxOverflow: int | None = Field(default=None, ge=0, le=1000, alias="maxOverflow")
    """Connections opened beyond poolSize under load."""
    poolRecycle: Duration | None = Field(default=None, alias="poolRecycle")
    """Connections older than this are replaced."""

    @field_validator("url")
    @classmethod
    def _supported(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return value


class Server(ApiModel):
    """Where the registry listens and how long and how much it waits for a client (the same limits,
    and the same defaults, as the proxy's and the gateway's servers: docs/security.md)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    headerTimeout: Duration = Field(default="10s", alias="headerTimeout")
    """From a connection's opening (or a kept-alive connection's next request) to complete request
    headers; a client that is slower gets a 408 and the connection is closed."""
    maxHeaderBytes: int = Field(default=64 * 1024, ge=1024, le=16 * 1024 * 1024, alias="maxHeaderBytes")
    """Request line plus headers (431 above)."""
    bodyTimeout: Duration = Field(default="30s", alias="bodyTimeout")
    """To receive a whole request body once its headers arrived (408 after)."""
    maxBodyBytes: int = Field(default=4 * 1024 * 1024, ge=1024, le=64 * 1024 * 1024, alias="maxBodyBytes")
    """Any request body (413 above); a publish is also held to `publish.maxBodyBytes`."""
    keepAliveTimeout: Duration = Field(default="5s", alias="keepAliveTimeout")
    """How long an idle kept-alive connection stays open between requests."""

    @field_validator("headerTimeout", "bodyTimeout", "keepAliveTimeout")
    @classmethod
    def _positive(cls, value: str) -> str:
        if parse_duration(value) <= 0:
            raise ValueError("must be longer than 0s")
        return value

    def limits(self, publish_body_bytes: int = 0) -> HttpLimits:
        """These limits as the shared `HttpLimits` (the body limit covers the largest publish)."""
        return HttpLimits(
            max_body_bytes=max(self.maxBodyBytes, publish_body_bytes),
            body_timeout=parse_duration(self.bodyTimeout),
            header_timeout=parse_duration(self.headerTimeout),
            max_header_bytes=self.maxHeaderBytes,
            # uvicorn's keep-alive timer takes whole seconds.
            keep_alive_timeout=max(1, round(parse_duration(self.keepAliveTimeout))),
        )


class Cors(ApiModel):
    """Cross-origin access for browser apps (`registry/cors.py`); the defaults are the official
    registry's (any origin, no credentials, a day's preflight cache) plus PATCH, which the status
    operations use. `allowedOrigins: []` turns CORS off (no CORS headers, preflights are not answered)."""

    allowedOrigins: list[str] = Field(default_factory=lambda: ["*"], alias="allowedOrigins", max_length=100)
    """`*`, exact origins (`https://console.example.com`) or one `*` wildcard (`https://*.example.com`)."""
    allowedMethods: list[str] = Field(
        default_factory=lambda: ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"], alias="allowedMethods"
    )
    allowedHeaders: list[str] = Field(default_factory=lambda: ["*"], alias="allowedHeaders")
    """Request headers a browser may send (`*`: any, echoed back to the preflight)."""
    exposedHeaders: list[str] = Field(
        default_factory=lambda: ["Content-Type", "Content-Length"], alias="exposedHeaders"
    )
    maxAge: int = Field(default=86400, ge=0, le=7 * 86400, alias="maxAge")
    """Seconds a browser may cache a preflight answer."""

    @field_validator("allowedOrigins", "allowedMethods", "allowedHeaders", "exposedHeaders")
    @classmethod
    def _tokens(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value or value.count("*") > 1 or any(c in value for c in ",\r\n\0 "):
                raise ValueError(f"{value!r}: expected one token (no commas, spaces; at most one '*')")
        return values


class Publish(ApiModel):
    """Publishing (`POST /v0.1/publish` and the status / delete operations); off without this block."""

    auth: IncomingAuthSettings | None = None
    """Who may publish: `type: oidc` with the issuer and the audience tokens must carry. Its access
    tokens are accepted directly, and its ID tokens are exchanged for registry tokens at
    `POST /v0.1/auth/oidc` (`mcp-publisher`'s login). Required unless `anonymousLogin` is on."""
    anonymousLogin: bool = Field(default=False, alias="anonymousLogin")
    """Development only: `POST /v0.1/auth/none` hands anyone a registry token that may publish
    `io.modelcontextprotocol.anonymous/*` (`mcp-publisher login none`), as the official registry's
    `MCP_REGISTRY_ENABLE_ANONYMOUS_AUTH`. Off by default."""
    tokenSigningKeyFile: str | None = Field(default=None, alias="tokenSigningKeyFile", min_length=1)
    """A file holding the Ed25519 seed (64 hex characters, as the official registry's
    `MCP_REGISTRY_JWT_PRIVATE_KEY`) that signs the registry tokens of `/v0.1/auth/*`; relative to the
    config file. Unset: a key generated at start (tokens do not outlive the process and are not
    accepted by other replicas): set it when several replicas share a database."""
    scope: str | None = Field(default=PUBLISH_SCOPE, min_length=1)
    """Scope (in the token's `scope` or `scp` claim) every publish, status or delete call needs; null
    for issuers that put no scopes in tokens (Kubernetes service-account tokens)."""
    grants: list[PublishGrant] = Field(default_factory=list)
    """Claims → namespaces, the private twin of the official registry's per-login permissions."""
    emailDomainNamespaces: bool = Field(default=False, alias="emailDomainNamespaces")
    """Also grant the namespaces of the token's verified email domain, as the official registry
    grants a proven domain: `alice@acme.com` (with `email_verified: true`) may publish
    `com.acme/*` and `com.acme.*`."""
    precedence: Literal["first", "last"] = "first"
    """Where published entries rank among the sources: `first` (a published name takes precedence
    over the same name from any source) or `last` (synced sources win; publishing a name a source
    serves is refused)."""
    maxBodyBytes: int = Field(default=1024 * 1024, ge=1024, le=16 * 1024 * 1024, alias="maxBodyBytes")
    """Largest server.json accepted (413 above)."""

    @model_validator(mode="after")
    def _oidc_only(self) -> Publish:
        if self.auth is None:
            if not self.anonymousLogin:
                raise ValueError("auth is required (an OIDC issuer), unless anonymousLogin is on")
            return self
        if self.auth.type != "oidc":
            raise ValueError("auth.type must be 'oidc': publishing needs authenticated callers")
        problems = self.auth.problems("auth")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class RegistryConfig(ApiModel):
    """The whole configuration file."""

    registryName: str = Field(pattern=DNS_LABEL_PATTERN, max_length=63, alias="registryName")
    """Also the value of the `mcpfleet.dev/registry` label the kubernetes source selects on."""
    sources: list[Source] = Field(min_length=1)
    """Merged in order; on a name conflict the first source listed wins."""
    database: Database = Field(default_factory=Database)
    server: Server = Field(default_factory=Server)
    deletedRetention: Duration = Field(default="168h", alias="deletedRetention")
    """How long an entry that left its sources stays visible as `status: deleted` (to `include_deleted`
    and `updated_since` readers) before it is purged."""
    publish: Publish | None = None
    """Publishing API settings; without them the registry is read-only."""
    auth: IncomingAuthSettings | None = None
    """Who may read the registry API: anonymous when unset; `type: oidc` asks every request (but
    `publicPaths`) for a bearer token of that issuer (ToolHive's `auth.mode: oauth`)."""
    publicPaths: list[str] = Field(
        default_factory=lambda: ["/health", "/readiness", "/version"], alias="publicPaths"
    )
    """Paths served without a token when `auth` asks for one."""
    cors: Cors = Field(default_factory=Cors)
    """Cross-origin access for browser apps (on by default, as on the official registry)."""
    aliases: list[str] = Field(default_factory=list, max_length=8)
    """Extra names the catalogue answers under, as ToolHive's server does: `/registry/<alias>/v0.1/...`
    is served like `/v0.1/...`."""

    @model_validator(mode="after")
    def _auth_problems(self) -> RegistryConfig:
        if self.auth is not None:
            problems = self.auth.problems("auth")
            if problems:
                raise ValueError("; ".join(problems))
        return self

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: list[Source]) -> list[Source]:
        seen: set[str] = set()
        for source in sources:
            if source.name in seen:
                raise ValueError(f"duplicate source name {source.name!r}")
            seen.add(source.name)
        return sources


def http_limits(config: RegistryConfig) -> HttpLimits:
    """The connection and body limits the registry is served with."""
    return config.server.limits(config.publish.maxBodyBytes if config.publish is not None else 0)


def merge_order(config: RegistryConfig) -> list[str]:
    """The sources in precedence order, published entries among them where `publish.precedence` says."""
    names = [s.name for s in config.sources]
    if config.publish is None:
        return names
    return [PUBLISHED, *names] if config.publish.precedence == "first" else [*names, PUBLISHED]


class ConfigError(RegistryError):
    """The config file is unreadable or invalid; the message names each offending key."""


def parse_config(data: Any) -> RegistryConfig:
    """Validate a decoded config document; raise ConfigError naming each bad key."""
    try:
        return RegistryConfig.model_validate(data)
    except ValidationError as exc:
        lines = [f"{location(err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()]
        raise ConfigError("invalid registry config:\n  " + "\n  ".join(lines)) from None


def load_config(path: Path) -> RegistryConfig:
    """Read a YAML or JSON config file (JSON is YAML) and validate it."""
    try:
        data = parse_json_or_yaml(path.read_text())
    except (OSError, DocumentError) as exc:
        raise ConfigError(f"cannot read registry config {path}: {exc}") from None
    return parse_config(data)
