"""`mcpfleet client setup / list / remove`: put the fleet's gateway (or one server) into the AI
clients' own configuration files.

This module finds the URL (the user fleet's state, `--dir` / `--state-dir`, `--server`, or `--url`),
reads the headers (`--token-file`, `--header`) and prints; the files are edited by
`mcpfleet.clients` (docs/clients.md).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import typer

from mcpfleet.api.kindnames import MEMBER_KINDS, VIRTUAL_MCP_SERVER

HELP = "Configure AI clients (Claude, Cursor, VS Code, ...) to use the fleet's gateway."
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
HEADER_NAME_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
MAX_SECRET_BYTES = 64 * 1024
DIR_HELP = "Another fleet's manifest folder (its state: --state-dir, else as `mcpfleet up`)."
STATE_HELP = "The fleet's state folder (default: the user fleet's, $MCPFLEET_HOME/state)."

app = typer.Typer(help=HELP, no_args_is_help=True)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


class NoUrl(Exception):
    """The fleet's URL cannot be found; the message says how to start the fleet."""


def _check_url(url: str) -> str:
    parts = urlsplit(url)
    if (
        len(url) > 2048
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or any(c.isspace() or ord(c) < 32 for c in url)
    ):
        raise _fail(f"--url {url!r}: expected an http(s) URL such as http://127.0.0.1:23967/mcp")
    if parts.username or parts.password:
        raise _fail("--url: credentials in a URL end up in logs; pass a token with --token-file")
    return url


def _state_dir(directory: Path | None, state_dir: Path | None) -> Path:
    if state_dir is not None:
        return state_dir.resolve()
    if directory is not None:
        from mcpfleet.platform.local.views import resolve_state_dir

        return resolve_state_dir(None)
    from mcpfleet.platform.local.userfleet import user_fleet

    return user_fleet().state


def _start_hint(directory: Path | None) -> str:
    if directory is not None:
        return f"start it: mcpfleet up {directory} --detach"
    return "start it: mcpfleet run time (or any catalogue entry: mcpfleet search)"


def fleet_url(directory: Path | None, state_dir: Path | None, server: str | None) -> str:
    """The URL of the fleet's gateway (or of `server`) from its state, or a clear error."""
    import sqlite3

    from mcpfleet.platform.local import snapshot
    from mcpfleet.platform.local.userfleet import GATEWAY_NAME

    state = _state_dir(directory, state_dir)
    if not (state / "state.db").is_file():
        raise NoUrl(f"no fleet state in {state}: the fleet has not run yet; {_start_hint(directory)}")
    kinds = (*MEMBER_KINDS, VIRTUAL_MCP_SERVER) if server else (VIRTUAL_MCP_SERVER,)
    try:
        objects = [o for kind in kinds for o in snapshot.read_objects(state, kind)]
    except sqlite3.Error as exc:
        raise NoUrl(f"the fleet state {state / 'state.db'} cannot be read ({exc})") from None
    if server:
        chosen = [o for o in objects if o.name == server]
        what = f"server {server!r}"
    else:
        chosen = [o for o in objects if o.name == GATEWAY_NAME] or (objects if len(objects) == 1 else [])
        what = "gateway (VirtualMCPServer)"
    if not chosen:
        known = ", ".join(sorted({o.name for o in objects})) or "none"
        raise NoUrl(
            f"no {what} in the fleet of {state} (known: {known}); name one with --server or pass --url"
        )
    url = chosen[0].status.get("url")
    if not isinstance(url, str) or not url:
        raise NoUrl(
            f"{chosen[0].kind.lower()}/{chosen[0].name} has no URL yet (is the fleet running? {_start_hint(directory)})"
        )
    return url


def _read_secret(path: Path, what: str) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        raise _fail(f"{what} {path}: cannot be read ({exc.strerror})") from None
    if len(data) > MAX_SECRET_BYTES:
        raise _fail(f"{what} {path}: more than {MAX_SECRET_BYTES} bytes")
    try:
        value = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise _fail(f"{what} {path}: not UTF-8 text") from None
    if not value:
        raise _fail(f"{what} {path}: empty")
    return value


