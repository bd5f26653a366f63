"""The served ASGI app of a proxy, assembled from its `ProxyConfig` (`proxy/config.py`).

Shared by `mcpfleet proxy` (`cli/proxy.py`, from its flags or `--config`) and by `mcpfleet up`, which
hosts stdio proxies in its own process (`platform/local/hosted.py`) and passes the child's exact `env`,
`cwd` and `hooks`. Every document the config names (incoming auth, run config, authz, audit, webhooks,
authorization server) is read once here, at start: a missing or invalid one stops the proxy with a
`ProxyConfigError` naming the field, so it never serves without what it was configured with. The
heavier stacks (OIDC, the relay, the attach client, the authz models) load only when configured.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcpfleet.httpsettings import HttpLimits
from mcpfleet.proxy.config import ProxyConfig, ProxyConfigError

if TYPE_CHECKING:
    from mcpfleet.auth.oidc import IncomingAuthSettings
    from mcpfleet.policy.guard import Policy
    from mcpfleet.proxy.child import ChildHooks
    from mcpfleet.proxy.http_app import ProxyApp
    from mcpfleet.proxy.remote import RemoteProxyApp
    from mcpfleet.ratelimit import Limiter
    from mcpfleet.toolconfig import ToolPolicy
    from mcpfleet.webhook.config import WebhookDocument


@dataclass(frozen=True)
class ChildContext:
    """How `mcpfleet up` starts a hosted proxy's stdio server (None fields: the proxy's own)."""

    env: dict[str, str] | None = None
    cwd: str | None = None
    hooks: ChildHooks | None = None


def http_limits(config: ProxyConfig) -> HttpLimits:
    """The config's limits over the `MCPFLEET_*` environment over the defaults."""
    try:
        return HttpLimits.from_env(**config.limits.model_dump())
    except ValueError as exc:
        raise ProxyConfigError(f"limits: {exc}", "limits") from None


def _incoming_auth(config: ProxyConfig) -> IncomingAuthSettings | None:
    if config.auth_config is None:
        return None
    from mcpfleet.auth.oidc import AuthConfigError, load_auth_config

    try:
        return load_auth_config(config.auth_config)
    except AuthConfigError as exc:
        raise ProxyConfigError(str(exc), "authConfig") from exc


def _policy(config: ProxyConfig) -> Policy:
    """The authz policies (then followed for changes) and the audit settings."""
    from mcpfleet.policy.guard import Policy, load_audit

    policy = Policy()
    if config.authz_config is not None:
        # (the authz models and their YAML reader: only for a proxy given an authz file)
        from mcpfleet.policy.config import AuthzConfigError
        from mcpfleet.policy.engine import PolicyEngine

        try:
            policy.engine = PolicyEngine(path=config.authz_config)
        except AuthzConfigError as exc:
            raise ProxyConfigError(str(exc), "authzConfig") from exc
    if config.audit_config is not None:
        try:
            policy.audit = load_audit(config.audit_config, "proxy")
        except ValueError as exc:
            raise ProxyConfigError(str(exc), "auditConfig") from exc
    return policy


def _tool_policy_and_limiter(config: ProxyConfig) -> tuple[ToolPolicy | None, Limiter | None]:
    """The run config's toolConfig (never serve tools it hides) and rateLimiting."""
    if config.run_config is None:
        return None, None
    from mcpfleet import ratelimit
    from mcpfleet.proxy.runconfig import RunConfigError, load_run_config  # the api models: ~0.1 s

    try:
        run = load_run_config(config.run_config)
        scope = f"{run.namespace or 'local'}/{run.name or 'proxy'}"
        limiter = ratelimit.build(run.rate_limiting, run.session_storage, scope)
        tool_policy = run.tool_policy()
    except (RunConfigError, ValueError) as exc:
        raise ProxyConfigError(str(exc), "runConfig") from exc
    if tool_policy is not None and (config.remote or config.remote_from_env):
        raise ProxyConfigError(
            "runConfig: toolConfig cannot be enforced in remote mode (remote / --remote: a byte relay);"
            " give it to a stdio proxy",
            "runConfig",
        )
    return tool_policy, limiter


def _webhooks(config: ProxyConfig) -> WebhookDocument | None:
    """The webhooks, their TLS files checked now: never serve without the webhooks it was given."""
    if config.webhook_config is None:
        return None
    from mcpfleet.webhook.client import ssl_context
    from mcpfleet.webhook.config import WebhookConfigError, load_webhook_config

    try:
        document = load_webhook_config(config.webhook_config)
        for endpoint in (*document.mutating, *document.validating):
            try:
                ssl_context(endpoint)
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                raise WebhookConfigError(
                    f"{config.webhook_config}: webhook {endpoint.name}: TLS files unusable: {exc}"
                ) from exc
    except WebhookConfigError as exc:
        raise ProxyConfigError(str(exc), "webhookConfig") from exc
    return document


