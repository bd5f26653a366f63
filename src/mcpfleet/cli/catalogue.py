"""`mcpfleet search`, `show` and `add`: find a server in the catalogues and add it to a fleet.

Only option parsing and printing live here; the work is in `mcpfleet.catalogue`, imported inside
each command so `mcpfleet --help` stays fast.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from mcpfleet.catalogue.entries import CatalogueEntry
    from mcpfleet.catalogue.manifest import AddPlan
    from mcpfleet.catalogue.sources import Catalogue

REGISTRY_HELP = "A registry speaking the official MCP registry API (repeatable), besides those of a running `mcpfleet up` and ~/.config/mcpfleet/registries.yaml."
CATALOGUE_HELP = "A catalogue file, upstream server.json or ToolHive registry format (repeatable)."
STATE_DIR_HELP = "State folder of the fleet (its registries are searched; `add` stores Secret values there). Default: $MCPFLEET_STATE_DIR or ./.mcpfleet"
OUTPUT_HELP = "table (default), json or yaml."

_registry = typer.Option([], "--registry", help=REGISTRY_HELP)
_catalogue = typer.Option([], "--catalogue", help=CATALOGUE_HELP)
_state_dir = typer.Option(None, "--state-dir", help=STATE_DIR_HELP)
_bundled = typer.Option(True, "--bundled/--no-bundled", help="Include the catalogue shipped with mcpfleet.")


def _gather(
    term: str, registry: list[str], catalogue: list[Path], state_dir: Path | None, bundled: bool
) -> Catalogue:
    from mcpfleet.catalogue.sources import gather
    from mcpfleet.platform.local.views import resolve_state_dir

    found = gather(
        term,
        registry,
        catalogue,
        resolve_state_dir(state_dir) if state_dir is None else state_dir,
        include_bundled=bundled,
    )
    for problem in found.problems:
        typer.echo(f"warning: {problem}", err=True)
    return found


def _print_documents(documents: list[dict[str, Any]], output: str) -> None:
    if output == "json":
        typer.echo(json.dumps(documents if len(documents) != 1 else documents[0], indent=2))
    else:
        import yaml

        typer.echo(yaml.safe_dump_all(documents, sort_keys=False).rstrip())


def _check_output(output: str) -> None:
    if output not in ("table", "json", "yaml"):
        raise typer.BadParameter(f"expected table, json or yaml, got {output!r}", param_hint="-o")


def search(
    term: str = typer.Argument("", help="Words to look for in names, titles, descriptions and packages."),
    registry: list[str] = _registry,
    catalogue: list[Path] = _catalogue,
    state_dir: Path | None = _state_dir,
    bundled: bool = _bundled,
    output: str = typer.Option("table", "--output", "-o", help=OUTPUT_HELP),
) -> None:
    """Search the catalogues for MCP servers.

    Examples:

    \b
      mcpfleet search time
      mcpfleet search "web page" -o json
      mcpfleet search github --registry https://registry.example/
    """
    from mcpfleet.catalogue.entries import search as rank

    _check_output(output)
    entries = rank(_gather(term, registry, catalogue, state_dir, bundled).entries, term)
    if output != "table":
        _print_documents([e.server for e in entries], output)
        return
    if not entries:
        typer.echo(f"no server matches {term!r}", err=True)
        raise typer.Exit(1)
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, show_edge=False)
    table.add_column("NAME", no_wrap=True)
    table.add_column("VERSION", no_wrap=True, min_width=len(max((e.version for e in entries), key=len)))
    table.add_column("TRANSPORT", no_wrap=True, min_width=5)
    table.add_column("PACKAGE", overflow="fold", ratio=1)
    table.add_column("DESCRIPTION", overflow="fold", ratio=1)
    for entry in entries:
        row = (entry.short_name, entry.version, entry.transport(), entry.package_label(), entry.description)
        table.add_row(*row)
    Console(soft_wrap=False).print(table)
    sources = sorted({e.source for e in entries})
    typer.echo(
        f"\nfrom: {', '.join(sources)}. Details: mcpfleet show NAME; add to a fleet: mcpfleet add NAME"
    )


def _lookup(
    reference: str, registry: list[str], catalogue: list[Path], state_dir: Path | None, bundled: bool
) -> CatalogueEntry:
    from mcpfleet.catalogue.entries import find

    name, _, version = reference.partition("@")
    term = name.rsplit("/", 1)[-1]
    entries = _gather(term, registry, catalogue, state_dir, bundled).entries
    try:
        return find(entries, name, version or None)
    except LookupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def show(
    reference: str = typer.Argument(..., metavar="NAME[@VERSION]", help="Short name (time) or full name."),
    registry: list[str] = _registry,
    catalogue: list[Path] = _catalogue,
    state_dir: Path | None = _state_dir,
    bundled: bool = _bundled,
    output: str = typer.Option("table", "--output", "-o", help=OUTPUT_HELP),
) -> None:
    """Show one catalogue entry: how it runs and the values it asks for.

    Examples:

    \b
      mcpfleet show time
      mcpfleet show io.github.modelcontextprotocol/filesystem -o json
    """
    _check_output(output)
    entry = _lookup(reference, registry, catalogue, state_dir, bundled)
    if output != "table":
        _print_documents([entry.server], output)
        return
    lines = [
        f"name:        {entry.name}  (add it as: mcpfleet add {entry.short_name})",
        f"version:     {entry.version}",
        f"description: {entry.description}",
        f"source:      {entry.source}",
    ]
    for package in entry.packages():
        version = package.get("version") or "-"
        transport = (package.get("transport") or {}).get("type", "stdio")
        lines.append(
            f"package:     {package.get('registryType')} {package.get('identifier')} {version} ({transport})"
        )
        for arg in package.get("packageArguments") or []:
            label = arg.get("name") or arg.get("valueHint")
            lines.append(f"  argument {label}{_flags(arg)}: {arg.get('description', '')}")
        for env in package.get("environmentVariables") or []:
            lines.append(f"  env {env.get('name')}{_flags(env)}: {env.get('description', '')}")
    for remote in entry.remotes():
        lines.append(f"remote:      {remote.get('type')} {remote.get('url')}")
        for header in remote.get("headers") or []:
            lines.append(f"  header {header.get('name')}{_flags(header)}: {header.get('description', '')}")
    typer.echo("\n".join(lines))


def _flags(spec: dict[str, Any]) -> str:
    marks = [
        m
        for m, on in (
            ("required", spec.get("isRequired")),
            ("secret", spec.get("isSecret")),
            ("repeatable", spec.get("isRepeated")),
        )
        if on
    ]
    if spec.get("default") is not None:
        marks.append(f"default {spec['default']}")
    if spec.get("choices"):
        marks.append("one of " + "|".join(map(str, spec["choices"])))
    return f" ({', '.join(marks)})" if marks else ""


def _pairs(values: list[str], flag: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected NAME=VALUE, got {value!r}", param_hint=flag)
        pairs.append((key, rest))
    return pairs


def _ask(path: str, spec: dict[str, Any], secret: bool) -> str | None:
    description = spec.get("description") or spec.get("name") or spec.get("valueHint") or path
    answer: str = typer.prompt(f"{description} [{path}]", hide_input=secret, default="", show_default=False)
    return answer or None


def add(
    reference: str = typer.Argument(..., metavar="NAME[@VERSION]", help="Short name (time) or full name."),
    directory: Path = typer.Option(
        Path("."), "--dir", help="The fleet's manifest folder (what `mcpfleet up DIR` runs)."
    ),
    name: str | None = typer.Option(None, "--name", help="Object name (default: the entry's short name)."),
    env: list[str] = typer.Option(
        [], "--env", help="NAME=VALUE for an environment variable of the entry (repeatable)."
    ),
    arg: list[str] = typer.Option(
        [],
        "--arg",
        help="NAME=VALUE for a package argument (flag without dashes, or a positional's hint; repeat for repeated ones).",
    ),
    header: list[str] = typer.Option(
        [], "--header", help="NAME=VALUE for a header of a remote (repeatable)."
    ),
    group: str | None = typer.Option(
        None, "--group", help="Put the server in this MCPGroup (written if the folder has none)."
    ),
    remote: bool = typer.Option(
        False, "--remote", help="Use the entry's remote endpoint instead of a package."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing manifest of that name."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the manifest; write nothing."),
    registry: list[str] = _registry,
    catalogue: list[Path] = _catalogue,
    state_dir: Path | None = _state_dir,
    bundled: bool = _bundled,
) -> None:
    """Write the manifest of a catalogue entry into a fleet's folder (`mcpfleet up DIR` then runs it).

    Required values come from --env / --arg / --header, or are asked for on a terminal. Secret values
    are stored as local Secrets (STATE/secrets/NAME-secrets/KEY, mode 0600) and only referenced by
    the manifest, which applies unchanged with `kubectl apply`.

    Examples:

    \b
      mcpfleet add time
      mcpfleet add filesystem --arg directory=/srv/docs --group tools
      mcpfleet add io.github.example/weather@1.2.0 --env API_KEY=... --dir servers
    """
    from mcpfleet.platform.local.views import resolve_state_dir

    plan = add_entry(
        reference,
        directory,
        name,
        env,
        arg,
        header,
        group,
        remote,
        force,
        dry_run,
        Sources(registry, catalogue, resolve_state_dir(state_dir), bundled),
    )
    if plan is not None:
        typer.echo(
            f"run it: mcpfleet up {directory}   (a running `mcpfleet up {directory}` picks it up by itself)"
        )


@dataclass
class Sources:
    """Where `add` looks the entry up, and the fleet's state folder (local Secret values go there)."""

    registry: list[str]
    catalogue: list[Path]
    state_dir: Path
    bundled: bool


