"""`mcpfleet proxy`: serve a stdio MCP server (or a remote one) over streamable HTTP / SSE."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from mcpfleet.cli import limit_options
from mcpfleet.cli.options import Opt

if TYPE_CHECKING:
    import typer

    from mcpfleet.auth.oidc import IncomingAuthSettings
    from mcpfleet.httplimits import HttpLimits
    from mcpfleet.policy.guard import Policy
    from mcpfleet.proxy.child import ChildHooks
    from mcpfleet.proxy.http_app import ProxyApp
    from mcpfleet.proxy.remote import RemoteProxyApp
    from mcpfleet.ratelimit import Limiter
    from mcpfleet.toolconfig import ToolPolicy
    from mcpfleet.webhook.config import WebhookDocument


def _bad(message: str, param_hint: str | None = None) -> typer.BadParameter:
    """A usage error, as typer reports it (typer is loaded only then: the start path never needs it)."""
    import typer

    return typer.BadParameter(message, param_hint=param_hint)


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise _bad(f"expected NAME=VALUE, got {item!r}", param_hint=flag)
        out[name] = value
    return out


def _incoming_auth(auth_config: str | None) -> IncomingAuthSettings | None:
    """`--auth-config`, read once at start; a missing or invalid file stops the proxy: it never serves
    without the auth it was configured with."""
    if auth_config is None:
        return None
    from mcpfleet.auth.oidc import AuthConfigError, load_auth_config

    try:
        return load_auth_config(auth_config)
    except AuthConfigError as exc:
        raise _bad(str(exc), param_hint="--auth-config") from exc


def _embedded_authserver(path: str, inner: object, mcp_path: str, public_url: str | None) -> object:
    """The proxy behind its embedded authorization server (`auth/authserver/`), read once at start:
    an invalid file or secret stops the proxy, which never serves without the auth it was given."""
    from mcpfleet.auth.authserver.config import AuthServerConfigError, load_settings
    from mcpfleet.auth.authserver.guard import build_app
    from mcpfleet.auth.authserver.server import AuthServer

    try:
        settings = load_settings(path)
        resource = (public_url or settings.issuer).rstrip("/") + mcp_path
        server = AuthServer(settings, resource=resource)
    except (AuthServerConfigError, ValueError) as exc:
        raise _bad(str(exc), param_hint="--authserver-config") from exc
    return build_app(inner, server, mcp_path=mcp_path)  # type: ignore[arg-type]


def _policy(authz_config: str | None, audit_config: str | None, component: str) -> Policy:
    """`--authz-config` / `--audit-config`, read at start (an invalid file stops the proxy: it never
    serves without the policies it was configured with); the authz file is then followed for changes."""
    from mcpfleet.policy.guard import Policy, load_audit

    policy = Policy()
    if authz_config is not None:
        # (the authz models and their YAML reader: only for a proxy given an authz file)
        from mcpfleet.policy.config import AuthzConfigError
        from mcpfleet.policy.engine import PolicyEngine

        try:
            policy.engine = PolicyEngine(path=authz_config)
        except AuthzConfigError as exc:
            raise _bad(str(exc), param_hint="--authz-config") from exc
    if audit_config is not None:
        try:
            policy.audit = load_audit(audit_config, component)
        except ValueError as exc:
            raise _bad(str(exc), param_hint="--audit-config") from exc
    return policy


def _tool_policy(run_config: str | None, remote: str | None) -> ToolPolicy | None:
    """`--run-config`'s toolConfig, read once at start like --auth-config: never serve tools it hides."""
    if run_config is None:
        return None
    from mcpfleet.proxy.runconfig import RunConfigError, load_run_config  # the api models: ~0.1 s

    try:
        tool_policy = load_run_config(run_config).tool_policy()
    except RunConfigError as exc:
        raise _bad(str(exc), param_hint="--run-config") from exc
    if tool_policy is not None and remote is not None:
        raise _bad(
            "toolConfig cannot be enforced in --remote mode (a byte relay); give it to a stdio proxy",
            param_hint="--run-config",
        )
    return tool_policy


