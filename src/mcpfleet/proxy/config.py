"""The proxy's configuration file: `ProxyConfig`, every option of `mcpfleet proxy` as one typed document.

The reconcile rules render it (`proxy.json`: a ConfigMap key on Kubernetes, a file in the workload's
state folder locally) and start `mcpfleet proxy --config FILE`; `mcpfleet up` hosts a proxy from this
model directly; the command's flags are a thin layer that builds the same model (`cli/proxy.py`).
camelCase on the wire, snake_case in Python, unknown fields refused, every error naming its field.

Secret values are never in it: a credential travels as the *name* of an environment variable
(`remoteFromEnv`, `headersFromEnv`, `bearerTokenFromEnv`) or as the path of a file. The incoming-auth,
authz, audit, webhook, authorization-server and run-config documents stay files of their own, named
here by path (relative paths are read from the config file's folder): each is a document another
component also reads or renders on its own (the authz file is followed for changes without a restart,
the authorization server's and the webhooks' are shared with the vMCP, the run config is the
workload's run record), see docs/proxy.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationError, model_validator

from mcpfleet.api.meta import ApiModel
from mcpfleet.configfile import DocumentError, error_location, parse_json_or_yaml, read_bounded

MAX_CONFIG_BYTES = 256 * 1024
"""Largest proxy config file read (a rendered one is a few hundred bytes)."""

CONFIG_FILE = "proxy.json"
"""The file name the reconcile rules render the config under."""

EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=256)]
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", max_length=256)]
FilePath = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$", max_length=253)]
Url = Annotated[str, StringConstraints(min_length=1, max_length=8192)]
HostPort = Annotated[str, StringConstraints(min_length=1, max_length=512)]


class ProxyConfigError(ValueError):
    """The proxy's configuration cannot be used; `field` names the offending field (wire name)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class AttachConfig(ApiModel):
    """A container's stdio reached through the Kubernetes attach API."""

    namespace: Name
    """The pod's namespace."""
    pod: Name | None = None
    """The pod's name (or `podFromEnv`)."""
    pod_from_env: EnvName | None = None
    """The environment variable holding the pod's name (the downward API's `metadata.name`): how a
    proxy in the same pod finds its own pod, which a rendered file cannot name."""
    container: Name | None = None
    """The container (default: the pod's only one)."""

    @model_validator(mode="after")
    def _one_pod(self) -> AttachConfig:
        if (self.pod is None) == (self.pod_from_env is None):
            raise ValueError("give exactly one of pod, podFromEnv")
        return self


class LimitsConfig(ApiModel):
    """HTTP limits (docs/security.md); an unset one comes from its `MCPFLEET_*` variable, then the default."""

    max_body_bytes: int | None = Field(default=None, gt=0, le=1 << 40)
    """Largest request body accepted, bytes (413 above)."""
    body_timeout: float | None = Field(default=None, gt=0, le=86400)
    """Seconds to receive a request body (408 after)."""
    header_timeout: float | None = Field(default=None, gt=0, le=86400)
    """Seconds for a connection to send complete request headers."""
    max_header_bytes: int | None = Field(default=None, gt=0, le=1 << 30)
    """Largest request line + headers, bytes (431 above)."""
    keep_alive_timeout: int | None = Field(default=None, gt=0, le=86400)
    """Seconds an idle keep-alive connection stays open."""
    max_json_depth: int | None = Field(default=None, gt=0, le=10000)
    """Deepest JSON nesting accepted in a message (JSON-RPC error -32600 above)."""


FILE_FIELDS = ("authConfig", "runConfig", "authzConfig", "auditConfig", "webhookConfig", "authserverConfig")
"""The fields naming files; a relative path in a config file is read from the file's folder."""