def headers_of(token_file: Path | None, header: list[str]) -> dict[str, str]:
    """`--token-file` as `Authorization: Bearer …` and each `--header NAME=VALUE` (`NAME=@FILE`
    reads the value from a file, keeping it out of the command line)."""
    headers: dict[str, str] = {}
    if token_file is not None:
        headers["Authorization"] = "Bearer " + _read_secret(token_file, "--token-file")
    for item in header:
        name, sep, value = item.partition("=")
        if not sep or not HEADER_NAME_RE.fullmatch(name):
            raise _fail(f"--header {name!r}: expected NAME=VALUE or NAME=@FILE with an HTTP header name")
        if value.startswith("@"):
            value = _read_secret(Path(value[1:]), f"--header {name}")
        if not value or len(value) > 8192 or any(c in value for c in "\r\n\x00"):
            raise _fail(f"--header {name}: the value must be 1 to 8192 characters on one line")
        headers[name] = value
    return headers


def _check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise _fail(
            f"--name {name!r}: letters, digits, '.', '_' and '-' (up to 64), starting with a letter or digit"
        )
    return name


def _chosen(names: list[str], every: bool, env: Any, present: bool = False) -> list[Any]:
    from mcpfleet.clients import setup as ops
    from mcpfleet.clients.table import CLIENTS, by_id

    if names:
        try:
            return [by_id(n) for n in dict.fromkeys(names)]
        except KeyError as exc:
            raise _fail(str(exc.args[0])) from None
    if every or present:
        return list(CLIENTS)
    found = [c for c in CLIENTS if ops.found(c, env)]
    if not found:
        known = ", ".join(c.id for c in CLIENTS)
        raise _fail(
            f"no AI client found on this machine; name one (mcpfleet client setup cursor) or use --all. Known: {known}"
        )
    return found


_url = typer.Option(None, "--url", help="Write this URL instead of reading the fleet's state.")
_server = typer.Option(
    None,
    "--server",
    help="A named server of the fleet (MCPServer, MCPRemoteProxy or VirtualMCPServer) instead of its gateway.",
)
_dir = typer.Option(None, "--dir", help=DIR_HELP)
_state = typer.Option(None, "--state-dir", help=STATE_HELP)
_name = typer.Option("mcpfleet", "--name", help="The entry's name in the client's configuration.")
_dry_run = typer.Option(False, "--dry-run", help="Print the change as a unified diff; write nothing.")


@app.command("setup")
def setup(
    clients: list[str] = typer.Argument(
        None, metavar="CLIENT", help="Client ids (default: every client found)."
    ),
    every: bool = typer.Option(False, "--all", help="Every known client, found or not (files are created)."),
    name: str = _name,
    url: str | None = _url,
    server: str | None = _server,
    directory: Path | None = _dir,
    state_dir: Path | None = _state,
    token_file: Path | None = typer.Option(
        None,
        "--token-file",
        help="Send `Authorization: Bearer <file content>` (the gateway requires a token).",
    ),
    header: list[str] = typer.Option(
        [], "--header", help="NAME=VALUE or NAME=@FILE: a header the client sends (repeatable)."
    ),
    dry_run: bool = _dry_run,
) -> None:
    """Write an MCP server entry for the fleet's gateway into AI clients' configuration files.

    Other entries, comments and formatting are kept; the file is backed up (FILE.mcpfleet-backup)
    before the first change; running it again changes nothing. Clients: claude-code,
    claude-desktop, cursor, vscode, windsurf, cline, goose, zed, codex, gemini (docs/clients.md).

    Examples:

    \b
      mcpfleet run time && mcpfleet client setup            # every client found on this machine
      mcpfleet client setup cursor vscode --dry-run         # show the diff, write nothing
      mcpfleet client setup claude-code --server time       # one server instead of the gateway
      mcpfleet client setup cursor --token-file ~/.config/mcpfleet/token
    """
    from mcpfleet.clients import setup as ops
    from mcpfleet.clients.files import ConfigFileError
    from mcpfleet.clients.table import Environment

    name = _check_name(name)
    env = Environment.current()
    chosen = _chosen(clients or [], every, env)
    try:
        target = _check_url(url) if url else _check_url(fleet_url(directory, state_dir, server))
    except NoUrl as exc:
        raise _fail(str(exc)) from None
    headers = headers_of(token_file, header)
    failed = wrote = False
    for client in chosen:
        try:
            plan = ops.plan_setup(client, env, name, target, headers)
            if not plan.changed:
                typer.echo(f"{client.title}: {plan.path} already has {name} -> {target} (nothing changed)")
            elif dry_run:
                typer.echo(plan.diff(), nl=False)
            else:
                backup = ops.apply(plan)
                note = f" (backup: {backup})" if backup else ""
                typer.echo(f"{client.title}: wrote {name} -> {target} in {plan.path}{note}")
                wrote = True
        except ConfigFileError as exc:
            typer.echo(f"error: {client.title}: {exc}", err=True)
            failed = True
    if wrote:
        typer.echo("restart (or reload) the client to pick up the change")
    raise typer.Exit(1 if failed else 0)


