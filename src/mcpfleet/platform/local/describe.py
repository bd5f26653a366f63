"""The body of `mcpfleet describe KIND NAME`: one local object in full, like `kubectl describe`.

Read-only, from the state file and the log files (no SQLAlchemy): what the manifest asks for, the
status and its conditions, the gateway's backends, the processes running for it, the recent
start / exit events of those processes (the log's `---` lines) and the last log lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from mcpfleet.api.kinds import lookup_kind
from mcpfleet.platform.local.display import age, plain_table
from mcpfleet.platform.local.snapshot import (
    DB_FILENAME,
    StoredObject,
    read_load_errors,
    read_objects,
    read_processes,
)
from mcpfleet.platform.local.views import log_files

EVENT_LINES = 16
"""Start-up milestones included (supervisor docstring): a run writes up to 7."""
LOG_LINES = 10


def _say(console: Console, text: str = "") -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def _indented(console: Console, text: str, indent: str = "  ") -> None:
    for line in text.rstrip("\n").splitlines():
        _say(console, indent + line)


def _events(path: Path) -> tuple[list[str], list[str]]:
    """The process start / exit lines of a log (the supervisor writes them with `---`) and its tail."""
    with path.open(errors="replace") as handle:
        lines = [line.rstrip("\n") for line in handle]
    events = [line.removeprefix("--- ") for line in lines if line.startswith("--- ")]
    return events[-EVENT_LINES:], lines[-LOG_LINES:]


def run_describe(state_dir: Path, kind_name: str, name: str | None, console: Console) -> int:
    if name is None and "/" in kind_name:
        kind_name, _, name = kind_name.partition("/")
    kind = lookup_kind(kind_name)
    if kind is None or not name:
        what = f"unknown kind {kind_name!r}" if kind is None else "a NAME is needed"
        _say(console, f"error: {what} (e.g. mcpfleet describe mcpserver time)")
        return 2
    if not (state_dir / DB_FILENAME).exists():
        _say(console, f"error: no state in {state_dir}; is `mcpfleet up` running here?")
        return 1
    found = [o for o in read_objects(state_dir, kind.info.kind) if o.name == name]
    if not found:
        invalid = [
            e
            for e in read_load_errors(state_dir)
            if e.get("kind") == kind.info.kind and e.get("name") == name
        ]
        _say(console, f'error: {kind.info.singular} "{name}" not found')
        for error in invalid:
            for path, reason in error.get("problems") or []:
                _say(console, f"  invalid manifest {error.get('file')}: {path or '-'}: {reason}")
        return 1
    obj = found[0]
    _summary(console, obj)
    _conditions_and_backends(console, obj.status)
    _processes_and_logs(console, state_dir, obj)
    return 0


def _summary(console: Console, obj: StoredObject) -> None:
    status: dict[str, Any] = obj.status
    spec = obj.shown_spec()
    _say(console, f"Name:         {obj.name}")
    _say(console, f"Namespace:    {obj.namespace}")
    _say(console, f"Kind:         {obj.kind}")
    _say(console, f"Source:       {obj.source}")
    _say(console, f"Created:      {obj.created} ({age(obj.created)} ago)")
    _say(console, f"Generation:   {obj.generation} (observed: {status.get('observedGeneration', '-')})")
    _say(console, "Spec:")
    _indented(console, yaml.safe_dump(spec, sort_keys=False, default_flow_style=False) if spec else "{}")
    _say(console, "Status:")
    _say(console, f"  Phase:      {status.get('phase', '-')}")
    if status.get("url"):
        _say(console, f"  URL:        {status['url']}")
    if "readyReplicas" in status:
        _say(console, f"  Ready:      {status['readyReplicas']}")
    if status.get("message"):
        _say(console, "  Message:")
        _indented(console, str(status["message"]), "    ")


def _processes_and_logs(console: Console, state_dir: Path, obj: StoredObject) -> None:
    processes = [p for p in read_processes(state_dir) if p.kind == obj.kind and p.name == obj.name]
    if processes:
        _say(console, "Processes:")
        body = [[p.key, str(p.pid or "-"), str(p.port or "-"), p.log_path] for p in processes]
        _indented(console, plain_table(["KEY", "PID", "PORT", "LOG"], body))
    files = log_files(state_dir, obj.name)
    if files:
        events, tail = _events(files[0])
        _say(console, f"Events (process starts and exits, from {files[0].name}):")
        _indented(console, "\n".join(events) or "<none>")
        _say(console, f"Last {len(tail)} log lines (mcpfleet logs {obj.name} for more):")
        _indented(console, "\n".join(tail) or "<empty>")
    else:
        _say(console, "Events:       <none> (no log file)")


def _conditions_and_backends(console: Console, status: dict[str, Any]) -> None:
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    if conditions:
        _say(console, "Conditions:")
        body = [
            [
                str(c.get("type", "")),
                str(c.get("status", "")),
                str(c.get("reason", "")),
                age(c.get("lastTransitionTime")),
                # A multi-line message (a crash's stderr) is in Message above; one line here.
                str(c.get("message", "")).splitlines()[0] if c.get("message") else "",
            ]
            for c in conditions
        ]
        _indented(console, plain_table(["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], body))
    backends = [b for b in status.get("discoveredBackends") or [] if isinstance(b, dict)]
    if backends:
        _say(console, "Backends:")
        body = [[str(b.get("name", "")), str(b.get("status", "")), str(b.get("url", ""))] for b in backends]
        _indented(console, plain_table(["NAME", "STATUS", "URL"], body))
