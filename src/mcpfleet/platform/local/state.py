"""The local platform's state: one SQLite file in the state dir (the standard library's sqlite3).

Owns four tables: `objects` (each manifest as last loaded, its local generation and its status,
in exactly the Kubernetes status shape), `processes` (what `up` started: pid, port, log file),
`ports` (persisted port allocations, see `ports`) and `meta` (small key / value facts such as the
`up` pid and the last load errors). Readers are other processes too (`mcpfleet get`, `mcpfleet
down`, the vMCP and registry discovery), so the file runs in WAL mode and every operation is a
short transaction.

The state files (state.db and its -wal / -shm) are owner-only (0600, `private_state_files`): the
manifests they hold may carry credentials (an MCPRemoteProxy's `remoteURL`).

Plain SQL, not an ORM: four tables of a few columns, and `mcpfleet up` reaches its first spawn
without loading SQLAlchemy (~0.2-0.3 s of imports). The tables are the ones the earlier SQLAlchemy
models created (same names, columns and constraints), so a state dir written by an older `up`
opens unchanged. Each `State` has one connection, used only by its own worker thread; every
operation is one function run there (one hand-over between the event loop and the thread per
operation, not one per statement: under load each hand-over waits for a CPU), so operations are
serialised and each is its own transaction, completed even when its caller is cancelled.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from mcpfleet.api.meta import now_rfc3339
from mcpfleet.platform.local.snapshot import DB_FILENAME, RecordedProcess, StoredObject

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS objects (
        kind VARCHAR NOT NULL,
        namespace VARCHAR NOT NULL,
        name VARCHAR NOT NULL,
        manifest TEXT NOT NULL,
        spec_hash VARCHAR NOT NULL,
        generation INTEGER NOT NULL,
        status TEXT NOT NULL,
        source VARCHAR NOT NULL,
        created VARCHAR NOT NULL,
        PRIMARY KEY (kind, namespace, name)
    )""",
    """CREATE TABLE IF NOT EXISTS processes (
        "key" VARCHAR NOT NULL,
        kind VARCHAR NOT NULL,
        name VARCHAR NOT NULL,
        pid INTEGER,
        port INTEGER,
        log_path VARCHAR NOT NULL,
        restarts INTEGER NOT NULL,
        started VARCHAR NOT NULL,
        PRIMARY KEY ("key")
    )""",
    """CREATE TABLE IF NOT EXISTS ports (
        "key" VARCHAR NOT NULL,
        port INTEGER NOT NULL,
        PRIMARY KEY ("key"),
        UNIQUE (port)
    )""",
    """CREATE TABLE IF NOT EXISTS meta (
        "key" VARCHAR NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY ("key")
    )""",
)
T = TypeVar("T")
_OBJECT_COLUMNS = "kind, namespace, name, manifest, generation, status, source, created"


STATE_FILES = (DB_FILENAME, f"{DB_FILENAME}-wal", f"{DB_FILENAME}-shm")
"""The SQLite file and its WAL companions (SQLite creates those with the main file's mode)."""


