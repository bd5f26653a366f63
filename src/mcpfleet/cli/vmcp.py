"""`mcpfleet vmcp`: run the virtual MCP gateway (the data plane behind VirtualMCPServer)."""

from __future__ import annotations

from pathlib import Path

import typer

from mcpfleet.cli import tracing_options

app = typer.Typer(
    help="Virtual MCP gateway: one MCP endpoint in front of a group of servers.", no_args_is_help=True
)


@app.command()
def serve(
    config: Path = typer.Option(..., "--config", "-c", help="vMCP config file (YAML or JSON)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind."),
    port: int = typer.Option(4483, "--port", help="Port to bind."),
    status_file: Path | None = typer.Option(
        None, "--status-file", help="Write the /status document to this file."
    ),
    status_resource: str | None = typer.Option(
        None, "--status-resource", help="Patch the status of this VirtualMCPServer (Kubernetes)."
    ),
    allowed_host: list[str] | None = typer.Option(
        None,
        "--allowed-host",
        help="Host header values to accept (glob, e.g. 'vmcp.example.com:*'). Default: "
        "loopback names when bound to loopback, anything otherwise.",
    ),
    public_url: str | None = typer.Option(
        None, "--public-url", help="External base URL (OAuth resource metadata)."
    ),
    max_sessions: int = typer.Option(
        10_000,
        "--max-sessions",
        envvar="MCPFLEET_VMCP_MAX_SESSIONS",
        min=1,
        help="Most 2025-era client sessions open at once; `initialize` beyond it answers HTTP 503.",
    ),
    session_idle_timeout: str = typer.Option(
        "1h",
        "--session-idle-timeout",
        envvar="MCPFLEET_VMCP_SESSION_IDLE_TIMEOUT",
        help="Forget a client session unused this long (no request, no open stream), e.g. 30m, 1h.",
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning, error."),
    trace_exporter: str | None = tracing_options.TRACE_EXPORTER,
    otlp_endpoint: str | None = tracing_options.OTLP_ENDPOINT,
) -> None:
    """Serve /mcp (both protocol eras), /health, /readyz, /status and /metrics."""
    import logging

    import uvicorn

    from mcpfleet import telemetry
    from mcpfleet.vmcp.config import ConfigError, load_config, parse_duration
    from mcpfleet.vmcp.server import ServeOptions, build_app

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        idle = parse_duration(session_idle_timeout)
    except ValueError as exc:
        typer.echo(f"error: --session-idle-timeout: {exc}", err=True)
        raise typer.Exit(2) from None
    if idle <= 0:
        typer.echo("error: --session-idle-timeout: must be positive", err=True)
        raise typer.Exit(2)
    try:
        cfg = load_config(config)
        opts = ServeOptions(
            host=host,
            port=port,
            status_file=str(status_file) if status_file else None,
            status_resource=status_resource,
            allowed_hosts=allowed_host or None,
            public_url=public_url,
            max_sessions=max_sessions,
            session_idle_seconds=idle,
        )
        provider = telemetry.setup_tracing(
            "mcpfleet-vmcp",
            telemetry.TracingOptions(exporter=trace_exporter, endpoint=otlp_endpoint),
            resource_attributes={"mcpfleet.vmcp.name": cfg.name},
        )
        asgi = build_app(cfg, opts, tracer=telemetry.tracer_of(provider))
    except (ConfigError, telemetry.TracingConfigError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        uvicorn.run(
            asgi,
            host=host,
            port=port,
            loop="uvloop",
            http="httptools",
            lifespan="on",
            proxy_headers=False,  # nothing here reads X-Forwarded-*; skip the middleware on the hot path
            timeout_graceful_shutdown=5,  # notification streams never end by themselves
            log_level="warning",
            access_log=False,
        )
    finally:
        telemetry.shutdown(provider)  # flush the spans still buffered
