"""`mcpfleet registry …`: run the registry server, publish to one."""

from __future__ import annotations

from pathlib import Path

import typer

from mcpfleet.cli import tracing_options

app = typer.Typer(
    help="The MCP registry server (upstream registry API over synced sources).", no_args_is_help=True
)


@app.command()
def serve(
    config: Path = typer.Option(..., "--config", "-c", help="Registry config file (YAML or JSON)."),
    host: str | None = typer.Option(
        None, "--host", help="Address to bind (default: server.host, 127.0.0.1)."
    ),
    port: int | None = typer.Option(None, "--port", help="Port to bind (default: server.port, 8080)."),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
    trace_exporter: str | None = tracing_options.TRACE_EXPORTER,
    otlp_endpoint: str | None = tracing_options.OTLP_ENDPOINT,
) -> None:
    """Serve the registry API, syncing the configured sources in the background.

    Examples:

    \b
      mcpfleet registry serve --config registry.yaml --port 8080
    """
    import logging

    import uvicorn

    from mcpfleet import telemetry
    from mcpfleet.registry.app import create_app
    from mcpfleet.registry.config import ConfigError, load_config
    from mcpfleet.registry.service import RegistryService

    try:
        cfg = load_config(config)
        provider = telemetry.setup_tracing(
            "mcpfleet-registry",
            telemetry.TracingOptions(exporter=trace_exporter, endpoint=otlp_endpoint),
            resource_attributes={"mcpfleet.registry.name": cfg.registryName},
        )
    except (ConfigError, telemetry.TracingConfigError) as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    tracer = telemetry.tracer_of(provider)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if log_level.lower() != "debug":
        logging.getLogger("alembic").setLevel(logging.WARNING)  # migration chatter at every start
    service = RegistryService(cfg, config.resolve().parent, tracer=tracer)
    try:
        uvicorn.run(
            create_app(service, tracer=tracer),
            host=host or cfg.server.host,
            port=cfg.server.port if port is None else port,
            loop="uvloop",
            http="httptools",
            log_level=log_level,
            access_log=False,
            lifespan="on",
        )
    finally:
        telemetry.shutdown(provider)  # flush the spans still buffered


@app.command()
def publish(
    file: Path = typer.Argument(..., help="The server.json document to publish."),
    registry: str = typer.Option(
        ..., "--registry", "-r", envvar="MCPFLEET_REGISTRY_URL", help="Base URL of the registry."
    ),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="File holding the bearer token (else $MCPFLEET_REGISTRY_TOKEN)."
    ),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds to wait for the registry."),
) -> None:
    """Publish a server.json as a new version (POST /v0.1/publish) with an OIDC bearer token.

    The token must carry the registry's publish scope and a grant for the server's namespace. The
    token is read from --token-file or $MCPFLEET_REGISTRY_TOKEN, never from the command line (it
    would show in the process list).

    Examples:

    \b
      MCPFLEET_REGISTRY_TOKEN=$(get-token) mcpfleet registry publish server.json -r https://registry.example.com
    """
    import os

    import httpx
    import orjson

    try:
        body = file.read_bytes()
    except OSError as exc:
        typer.echo(f"cannot read {file}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None
    try:
        token = (
            token_file.read_text().strip() if token_file else os.environ.get("MCPFLEET_REGISTRY_TOKEN", "")
        )
    except OSError as exc:
        typer.echo(f"cannot read {token_file}: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None
    if not token:
        typer.echo("no token: pass --token-file or set MCPFLEET_REGISTRY_TOKEN", err=True)
        raise typer.Exit(2)
    url = registry.rstrip("/") + "/v0.1/publish"
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    try:
        response = httpx.post(url, content=body, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        typer.echo(f"cannot reach {url}: {exc}", err=True)
        raise typer.Exit(1) from None
    try:
        answer = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        answer = None
    if response.status_code != 200 or not isinstance(answer, dict):
        detail = answer.get("detail") if isinstance(answer, dict) else response.text[:300]
        fields = [e.get("location") for e in answer.get("errors") or []] if isinstance(answer, dict) else []
        where = f" ({', '.join(str(f) for f in fields if f)})" if any(fields) else ""
        typer.echo(f"publish failed: HTTP {response.status_code}: {detail}{where}", err=True)
        raise typer.Exit(1)
    server = answer.get("server", {})
    typer.echo(f"published {server.get('name')} {server.get('version')}")
