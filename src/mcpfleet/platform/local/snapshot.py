"""Read-only views of the local state for the quick commands (`get`, `logs`, `down`).

They read the SQLite file with the standard library only, so `mcpfleet get` answers without
an event loop or a thread; the tables are the ones `state` defines and writes. WAL mode lets them read
while `up` writes.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpfleet.redact import redact_url

DB_FILENAME = "state.db"
META_LOAD_ERRORS = "load_errors"
"""Meta key: the invalid manifests of the last load, as JSON (`up` writes, `get` reads)."""
URL_FIELDS = ("remoteURL", "remoteUrl")
"""Spec fields holding a URL that may carry credentials (MCPRemoteProxy, MCPServerEntry)."""


@dataclass(frozen=True)
class StoredObject:
    """One object as the local platform knows it: manifest, generation and status."""

    kind: str
    namespace: str
    name: str
    manifest: dict[str, Any]
    generation: int
    status: dict[str, Any]
    source: str
    created: str

    def shown_spec(self) -> dict[str, Any]:
        """The spec as shown to a person (`get -o yaml`, `describe`): URL fields that may carry
        credentials (`remoteURL`: `user:pw@`, query values) redacted, as the proxy's /health does."""
        spec = self.manifest.get("spec")
        if not isinstance(spec, dict):
            return {}
        shown = dict(spec)
        for key in URL_FIELDS:
            if isinstance(shown.get(key), str):
                shown[key] = redact_url(shown[key])
        return shown

    def as_document(self) -> dict[str, Any]:
        """The object as `kubectl get -o yaml` would show it: metadata filled in, status attached,
        URL credentials redacted (`shown_spec`)."""
        doc = dict(self.manifest)
        if "spec" in doc:
            doc["spec"] = self.shown_spec()
        meta = dict(doc.get("metadata") or {})
        meta.setdefault("namespace", self.namespace)
        meta["generation"] = self.generation
        meta["creationTimestamp"] = self.created
        doc["metadata"] = meta
        doc["status"] = self.status
        return doc


@dataclass(frozen=True)
class RecordedProcess:
    """A process `up` recorded (`describe` shows them)."""

    key: str
    kind: str
    name: str
    pid: int | None
    port: int | None
    log_path: str


def _connect(state_dir: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{state_dir / DB_FILENAME}?mode=ro", uri=True, timeout=5)


def read_objects(state_dir: Path, kind: str | None = None) -> list[StoredObject]:
    query = "select kind, namespace, name, manifest, generation, status, source, created from objects"
    params: tuple[str, ...] = ()
    if kind is not None:
        query += " where kind = ?"
        params = (kind,)
    with closing(_connect(state_dir)) as db:
        rows = db.execute(query + " order by kind, namespace, name", params).fetchall()
    return [
        StoredObject(k, ns, n, json.loads(m), g, json.loads(s or "{}"), src, c)
        for k, ns, n, m, g, s, src, c in rows
    ]


def read_processes(state_dir: Path) -> list[RecordedProcess]:
    with closing(_connect(state_dir)) as db:
        rows = db.execute(
            "select key, kind, name, pid, port, log_path from processes order by key"
        ).fetchall()
    return [RecordedProcess(*row) for row in rows]


def read_load_errors(state_dir: Path) -> list[dict[str, Any]]:
    """The invalid manifests `up` saw at its last load: file, document, kind, name, problems."""
    with closing(_connect(state_dir)) as db:
        try:
            row = db.execute("select value from meta where key = ?", (META_LOAD_ERRORS,)).fetchone()
        except sqlite3.OperationalError:  # a state file from before the meta table
            return []
    if row is None:
        return []
    try:
        value = json.loads(row[0])
    except ValueError:
        return []
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
