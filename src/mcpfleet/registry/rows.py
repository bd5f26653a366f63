"""The served catalogue's rows, and reading them from the database without SQLAlchemy.

`CatalogueRow` and the names of the columns and tables it is read from are declared here, free of
SQLAlchemy, and `store.py` builds its tables' queries from them. `read_sqlite` reads the stored
catalogue with the standard library's `sqlite3`, `read_postgres` with asyncpg (the driver the
store's SQLAlchemy engine uses on PostgreSQL), read-only: a read-only registry serves it while
SQLAlchemy loads and the store opens (about a third of a start on an existing database, issue 17;
`RegistryService.start`). Both answer None when the database is not there, cannot be read or is
not at the schema this version writes (then the store opens first, migrating, as before).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

# The newest migration's revision; a test checks it against alembic's head.
SCHEMA_HEAD = "0002"
VERSION_TABLE = "registry_alembic_version"  # as migrations/env.py names it
SERVERS_TABLE = "registry_servers"
META_TABLE = "registry_meta"


# Not frozen: a frozen dataclass sets each field through `object.__setattr__`, which made building
# the rows of 10,000 entries 3.5x slower (~20 ms of a start); nothing assigns to a row.
@dataclass(slots=True)
class CatalogueRow:
    name: str
    version: str
    status: str
    is_latest: bool
    published_at: str
    updated_at: str
    status_changed_at: str
    document: bytes
    """The stored server.json, UTF-8: spliced into the served body as it is."""
    status_message: str | None = None


CATALOGUE_COLUMNS = (
    "name",
    "version",
    "status",
    "is_latest",
    "published_at",
    "updated_at",
    "status_changed_at",
    "document",
    "status_message",
)
"""The columns of `registry_servers` a `CatalogueRow` holds, in its field order."""

# The three reads of a stored catalogue (in one read transaction). The document is read as bytes
# where the driver can be asked to: decoding 6.5 MB of JSON text into str at start-up, only to
# encode it again when the body is built, was a third of reading the rows (SQLite, measured).
_VERSION_SQL = f"SELECT version_num FROM {VERSION_TABLE}"
_GENERATION_SQL = f"SELECT generation FROM {META_TABLE} WHERE id = 1"


def _rows_sql(document_as_bytes: str) -> str:
    columns = [document_as_bytes if c == "document" else c for c in CATALOGUE_COLUMNS]
    return f"SELECT {', '.join(columns)} FROM {SERVERS_TABLE}"


_SQLITE_ROWS_SQL = _rows_sql("CAST(document AS BLOB)")
_POSTGRES_ROWS_SQL = _rows_sql("convert_to(document, 'UTF8')")


def row_of(r: tuple[Any, ...]) -> CatalogueRow:
    """A row of CATALOGUE_COLUMNS as a CatalogueRow (SQLite stores booleans as integers; the
    document comes as text from SQLAlchemy, as bytes from the start-up readers)."""
    document = r[7]
    if isinstance(document, str):
        document = document.encode()
    return CatalogueRow(r[0], r[1], r[2], bool(r[3]), r[4], r[5], r[6], document, r[8])


def sqlite_path(url: str | None, default_path: Path) -> Path | None:
    """The file of an SQLite database URL as `store.database_url` opens it (None: not a plain
    SQLite file URL, e.g. PostgreSQL, an in-memory database or URL parameters)."""
    if url is None:
        return default_path
    prefix = "sqlite+aiosqlite:///"
    if not url.startswith(prefix) or "?" in url or url == prefix or ":memory:" in url:
        return None
    return Path(url[len(prefix) :])


def read_sqlite(
    path: Path, convert: Callable[[list[CatalogueRow]], list[T]], chunk: int = 1000
) -> tuple[int, list[T]] | None:
    """The generation and `convert` of every row of the catalogue stored in `path`, `chunk` rows
    at a time (as `Store.catalogue_items` reads it); None when there is no database at the current
    schema there. Blocking: run it in a thread."""
    if not path.is_file():
        return None
    # Read-write like the store (a read-only open of a WAL database can fail on its -shm file);
    # nothing is written.
    try:
        db = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        db.execute("BEGIN")  # one read transaction: the generation and the rows of the same commit
        version = db.execute(_VERSION_SQL).fetchone()
        if version is None or version[0] != SCHEMA_HEAD:
            return None
        meta = db.execute(_GENERATION_SQL).fetchone()
        out: list[T] = []
        cursor = db.execute(_SQLITE_ROWS_SQL)
        while part := cursor.fetchmany(chunk):
            out.extend(convert([row_of(r) for r in part]))
        return int(meta[0] if meta else 0), out
    except sqlite3.DatabaseError:  # not a database, or no such table: not one this version made
        return None
    finally:
        db.close()


def postgres_dsn(url: str | None) -> str | None:
    """The asyncpg DSN of a PostgreSQL store URL (None: not a plain `postgresql+asyncpg://` URL;
    URL parameters are SQLAlchemy's to interpret, so such a URL is left to the store)."""
    prefix = "postgresql+asyncpg://"
    if url is None or not url.startswith(prefix) or "?" in url:
        return None
    return "postgresql://" + url[len(prefix) :]


async def read_postgres(
    dsn: str,
    convert: Callable[[list[CatalogueRow]], list[T]],
    password: str | None = None,
    chunk: int = 1000,
    connect_timeout: float = 10.0,
) -> tuple[int, list[T]] | None:
    """The generation and `convert` of every row of the catalogue stored in the PostgreSQL
    database at `dsn`, `chunk` rows at a time, in one read-only repeatable-read transaction (the
    generation and the rows of the same commit); None when it cannot be read for any reason (no
    schema yet, another schema version, a connection or permission error): the store then opens
    first and reports what is wrong."""
    import asyncpg

    try:
        conn = await asyncpg.connect(dsn, password=password, timeout=connect_timeout)
    except Exception as exc:  # (any doubt: the store's own open reports the error)
        log.info("stored catalogue not read before the store opens: %s", exc)
        return None
    try:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            version = await conn.fetchval(_VERSION_SQL)
            if version != SCHEMA_HEAD:
                return None
            generation = await conn.fetchval(_GENERATION_SQL)
            out: list[T] = []
            cursor = await conn.cursor(_POSTGRES_ROWS_SQL)
            while part := await cursor.fetch(chunk):
                out.extend(convert([row_of(tuple(r)) for r in part]))
            return int(generation or 0), out
    except Exception as exc:  # no such table, a permission refused, a dropped connection
        log.info("stored catalogue not read before the store opens: %s", exc)
        return None
    finally:
        with contextlib.suppress(Exception):
            await conn.close(timeout=connect_timeout)
