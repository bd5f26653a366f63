"""What the console shows of a local fleet, read from its state folder (read-only).

The same sources as `mcpfleet get / describe / logs`: the state file (objects, their status, the
invalid manifests of the last load, processes) and the log files. Reads are bounded: a log is read
from its last `LOG_TAIL_BYTES` only, whatever its size.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mcpfleet.api import kindnames
from mcpfleet.platform.local.display import age
from mcpfleet.platform.local.snapshot import (
    DB_FILENAME,
    StoredObject,
    read_load_errors,
    read_objects,
)
from mcpfleet.platform.local.views import log_files

LOG_TAIL_BYTES = 64 * 1024
"""The most of a log file the console reads (its end)."""
LOG_LINES = 200
EVENT_LINES = 20
MESSAGE_CHARS = 4000
"""A status message longer than this is cut (a crash's stderr can be long)."""
WORKLOAD_KINDS = kindnames.WORKLOAD_KINDS


@dataclass(frozen=True)
class Row:
    """One object on the fleet page."""

    kind: str
    name: str
    namespace: str
    phase: str
    cause: str
    since: str
    since_age: str
    url: str
    source: str

    @property
    def failed(self) -> bool:
        return self.phase == "Failed"


@dataclass(frozen=True)
class InvalidManifest:
    """A manifest `up` could not load: file, object and the problems (field, reason)."""

    file: str
    what: str
    problems: list[tuple[str, str]]


@dataclass
class Fleet:
    """The fleet page's content; `present` is False when the folder holds no state yet; `problems`
    are what could not be read (a Kubernetes API refusal)."""

    present: bool
    rows: list[Row] = field(default_factory=list)
    invalid: list[InvalidManifest] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def workloads(self) -> list[Row]:
        return [r for r in self.rows if r.kind in WORKLOAD_KINDS]

    @property
    def others(self) -> list[Row]:
        return [r for r in self.rows if r.kind not in WORKLOAD_KINDS]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.workloads:
            out[row.phase] = out.get(row.phase, 0) + 1
        return out


def _since(status: dict[str, Any]) -> str:
    """When the object entered its current state: the Ready condition's last transition."""
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return str(condition.get("lastTransitionTime") or "")
    return ""


def _cause(status: dict[str, Any]) -> str:
    message = str(status.get("message") or "")
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS] + "…"
    return message


def row_of(obj: StoredObject) -> Row:
    status = obj.status if isinstance(obj.status, dict) else {}
    since = _since(status)
    return Row(
        kind=obj.kind,
        name=obj.name,
        namespace=obj.namespace,
        phase=str(status.get("phase") or ("Pending" if obj.kind in WORKLOAD_KINDS else "-")),
        cause=_cause(status),
        since=since,
        since_age=age(since) if since else "",
        url=str(status.get("url") or ""),
        source=obj.source,
    )


def fleet_of(
    objects: list[StoredObject], errors: list[dict[str, Any]] | None = None, problems: list[str] | None = None
) -> Fleet:
    """The fleet page of these objects (and the manifests that could not be loaded, locally)."""
    invalid = [
        InvalidManifest(
            file=str(e.get("file", "?")),
            what=f"{e.get('kind')}/{e.get('name')}" if e.get("kind") else "-",
            problems=[(str(p or "-"), str(r)) for p, r in (e.get("problems") or [["", "invalid"]])],
        )
        for e in errors or []
    ]
    order = {kind: i for i, kind in enumerate(WORKLOAD_KINDS)}
    rows = sorted((row_of(o) for o in objects), key=lambda r: (order.get(r.kind, 99), r.kind, r.name))
    return Fleet(present=True, rows=rows, invalid=invalid, problems=list(problems or []))


def read_fleet(state_dir: Path) -> Fleet:
    if not (state_dir / DB_FILENAME).is_file():
        return Fleet(present=False)
    try:
        objects = read_objects(state_dir)
        errors = read_load_errors(state_dir)
    except sqlite3.Error:
        return Fleet(present=False)
    return fleet_of(objects, errors)


def find_object(state_dir: Path, kind: str, name: str) -> StoredObject | None:
    if not (state_dir / DB_FILENAME).is_file():
        return None
    for obj in read_objects(state_dir, kind):
        if obj.name == name:
            return obj
    return None


def manifest_yaml(obj: StoredObject) -> str:
    return yaml.safe_dump(obj.manifest, sort_keys=False, default_flow_style=False)


@dataclass(frozen=True)
class Logs:
    file: str
    lines: list[str]
    events: list[str]


def read_logs(state_dir: Path, name: str) -> Logs | None:
    """The end of workload NAME's log, and its process start / exit lines (`---`, as `describe`)."""
    files = log_files(state_dir, name)
    if not files:
        return None
    path = files[0]
    with path.open("rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - LOG_TAIL_BYTES))
        data = handle.read(LOG_TAIL_BYTES)
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if size > LOG_TAIL_BYTES and lines:
        lines = lines[1:]  # the first line was cut by the seek
    events = [line.removeprefix("--- ") for line in lines if line.startswith("--- ")]
    return Logs(file=path.name, lines=lines[-LOG_LINES:], events=events[-EVENT_LINES:])


def manifests_folder(state_dir: Path) -> Path | None:
    """The folder the fleet's `up` runs (where "add to fleet" writes), as `up` recorded it."""
    if not (state_dir / DB_FILENAME).is_file():
        return None
    from contextlib import closing

    try:
        with closing(sqlite3.connect(f"file:{state_dir / DB_FILENAME}?mode=ro", uri=True, timeout=5)) as db:
            row = db.execute("select value from meta where key = 'manifests'").fetchone()
    except sqlite3.Error:
        return None
    if row is None:
        return None
    path = Path(row[0])
    return path if path.is_dir() else path.parent


POD_REASON_CHARS = 1000
WAITING_REASONS_SHOWN = 3


@dataclass(frozen=True)
class PodRow:
    """One pod of a workload on a cluster: what `kubectl get pods` says, and why it is not ready."""

    name: str
    phase: str
    ready: str
    restarts: int
    reason: str


def pod_row(pod: dict[str, Any]) -> PodRow:
    """A Pod as the API answers it (any shape: a hostile answer gives empty fields, never an error)."""
    metadata = _mapping(pod.get("metadata"))
    status = _mapping(pod.get("status"))
    containers = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    reasons: list[str] = []
    restarts = 0
    for container in containers:
        count = container.get("restartCount")
        restarts += count if isinstance(count, int) and count > 0 else 0
        state = _mapping(container.get("state"))
        for how in ("waiting", "terminated"):
            detail = state.get(how)
            if isinstance(detail, dict) and (detail.get("reason") or detail.get("message")):
                reasons.append(
                    f"{container.get('name', '?')}: {detail.get('reason') or ''} {detail.get('message') or ''}"
                )
    reason = "; ".join(" ".join(r.split()) for r in reasons[:WAITING_REASONS_SHOWN])
    return PodRow(
        name=str(metadata.get("name") or "?")[:253],
        phase=str(status.get("phase") or "?")[:50],
        ready=f"{sum(1 for c in containers if c.get('ready') is True)}/{len(containers)}",
        restarts=restarts,
        reason=reason[:POD_REASON_CHARS],
    )


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
