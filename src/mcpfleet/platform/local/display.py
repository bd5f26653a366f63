"""What `mcpfleet up` and `mcpfleet get` show: kubectl-style columns and the rich progress view.

Columns come from each kind's printer columns (`KindInfo.columns`, the same list the CRDs give
`kubectl get`), evaluated on the stored object, so both commands agree column for column.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from mcpfleet.api.meta import PrinterColumn
from mcpfleet.api.resource import Resource
from mcpfleet.platform.local.snapshot import StoredObject

if TYPE_CHECKING:
    from mcpfleet.platform.local.loader import LoadError

_FILTER = re.compile(r'^\[\?\(@\.(\w+)=="([^"]*)"\)\]$')
SETTLED = {"Running", "Ready", "Degraded", "Failed", "Stopped"}
PHASE_STYLE = {
    "Running": "green",
    "Ready": "green",
    "Degraded": "yellow",
    "Pending": "cyan",
    "Failed": "red",
    "Stopped": "dim",
    "Terminating": "dim",
}


def json_path(document: Any, path: str) -> Any:
    """Evaluate the small JSONPath subset printer columns use: `.a.b` and `[?(@.k=="v")]` filters."""
    current: Any = document
    for token in re.findall(r"\.[A-Za-z0-9_]+|\[\?\(@\.\w+==\"[^\"]*\"\)\]", path):
        if token.startswith("."):
            current = current.get(token[1:]) if isinstance(current, dict) else None
        else:
            match = _FILTER.match(token)
            assert match is not None
            field, value = match.groups()
            items = current if isinstance(current, list) else []
            current = next((i for i in items if isinstance(i, dict) and i.get(field) == value), None)
        if current is None:
            return None
    return current


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """kubectl's AGE: 45s, 12m, 3h, 2d."""
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def cell(obj: StoredObject, column: PrinterColumn) -> str:
    value = json_path(obj.as_document(), column.json_path)
    if column.type == "date":
        return age(value if isinstance(value, str) else None)
    return "" if value is None else str(value)


def rows(
    kind: type[Resource], objects: list[StoredObject], wide: bool = False
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of `get KIND` (NAME first, then the kind's printer columns; -o wide adds the
    priority > 0 ones, as kubectl does)."""
    columns = [c for c in kind.info.columns if wide or c.priority == 0]
    header = ["NAME", *(c.name.upper() for c in columns)]
    return header, [[o.name, *(cell(o, c) for c in columns)] for o in objects]


def plain_table(header: list[str], body: list[list[str]]) -> str:
    """Columns separated by three spaces, like kubectl."""
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["   ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in [header, *body]]
    return "\n".join(lines)


def short(message: str | None, limit: int = 70) -> str:
    first = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _lines(message: str | None) -> list[str]:
    return [line.strip() for line in (message or "").splitlines() if line.strip()]


def headline(message: str | None, limit: int = 200) -> str:
    """One line for a table cell: a multi-line failure (`X exited with code 1:` + stderr lines)
    shows its last stderr line, which is where the cause is, not the colon it starts with."""
    lines = _lines(message)
    if not lines:
        return ""
    text = lines[0] if len(lines) == 1 else f"{lines[0].rstrip(':')}: {lines[-1]}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def failure_block(kind: str, name: str, message: str | None) -> list[str]:
    """A failed workload for the `up` terminal: what failed, the last stderr lines, where the log is."""
    lines = _lines(message)
    first = lines[0].rstrip(":") if lines else "failed"
    block = [f"✗ {kind}/{name}: {first}", *(f"    {line}" for line in lines[1:])]
    block.append(f"    (full log: mcpfleet logs {name})")
    return block


def progress_table(objects: list[StoredObject], errors: list[LoadError], spinner_frame: int = 0) -> Table:
    """The live view while `up` brings workloads up: one line per workload, invalid manifests below."""
    spinner = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"[spinner_frame % 10]
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    for title in ("", "KIND", "NAME", "STATUS", "URL / MESSAGE"):
        table.add_column(title)
    for obj in objects:
        phase = str(obj.status.get("phase") or "Pending")
        mark = {"Failed": "✗", "Stopped": "-"}.get(phase, "✓" if phase in SETTLED else spinner)
        detail = obj.status.get("url") or headline(obj.status.get("message"))
        table.add_row(
            Text(mark, style=PHASE_STYLE.get(phase, "")),
            obj.kind,
            obj.name,
            Text(phase, style=PHASE_STYLE.get(phase, "")),
            Text(str(detail or "")),  # a Text, not a str: a message (stderr) is never parsed as markup
        )
    for error in errors:
        table.add_row(
            Text("✗", style="red"),
            "invalid",
            Text(error.file),
            Text("Invalid", style="red"),
            Text(short(str(error), 100)),
        )
    return table
