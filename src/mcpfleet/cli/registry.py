"""`mcpfleet registry serve`: run the registry server (`registry publish` is in cli/publish.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from mcpfleet.cli import tracing_options
from mcpfleet.cli.options import REQUIRED, Opt

HELP = "The MCP registry server (upstream registry API over synced sources)."


def serve(
    config: Path = Opt(REQUIRED, "--config", "-c", help="Registry config file (YAML or JSON)."),
    host: str | None = Opt(None, "--host", help="Address to bind (default: server.host, 127.0.0.1)."),
    port: int | None = Opt(None, "--port", help="Port to bind (default: server.port, 8080)."),
    log_level: str = Opt("info", "--log-level", help="debug, info, warning or error."),
    trace_exporter: str | None = tracing_options.TRACE_EXPORTER,
    otlp_endpoint: str | None = tracing_options.OTLP_ENDPOINT,
) -> None:
    """Serve the registry API, syncing the configured sources in the background.

    Examples:

    \b
      mcpfleet registry serve --config registry.yaml --port 8080
    """
    import logging

    from mcpfleet import malloctune, telemetry, uvicornserver
    from mcpfleet.registry.app import create_app, served
    from mcpfleet.registry.config import ConfigError, load_config
    from mcpfleet.registry.service import RegistryService

    malloctune.one_arena()  # (this process is the registry's alone: before any thread allocates)
    try:
        cfg = load_config(config)
        provider = telemetry.setup_tracing(
            "mcpfleet-registry",
            telemetry.TracingOptions(exporter=trace_exporter, endpoint=otlp_endpoint),
            resource_attributes={"mcpfleet.registry.name": cfg.registryName},
        )
    except (ConfigError, telemetry.TracingConfigError) as exc:
        print(exc, file=sys.stderr)
        sys.exit(2)
    tracer = telemetry.tracer_of(provider)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if log_level.lower() != "debug":
        logging.getLogger("alembic").setLevel(logging.WARNING)  # migration chatter at every start
    failed: list[BaseException] = []

    def stop_serving(exc: BaseException) -> None:  # the store did not open after the stored catalogue
        failed.append(exc)
        server.should_exit = True

    # Serve the catalogue stored in SQLite while SQLAlchemy loads and the store opens (issue 17).
    service = RegistryService(
        cfg, config.resolve().parent, tracer=tracer, serve_stored_first=True, on_failure=stop_serving
    )
    # The connection and body limits of `server.*` (header / body deadlines, sizes, keep-alive).
    asgi, limit_options = served(create_app(service, tracer=tracer))
    server = uvicornserver.server(
        asgi,
        host=host or cfg.server.host,
        port=cfg.server.port if port is None else port,
        loop="uvloop",
        ws="none",  # nothing here serves WebSockets: skip loading a WebSocket implementation at start
        log_level=log_level,
        access_log=False,
        lifespan="on",
        **limit_options,  # (the httptools protocol, with a header deadline and size cap)
    )
    try:
        uvicornserver.run(server)
    finally:
        telemetry.shutdown(provider)  # flush the spans still buffered
    if failed:
        sys.exit(uvicornserver.STARTUP_FAILURE)