def remote_url(config: ProxyConfig) -> str | None:
    """`remote`, or the URL in the environment variable `remoteFromEnv` names (credentials in a URL
    are never in a file or the process's argv, which any local user can read)."""
    if config.remote_from_env is None:
        return config.remote
    value = os.environ.get(config.remote_from_env, "").strip()
    if not value:
        raise ProxyConfigError(
            f"remoteFromEnv: the environment variable {config.remote_from_env} is not set or empty",
            "remoteFromEnv",
        )
    return value


def _remote_app(config: ProxyConfig, url: str) -> RemoteProxyApp:
    """The relay: headers from the environment, the stdio mode's Host/Origin policy."""
    from mcpfleet.proxy.http_app import security_for
    from mcpfleet.proxy.remote import RemoteProxyApp, bearer_from_env, headers_from_env

    headers = headers_from_env(dict(config.headers_from_env))
    if config.bearer_token_from_env is not None:
        headers.update(bearer_from_env(config.bearer_token_from_env))
    # The relay adds secret headers: a DNS-rebinding page must not reach it through a browser here.
    security = security_for(config.host, config.allowed_hosts)
    return RemoteProxyApp(url, headers, all_paths=config.forward_all_paths, security=security)


def _served_app(
    config: ProxyConfig, url: str | None, tool_policy: ToolPolicy | None, depth: int, child: ChildContext
) -> ProxyApp | RemoteProxyApp:
    """The app that serves the MCP server: the relay, the attached container or the stdio command."""
    from mcpfleet.proxy.serve import build_stdio_app

    if url is not None:
        return _remote_app(config, url)
    if config.attach is not None:
        from mcpfleet.proxy.attach import AttachTarget, attach_factory, in_cluster_connection, load_kubeconfig

        attach = config.attach
        pod = attach.pod if attach.pod is not None else os.environ.get(attach.pod_from_env or "", "")
        if not pod:
            raise ProxyConfigError(f"attach.podFromEnv: {attach.pod_from_env} is not set or empty", "attach")
        target = AttachTarget(attach.namespace, pod, attach.container)
        kubeconfig = config.kubeconfig
        conn = load_kubeconfig(kubeconfig, config.context) if kubeconfig else in_cluster_connection()
        factory = attach_factory(conn, target)
        return build_stdio_app(
            [],
            host=config.host,
            transport=config.transport,
            allowed_hosts=config.allowed_hosts,
            factory=factory,
            tool_policy=tool_policy,
            max_json_depth=depth,
        )
    return build_stdio_app(
        config.command,
        host=config.host,
        transport=config.transport,
        allowed_hosts=config.allowed_hosts,
        isolation=config.isolation,
        max_session_servers=config.max_session_servers,
        modern_era=config.modern_era,
        tool_policy=tool_policy,
        max_json_depth=depth,
        env=child.env,
        cwd=child.cwd,
        hooks=child.hooks,
    )


def build_proxy(config: ProxyConfig, child: ChildContext | None = None) -> tuple[object, HttpLimits]:
    """The served ASGI app (incoming auth, policies, webhooks, rate limits around the MCP server) and
    its HTTP limits; ProxyConfigError names the field when a document or value is unusable."""
    from mcpfleet.proxy.serve import with_auth

    limits = http_limits(config)
    url = remote_url(config)
    auth = _incoming_auth(config)
    policy = _policy(config)
    tool_policy, limiter = _tool_policy_and_limiter(config)
    webhooks = _webhooks(config)
    try:
        app = _served_app(config, url, tool_policy, limits.max_json_depth, child or ChildContext())
    except (ValueError, OSError) as exc:
        if isinstance(exc, ProxyConfigError):
            raise
        raise ProxyConfigError(str(exc)) from exc
    depth = limits.max_json_depth
    if config.authserver_config is None:
        served = with_auth(
            app,
            auth,
            mcp_path=config.mcp_path,
            public_url=config.public_url,
            policy=policy,
            limiter=limiter,
            webhooks=webhooks,
            max_json_depth=depth,
        )
        return served, limits
    if auth is not None and auth.type != "anonymous":
        raise ProxyConfigError(
            "authserverConfig: give either authConfig or authserverConfig", "authserverConfig"
        )
    inner = with_auth(app, None, policy=policy, limiter=limiter, webhooks=webhooks, max_json_depth=depth)
    return _embedded_authserver(config, inner), limits


def _embedded_authserver(config: ProxyConfig, inner: object) -> object:
    """The proxy behind its embedded authorization server (`auth/authserver/`), read once at start."""
    from mcpfleet.auth.authserver.config import AuthServerConfigError, load_settings
    from mcpfleet.auth.authserver.guard import build_app
    from mcpfleet.auth.authserver.server import AuthServer

    assert config.authserver_config is not None
    try:
        settings = load_settings(config.authserver_config)
        resource = (config.public_url or settings.issuer).rstrip("/") + config.mcp_path
        server = AuthServer(settings, resource=resource)
    except (AuthServerConfigError, ValueError) as exc:
        raise ProxyConfigError(str(exc), "authserverConfig") from exc
    return build_app(inner, server, mcp_path=config.mcp_path)  # type: ignore[arg-type]
