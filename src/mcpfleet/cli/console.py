"""`mcpfleet console serve`: the web console of a fleet, on its own (`mcpfleet up` serves it too).

Only option parsing lives here; the console is `mcpfleet.console`, imported inside the command so
`mcpfleet --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    kubernetes: bool = typer.Option(
        False,
        "--kubernetes",
        help="Show a namespace of a cluster instead, read from the Kubernetes API (in-cluster "
        "service account, or $KUBECONFIG / ~/.kube/config).",
    ),
    namespace: str | None = typer.Option(
        None, "--namespace", "-n", help="With --kubernetes: the namespace. Default: the configuration's."
    ),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port (0: any free port)."),
    listen: str = typer.Option(
        "127.0.0.1",
        "--listen",
        help="Address to listen on. Anything but loopback only in a pod behind port-forward or an "
        "authenticating proxy: the console has no sign-in.",
    ),
    allowed_hosts: list[str] = typer.Option(
        [],
        "--allowed-host",
        help="A Host name (host:port, * for any port) accepted besides loopback, e.g. the console "
        "Service's name. Repeatable.",
    ),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn's log level."),
) -> None:
    """Serve the web console of a local fleet (its STATE_DIR) or of a cluster's namespace.

    Examples:

    \b
      mcpfleet console serve
      mcpfleet console serve --state-dir examples/quickstart/.mcpfleet --port 9000
      mcpfleet console serve --kubernetes --namespace team-a
    """
    import asyncio

    from mcpfleet.console.serve import serve as run

    fleet, where = _fleet(state_dir, kubernetes, namespace)

    def ready(url: str) -> None:
        typer.echo(f"console: {url} ({where}); Ctrl-C stops it")

    try:
        asyncio.run(run(fleet, port, log_level, ready, host=listen, extra_hosts=allowed_hosts))
    except OSError as exc:
        typer.echo(f"error: cannot serve on {listen}:{port}: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        pass


def _fleet(state_dir: Path | None, kubernetes: bool, namespace: str | None) -> tuple[Any, str]:
    """The console's source and how the ready line names it."""
    if kubernetes:
        if state_dir is not None:
            raise typer.BadParameter("give either --state-dir or --kubernetes", param_hint="--state-dir")
        from mcpfleet.console.kubesource import KubeSource
        from mcpfleet.console.source import SourceError

        try:
            source = KubeSource.from_environment(namespace)
        except SourceError as exc:
            raise typer.BadParameter(str(exc), param_hint="--kubernetes") from None
        return source, source.label
    if namespace is not None:
        raise typer.BadParameter("--namespace goes with --kubernetes", param_hint="--namespace")
    from mcpfleet.platform.local.views import resolve_state_dir

    state = resolve_state_dir(state_dir)
    if not state.is_dir():
        raise typer.BadParameter(f"{state} is not a folder", param_hint="--state-dir")
    return state, f"fleet state: {state}"
