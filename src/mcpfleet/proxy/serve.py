"""Running the proxy: build the ASGI app for the chosen mode and serve it with uvicorn
(uvloop + httptools), on a socket bound here so `--port 0` works and the real URL is printed."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mcpfleet.httplimits import BodyLimits, HttpLimits, uvicorn_options
from mcpfleet.proxy.backend import (
    MAX_SESSION_SERVERS,
    ChildFactory,
    ModernEra,
    StdioBackend,
    process_factory,
)
from mcpfleet.proxy.child import ChildHooks
from mcpfleet.proxy.http_app import ProxyApp, security_for
from mcpfleet.toolconfig import ToolPolicy

if TYPE_CHECKING:  # loaded when used: a plain stdio proxy starts without aiohttp and the auth stack
    from mcpfleet.auth.oidc import IncomingAuthSettings
    from mcpfleet.policy.guard import Policy
    from mcpfleet.proxy.remote import RemoteProxyApp
    from mcpfleet.ratelimit import Limiter
    from mcpfleet.webhook.config import WebhookDocument

log = logging.getLogger(__name__)


def build_stdio_app(
    command: Sequence[str],
    *,
    host: str,
    transport: str = "streamable-http",
    allowed_hosts: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    factory: ChildFactory | None = None,
    isolation: str = "shared",
    tool_policy: ToolPolicy | None = None,
    max_json_depth: int | None = None,
    cwd: str | None = None,
    hooks: ChildHooks | None = None,
    max_session_servers: int = MAX_SESSION_SERVERS,
    modern_era: str = "auto",
) -> ProxyApp:
    """The proxy app for a local command, or for `factory` (e.g. an attached container) when given.

    `tool_policy` (an MCPToolConfig's filter and overrides, from the run config) is enforced on
    every transport and era: all of them reach the child through the multiplexer. `modern_era`:
    `auto` (probe the server's eras at start), `translate` (one process; 2026-07-28 clients
    translated onto it) or `separate` (a second process for them), `proxy/backend.py`. `cwd` and
    `hooks` are for a host running the proxy in-process (`mcpfleet.proxy.child.ChildHooks`).
    """
    if transport not in ("streamable-http", "sse"):
        raise ValueError(f"--transport: expected streamable-http or sse, got {transport!r}")
    if factory is None:
        backend = StdioBackend(
            process_factory(command, env=env, cwd=cwd, hooks=hooks),
            per_session=isolation == "session",
            tool_policy=tool_policy,
            max_session_servers=max_session_servers,
            modern_era=_modern_era(modern_era),
        )
    else:
        if isolation != "shared":
            raise ValueError("--isolation session needs a command: an attached container has one stdio")
        backend = StdioBackend(factory, single_stdio=True, tool_policy=tool_policy)
    return ProxyApp(
        backend,
        security=security_for(host, allowed_hosts),
        enable_sse=transport == "sse",
        isolation=isolation,
        max_json_depth=max_json_depth or HttpLimits().max_json_depth,
    )


def _modern_era(value: str) -> ModernEra:
    if value == "auto":
        return "auto"
    if value == "translate":
        return "translate"
    if value == "separate":
        return "separate"
    raise ValueError(f"--modern-era: expected auto, translate or separate, got {value!r}")


def with_auth(
    app: ProxyApp | RemoteProxyApp,
    auth: IncomingAuthSettings | None,
    *,
    mcp_path: str = "/mcp",
    public_url: str | None = None,
    policy: Policy | None = None,
    limiter: Limiter | None = None,
    webhooks: WebhookDocument | None = None,
    max_json_depth: int | None = None,
) -> Any:
    """`app` behind incoming auth (`mcpfleet.auth`): every path but `/health` needs a valid token.

    With a `policy` (authorization and / or audit), `policy.asgi.PolicyMiddleware` sits between the
    guard and the app, so it sees the claims the guard validated. With a `limiter` (rateLimiting),
    requests pass its buckets after auth and before the policy (as in the vMCP gateway, where the
    limits apply before authorization, so denied calls count too; a refused request is audited by the
    limiter's hook, outcome `rate_limited`, as the policy middleware never sees it).
    With `webhooks` (an MCPWebhookConfig), `webhook.asgi.WebhookMiddleware` sits after the rate
    limits and before the policy, ToolHive's order (why: that module's docstring):
    `AuthGuard -> RateLimitGuard -> WebhookMiddleware -> PolicyMiddleware -> app`.

    A remote-mode app does not forward the validated `Authorization` header: the token was issued
    for this proxy, and passing it upstream would be token passthrough, which MCP forbids (upstream
    credentials come from `--header-from-env`).
    """
    inner: Any = app
    if policy is not None and policy.active:
        from mcpfleet.policy.asgi import PolicyMiddleware  # reads the auth stack's identity

        inner = PolicyMiddleware(inner, policy)
    if webhooks is not None and (webhooks.mutating or webhooks.validating):
        from mcpfleet.webhook.asgi import WebhookMiddleware  # loaded when used, like the auth stack

        depth = max_json_depth or HttpLimits().max_json_depth
        audit = policy.audit if policy is not None else None
        inner = WebhookMiddleware(inner, webhooks, max_json_depth=depth, audit=audit)
    if limiter is not None:
        from mcpfleet.ratelimit.asgi import OnRefused, RateLimitGuard  # loaded when used, like auth

        on_refused: OnRefused | None = None
        if policy is not None and policy.audit is not None:
            from mcpfleet.policy.asgi import audit_request

            refusal_audit = policy.audit

            def audit_refusal(scope: Any, msg: dict[str, Any], reason: str, started: float) -> None:
                audit_request(refusal_audit, scope, msg, "rate_limited", started, reason)

            on_refused = audit_refusal
        inner = RateLimitGuard(inner, limiter, on_refused)
    if auth is None or auth.type == "anonymous":
        return inner
    from mcpfleet.auth.asgi import AuthGuard
    from mcpfleet.proxy.remote import RemoteProxyApp

    return AuthGuard(
        inner,
        auth,
        mcp_path=mcp_path,
        public_url=public_url,
        forward_authorization=not isinstance(app, RemoteProxyApp),
    )


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


async def serve(
    app: Any, host: str, port: int, log_level: str = "warning", limits: HttpLimits | None = None
) -> None:
    """Serve `app` within `limits` (body size and read time, header deadline; docs/security.md)."""
    import uvicorn

    limits = limits or HttpLimits()
    sock = bind(host, port)
    actual = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"mcpfleet proxy listening on http://{shown}:{actual}/mcp", file=sys.stderr, flush=True)
    config = uvicorn.Config(
        BodyLimits(app, limits),
        loop="uvloop",
        ws="none",  # nothing here serves WebSockets: skip loading a WebSocket implementation at start
        lifespan="on",
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=3,
        **uvicorn_options(limits),
    )
    await uvicorn.Server(config).serve(sockets=[sock])


def run(app: Any, host: str, port: int, log_level: str = "warning", limits: HttpLimits | None = None) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings it
        asyncio.run(serve(app, host, port, log_level, limits))
        return
    uvloop.run(serve(app, host, port, log_level, limits))
