"""Assembles a runnable gateway from a config: backend source, status writer, auth, ASGI app.

Kept apart from the CLI so tests and the local platform build the same thing in-process.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcpfleet import ratelimit
from mcpfleet.api.duration import parse_duration
from mcpfleet.api.kindnames import MEMBER_KINDS
from mcpfleet.auth.oidc import (
    AuthConfigError,
    Authenticator,
    make_authenticator,
    protected_resource_metadata,
)
from mcpfleet.jsonrpc import DEFAULT_MAX_DEPTH
from mcpfleet.redisconn import redis_client
from mcpfleet.vmcp.app import LOOPBACK_HOSTS, LOOPBACK_ORIGINS, VMCPApp
from mcpfleet.vmcp.backends import (
    BackendSource,
    BackendSpec,
    CombinedBackendSource,
    KubernetesBackendSource,
    StaticBackendSource,
)
from mcpfleet.vmcp.config import ConfigError, VMCPConfig
from mcpfleet.vmcp.gateway import MAX_SESSIONS, MAX_SESSIONS_PER_SUBJECT, SESSION_IDLE_SECONDS, Gateway
from mcpfleet.vmcp.status import FileStatusWriter, KubernetesStatusWriter, NoopStatusWriter, StatusWriter

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from mcpfleet.auth.authserver.guard import ASGIApp
    from mcpfleet.auth.authserver.server import AuthServer


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 4483
    status_file: str | None = None
    status_resource: str | None = None  # VirtualMCPServer name to patch (Kubernetes)
    allowed_hosts: list[str] | None = None
    public_url: str | None = None
    max_json_depth: int = DEFAULT_MAX_DEPTH  # the other HTTP limits are the server's (httplimits)
    # 2025-era client sessions: at most this many at once; forgotten after this long unused.
    max_sessions: int = MAX_SESSIONS
    session_idle_seconds: float = SESSION_IDLE_SECONDS
    # ...and at most this many opened by one caller (token subject; anonymous: client address).
    max_sessions_per_subject: int = MAX_SESSIONS_PER_SUBJECT
    # The config file to follow: its tool filters / overrides / composite tools apply live.
    config_file: str | None = None


ENV_MAX_SESSIONS = "MCPFLEET_VMCP_MAX_SESSIONS"
ENV_SESSION_IDLE = "MCPFLEET_VMCP_SESSION_IDLE_TIMEOUT"
ENV_MAX_SESSIONS_PER_SUBJECT = "MCPFLEET_VMCP_MAX_SESSIONS_PER_SUBJECT"


def subject_session_limit(value: int | str | None) -> int:
    """`--max-sessions-per-subject` (None: $MCPFLEET_VMCP_MAX_SESSIONS_PER_SUBJECT, else the
    default), checked; raises ConfigError naming the flag."""
    raw = value if value is not None else os.environ.get(ENV_MAX_SESSIONS_PER_SUBJECT)
    try:
        limit = MAX_SESSIONS_PER_SUBJECT if raw is None else int(raw)
    except ValueError:
        raise ConfigError(f"--max-sessions-per-subject: expected a whole number, got {raw!r}") from None
    if limit < 1:
        raise ConfigError(f"--max-sessions-per-subject: must be at least 1, got {limit}")
    return limit


def session_limits(max_sessions: int | str | None, idle_timeout: str | None) -> tuple[int, float]:
    """`--max-sessions` / `--session-idle-timeout` (None: $MCPFLEET_VMCP_*, else the defaults),
    checked; raises ConfigError naming the flag."""
    raw_max = max_sessions if max_sessions is not None else os.environ.get(ENV_MAX_SESSIONS)
    raw_idle = idle_timeout if idle_timeout is not None else os.environ.get(ENV_SESSION_IDLE)
    try:
        limit = MAX_SESSIONS if raw_max is None else int(raw_max)
    except ValueError:
        raise ConfigError(f"--max-sessions: expected a whole number, got {raw_max!r}") from None
    if limit < 1:
        raise ConfigError(f"--max-sessions: must be at least 1, got {limit}")
    try:
        idle = SESSION_IDLE_SECONDS if raw_idle is None else parse_duration(raw_idle)
    except ValueError as exc:
        raise ConfigError(f"--session-idle-timeout: {exc}") from None
    if idle <= 0:
        raise ConfigError("--session-idle-timeout: must be positive")
    return limit, idle


def static_specs(config: VMCPConfig) -> list[BackendSpec]:
    return [
        BackendSpec(b.name, b.url, b.transport, tuple(sorted(b.metadata.items()))) for b in config.backends
    ]


def namespace_of(config: VMCPConfig) -> str | None:
    if config.namespace:
        return config.namespace
    ns = os.environ.get("POD_NAMESPACE")
    if ns:
        return ns
    path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    return None


def make_source(config: VMCPConfig, kube_client: Any | None = None) -> BackendSource:
    """Static backends, or the group discovered in Kubernetes (plus static extras) when possible.

    Discovered mode needs `groupRef` and a namespace (config, $POD_NAMESPACE or the service
    account). Rendered entries for group members (metadata kind MCPServer / MCPRemoteProxy) are then
    superseded by the live view, so URL changes and deletions are followed without a restart.
    Without a namespace, a rendered `backends` list is served as is.
    """
    static = static_specs(config)
    ns = namespace_of(config) if config.group_ref else None
    if config.group_ref and ns is not None:
        extras = [b for b in static if dict(b.metadata).get("kind") not in _MEMBER_KINDS]
        kube = KubernetesBackendSource(config.group_ref, ns, kube_client)
        return CombinedBackendSource(extras, kube) if extras else kube
    if not static:
        if config.group_ref:
            raise ConfigError(
                "groupRef: discovered mode needs a namespace (config `namespace` or $POD_NAMESPACE)"
            )
        raise ConfigError("backends: no backends and no groupRef - nothing to aggregate")
    return StaticBackendSource(static)


_MEMBER_KINDS = MEMBER_KINDS


def make_status_writer(
    config: VMCPConfig, opts: ServeOptions, kube_client: Any | None = None
) -> StatusWriter:
    if opts.status_file:
        return FileStatusWriter(opts.status_file)
    if opts.status_resource:
        ns = namespace_of(config)
        if ns is None:
            raise ConfigError("--status-resource needs a namespace (config `namespace` or $POD_NAMESPACE)")
        return KubernetesStatusWriter(opts.status_resource, ns, kube_client)
    return NoopStatusWriter()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_app(
    config: VMCPConfig,
    opts: ServeOptions,
    *,
    source: BackendSource | None = None,
    status_writer: StatusWriter | None = None,
    tracer: Tracer | None = None,
    auth_server: AuthServer | None = None,
) -> VMCPApp:
    """The ASGI app; the gateway starts and stops with the ASGI lifespan.

    `tracer` (see `mcpfleet.telemetry`) turns on request, backend-call and composite-step spans;
    None leaves tracing off. `auth_server` (VirtualMCPServer `authServerConfig`) makes the gateway
    accept only the tokens that embedded authorization server issued; its issuer must be incomingAuth's
    OIDC issuer. The caller serves its endpoints in front of the app (`with_auth_server`).
    """
    gateway = Gateway(
        config,
        source or make_source(config),
        status_writer=status_writer or make_status_writer(config, opts),
        tracer=tracer,
        max_sessions=opts.max_sessions,
        session_idle=opts.session_idle_seconds,
        config_file=opts.config_file,
        max_sessions_per_subject=opts.max_sessions_per_subject,
    )
    # Buckets and sessions are keyed by the gateway (namespace/name): one Redis may serve many.
    scope = f"{config.namespace or 'local'}/{config.name}"
    storage = config.session_storage
    if storage is not None and storage.provider == "redis":
        from mcpfleet.vmcp.sessions import SessionStore  # loads redis: only for a Redis session store

        gateway.session_store = SessionStore(
            redis_client(storage), scope, opts.session_idle_seconds, storage.key_prefix or ""
        )
    allowed_hosts = opts.allowed_hosts
    allowed_origins = None
    if allowed_hosts is not None:
        # Loopback Host values with any port, like the proxy allows: `kubectl port-forward` reaches an
        # in-cluster gateway as 127.0.0.1:<local port>. A DNS-rebinding attack carries the attacker's
        # own host name, never a loopback one, so this does not weaken the protection.
        allowed_hosts = [*LOOPBACK_HOSTS, *allowed_hosts]
    elif _is_loopback(opts.host):
        # DNS-rebinding protection: a loopback-bound gateway only answers loopback Host/Origin values.
        allowed_hosts = LOOPBACK_HOSTS
        allowed_origins = LOOPBACK_ORIGINS
    resource_metadata = None
    auth = None
    if config.incoming_auth.type == "oidc":
        try:
            # load_config() has read `oidcFile` already; a config built in code is resolved here.
            incoming = config.incoming_auth.resolved()
        except AuthConfigError as exc:
            raise ConfigError(f"incomingAuth.{exc}") from exc
        assert incoming.oidc is not None
        base = opts.public_url or f"http://{opts.host}:{opts.port}"
        resource_metadata = protected_resource_metadata(incoming.oidc, f"{base}/mcp")
        # The authenticator opens its HTTP session on first use, inside the server's event loop.
        auth = make_authenticator(incoming, resource_metadata=f"{base}/.well-known/oauth-protected-resource")
        if auth_server is not None:
            auth = _own_tokens(auth_server, incoming.oidc.issuer or "", resource_metadata, base)
    elif auth_server is not None:
        raise ConfigError("authserver: needs incomingAuth type oidc with the authorization server's issuer")
    return VMCPApp(
        gateway,
        auth,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        resource_metadata=resource_metadata,
        tracer=tracer,
        max_json_depth=opts.max_json_depth,
        limiter=ratelimit.build(config.rate_limiting, storage, scope),
    )


def _own_tokens(
    server: AuthServer, issuer: str, resource_metadata: dict[str, Any] | None, base: str
) -> Authenticator:
    """The embedded server's authenticator in place of the OIDC one: same issuer, but validated with our
    own keys (the gateway would otherwise fetch its own JWKS from itself)."""
    from mcpfleet.auth.authserver.guard import OwnTokenAuthenticator

    if issuer.rstrip("/") != server.issuer.rstrip("/"):
        raise ConfigError(
            f"incomingAuth.oidc.issuer: {issuer} must be the embedded authorization server's issuer"
            f" {server.issuer}"
        )
    if resource_metadata is not None:
        resource_metadata["resource"] = server.resource
    return OwnTokenAuthenticator(server, f"{base}/.well-known/oauth-protected-resource")


def with_auth_server(app: VMCPApp, server: AuthServer) -> ASGIApp:
    """The gateway behind the embedded server's endpoints (`/oauth/*`, `/.well-known/…`): the protected
    resource metadata stays the gateway's own."""
    from mcpfleet.auth.authserver.guard import AuthServerFront

    return AuthServerFront(server, app)


def load_auth_server(path: str, public_url: str | None) -> AuthServer:
    """The embedded authorization server from its settings file (`--authserver-config`), read once at
    start: an invalid file or secret stops the gateway (a ConfigError), which never serves without the
    auth it was given. Its protected resource is the gateway's `/mcp`."""
    from mcpfleet.auth.authserver.config import AuthServerConfigError, load_settings
    from mcpfleet.auth.authserver.server import AuthServer

    try:
        settings = load_settings(path)
        return AuthServer(settings, resource=(public_url or settings.issuer).rstrip("/") + "/mcp")
    except (AuthServerConfigError, ValueError) as exc:
        raise ConfigError(f"--authserver-config: {exc}") from exc
