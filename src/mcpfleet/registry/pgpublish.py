"""Publishing one version on PostgreSQL in two round trips (issue 32).

The general path (`Store.publish`: SQLAlchemy Core, one transaction) costs nine round trips and
~4 ms of Python per publish, most of it building and compiling statements. A publish touches one
name, so here, on the asyncpg connection under the engine's pool entry:

1. one query reads that name's source entries (of the merged sources) and its served rows;
2. `merge.plan_merge` decides in Python, exactly as the general path does;
3. one statement writes everything — the source entry, the served row, the re-flagged and
   tombstoned rows, the generation — as data-modifying CTEs, one implicit transaction: all or nothing.

The version being taken (published before, or served) is seen in the read; a concurrent publish of
the same version from another replica fails the write on a primary key, as on the general path.
When the plan needs any other document than the one being published (a source that now wins or
loses other versions' content), this path steps aside (`None`) and the general one runs.
The rows of the name as served afterwards come from what was read and written, not a third read.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from mcpfleet.registry.entry import PUBLISHED, STATUS_DELETED, Entry
from mcpfleet.registry.merge import KnownDocs, now_iso, plan_merge, winners
from mcpfleet.registry.rows import META_TABLE, SERVERS_TABLE, CatalogueRow

SOURCE_ENTRIES_TABLE = "registry_source_entries"

# Kind 0: a source entry (source, name, version, status, content hash); kind 1: a served row.
_READ_SQL = f"""
SELECT 0, source::text, name::text, version::text, status::text, content_hash::text,
       NULL::text, NULL::boolean, NULL::text, NULL::text, NULL::bytea, NULL::text
  FROM {SOURCE_ENTRIES_TABLE} WHERE source = ANY($1::text[]) AND name = $2
UNION ALL
SELECT 1, source::text, name::text, version::text, status::text, content_hash::text,
       published_at::text, is_latest, updated_at::text, status_changed_at::text,
       convert_to(document, 'UTF8'), status_message
  FROM {SERVERS_TABLE} WHERE name = $2
