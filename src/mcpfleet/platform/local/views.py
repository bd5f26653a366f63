"""The bodies of `mcpfleet get` and `mcpfleet logs`: read-only, quick, no SQLAlchemy.

`get` prints what `kubectl get` prints for the same kind (the printer columns of the CRDs) from the
local state; `logs` prints a workload's log file from the state dir.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from mcpfleet.api.kinds import ALL_KINDS, lookup_kind
from mcpfleet.api.resource import Resource
from mcpfleet.platform.local.display import plain_table, rows
from mcpfleet.platform.local.snapshot import DB_FILENAME, StoredObject, read_load_errors, read_objects

DEFAULT_STATE_DIR = ".mcpfleet"
STATE_DIR_ENV = "MCPFLEET_STATE_DIR"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def resolve_state_dir(option: Path | None) -> Path:
    """--state-dir, else $MCPFLEET_STATE_DIR, else ./.mcpfleet (`get`/`down` find it from the same folder)."""
    if option is not None:
        return option.resolve()
    from_env = os.environ.get(STATE_DIR_ENV)
    return Path(from_env).resolve() if from_env else (Path.cwd() / DEFAULT_STATE_DIR).resolve()


# -- get --------------------------------------------------------------------------------------


def parse_targets(args: list[str]) -> list[tuple[str, list[str]]] | str:
    """kubectl's argument forms: `KIND`, `KIND NAME…`, `KIND/NAME…`; an error text otherwise."""
    if not args:
        return "expected a kind (mcpservers, mcps, vmcp, …, or all)"
    if any("/" in a for a in args):
        if not all(a.count("/") == 1 and all(a.split("/")) for a in args):
            return "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form"
        targets: list[tuple[str, list[str]]] = []
        for arg in args:
            kind, name = arg.split("/")
            for existing in targets:
                if existing[0] == kind:
                    existing[1].append(name)
                    break
            else:
                targets.append((kind, [name]))
        return targets
    return [(args[0], args[1:])]


def _kinds(kind_name: str) -> list[type[Resource]] | None:
    if kind_name == "all":
        return [k for k in ALL_KINDS if k.info.workload]
    kind = lookup_kind(kind_name)
    return None if kind is None else [kind]


def _resolve(
    targets: list[tuple[str, list[str]]], console: Console
) -> list[tuple[type[Resource], list[str]]] | None:
    """(kind, names) per target; None (after printing why) for an unknown kind or `all NAME`."""
    resolved: list[tuple[type[Resource], list[str]]] = []
    for kind_name, names in targets:
        kinds = _kinds(kind_name)
        if kinds is None:
            known = ", ".join(k.info.plural for k in ALL_KINDS)
            console.print(
                f"error: unknown kind {kind_name!r}; known: {known} (or all)", markup=False, highlight=False
            )
            return None
        if names and kind_name == "all":
            console.print("error: a name needs a kind (get mcpserver NAME), not all", markup=False)
            return None
        resolved += [(kind, names) for kind in kinds]
    return resolved


def _find(
    state_dir: Path, resolved: list[tuple[type[Resource], list[str]]], load_errors: list[dict[str, Any]]
) -> tuple[list[tuple[type[Resource], list[StoredObject]]], list[str]]:
    """The stored objects asked for, and a "not found" line per missing name (with why, if invalid)."""
    found: list[tuple[type[Resource], list[StoredObject]]] = []
    missing: list[str] = []
    for kind, names in resolved:
        objects = read_objects(state_dir, kind.info.kind)
        if names:
            by_name = {o.name: o for o in objects}
            objects = [by_name[n] for n in names if n in by_name]
            for name in (n for n in names if n not in by_name):
                invalid = [
                    e for e in load_errors if e.get("kind") == kind.info.kind and e.get("name") == name
                ]
                why = f" (its manifest is invalid: {_error_text(invalid[0])})" if invalid else ""
                missing.append(f'{kind.info.singular} "{name}" not found{why}')
        found.append((kind, objects))
    return found, missing


def _print_documents(objects: list[StoredObject], *, single: bool, output: str, console: Console) -> None:
    """`-o yaml|json`: one object as itself, several as a v1 List."""
    documents = [o.as_document() for o in objects]
    payload: Any = documents[0] if single else {"apiVersion": "v1", "kind": "List", "items": documents}
    text = yaml.safe_dump(payload, sort_keys=False) if output == "yaml" else json.dumps(payload, indent=2)
    console.print(text, markup=False, highlight=False, soft_wrap=True, end="")


