"""The full `mcpfleet` command line (typer): assembles the command groups.

Each command module keeps its heavy imports inside the command functions so that
`mcpfleet --help` and `mcpfleet --version` start fast. The service commands declare their options
with `cli.options.Opt` (the fast start path of `cli/main.py` reads them without typer); here they
become typer commands.
"""

from __future__ import annotations

from typing import Any

import typer

from mcpfleet import __version__
from mcpfleet.cli import (
    auth,
    catalogue,
    clients,
    console,
    crds,
    devcluster,
    embeddings,
    fleet,
    local,
    operator,
    proxy,
    publish,
    registry,
    vmcp,
)
from mcpfleet.cli.options import typer_command

PROXY_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}
"""`mcpfleet proxy COMMAND ARGS...`: the stdio server's command line is the command's extra arguments."""

app = typer.Typer(
    name="mcpfleet",
    help="Run, register and aggregate fleets of MCP servers, on Kubernetes or on one machine.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"mcpfleet {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
    ),
) -> None:
    """mcpfleet: a control plane for MCP servers."""


app.command("crds")(crds.crds)
app.add_typer(devcluster.app, name="dev-cluster")
app.add_typer(operator.app, name="operator")
registry_app = typer.Typer(help=registry.HELP, no_args_is_help=True)
registry_app.command("serve")(typer_command(registry.serve))
registry_app.command("publish")(publish.publish)
app.add_typer(registry_app, name="registry")
vmcp_app = typer.Typer(help=vmcp.HELP, no_args_is_help=True)
vmcp_app.command("serve")(typer_command(vmcp.serve))
app.add_typer(vmcp_app, name="vmcp")
embeddings_app = typer.Typer(help=embeddings.HELP, no_args_is_help=True)
embeddings_app.command("serve")(typer_command(embeddings.serve))
app.add_typer(embeddings_app, name="embeddings")
for _name in ("search", "show", "add"):
    app.command(_name)(getattr(catalogue, _name))
for _name in ("run", "stop", "start", "rm"):
    app.command(_name)(getattr(fleet, _name))
app.command("list")(fleet.list_)
app.add_typer(auth.app, name="auth")
app.add_typer(clients.app, name="client")
app.add_typer(console.app, name="console")
for _name in ("up", "down", "get", "describe", "logs"):
    app.command(_name)(getattr(local, _name))
app.command("proxy", context_settings=PROXY_CONTEXT)(typer_command(proxy.proxy, command_line=True))


def _plain_metavars(command: Any) -> None:
    """`--port-range PORT_RANGE`, not typer's `<str>`: a value's placeholder names what it is.

    (Duck-typed: typer builds its commands on its own copy of click's classes.)
    """
    for param in command.params:
        if param.metavar is None and not getattr(param, "is_flag", False) and param.name:
            param.metavar = param.name.upper()
        if param.param_type_name == "argument":
            # typer's arguments print their type (`<path>`) after the name; the name says enough.
            param.display_type_rich = lambda ctx: None
    for sub in (getattr(command, "commands", None) or {}).values():
        _plain_metavars(sub)


def command() -> Any:
    """The `mcpfleet` command, with plain help (no rich boxes that cut variable names) and
    placeholders named after the value."""
    cli = typer.main.get_command(app)
    _plain_metavars(cli)
    return cli