"""

# Every data-modifying CTE runs to completion whether or not the final SELECT reads it; the sets of
# rows they touch are disjoint (a new row, re-flagged ones, tombstoned ones), as PostgreSQL requires.
_WRITE_SQL = f"""
WITH published AS (
  INSERT INTO {SOURCE_ENTRIES_TABLE} (source, name, version, status, content_hash, document)
  VALUES ($1, $2, $3, $4, $5, $6)
), served AS (
  INSERT INTO {SERVERS_TABLE} (name, version, source, status, is_latest, published_at, updated_at,
                               status_changed_at, content_hash, document)
  SELECT $2, $3, $1, $4, $7, $8, $9, $9, $5, $6 WHERE $10
), flagged AS (
  UPDATE {SERVERS_TABLE} s SET is_latest = f.is_latest, updated_at = $9
    FROM unnest($11::text[], $12::boolean[]) AS f(version, is_latest)
   WHERE s.name = $2 AND s.version = f.version
), tombstoned AS (
  UPDATE {SERVERS_TABLE} s
     SET status = '{STATUS_DELETED}', is_latest = false, updated_at = $9, status_changed_at = $9
   WHERE s.name = $2 AND s.version = ANY($13::text[])
)
UPDATE {META_TABLE} SET generation = generation + $14 WHERE id = 1 RETURNING generation
"""


class _Served:
    """A served row as read: what `plan_merge` compares, and the rest of its catalogue row."""

    __slots__ = ("content_hash", "is_latest", "published_at", "row", "source", "status")

    def __init__(self, record: Any) -> None:
        self.source, self.status, self.content_hash = record[1], record[4], record[5]
        self.published_at, self.is_latest = record[6], record[7]
        self.row = CatalogueRow(
            record[2],
            record[3],
            record[4],
            bool(record[7]),
            record[6],
            record[8],
            record[9],
            record[10],
            record[11],
        )


class PostgresPublisher:
    """Publishes on one connection of the engine's pool, kept between publishes: publishes take the
    registry's write lock one at a time anyway, and checking a connection out of the pool costs a
    pre-ping (three round trips) and SQLAlchemy's checkout each time (~1 ms of CPU, measured). A
    connection found dead when a publish starts is replaced once."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._conn: AsyncConnection | None = None
        self._lock = asyncio.Lock()

    async def close(self) -> None:
        async with self._lock:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                await conn.close()

    async def _driver(self) -> Any:
        if self._conn is None:
            self._conn = await self.engine.connect()
        raw = await self._conn.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None, "no asyncpg connection behind the pool entry"
        return driver

    async def _drop(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            with contextlib.suppress(Exception):
                await conn.invalidate()
                await conn.close()

    async def publish(
        self, entry: Entry, document: str, digest: str, order: list[str]
    ) -> tuple[bool, int, list[CatalogueRow]] | None:
        """Publish `entry` (its `document` and content hash `digest`) and merge its name.
        Returns (published, generation, the name's served rows); published False: that version was
        published before or is served (nothing written). None: this path does not apply, use the
        general one."""
        import asyncpg

        async with self._lock:
            for attempt in (1, 2):
                try:
                    driver = await self._driver()
                    records = await driver.fetch(_READ_SQL, [*order, PUBLISHED], entry.name)
                    break
                except (OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError):
                    await self._drop()  # (a connection closed by the server while kept: once more)
                    if attempt == 2:
                        raise
            sources = [(r[1], r[2], r[3], r[4], r[5]) for r in records if r[0] == 0]
            current = {(r[2], r[3]): _Served(r) for r in records if r[0] == 1}
            if entry.key in current or any(s[0] == PUBLISHED and s[2] == entry.version for s in sources):
                return False, 0, []
            sources.append((PUBLISHED, entry.name, entry.version, entry.status, digest))
            known: KnownDocs = {PUBLISHED: {entry.key: (document, digest)}}
            plan = plan_merge(winners(sources, order), current, known, now_iso())
            if plan.updates or any(key != (PUBLISHED, *entry.key) for key in plan.need_doc):
                return None
            insert = plan.inserts[0] if plan.inserts else None
            changed = bool(plan.inserts or plan.flag_updates or plan.tombstones)
            try:
                generation = await driver.fetchval(
                    _WRITE_SQL,
                    PUBLISHED,
                    entry.name,
                    entry.version,
                    entry.status,
                    digest,
                    document,
                    bool(insert and insert["is_latest"]),
                    insert["published_at"] if insert else plan.now,
                    plan.now,
                    insert is not None,
                    [f["k_version"] for f in plan.flag_updates],
                    [f["is_latest"] for f in plan.flag_updates],
                    [t["k_version"] for t in plan.tombstones],
                    1 if changed else 0,
                )
            except asyncpg.UniqueViolationError:
                return False, 0, []  # a concurrent publish of the same version (another replica) won
            except (OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError):
                await self._drop()  # (not retried: the write may have committed)
                raise
        return True, int(generation or 0), _rows_after(current, plan, insert, document)


def _rows_after(
    current: dict[tuple[str, str], _Served], plan: Any, insert: Any, document: str
) -> list[CatalogueRow]:
    """The name's served rows as the write left them."""
    flags = {f["k_version"]: f["is_latest"] for f in plan.flag_updates}
    tombstones = {t["k_version"] for t in plan.tombstones}
    rows = []
    for (_name, version), served in current.items():
        row = served.row
        if version in flags:
            row.is_latest, row.updated_at = flags[version], plan.now
        elif version in tombstones:
            row.status, row.is_latest = STATUS_DELETED, False
            row.updated_at = row.status_changed_at = plan.now
        rows.append(row)
    if insert is not None:
        rows.append(
            CatalogueRow(
                insert["name"],
                insert["version"],
                insert["status"],
                insert["is_latest"],
                insert["published_at"],
                insert["updated_at"],
                insert["status_changed_at"],
                document.encode(),
                None,
            )
        )
    return rows