def add_entry(
    reference: str,
    directory: Path,
    name: str | None,
    env: list[str],
    arg: list[str],
    header: list[str],
    group: str | None,
    remote: bool,
    force: bool,
    dry_run: bool,
    sources: Sources,
) -> AddPlan | None:
    """`mcpfleet add` without its option parsing (also `mcpfleet run`'s first step): the plan
    written, or None for a dry run. Exits with code 2 naming the field when the entry cannot be added."""
    from mcpfleet.catalogue.fleet import manifest_text, write
    from mcpfleet.catalogue.manifest import AddError, Inputs, plan_add
    from mcpfleet.platform.local.paths import PathEscapeError

    entry = _lookup(reference, sources.registry, sources.catalogue, sources.state_dir, sources.bundled)
    args: dict[str, list[str]] = {}
    for key, value in _pairs(arg, "--arg"):
        args.setdefault(key, []).append(value)
    inputs = Inputs(
        env=dict(_pairs(env, "--env")),
        args=args,
        headers=dict(_pairs(header, "--header")),
        prompt=_ask if sys.stdin.isatty() and not dry_run else None,
    )
    object_name = name or entry.short_name
    try:
        plan = plan_add(entry, object_name, inputs, group=group, remote=remote)
        if dry_run:
            typer.echo(manifest_text(plan).rstrip())
            return None
        written = write(plan, directory, sources.state_dir, force=force)
    except (AddError, PathEscapeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{plan.kind.lower()}/{object_name} written to {written[0]}")
    if plan.secrets:
        typer.echo(
            f"secret values stored locally in Secret {plan.secret_name} (keys {', '.join(sorted(plan.secrets))}); "
            f"on Kubernetes create it first: kubectl create secret generic {plan.secret_name} --from-literal=KEY=VALUE"
        )
    return plan
