"""`mcpfleet run`, `list`, `stop`, `start`, `rm`: the user's own fleet, the way `thv` users expect.

`run NAME` is `add` into the user fleet (or `--dir`), then makes sure an `up` runs for it in the
background (`up --detach`) and waits until the server runs. The work is in
`mcpfleet.platform.local.userfleet` / `detach` and `mcpfleet.catalogue`; this module parses options.
"""

from __future__ import annotations

from pathlib import Path

import typer

from mcpfleet.api.kindnames import VIRTUAL_MCP_SERVER
from mcpfleet.cli import catalogue as catalogue_cli

DIR_HELP = "A fleet's manifest folder instead of the user fleet ($MCPFLEET_HOME/fleet)."
STATE_DIR_HELP = "State folder of that fleet (default: $MCPFLEET_HOME/state; with --dir, as `mcpfleet up`: $MCPFLEET_STATE_DIR or ./.mcpfleet)."


def _fleet(directory: Path | None, state_dir: Path | None) -> tuple[Path, Path, bool]:
    """(manifests, state, is the user fleet)."""
    from mcpfleet.platform.local.userfleet import ensure_user_fleet, user_fleet

    if directory is None:
        fleet = user_fleet()
        ensure_user_fleet(fleet)
        return fleet.manifests, (state_dir.resolve() if state_dir else fleet.state), True
    from mcpfleet.platform.local.views import resolve_state_dir

    return directory.resolve(), resolve_state_dir(state_dir), False


def run(
    reference: str = typer.Argument(..., metavar="NAME[@VERSION]", help="Short name (time) or full name."),
    directory: Path | None = typer.Option(None, "--dir", help=DIR_HELP),
    name: str | None = typer.Option(None, "--name", help="Object name (default: the entry's short name)."),
    env: list[str] = typer.Option(
        [], "--env", help="NAME=VALUE for an environment variable of the entry (repeatable)."
    ),
    arg: list[str] = typer.Option([], "--arg", help="NAME=VALUE for a package argument (repeatable)."),
    header: list[str] = typer.Option(
        [], "--header", help="NAME=VALUE for a header of a remote (repeatable)."
    ),
    group: str | None = typer.Option(
        None, "--group", help="MCPGroup (user fleet default: default, behind its gateway)."
    ),
    remote: bool = typer.Option(
        False, "--remote", help="Use the entry's remote endpoint instead of a package."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing manifest of that name."),
    timeout: float = typer.Option(
        300.0,
        "--timeout",
        help="Seconds to wait for the server to run (a first npx / uvx download can be slow).",
    ),
    registry: list[str] = catalogue_cli._registry,
    catalogue: list[Path] = catalogue_cli._catalogue,
    state_dir: Path | None = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
    bundled: bool = catalogue_cli._bundled,
) -> None:
    """Add a catalogue entry to a fleet and run it: the fleet's `up` starts in the background if
    none runs (it survives the terminal; `mcpfleet down` stops it).

    Examples:

    \b
      mcpfleet run time
      mcpfleet run filesystem --arg directory=$HOME/notes
      mcpfleet list; mcpfleet stop time; mcpfleet rm time
    """
    from mcpfleet.platform.local.detach import start_detached, wait_for
    from mcpfleet.platform.local.userfleet import DEFAULT_GROUP, GATEWAY_NAME

    manifests, state, is_user_fleet = _fleet(directory, state_dir)
    sources = catalogue_cli.Sources(registry, catalogue, state, bundled)
    group = group or (DEFAULT_GROUP if is_user_fleet else None)
    plan = catalogue_cli.add_entry(
        reference, manifests, name, env, arg, header, group, remote, force, False, sources
    )
    assert plan is not None  # not a dry run
    object_name, kind = plan.name, plan.kind
    try:
        pid = start_detached(manifests, state)
    except RuntimeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"mcpfleet up is running for {manifests} (pid {pid}, log {state / 'up.log'})")
    found = wait_for(state, kind, object_name, timeout)
    phase = found.status.get("phase") if found else None
    if phase != "Running":
        message = (found.status.get("message") if found else None) or "not seen yet"
        typer.echo(f"error: {kind.lower()}/{object_name} is {phase or 'not running'}: {message}", err=True)
        typer.echo(f"see: mcpfleet describe {kind.lower()} {object_name} --state-dir {state}", err=True)
        raise typer.Exit(1)
    typer.echo(f"{kind.lower()}/{object_name} is running: {found.status.get('url') if found else ''}")
    if is_user_fleet or group:
        gateway = wait_for(state, VIRTUAL_MCP_SERVER, GATEWAY_NAME, 30.0) if is_user_fleet else None
        if gateway is not None and gateway.status.get("url"):
            typer.echo(f"gateway (every server of the fleet): {gateway.status['url']}")
            typer.echo("connect an AI client: mcpfleet client setup")


def list_(
    directory: Path | None = typer.Option(None, "--dir", help=DIR_HELP),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
    output: str | None = typer.Option(None, "--output", "-o", help="yaml, json, wide or name."),
) -> None:
    """List the servers of the user fleet (or --dir) with their phase and URL.

    Examples:

    \b
      mcpfleet list
      mcpfleet list -o yaml
    """
    from rich.console import Console

    from mcpfleet.platform.local.lock import holder_pid
    from mcpfleet.platform.local.views import run_get

    manifests, state, _ = _fleet(directory, state_dir)
    if holder_pid(state) is None:
        typer.echo(
            f"no mcpfleet up runs for {manifests} (start it: mcpfleet up {manifests} --state-dir {state} --detach)",
            err=True,
        )
    if not (state / "state.db").exists():
        raise typer.Exit(0)
    console = Console(width=400) if output not in ("yaml", "json") else Console(width=10_000)
    raise typer.Exit(run_get(state, ["all"], output, console))


def _edit(name: str, directory: Path | None, state_dir: Path | None, action: str) -> None:
    from mcpfleet.platform.local.userfleet import Fleet, FleetEditError, remove, set_running

    manifests, state, _ = _fleet(directory, state_dir)
    fleet = Fleet(manifests=manifests, state=state)
    try:
        if action == "rm":
            done = remove(fleet, name)
            typer.echo(f"removed {', '.join(str(p) for p in done)}")
        else:
            path = set_running(fleet, name, running=action == "start")
            typer.echo(f"{name}: {'started' if action == 'start' else 'stopped (replicas: 0)'} in {path}")
    except FleetEditError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def stop(
    name: str = typer.Argument(..., help="The server's object name."),
    directory: Path | None = typer.Option(None, "--dir", help=DIR_HELP),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
) -> None:
    """Stop a server of the fleet (its manifest gets `replicas: 0`; `mcpfleet start` undoes it).

    Examples:

    \b
      mcpfleet stop time
    """
    _edit(name, directory, state_dir, "stop")


def start(
    name: str = typer.Argument(..., help="The server's object name."),
    directory: Path | None = typer.Option(None, "--dir", help=DIR_HELP),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
) -> None:
    """Start a server stopped with `mcpfleet stop`.

    Examples:

    \b
      mcpfleet start time
    """
    _edit(name, directory, state_dir, "start")


def rm(
    name: str = typer.Argument(..., help="The server's object name."),
    directory: Path | None = typer.Option(None, "--dir", help=DIR_HELP),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
) -> None:
    """Remove a server from the fleet: its manifest and the local Secret `add` stored for it.

    Examples:

    \b
      mcpfleet rm time
    """
    _edit(name, directory, state_dir, "rm")
