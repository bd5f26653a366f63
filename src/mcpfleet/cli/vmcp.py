"""`mcpfleet vmcp`: run the virtual MCP gateway (the data plane behind VirtualMCPServer)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mcpfleet.cli import limit_options, tracing_options
from mcpfleet.cli.options import REQUIRED, Opt

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from mcpfleet.auth.authserver.guard import ASGIApp
    from mcpfleet.httpsettings import HttpLimits

HELP = "Virtual MCP gateway: one MCP endpoint in front of a group of servers."


def serve(
    config: Path = Opt(REQUIRED, "--config", "-c", help="vMCP config file (YAML or JSON)."),
    host: str = Opt("127.0.0.1", "--host", help="Address to bind."),
    port: int = Opt(4483, "--port", help="Port to bind."),
    status_file: Path | None = Opt(None, "--status-file", help="Write the /status document to this file."),
    status_resource: str | None = Opt(
        None, "--status-resource", help="Patch the status of this VirtualMCPServer (Kubernetes)."
    ),
    allowed_host: list[str] | None = Opt(
        None,
        "--allowed-host",
        help="Host header values to accept (glob, e.g. 'vmcp.example.com:*'). Default: "
        "loopback names when bound to loopback, anything otherwise.",
    ),
    public_url: str | None = Opt(None, "--public-url", help="External base URL (OAuth resource metadata)."),
    max_sessions: int | None = Opt(
        None,
        "--max-sessions",
        help="Most 2025-era client sessions open at once; `initialize` beyond it answers HTTP 503. "
        "Default: $MCPFLEET_VMCP_MAX_SESSIONS, else 10000.",
    ),
    max_sessions_per_subject: int | None = Opt(
        None,
        "--max-sessions-per-subject",
        help="Most 2025-era client sessions one caller may hold (a token's subject; anonymous: a "
        "client address); `initialize` beyond it answers HTTP 429. "
        "Default: $MCPFLEET_VMCP_MAX_SESSIONS_PER_SUBJECT, else 100.",
    ),
    session_idle_timeout: str | None = Opt(
        None,
        "--session-idle-timeout",
        help="Forget a client session unused this long (no request, no open stream), e.g. 30m. "
        "Default: $MCPFLEET_VMCP_SESSION_IDLE_TIMEOUT, else 1h.",
    ),
    authserver_config: str | None = Opt(
        None,
        "--authserver-config",
        help="Embedded OAuth 2.1 authorization server settings (JSON; VirtualMCPServer authServerConfig): "
        "the gateway serves its endpoints and accepts only the tokens it issued.",
    ),
    log_level: str = Opt("info", "--log-level", help="debug, info, warning, error."),
    trace_exporter: str | None = tracing_options.TRACE_EXPORTER,
    otlp_endpoint: str | None = tracing_options.OTLP_ENDPOINT,
    max_body_bytes: int | None = limit_options.MAX_BODY_BYTES,
    body_timeout: float | None = limit_options.BODY_TIMEOUT,
    header_timeout: float | None = limit_options.HEADER_TIMEOUT,
    max_header_bytes: int | None = limit_options.MAX_HEADER_BYTES,
    keep_alive_timeout: int | None = limit_options.KEEP_ALIVE_TIMEOUT,
    max_json_depth: int | None = limit_options.MAX_JSON_DEPTH,
) -> None:
    """Serve /mcp (both protocol eras), /health, /readyz, /status and /metrics.

    Examples:

    \b
      mcpfleet vmcp serve --config vmcp.yaml --port 4483
    """
    limits = limit_options.limits(
        max_body_bytes, body_timeout, header_timeout, max_header_bytes, keep_alive_timeout, max_json_depth
    )
    asgi, provider = _build(
        config,
        limits,
        log_level=log_level,
        host=host,
        port=port,
        status_file=status_file,
        status_resource=status_resource,
        allowed_host=allowed_host,
        public_url=public_url,
        max_sessions=max_sessions,
        max_sessions_per_subject=max_sessions_per_subject,
        session_idle_timeout=session_idle_timeout,
        authserver_config=authserver_config,
        trace_exporter=trace_exporter,
        otlp_endpoint=otlp_endpoint,
    )
    _run(asgi, host, port, limits, provider)


def _build(
    config: Path,
    limits: HttpLimits,
    *,
    log_level: str,
    host: str,
    port: int,
    status_file: Path | None,
    status_resource: str | None,
    allowed_host: list[str] | None,
    public_url: str | None,
    max_sessions: int | None,
    max_sessions_per_subject: int | None,
    session_idle_timeout: str | None,
    authserver_config: str | None,
    trace_exporter: str | None,
    otlp_endpoint: str | None,
) -> tuple[ASGIApp, TracerProvider | None]:
    """The ASGI app of `serve` and its tracer provider; a bad config exits with status 2."""
    import logging

    from mcpfleet import malloctune, telemetry
    from mcpfleet.vmcp.config import ConfigError, load_config
    from mcpfleet.vmcp.server import (
        ServeOptions,
        build_app,
        load_auth_server,
        session_limits,
        subject_session_limit,
        with_auth_server,
    )

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    malloctune.tune()  # opt-in glibc thresholds (MCPFLEET_MALLOC_TUNE=1); see bench/vmcp_steady.py
    try:
        limit, idle = session_limits(max_sessions, session_idle_timeout)
        per_subject = subject_session_limit(max_sessions_per_subject)
        cfg = load_config(config)
        opts = ServeOptions(
            host=host,
            port=port,
            status_file=str(status_file) if status_file else None,
            status_resource=status_resource,
            allowed_hosts=allowed_host or None,
            public_url=public_url,
            max_json_depth=limits.max_json_depth,
            max_sessions=limit,
            max_sessions_per_subject=per_subject,
            session_idle_seconds=idle,
            config_file=str(config),
        )
        provider = telemetry.setup_tracing(
            "mcpfleet-vmcp",
            telemetry.TracingOptions(exporter=trace_exporter, endpoint=otlp_endpoint),
            resource_attributes={"mcpfleet.vmcp.name": cfg.name},
        )
        auth_server = load_auth_server(authserver_config, public_url) if authserver_config else None
        app = build_app(cfg, opts, tracer=telemetry.tracer_of(provider), auth_server=auth_server)
        asgi = with_auth_server(app, auth_server) if auth_server is not None else app
    except (ConfigError, telemetry.TracingConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    return asgi, provider


def _run(asgi: ASGIApp, host: str, port: int, limits: HttpLimits, provider: TracerProvider | None) -> None:
    """Serve `asgi` with uvicorn until stopped, then flush the spans still buffered."""
    from mcpfleet import telemetry, uvicornserver
    from mcpfleet.httplimits import BodyLimits, uvicorn_options

    try:
        server = uvicornserver.server(
            BodyLimits(asgi, limits),
            host=host,
            port=port,
            loop="uvloop",
            ws="none",  # nothing here serves WebSockets: skip loading a WebSocket implementation at start
            lifespan="on",
            proxy_headers=False,  # nothing here reads X-Forwarded-*; skip the middleware on the hot path
            timeout_graceful_shutdown=5,  # notification streams never end by themselves
            log_level="warning",
            access_log=False,
            **uvicorn_options(limits),
        )
        uvicornserver.run(server)
    finally:
        telemetry.shutdown(provider)  # flush the spans still buffered
