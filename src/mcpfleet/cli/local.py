"""`mcpfleet up`, `down`, `get`, `describe`, `logs`: the local platform from the command line.

Only option parsing lives here; the work is in `mcpfleet.platform.local.commands`, imported inside
each command so `mcpfleet --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer

STATE_DIR_HELP = (
    "State folder (SQLite state, logs, rendered configs). Default: $MCPFLEET_STATE_DIR or ./.mcpfleet"
)


def _port_range(value: str) -> tuple[int, int]:
    low, sep, high = value.partition("-")
    try:
        if not sep:
            raise ValueError
        return int(low), int(high)
    except ValueError:
        raise typer.BadParameter(
            f"expected LOW-HIGH, e.g. 20000-29999, got {value!r}", param_hint="--port-range"
        ) from None


def _detach(directory: Path, state: Path, argv: list[str]) -> NoReturn:
    """Start `up` again in the background with `argv`, say where it logs and how to stop it, exit."""
    from mcpfleet.platform.local.detach import start_detached

    try:
        pid = start_detached(directory.resolve(), state, argv)
    except RuntimeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"mcpfleet up runs in the background (pid {pid}; log {state / 'up.log'}); stop it: mcpfleet down --state-dir {state}"
    )
    raise typer.Exit(0)


def up(
    directory: Path = typer.Argument(
        ..., help="Folder (or file) of manifests, the same YAML as for Kubernetes."
    ),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
    port_range: str = typer.Option(
        "20000-29999", "--port-range", help="Ports given to local workloads (LOW-HIGH)."
    ),
    progress: bool = typer.Option(
        True, "--progress/--no-progress", help="Live progress table on a terminal."
    ),
    log_level: str = typer.Option("warning", "--log-level", help="Log level of mcpfleet up itself."),
    detach: bool = typer.Option(
        False, "--detach", help="Run in the background, past the terminal's end (log: STATE/up.log)."
    ),
    web_console: bool = typer.Option(
        True,
        "--console/--no-console",
        help="Serve the web console on a loopback port (printed with the gateway's).",
    ),
) -> None:
    """Run the manifests in DIRECTORY on this machine and keep them converged until Ctrl-C.

    Examples:

    \b
      mcpfleet up examples/quickstart
      mcpfleet up ./servers --port-range 40000-40999 --no-progress
      mcpfleet up ./servers --detach        (stop it with: mcpfleet down)
      mcpfleet up ./servers --no-console    (no web console)
    """
    import logging
    import sys

    from rich.console import Console

    from mcpfleet.platform.local.commands import run_up
    from mcpfleet.platform.local.views import resolve_state_dir

    if not directory.exists():
        raise typer.BadParameter(f"{directory} does not exist", param_hint="DIRECTORY")
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    low_high = _port_range(port_range)
    if detach:
        _detach(
            directory,
            resolve_state_dir(state_dir),
            [
                "--port-range",
                port_range,
                "--log-level",
                log_level,
                *([] if web_console else ["--no-console"]),
            ],
        )
    import uvloop  # `up` hosts the proxies, the vMCP and the registry: the loop they are served on

    from mcpfleet import malloctune

    malloctune.tune()  # opt-in (MCPFLEET_MALLOC_TUNE=1), as the vMCP's own process
    side = None
    if web_console:
        from functools import partial

        from mcpfleet.console.serve import hosted

        side = partial(hosted, port_range=low_high)

    code = uvloop.run(
        run_up(
            directory.resolve(),
            resolve_state_dir(state_dir),
            console=Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160),
            port_range=low_high,
            progress=progress,
            side=side,
        )
    )
    raise typer.Exit(code)


def down(state_dir: Path | None = typer.Option(None, "--state-dir", help=STATE_DIR_HELP)) -> None:
    """Stop everything `mcpfleet up` started for this state folder (by pid).

    Examples:

    \b
      mcpfleet down
      mcpfleet down --state-dir /tmp/demo/.mcpfleet
    """
    import asyncio

    from rich.console import Console

    from mcpfleet.platform.local.commands import run_down
    from mcpfleet.platform.local.views import resolve_state_dir

    raise typer.Exit(asyncio.run(run_down(resolve_state_dir(state_dir), Console())))


def get(
    args: list[str] = typer.Argument(
        ...,
        metavar="KIND [NAME]... | KIND/NAME...",
        help="Kind, plural or short name (mcpservers, mcps, vmcp, mcpg…) or all, then names; "
        "or KIND/NAME pairs, as with kubectl.",
    ),
    output: str | None = typer.Option(None, "--output", "-o", help="yaml, json, wide or name."),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
) -> None:
    """List local objects with the columns of `kubectl get` (or one object with -o yaml).

    Invalid manifests are listed below the objects, with their file and field.

    Examples:

    \b
      mcpfleet get all
      mcpfleet get mcps time everything
      mcpfleet get mcpserver/time -o yaml
    """
    from rich.console import Console

    from mcpfleet.platform.local.views import resolve_state_dir, run_get

    console = Console(width=400) if output not in ("yaml", "json") else Console(width=10_000)
    raise typer.Exit(run_get(resolve_state_dir(state_dir), args, output, console))


def describe(
    kind: str = typer.Argument(..., help="Kind, plural or short name (mcps, vmcp, mcpg…), or KIND/NAME."),
    name: str | None = typer.Argument(None, help="The object's name."),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
) -> None:
    """Show one local object in full, like `kubectl describe`: spec, status, conditions, backends,
    processes, recent process starts / exits and the last log lines.

    Examples:

    \b
      mcpfleet describe mcpserver time
      mcpfleet describe vmcp/gateway
    """
    from rich.console import Console

    from mcpfleet.platform.local.describe import run_describe
    from mcpfleet.platform.local.views import resolve_state_dir

    raise typer.Exit(run_describe(resolve_state_dir(state_dir), kind, name, Console(width=10_000)))


def logs(
    name: str = typer.Argument(..., help="Workload name (MCPServer, VirtualMCPServer, MCPRegistry…)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines."),
    tail: int | None = typer.Option(None, "--tail", help="Only the last N lines."),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
) -> None:
    """Print the log (stdout and stderr) of a local workload's process.

    Examples:

    \b
      mcpfleet logs time --tail 20
      mcpfleet logs gateway -f
    """
    from rich.console import Console

    from mcpfleet.platform.local.views import resolve_state_dir, run_logs

    try:
        code = run_logs(resolve_state_dir(state_dir), name, follow, tail, Console(width=10_000))
    except KeyboardInterrupt:
        code = 0
    raise typer.Exit(code)