def private_state_files(state_dir: Path) -> None:
    """Make the state files owner-only (0600): they hold every manifest, credentials in an
    MCPRemoteProxy's `remoteURL` included.

    A new state.db is created 0600 (O_EXCL) before SQLite opens it, so it is never readable by others;
    existing files are narrowed by path (`os.chmod`). Never by opening and closing a descriptor: in a
    process that has an SQLite connection on the file, closing any descriptor of it drops that
    process's POSIX locks on it, and SQLite's WAL then loses writes.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.close(os.open(state_dir / DB_FILENAME, flags, 0o600))
    except (FileExistsError, FileNotFoundError):
        pass  # exists (narrowed below, by path); or no folder yet (SQLite says so)
    for name in STATE_FILES:
        path = state_dir / name
        try:
            if not path.is_symlink() and path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
        except FileNotFoundError:
            continue


def spec_hash(manifest: dict[str, Any]) -> str:
    """What bumps the generation: the spec, as on Kubernetes (labels and annotations do not)."""
    return hashlib.sha256(json.dumps(manifest.get("spec") or {}, sort_keys=True).encode()).hexdigest()


def _object(row: Iterable[Any]) -> StoredObject:
    kind, namespace, name, manifest, generation, status, source, created = row
    return StoredObject(
        kind=kind,
        namespace=namespace,
        name=name,
        manifest=json.loads(manifest),
        generation=generation,
        status=json.loads(status or "{}"),
        source=source,
        created=created,
    )


class State:
    """Async access to the state file. Create with `await State.open(state_dir)`; `close()` at the end."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self._db: sqlite3.Connection | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcpfleet-state")

    @classmethod
    async def open(cls, state_dir: Path, create: bool = True) -> State:
        """With `create`, the folder and tables are made now; without (a reader in another
        process), nothing is touched until the first query."""
        state = cls(state_dir)
        if create:

            def schema(db: sqlite3.Connection) -> None:
                for statement in SCHEMA:
                    db.execute(statement)

            await asyncio.to_thread(state_dir.mkdir, parents=True, exist_ok=True)
            await state._write(schema)
        return state

    async def close(self) -> None:
        def close(db: sqlite3.Connection | None) -> None:
            if db is not None:
                db.close()

        # The thread stays (it ends with the State): a closed State reconnects if used again.
        db, self._db = self._db, None
        await asyncio.get_running_loop().run_in_executor(self._thread, close, db)

    def _connection(self) -> sqlite3.Connection:
        """The connection (opened at first use), on the state's own thread only."""
        if self._db is None:
            private_state_files(self.state_dir)
            # Autocommit: reads are single statements; writes open their transaction explicitly.
            db = sqlite3.connect(
                self.state_dir / DB_FILENAME, timeout=5, isolation_level=None, check_same_thread=False
            )
            try:
                db.execute("PRAGMA busy_timeout=5000")  # first: the next pragma may wait for a lock
                # WAL: `mcpfleet get` and the discovery readers never block the reconcile loop's writes.
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
            except BaseException:
                db.close()
                raise
            self._db = db
        return self._db

    async def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, lambda: work(self._connection())
        )

    async def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` in one write transaction (BEGIN IMMEDIATE: the write lock is taken, or waited
        for, up front)."""

        def transaction() -> T:
            db = self._connection()
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result

        return await asyncio.get_running_loop().run_in_executor(self._thread, transaction)

    # -- objects ------------------------------------------------------------------------------

    async def upsert_object(
        self, kind: str, namespace: str, name: str, manifest: dict[str, Any], source: str
    ) -> StoredObject:
        """Store the manifest; the generation goes up by one when the spec changed."""
        digest = spec_hash(manifest)
        encoded = json.dumps(manifest)
        key = (kind, namespace, name)

        def upsert(db: sqlite3.Connection) -> StoredObject:
            row = db.execute(
                "SELECT manifest, spec_hash, generation, status, source, created FROM objects "
                "WHERE kind = ? AND namespace = ? AND name = ?",
                key,
            ).fetchone()
            if row is None:
                created = now_rfc3339()
                db.execute(
                    f"INSERT INTO objects ({_OBJECT_COLUMNS}, spec_hash) "
                    "VALUES (?, ?, ?, ?, 1, '{}', ?, ?, ?)",
                    (*key, encoded, source, created, digest),
                )
                return StoredObject(kind, namespace, name, manifest, 1, {}, source, created)
            old_manifest, old_digest, generation, status, old_source, created = row
            if old_digest != digest:
                generation += 1
            # An unchanged re-read writes nothing.
            if old_digest != digest or old_manifest != encoded or old_source != source:
                db.execute(
                    "UPDATE objects SET manifest = ?, spec_hash = ?, generation = ?, source = ? "
                    "WHERE kind = ? AND namespace = ? AND name = ?",
                    (encoded, digest, generation, source, *key),
                )
            return _object((*key, encoded, generation, status, source, created))

        return await self._write(upsert)

    async def delete_object(self, kind: str, namespace: str, name: str) -> None:
        await self._write(
            lambda db: db.execute(
                "DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?", (kind, namespace, name)
            )
        )

    async def objects(self, kind: str | None = None) -> list[StoredObject]:
        query = f"SELECT {_OBJECT_COLUMNS} FROM objects"
        params: tuple[str, ...] = ()
        if kind is not None:
            query += " WHERE kind = ?"
            params = (kind,)
        rows = await self._read(
            lambda db: db.execute(query + " ORDER BY kind, namespace, name", params).fetchall()
        )
        return [_object(r) for r in rows]

    async def get_object(self, kind: str, namespace: str, name: str) -> StoredObject | None:
        row = await self._read(
            lambda db: db.execute(
                f"SELECT {_OBJECT_COLUMNS} FROM objects WHERE kind = ? AND namespace = ? AND name = ?",
                (kind, namespace, name),
            ).fetchone()
        )
        return None if row is None else _object(row)

    async def set_status(self, kind: str, namespace: str, name: str, status: dict[str, Any]) -> bool:
        """Write the status; returns False (and writes nothing) when it is unchanged."""
        encoded = json.dumps(status, sort_keys=True)
        changed = await self._write(
            lambda db: (
                db.execute(
                    "UPDATE objects SET status = ? WHERE kind = ? AND namespace = ? AND name = ? AND status != ?",
                    (encoded, kind, namespace, name, encoded),
                ).rowcount
            )
        )
        return changed > 0

    # -- processes ----------------------------------------------------------------------------

    async def record_process(
        self, key: str, kind: str, name: str, pid: int, port: int | None, log_path: str, restarts: int
    ) -> None:
        row = (key, kind, name, pid, port, log_path, restarts, now_rfc3339())
        await self._write(
            lambda db: db.execute(
                'INSERT OR REPLACE INTO processes ("key", kind, name, pid, port, log_path, restarts, started) '
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
        )

    async def forget_process(self, key: str) -> None:
        await self._write(lambda db: db.execute('DELETE FROM processes WHERE "key" = ?', (key,)))

    async def processes(self) -> list[RecordedProcess]:
        rows = await self._read(
            lambda db: db.execute(
                'SELECT "key", kind, name, pid, port, log_path FROM processes ORDER BY "key"'
            ).fetchall()
        )
        return [RecordedProcess(*row) for row in rows]

    # -- ports --------------------------------------------------------------------------------

    async def ports(self) -> dict[str, int]:
        rows = await self._read(lambda db: db.execute('SELECT "key", port FROM ports').fetchall())
        return {key: port for key, port in rows}

    async def save_port(self, key: str, port: int) -> None:
        """Hold `port` for `key` (`sqlite3.IntegrityError` when another key holds it)."""
        await self._write(
            lambda db: db.execute(
                'INSERT INTO ports ("key", port) VALUES (?, ?) '
                'ON CONFLICT ("key") DO UPDATE SET port = excluded.port',
                (key, port),
            )
        )

    async def release_port(self, key: str) -> None:
        await self._write(lambda db: db.execute('DELETE FROM ports WHERE "key" = ?', (key,)))

    # -- meta ---------------------------------------------------------------------------------

    async def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            await self._write(lambda db: db.execute('DELETE FROM meta WHERE "key" = ?', (key,)))
        else:
            await self._write(
                lambda db: db.execute(
                    'INSERT OR REPLACE INTO meta ("key", value) VALUES (?, ?)', (key, value)
                )
            )

    async def get_meta(self, key: str) -> str | None:
        row = await self._read(
            lambda db: db.execute('SELECT value FROM meta WHERE "key" = ?', (key,)).fetchone()
        )
        return None if row is None else str(row[0])
