"""`mcpfleet auth enable / disable / token`: protect a local fleet's gateway without an identity
provider of one's own (the local token issuer, `platform/local/issuer.py`).

Three commands from an open gateway to a client that sends a token:

    mcpfleet auth enable                                   # the user fleet's gateway requires tokens
    mcpfleet auth token --user alice -o ~/.config/mcpfleet/alice.token
    mcpfleet client setup cursor --token-file ~/.config/mcpfleet/alice.token
"""

from __future__ import annotations

from pathlib import Path

import typer

HELP = "Protect a local fleet's gateway with tokens from a local issuer (no identity provider needed)."
app = typer.Typer(help=HELP, no_args_is_help=True)

DIR_HELP = "A fleet's manifest folder instead of the user fleet: prints the incomingAuth block to paste into its VirtualMCPServer."
STATE_DIR_HELP = "State folder of that fleet (default: $MCPFLEET_HOME/state; with --dir, $MCPFLEET_STATE_DIR or ./.mcpfleet)."
_dir = typer.Option(None, "--dir", help=DIR_HELP)
_state = typer.Option(None, "--state-dir", help=STATE_DIR_HELP)


def _inline(settings: object) -> dict[str, object]:
    from mcpfleet.platform.local.issuer import IssuerSettings

    assert isinstance(settings, IssuerSettings)
    return {
        "issuer": settings.url,
        "audience": settings.audience,
        "jwksUrl": settings.jwks_url,
        # The issuer is this machine's loopback: plain http and a private address, on purpose.
        "insecureAllowHTTP": True,
        "jwksAllowPrivateIP": True,
    }


@app.command()
def enable(directory: Path | None = _dir, state_dir: Path | None = _state) -> None:
    """Create the fleet's token issuer and make its gateway require tokens from it.

    The running `mcpfleet up` serves the issuer at once and applies the gateway change like any edit.

    Examples:

    \b
      mcpfleet auth enable
      mcpfleet auth enable --dir ./servers      (prints the incomingAuth block)
    """
    import yaml

    from mcpfleet.cli.fleet import _fleet
    from mcpfleet.platform.local.issuer import IssuerError, ensure_issuer
    from mcpfleet.platform.local.userfleet import Fleet, FleetEditError, set_gateway_auth

    manifests, state, is_user_fleet = _fleet(directory, state_dir)
    try:
        settings = ensure_issuer(state)
    except (IssuerError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    block = {"incomingAuth": {"type": "oidc", "oidcConfig": {"type": "inline", "inline": _inline(settings)}}}
    if not is_user_fleet:
        typer.echo(f"local token issuer: {settings.url} (served by `mcpfleet up` for {state})")
        typer.echo("put this into your VirtualMCPServer's spec:\n")
        typer.echo(yaml.safe_dump(block, sort_keys=False).rstrip())
        return
    try:
        path = set_gateway_auth(Fleet(manifests, state), _inline(settings))
    except FleetEditError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"the gateway in {path} now requires tokens from the local issuer {settings.url}")
    typer.echo(
        "issue one: mcpfleet auth token --user NAME -o FILE; give it to a client: mcpfleet client setup --token-file FILE"
    )


@app.command()
def disable(directory: Path | None = _dir, state_dir: Path | None = _state) -> None:
    """Let the user fleet's gateway accept anonymous clients again (the issuer key stays).

    Examples:

    \b
      mcpfleet auth disable
    """
    from mcpfleet.cli.fleet import _fleet
    from mcpfleet.platform.local.userfleet import Fleet, FleetEditError, set_gateway_auth

    manifests, state, is_user_fleet = _fleet(directory, state_dir)
    if not is_user_fleet:
        typer.echo(
            "error: --dir: edit that fleet's VirtualMCPServer (incomingAuth: {type: anonymous})", err=True
        )
        raise typer.Exit(2)
    try:
        path = set_gateway_auth(Fleet(manifests, state), None)
    except FleetEditError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"the gateway in {path} accepts anonymous clients again")


def _ttl(value: str) -> int:
    from mcpfleet.api.duration import parse_duration

    try:
        return int(parse_duration(value))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--ttl") from None


@app.command()
def token(
    user: str = typer.Option(
        ..., "--user", help="Who the token is for (its `sub`; what audit logs and policies see)."
    ),
    ttl: str = typer.Option("720h", "--ttl", help="Lifetime, e.g. 24h, 720h (at most 366 days)."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write it to this file (mode 0600) instead of printing it."
    ),
    directory: Path | None = _dir,
    state_dir: Path | None = _state,
) -> None:
    """Issue a bearer token for USER from the fleet's local issuer.

    Examples:

    \b
      mcpfleet auth token --user alice -o ~/.config/mcpfleet/alice.token
      mcpfleet auth token --user ci --ttl 24h
    """
    import os

    from mcpfleet.cli.fleet import _fleet
    from mcpfleet.platform.local.issuer import IssuerError, issue_token

    _, state, _ = _fleet(directory, state_dir)
    try:
        value = issue_token(state, user, _ttl(ttl))
    except IssuerError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if output is None:
        typer.echo(value)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    os.chmod(output, 0o600)
    typer.echo(f"token for {user} written to {output} (mode 0600)")