def _limiter(run_config: str | None) -> Limiter | None:
    """`--run-config`'s rateLimiting (Redis-shared with a redis sessionStorage), or None."""
    if run_config is None:
        return None
    from mcpfleet import ratelimit
    from mcpfleet.proxy.runconfig import RunConfigError, load_run_config

    try:
        config = load_run_config(run_config)
        scope = f"{config.namespace or 'local'}/{config.name or 'proxy'}"
        return ratelimit.build(config.rate_limiting, config.session_storage, scope)
    except (RunConfigError, ValueError) as exc:
        raise _bad(str(exc), param_hint="--run-config") from exc


def _webhooks(webhook_config: str | None) -> WebhookDocument | None:
    """`--webhook-config` (an MCPWebhookConfig's webhooks), read at start like --auth-config: an invalid
    file or TLS file stops the proxy, which never serves without the webhooks it was given."""
    if webhook_config is None:
        return None
    from mcpfleet.webhook.client import ssl_context
    from mcpfleet.webhook.config import WebhookConfigError, load_webhook_config

    try:
        document = load_webhook_config(webhook_config)
        for endpoint in (*document.mutating, *document.validating):
            try:
                ssl_context(endpoint)
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                raise WebhookConfigError(
                    f"{webhook_config}: webhook {endpoint.name}: TLS files unusable: {exc}"
                ) from exc
    except WebhookConfigError as exc:
        raise _bad(str(exc), param_hint="--webhook-config") from exc
    return document


def _remote_url(remote: str | None, remote_from_env: str | None) -> str | None:
    """`--remote URL`, or the URL in the environment variable `--remote-from-env` names: what
    `mcpfleet up` and the operator pass, so that credentials in the URL (`user:pw@`, a token in the
    query) are never in the process's argv, which any local user can read (`ps`, /proc/PID/cmdline)."""
    if remote_from_env is None:
        return remote
    if remote is not None:
        raise _bad("give either --remote or --remote-from-env", param_hint="--remote-from-env")
    value = os.environ.get(remote_from_env, "").strip()
    if not value:
        raise _bad(
            f"the environment variable {remote_from_env} is not set or empty", param_hint="--remote-from-env"
        )
    return value


def _remote_app(
    remote: str,
    host: str,
    allowed_hosts: list[str],
    header_from_env: list[str],
    bearer_token_from_env: str | None,
    all_paths: bool,
) -> RemoteProxyApp:
    """The `--remote` relay: headers from the environment, the stdio mode's Host/Origin policy."""
    from mcpfleet.proxy.http_app import security_for
    from mcpfleet.proxy.remote import RemoteProxyApp, bearer_from_env, headers_from_env

    headers = headers_from_env(_pairs(header_from_env, "--header-from-env"))
    if bearer_token_from_env is not None:
        if any(name.lower() == "authorization" for name in headers):
            raise _bad(
                "Authorization is already set by --header-from-env", param_hint="--bearer-token-from-env"
            )
        headers.update(bearer_from_env(bearer_token_from_env))
    # The relay adds secret headers: a DNS-rebinding page must not reach it through a browser here.
    return RemoteProxyApp(remote, headers, all_paths=all_paths, security=security_for(host, allowed_hosts))


def proxy(
    command: list[str],
    transport: str = Opt(
        "streamable-http", "--transport", help="streamable-http (/mcp) or sse (/sse + /messages/, plus /mcp)."
    ),
    host: str = Opt("127.0.0.1", "--host", help="Address to listen on."),
    port: int = Opt(8080, "--port", help="Port to listen on (0 = any free port; the URL is printed)."),
    remote: str | None = Opt(None, "--remote", help="Forward to this remote MCP URL instead of a command."),
    remote_from_env: str | None = Opt(
        None,
        "--remote-from-env",
        help="ENV_VAR: like --remote, the URL read from this environment variable (a URL with "
        "credentials stays out of the process list).",
    ),
    header_from_env: list[str] = Opt(
        [],
        "--header-from-env",
        help="HEADER=ENV_VAR: add a header to remote requests, value from the environment.",
    ),
    bearer_token_from_env: str | None = Opt(
        None,
        "--bearer-token-from-env",
        help="ENV_VAR: send `Authorization: Bearer $ENV_VAR` to the remote (--remote only).",
    ),
    attach: str | None = Opt(
        None,
        "--attach",
        help="NAMESPACE/POD or NAMESPACE/POD/CONTAINER: use a container's stdio via the Kubernetes attach API.",
    ),
    kubeconfig: str | None = Opt(
        None, "--kubeconfig", help="Kubeconfig for --attach (default: the pod's service account)."
    ),
    context: str | None = Opt(None, "--context", help="Kubeconfig context for --attach."),
    isolation: str = Opt(
        "shared",
        "--isolation",
        help="shared: one server process for all handshake-era sessions; session: one per session.",
    ),
    max_session_servers: int = Opt(
        10,
        "--max-session-servers",
        help="--isolation session: most per-session server processes running at once; a new "
        "session beyond it answers HTTP 503 (a session's process ends with it, idle ones included).",
    ),
    modern_era: str = Opt(
        "translate",
        "--modern-era",
        help="translate: 2026-07-28 clients share the one server process (the proxy translates); "
        "separate: a second process serves them natively (for 2026-07-28-only server features).",
    ),
    allowed_host: list[str] = Opt(
        [], "--allowed-host", help="Extra Host header value accepted by DNS-rebinding protection (host:port)."
    ),
    forward_all_paths: bool = Opt(
        False,
        "--forward-all-paths",
        help="--remote: forward every path (not only /mcp) to the same path on the remote's origin.",
    ),
    auth_config: str | None = Opt(
        None,
        "--auth-config",
        help="Incoming auth (JSON: {type: oidc, oidc: {...}, oidcFile: ...}); every path but /health needs a token.",
    ),
    run_config: str | None = Opt(
        None,
        "--run-config",
        help="The server's runconfig.json: its toolConfig (MCPToolConfig filter / overrides) and rateLimiting are enforced.",
    ),
    authz_config: str | None = Opt(
        None,
        "--authz-config",
        help="Cedar authorization (ToolHive's authz file: {version, type: cedarv1, cedar: {policies, "
        "entities_json}}); followed for changes.",
    ),
    audit_config: str | None = Opt(
        None,
        "--audit-config",
        help="Audit logging settings (JSON: {enabled, logFile, includeRequestData, ...}): one JSON line per request.",
    ),
    webhook_config: str | None = Opt(
        None,
        "--webhook-config",
        help="Mutating and validating webhooks called on each request (JSON: {mutating, validating, ...}, "
        "rendered from an MCPWebhookConfig).",
    ),
    authserver_config: str | None = Opt(
        None,
        "--authserver-config",
        help="Run the embedded OAuth 2.1 authorization server (JSON rendered from an MCPExternalAuthConfig "
        "embeddedAuthServer); every path but /health and its endpoints then needs a token it issued.",
    ),
    public_url: str | None = Opt(
        None, "--public-url", help="External base URL, for the OAuth protected-resource metadata."
    ),
    log_level: str = Opt("warning", "--log-level", help="debug, info, warning or error."),
    max_body_bytes: int | None = limit_options.MAX_BODY_BYTES,
    body_timeout: float | None = limit_options.BODY_TIMEOUT,
    header_timeout: float | None = limit_options.HEADER_TIMEOUT,
    max_header_bytes: int | None = limit_options.MAX_HEADER_BYTES,
    keep_alive_timeout: int | None = limit_options.KEEP_ALIVE_TIMEOUT,
    max_json_depth: int | None = limit_options.MAX_JSON_DEPTH,
) -> None:
    """Serve a stdio MCP server over HTTP: COMMAND ARGS... after `--`, a container (--attach), or --remote URL.

    Examples:

    \b
      mcpfleet proxy --port 8080 -- uvx mcp-server-time
      mcpfleet proxy --port 8081 --remote https://example.com/mcp
      REMOTE_URL='https://user:pw@example.com/mcp' mcpfleet proxy --remote-from-env REMOTE_URL
    """
    options = dict(locals())  # every option, first thing: build() takes them by name
    del options["command"]
    from mcpfleet.proxy.serve import run

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    served, limits = build(command, **options)
    try:
        run(served, host, port, log_level, limits)
    except KeyboardInterrupt:
        pass