def run_get(state_dir: Path, args: list[str], output: str | None, console: Console) -> int:
    targets = parse_targets(args)
    if isinstance(targets, str):
        console.print(f"error: {targets}", markup=False, highlight=False)
        return 2
    if output not in (None, "", "wide", "name", "yaml", "json"):
        console.print(f"error: -o: expected yaml, json, wide or name, got {output!r}", markup=False)
        return 2
    resolved = _resolve(targets, console)
    if resolved is None:
        return 2
    if not (state_dir / DB_FILENAME).exists():
        console.print(f"No resources found (no state in {state_dir}; is `mcpfleet up` running here?)")
        return 1 if any(names for _, names in resolved) else 0
    load_errors = read_load_errors(state_dir)
    found, missing = _find(state_dir, resolved, load_errors)
    everything = [o for _, objects in found for o in objects]
    if output in ("yaml", "json"):
        if everything:
            single = len(resolved) == 1 and len(resolved[0][1]) == 1
            _print_documents(everything, single=single, output=output, console=console)
    else:
        _print_tables(found, output, console)
        listing = not any(names for _, names in resolved)
        kinds = {k.info.kind for k, _ in resolved}
        # `all` shows every document `up` refused, whatever its kind (an unknown or misspelt kind, a
        # non-workload kind): it has no row anywhere else. A kind asked by name shows its own.
        asked_all = any(kind_name == "all" for kind_name, _ in targets)
        shown_errors = [e for e in load_errors if asked_all or not e.get("kind") or e.get("kind") in kinds]
        if listing and output != "name" and shown_errors:
            _print_load_errors(shown_errors, console)
        elif listing and not everything:
            console.print("No resources found in the local platform.")
    for line in missing:
        console.print(f"error: {line}", markup=False, highlight=False)
    return 1 if missing else 0


def _print_tables(
    found: list[tuple[type[Resource], list[StoredObject]]], output: str | None, console: Console
) -> None:
    printed = False
    for kind, objects in found:
        if not objects:
            continue
        if output == "name":
            for obj in objects:
                console.print(f"{kind.info.singular}/{obj.name}", markup=False, highlight=False)
            continue
        header, body = rows(kind, objects, wide=output == "wide")
        if len(found) > 1:
            body = [[f"{kind.info.singular}/{r[0]}", *r[1:]] for r in body]
        if printed:
            console.print()
        console.print(plain_table(header, body), markup=False, highlight=False, soft_wrap=True)
        printed = True


def _error_text(error: dict[str, Any]) -> str:
    where = str(error.get("file", "?"))
    if error.get("document") is not None:
        where += f" (document {error['document']})"
    problems = "; ".join(f"{p}: {r}" if p else str(r) for p, r in error.get("problems") or [])
    return f"{where}: {problems}"


def _print_load_errors(errors: list[dict[str, Any]], console: Console) -> None:
    """Manifests `up` could not load: not applied, so they have no row of their own kind."""
    body: list[list[str]] = []
    for error in errors:
        what = f"{error.get('kind')}/{error.get('name')}" if error.get("kind") else "-"
        document = str(error.get("document") or "-")
        for path, reason in error.get("problems") or [["", "invalid"]]:
            body.append([str(error.get("file", "?")), document, what, str(path or "-"), str(reason)])
    console.print()
    console.print("Invalid manifests (not applied; `mcpfleet up` reloads a file when it is saved):")
    header = ["FILE", "DOC", "OBJECT", "FIELD", "PROBLEM"]
    console.print(plain_table(header, body), markup=False, highlight=False, soft_wrap=True)


# -- logs -------------------------------------------------------------------------------------


def log_files(state_dir: Path, name: str) -> list[Path]:
    """The log files of workload NAME: NAME.log, KIND-NAME.log, and per-container NAME-*.log."""
    logs = state_dir / "logs"
    if not logs.is_dir():
        return []
    candidates = [
        logs / f"{name}.log",
        *sorted(logs.glob(f"*-{name}.log")),
        *sorted(logs.glob(f"{name}-*.log")),
    ]
    seen: list[Path] = []
    for path in candidates:
        if path.is_file() and path not in seen:
            seen.append(path)
    return seen


def run_logs(state_dir: Path, name: str, follow: bool, tail: int | None, console: Console) -> int:
    files = log_files(state_dir, name)
    if not files:
        console.print(f"[red]error:[/] no logs for {name!r} in {state_dir / 'logs'}")
        return 1
    path = files[0]
    if len(files) > 1:
        console.print(
            f"# {len(files)} log files match; showing {path.name} "
            f"(others: {', '.join(f.name for f in files[1:])})"
        )
    with path.open(errors="replace") as handle:
        lines = handle.readlines()
        shown = lines if tail is None or tail < 0 else lines[-tail:] if tail else []
        for line in shown:
            console.print(line.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
        while follow:
            line = handle.readline()
            if line:
                console.print(line.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
            else:
                time.sleep(0.2)
    return 0