@app.command("list")
def list_(
    name: str = _name,
    url: str | None = _url,
    server: str | None = _server,
    directory: Path | None = _dir,
    state_dir: Path | None = _state,
    output: str | None = typer.Option(None, "--output", "-o", help="json for a machine-readable list."),
) -> None:
    """Show each known client: found on this machine, its file, and whether the entry is there
    and points at the fleet's current URL (current, stale (URL), - for none, or the file's error).

    Examples:

    \b
      mcpfleet client list
      mcpfleet client list -o json
      mcpfleet client list --dir examples/quickstart     # compare with another fleet's gateway
    """
    from mcpfleet.clients import setup as ops
    from mcpfleet.clients.table import CLIENTS, Environment

    _check_name(name)
    if output not in (None, "json"):
        raise _fail(f"--output {output!r}: json, or nothing for the table")
    try:
        current: str | None = _check_url(url) if url else fleet_url(directory, state_dir, server)
    except NoUrl:
        current = None  # no running fleet: still list the files
    env = Environment.current()
    rows: list[dict[str, Any]] = []
    for client in CLIENTS:
        st = ops.status(client, env, name)
        if st.error:
            entry = f"error: {st.error}"
        elif st.entry_url is None:
            entry = "-"
        elif current is None:
            entry = st.entry_url
        else:
            entry = "current" if st.entry_url == current else f"stale ({st.entry_url})"
        rows.append({"client": client.id, "found": st.found, "file": str(st.path), "entry": entry})
    if output == "json":
        typer.echo(json.dumps({"url": current, "clients": rows}, indent=2))
        return
    typer.echo(f"{name} URL: {current or 'unknown (no running fleet found)'}")
    widths = [
        max(len(str(r[k])) for r in [*rows, {"client": "CLIENT", "entry": "ENTRY"}])
        for k in ("client", "entry")
    ]
    typer.echo(f"{'CLIENT':<{widths[0]}}  FOUND  {'ENTRY':<{widths[1]}}  FILE")
    for r in rows:
        found = "yes" if r["found"] else "no"
        typer.echo(f"{r['client']:<{widths[0]}}  {found:<5}  {r['entry']:<{widths[1]}}  {r['file']}")


@app.command("remove")
def remove(
    clients: list[str] = typer.Argument(
        None, metavar="CLIENT", help="Client ids (default: every client whose file has the entry)."
    ),
    name: str = _name,
    dry_run: bool = _dry_run,
) -> None:
    """Remove the mcpfleet entry (only it) from AI clients' configuration files.

    Examples:

    \b
      mcpfleet client remove                 # from every client that has it
      mcpfleet client remove cursor --dry-run
    """
    from mcpfleet.clients import setup as ops
    from mcpfleet.clients.files import ConfigFileError
    from mcpfleet.clients.table import Environment

    name = _check_name(name)
    env = Environment.current()
    failed = False
    for client in _chosen(clients or [], False, env, present=True):
        try:
            plan = ops.plan_remove(client, env, name)
            if not plan.changed:
                if clients:
                    typer.echo(f"{client.title}: no {name} entry in {plan.path} (nothing changed)")
            elif dry_run:
                typer.echo(plan.diff(), nl=False)
            else:
                backup = ops.apply(plan)
                note = f" (backup: {backup})" if backup else ""
                typer.echo(f"{client.title}: removed {name} from {plan.path}{note}")
        except ConfigFileError as exc:
            typer.echo(f"error: {client.title}: {exc}", err=True)
            failed = True
    raise typer.Exit(1 if failed else 0)
