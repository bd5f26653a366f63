"""The audit log page's data: the audit files the fleet's gateways and servers write.

A workload writes audit events to a file when its manifest sets `audit.enabled` and `audit.logFile`
(a VirtualMCPServer's `spec.config.audit`, an MCPServer's `spec.audit`); events written to stdout
are in the workload's log instead. Only the end of each file is read (`TAIL_BYTES`), at most
`MAX_EVENTS` events are shown, newest first, filtered by who (the subject), tool (the target's name)
and outcome. Lines that are not JSON objects are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpfleet.platform.local.snapshot import StoredObject

TAIL_BYTES = 1024 * 1024
MAX_EVENTS = 500
OUTCOMES = ("success", "denied", "rate_limited", "error", "tool_error")


@dataclass(frozen=True)
class Event:
    time: str
    component: str
    method: str
    target: str
    subject: str
    outcome: str
    duration_ms: str
    reason: str


def audit_files(objects: list[StoredObject]) -> list[tuple[str, Path]]:
    """(workload, file) for each workload whose manifest writes audit events to a file."""
    out: list[tuple[str, Path]] = []
    for obj in objects:
        spec: dict[str, Any] = obj.manifest.get("spec") or {}
        config: dict[str, Any] = spec["config"] if isinstance(spec.get("config"), dict) else {}
        for audit in (spec.get("audit"), config.get("audit")):
            if isinstance(audit, dict) and audit.get("enabled") and isinstance(audit.get("logFile"), str):
                path = Path(audit["logFile"])
                if path.is_absolute():
                    out.append((obj.name, path))
    return out


def _event(raw: dict[str, Any]) -> Event:
    subject: dict[str, Any] = raw["subject"] if isinstance(raw.get("subject"), dict) else {}
    target: dict[str, Any] = raw["target"] if isinstance(raw.get("target"), dict) else {}
    who = subject.get("name") or subject.get("email") or subject.get("sub") or "anonymous"
    return Event(
        time=str(raw.get("time", ""))[:40],
        component=str(raw.get("component", ""))[:200],
        method=str(raw.get("method", ""))[:100],
        target=str(target.get("name", ""))[:300],
        subject=str(who)[:300],
        outcome=str(raw.get("outcome", ""))[:40],
        duration_ms=str(raw.get("durationMs", ""))[:20],
        reason=str(raw.get("reason", ""))[:500],
    )


def _tail(path: Path) -> list[str]:
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            lines = handle.read(TAIL_BYTES).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return lines[1:] if size > TAIL_BYTES else lines


def read_events(
    files: list[tuple[str, Path]], who: str = "", tool: str = "", outcome: str = ""
) -> list[Event]:
    events: list[Event] = []
    for _workload, path in files:
        for line in _tail(path):
            try:
                raw = json.loads(line)
            except ValueError:
                continue
            if isinstance(raw, dict):
                events.append(_event(raw))
    wanted = [
        e
        for e in events
        if (not who or who.lower() in e.subject.lower())
        and (not tool or tool.lower() in e.target.lower())
        and (not outcome or e.outcome == outcome)
    ]
    wanted.sort(key=lambda e: e.time, reverse=True)
    return wanted[:MAX_EVENTS]