class ProxyConfig(ApiModel):
    """`mcpfleet proxy`'s whole configuration: what it serves, how, and what it enforces."""

    transport: Literal["streamable-http", "sse"] = "streamable-http"
    """streamable-http (`/mcp`) or sse (`/sse` + `/messages/`, plus `/mcp`)."""
    host: HostPort = "127.0.0.1"
    """Address to listen on."""
    port: int = Field(default=8080, ge=0, le=65535)
    """Port to listen on (0: any free port)."""
    command: list[Annotated[str, StringConstraints(max_length=65536)]] = Field(
        default_factory=list, max_length=4096
    )
    """The stdio MCP server's command line (or `remote`, `remoteFromEnv`, `attach`)."""
    remote: Url | None = None
    """Forward to this remote MCP URL instead of running a command (a URL with credentials belongs in
    `remoteFromEnv`)."""
    remote_from_env: EnvName | None = None
    """Like `remote`, the URL read from this environment variable: credentials stay out of files and argv."""
    headers_from_env: dict[HeaderName, EnvName] = Field(default_factory=dict, max_length=100)
    """HEADER: ENV_VAR: a header added to remote requests, its value from the environment (remote only)."""
    bearer_token_from_env: EnvName | None = None
    """Send `Authorization: Bearer $ENV_VAR` to the remote (remote only)."""
    forward_all_paths: bool = False
    """Forward every path (not only /mcp) to the same path on the remote's origin (remote only)."""
    attach: AttachConfig | None = None
    """Use a container's stdio through the Kubernetes attach API."""
    kubeconfig: FilePath | None = None
    """Kubeconfig for `attach` (default: the pod's service account)."""
    context: Annotated[str, StringConstraints(max_length=253)] | None = None
    """Kubeconfig context for `attach`."""
    isolation: Literal["shared", "session"] = "shared"
    """shared: one server process for all handshake-era sessions; session: one per session."""
    max_session_servers: int = Field(default=10, ge=1, le=10000)
    """With isolation session: most per-session server processes at once (HTTP 503 beyond)."""
    modern_era: Literal["auto", "translate", "separate"] = "auto"
    """auto: probe the server at start: one process, 2026-07-28 translated onto it, unless the server
    speaks 2026-07-28 and announces list changes (then served natively, handshake clients by a second
    process); translate: always one process; separate: always a second process for 2026-07-28."""
    allowed_hosts: list[HostPort] = Field(default_factory=list, max_length=100)
    """Extra Host header values accepted by DNS-rebinding protection (host:port)."""
    auth_config: FilePath | None = None
    """Incoming auth file (JSON: `{type: oidc, oidc: {...}, oidcFile: ...}`); every path but /health needs a token."""
    run_config: FilePath | None = None
    """The server's runconfig.json: its toolConfig and rateLimiting are enforced."""
    authz_config: FilePath | None = None
    """Cedar authorization file (ToolHive's authz format); followed for changes."""
    audit_config: FilePath | None = None
    """Audit logging settings file: one JSON line per request."""
    webhook_config: FilePath | None = None
    """Mutating and validating webhooks file (rendered from an MCPWebhookConfig)."""
    authserver_config: FilePath | None = None
    """The embedded OAuth 2.1 authorization server's file (rendered from an MCPExternalAuthConfig)."""
    public_url: Url | None = None
    """External base URL, for the OAuth protected-resource metadata."""
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    """Log level."""
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    """HTTP limits."""

    @model_validator(mode="after")
    def _consistent(self) -> ProxyConfig:
        remote = self.remote is not None or self.remote_from_env is not None
        if sum((bool(self.command), remote, self.attach is not None)) != 1:
            raise ValueError(
                "give exactly one of: command (the server's command line, after `--`), remote (or"
                " remoteFromEnv), attach"
            )
        if self.remote is not None and self.remote_from_env is not None:
            raise ValueError("remoteFromEnv: give either remote or remoteFromEnv")
        if not remote:
            for name, given in (
                ("headersFromEnv", bool(self.headers_from_env)),
                ("bearerTokenFromEnv", self.bearer_token_from_env is not None),
                ("forwardAllPaths", self.forward_all_paths),
            ):
                if given:
                    raise ValueError(f"{name}: only used with remote or remoteFromEnv")
        if self.bearer_token_from_env is not None and any(
            name.lower() == "authorization" for name in self.headers_from_env
        ):
            raise ValueError("bearerTokenFromEnv: Authorization is already set by headersFromEnv")
        return self

    @property
    def mcp_path(self) -> str:
        """The MCP endpoint path: /sse for a stdio server served over SSE, /mcp otherwise."""
        return (
            "/sse"
            if self.transport == "sse" and self.remote is None and self.remote_from_env is None
            else "/mcp"
        )

    @property
    def needs_own_process(self) -> bool:
        """A relay, an attach or incoming auth: `mcpfleet up` runs it as its own process."""
        return bool(self.remote or self.remote_from_env or self.attach or self.auth_config)


def _message(error: Any) -> str:
    return str(error["msg"]).removeprefix("Value error, ")


def parse_proxy_config(raw: Any, source: str = "proxy config") -> ProxyConfig:
    """Validate plain data as a ProxyConfig; ProxyConfigError names `source` and each bad field
    (the first one as the error's `field`)."""
    if not isinstance(raw, dict):
        raise ProxyConfigError(f"{source}: expected a mapping at the top level, got {type(raw).__name__}")
    try:
        return ProxyConfig.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        problems = "; ".join(
            f"{error_location(e)}: {_message(e)}" if e["loc"] else _message(e) for e in errors[:5]
        )
        first = errors[0]
        field = str(first["loc"][0]) if first["loc"] else _message(first).partition(":")[0]
        raise ProxyConfigError(f"{source}: {problems}", field if field in _WIRE_NAMES else None) from None


_WIRE_NAMES = frozenset(f.alias or n for n, f in ProxyConfig.model_fields.items())


def read_proxy_config(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a JSON or YAML config file (bounded read), its relative file paths made
    relative to the file's folder; ProxyConfigError naming the file."""
    file = Path(path)
    data = read_bounded(file, MAX_CONFIG_BYTES, "proxy config", ProxyConfigError)
    try:
        raw = parse_json_or_yaml(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ProxyConfigError(f"{file}: not UTF-8 text") from None
    except (DocumentError, RecursionError) as exc:
        raise ProxyConfigError(f"{file}: neither JSON nor YAML: {str(exc)[:200]}") from None
    if not isinstance(raw, dict):
        raise ProxyConfigError(f"{file}: expected a mapping at the top level, got {type(raw).__name__}")
    for key in FILE_FIELDS:
        value = raw.get(key)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            raw[key] = str(file.parent / value)
    return raw


def load_proxy_config(path: str | Path, overrides: dict[str, Any] | None = None) -> ProxyConfig:
    """Read `path`, apply `overrides` (wire names: each replaces the file's field), validate."""
    return parse_proxy_config({**read_proxy_config(path), **(overrides or {})}, str(path))