def build(
    command: list[str],
    *,
    transport: str,
    host: str,
    remote: str | None,
    header_from_env: list[str],
    bearer_token_from_env: str | None,
    attach: str | None,
    kubeconfig: str | None,
    context: str | None,
    isolation: str,
    max_session_servers: int = 10,  # proxy.backend.MAX_SESSION_SERVERS (not imported: start time)
    modern_era: str = "translate",
    allowed_host: list[str],
    forward_all_paths: bool,
    auth_config: str | None,
    run_config: str | None,
    public_url: str | None,
    max_body_bytes: int | None,
    authz_config: str | None = None,
    audit_config: str | None = None,
    webhook_config: str | None = None,
    authserver_config: str | None = None,
    body_timeout: float | None,
    header_timeout: float | None,
    max_header_bytes: int | None,
    keep_alive_timeout: int | None,
    max_json_depth: int | None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    hooks: ChildHooks | None = None,
    remote_from_env: str | None = None,
    **_serving: object,
) -> tuple[object, HttpLimits]:
    """The served ASGI app and its HTTP limits from `mcpfleet proxy`'s options (its click params).

    Shared by the command and by `mcpfleet up`, which hosts stdio proxies in-process
    (`platform/local/hosted.py`) and passes the child's exact `env`, `cwd` and `hooks`. The serving
    options (`port`, `log_level`) are the caller's business. Raises typer.BadParameter.
    """
    from mcpfleet.proxy.serve import build_stdio_app, with_auth

    limits = limit_options.limits(
        max_body_bytes, body_timeout, header_timeout, max_header_bytes, keep_alive_timeout, max_json_depth
    )
    remote = _remote_url(remote, remote_from_env)
    auth = _incoming_auth(auth_config)
    policy = _policy(authz_config, audit_config, "proxy")
    tool_policy = _tool_policy(run_config, remote)
    limiter = _limiter(run_config)
    webhooks = _webhooks(webhook_config)
    app: ProxyApp | RemoteProxyApp
    try:
        if sum((remote is not None, attach is not None, bool(command))) > 1:
            raise _bad("give exactly one of: a command after --, --remote, --attach")
        if attach is not None:
            from mcpfleet.proxy.attach import (
                AttachTarget,
                attach_factory,
                in_cluster_connection,
                load_kubeconfig,
            )

            target = AttachTarget.parse(attach)
            conn = load_kubeconfig(kubeconfig, context) if kubeconfig else in_cluster_connection()
            factory = attach_factory(conn, target)
            app = build_stdio_app(
                [],
                host=host,
                transport=transport,
                allowed_hosts=allowed_host,
                factory=factory,
                tool_policy=tool_policy,
                max_json_depth=limits.max_json_depth,
            )
        elif remote is not None:
            if command:
                raise _bad("give either --remote or a command after --, not both", param_hint="--remote")
            app = _remote_app(
                remote, host, allowed_host, header_from_env, bearer_token_from_env, forward_all_paths
            )
        else:
            if not command:
                raise _bad("give the stdio server command after `--`", param_hint="COMMAND")
            if header_from_env:
                raise _bad("only used with --remote", param_hint="--header-from-env")
            if bearer_token_from_env is not None:
                raise _bad("only used with --remote", param_hint="--bearer-token-from-env")
            if forward_all_paths:
                raise _bad("only used with --remote", param_hint="--forward-all-paths")
            app = build_stdio_app(
                command,
                host=host,
                transport=transport,
                allowed_hosts=allowed_host,
                isolation=isolation,
                max_session_servers=max_session_servers,
                modern_era=modern_era,
                tool_policy=tool_policy,
                max_json_depth=limits.max_json_depth,
                env=env,
                cwd=cwd,
                hooks=hooks,
            )
    except (ValueError, OSError) as exc:
        raise _bad(str(exc)) from exc
    mcp_path = "/sse" if transport == "sse" and remote is None else "/mcp"
    if authserver_config is not None:
        if auth is not None and auth.type != "anonymous":
            raise _bad("give either --auth-config or --authserver-config", param_hint="--authserver-config")
        inner = with_auth(
            app,
            None,
            policy=policy,
            limiter=limiter,
            webhooks=webhooks,
            max_json_depth=limits.max_json_depth,
        )
        return _embedded_authserver(authserver_config, inner, mcp_path, public_url), limits
    served = with_auth(
        app,
        auth,
        mcp_path=mcp_path,
        public_url=public_url,
        policy=policy,
        limiter=limiter,
        webhooks=webhooks,
        max_json_depth=limits.max_json_depth,
    )
    return served, limits
