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
from mcpfleet.platform.local.display import plain_table, rows
from mcpfleet.platform.local.snapshot import DB_FILENAME, StoredObject, read_objects

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


def run_get(state_dir: Path, kind_name: str, name: str | None, output: str | None, console: Console) -> int:
    kinds = [k for k in ALL_KINDS if k.info.workload] if kind_name == "all" else []
    if not kinds:
        kind = lookup_kind(kind_name)
        if kind is None:
            known = ", ".join(k.info.plural for k in ALL_KINDS)
            console.print(f"[red]error:[/] unknown kind {kind_name!r}; known: {known} (or all)")
            return 2
        kinds = [kind]
    if not (state_dir / DB_FILENAME).exists():
        console.print(f"No resources found (no state in {state_dir}; is `mcpfleet up` running here?)")
        return 1 if name else 0
    found: list[tuple[Any, list[StoredObject]]] = []
    for kind in kinds:
        objects = read_objects(state_dir, kind.info.kind)
        if name is not None:
            objects = [o for o in objects if o.name == name]
        found.append((kind, objects))
    everything = [o for _, objects in found for o in objects]
    if name is not None and not everything:
        console.print(f'Error from server (NotFound): {kinds[0].info.plural} "{name}" not found')
        return 1
    if output in ("yaml", "json"):
        _print_documents(everything, single=name is not None, output=output, console=console)
        return 0
    if output not in (None, "", "wide", "name"):
        console.print(f"[red]error:[/] -o: expected yaml, json, wide or name, got {output!r}")
        return 2
    if not everything:
        console.print("No resources found in the local platform.")
        return 0
    _print_tables(found, output, console)
    return 0


def _print_documents(objects: list[StoredObject], *, single: bool, output: str, console: Console) -> None:
    """`-o yaml|json`: one object as itself, several as a v1 List."""
    documents = [o.as_document() for o in objects]
    payload: Any = (
        documents[0]
        if single and len(documents) == 1
        else {"apiVersion": "v1", "kind": "List", "items": documents}
    )
    text = yaml.safe_dump(payload, sort_keys=False) if output == "yaml" else json.dumps(payload, indent=2)
    console.print(text, markup=False, highlight=False, soft_wrap=True, end="")


def _print_tables(found: list[tuple[Any, list[StoredObject]]], output: str | None, console: Console) -> None:
    """A table per kind (`kind/name` rows when several kinds), or `-o name` lines."""
    for index, (kind, objects) in enumerate(found):
        if not objects:
            continue
        if output == "name":
            for obj in objects:
                console.print(f"{kind.info.singular}/{obj.name}", markup=False, highlight=False)
            continue
        header, body = rows(kind, objects, wide=output == "wide")
        if len(found) > 1:
            body = [[f"{kind.info.singular}/{r[0]}", *r[1:]] for r in body]
        if index and output != "name":
            console.print()
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
