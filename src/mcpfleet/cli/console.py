"""`mcpfleet console serve`: the web console of a fleet, on its own (`mcpfleet up` serves it too).

Only option parsing lives here; the console is `mcpfleet.console`, imported inside the command so
`mcpfleet --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(
    help="The web console: see the fleet, try a tool, add a server (docs/console.md).", no_args_is_help=True
)


@app.command("serve")
def serve(
    state_dir: Path | None = typer.Option(
        None,
        "--state-dir",
        help="State folder of the fleet to show. Default: $MCPFLEET_STATE_DIR or ./.mcpfleet",
    ),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Loopback port (0: any free port)."),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn's log level."),
) -> None:
    """Serve the web console of the fleet whose state is in STATE_DIR, on 127.0.0.1 only.

    Examples:

    \b
      mcpfleet console serve
      mcpfleet console serve --state-dir examples/quickstart/.mcpfleet --port 9000
    """
    import asyncio

    from mcpfleet.console.serve import serve as run
    from mcpfleet.platform.local.views import resolve_state_dir

    state = resolve_state_dir(state_dir)
    if not state.is_dir():
        raise typer.BadParameter(f"{state} is not a folder", param_hint="--state-dir")

    def ready(url: str) -> None:
        typer.echo(f"console: {url} (fleet state: {state}); Ctrl-C stops it")

    try:
        asyncio.run(run(state, port, log_level, ready))
    except OSError as exc:
        typer.echo(f"error: cannot serve on 127.0.0.1:{port}: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass
