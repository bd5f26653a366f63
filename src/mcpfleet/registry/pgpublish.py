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
from mcpfleet.registry.merge import KnownDocs, MergePlan, now_iso, plan_merge, winners
from mcpfleet.registry.rows import META_TABLE, SERVERS_TABLE, CatalogueRow

SOURCE_ENTRIES_TABLE = "registry_source_entries"

# Kind 0: a source entry (source, name, version, status, content hash); kind 1: a served row.
_READ_SQL = f"""
SELECT 0, source::text, name::text, version::text, status::text, content_hash::text,
       NULL::text, NULL::boolean, NULL::text, NULL::text, NULL::bytea, NULL::text
  FROM {SOURCE_ENTRIES_TABLE} WHERE source = ANY($1::text[]) AND name = ANY($2::text[])
UNION ALL
SELECT 1, source::text, name::text, version::text, status::text, content_hash::text,
       published_at::text, is_latest, updated_at::text, status_changed_at::text,
       convert_to(document, 'UTF8'), status_message
  FROM {SERVERS_TABLE} WHERE name = ANY($2::text[])
"""

# Every data-modifying CTE runs to completion whether or not the final statement reads it; the rows
# they touch are disjoint (new rows, re-flagged ones, tombstoned ones), as PostgreSQL requires.
# $1: the published source, $2: the time of this write.
_WRITE_SQL = f"""
WITH published AS (
  INSERT INTO {SOURCE_ENTRIES_TABLE} (source, name, version, status, content_hash, document)
  SELECT $1, * FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
), served AS (
  INSERT INTO {SERVERS_TABLE} (name, version, source, status, is_latest, published_at, updated_at,
                               status_changed_at, content_hash, document)
  SELECT i.n, i.v, $1, i.s, i.l, $2, $2, $2, i.h, i.d
    FROM unnest($8::text[], $9::text[], $10::text[], $11::boolean[], $12::text[], $13::text[])
         AS i(n, v, s, l, h, d)
), flagged AS (
  UPDATE {SERVERS_TABLE} s SET is_latest = f.l, updated_at = $2
    FROM unnest($14::text[], $15::text[], $16::boolean[]) AS f(n, v, l)
   WHERE s.name = f.n AND s.version = f.v
), tombstoned AS (
  UPDATE {SERVERS_TABLE} s
     SET status = '{STATUS_DELETED}', is_latest = false, updated_at = $2, status_changed_at = $2
    FROM unnest($17::text[], $18::text[]) AS t(n, v)
   WHERE s.name = t.n AND s.version = t.v
)
UPDATE {META_TABLE} SET generation = generation + $19 WHERE id = 1 RETURNING generation
"""

Outcome = tuple[bool, int, list[CatalogueRow]] | None
"""Of one publish: (published, generation, the name's served rows); published False: that version
was published before or is served (nothing written); None: left to the general path."""


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

    async def publish_many(self, batch: list[tuple[Entry, str, str]], order: list[str]) -> list[Outcome]:
        """Publish each (entry, document, content hash) of `batch` — distinct names — and merge
        their names, in one read and one write; the outcome of each, in `batch`'s order. Written
        ones get consecutive generations in `batch`'s order (a publish that changes nothing
        served keeps the generation before it)."""
        import asyncpg

        names = [entry.name for entry, _d, _h in batch]
        assert len(set(names)) == len(names), "one publish per name in a batch"
        async with self._lock:
            for attempt in (1, 2):
                try:
                    driver = await self._driver()
                    records = await driver.fetch(_READ_SQL, [*order, PUBLISHED], names)
                    break
                except (OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError):
                    await self._drop()  # (a connection closed by the server while kept: once more)
                    if attempt == 2:
                        raise
            now = now_iso()
            plans = _plans(batch, records, order, now)
            write = _Write()
            for (entry, document, digest), planned in zip(batch, plans, strict=True):
                if isinstance(planned, tuple):
                    write.add(entry, document, digest, *planned)
            if not write.entries:
                return [None if p is None else (False, 0, []) for p in plans]
            try:
                generation = int(await driver.fetchval(_WRITE_SQL, PUBLISHED, now, *write.arguments()) or 0)
            except asyncpg.UniqueViolationError:
                # Another replica published one of these versions meanwhile: nothing was written;
                # each goes again alone on the general path, which tells the duplicate apart.
                return [None] * len(batch)
            except (OSError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError):
                await self._drop()  # (not retried: the write may have committed)
                raise
        return write.outcomes(plans, generation)


def _plans(
    batch: list[tuple[Entry, str, str]], records: list[Any], order: list[str], now: str
) -> list[tuple[MergePlan, dict[tuple[str, str], _Served]] | bool | None]:
    """Per publish: (its name's plan, the name's served rows) to write; False: the version is taken;
    None: the plan needs another document than the published one (the general path's case)."""
    sources: dict[str, list[tuple[str, str, str, str, str]]] = {}
    served: dict[str, dict[tuple[str, str], _Served]] = {}
    for r in records:
        if r[0] == 0:
            sources.setdefault(r[2], []).append((r[1], r[2], r[3], r[4], r[5]))
        else:
            served.setdefault(r[2], {})[(r[2], r[3])] = _Served(r)
    out: list[tuple[MergePlan, dict[tuple[str, str], _Served]] | bool | None] = []
    for entry, document, digest in batch:
        rows = sources.get(entry.name, [])
        current = served.get(entry.name, {})
        if entry.key in current or any(s[0] == PUBLISHED and s[2] == entry.version for s in rows):
            out.append(False)
            continue
        rows.append((PUBLISHED, entry.name, entry.version, entry.status, digest))
        known: KnownDocs = {PUBLISHED: {entry.key: (document, digest)}}
        plan = plan_merge(winners(rows, order), current, known, now)
        if plan.updates or any(key != (PUBLISHED, *entry.key) for key in plan.need_doc):
            out.append(None)
        else:
            out.append((plan, current))
    return out


class _Write:
    """The arrays of one batched write, and the outcomes it leads to."""

    def __init__(self) -> None:
        self.entries: list[tuple[Entry, str, str, MergePlan, dict[tuple[str, str], _Served]]] = []

    def add(
        self,
        entry: Entry,
        document: str,
        digest: str,
        plan: MergePlan,
        current: dict[tuple[str, str], _Served],
    ) -> None:
        self.entries.append((entry, document, digest, plan, current))

    def arguments(self) -> list[Any]:
        published: list[list[Any]] = [[], [], [], [], []]
        inserted: list[list[Any]] = [[], [], [], [], [], []]
        flagged: list[list[Any]] = [[], [], []]
        tombstoned: list[list[Any]] = [[], []]
        changed = 0
        for entry, document, digest, plan, _current in self.entries:
            for column, value in zip(
                published, (entry.name, entry.version, entry.status, digest, document), strict=True
            ):
                column.append(value)
            for row in plan.inserts:  # (only ever the published version: see `_plans`)
                values = (row["name"], row["version"], row["status"], row["is_latest"], digest, document)
                for column, value in zip(inserted, values, strict=True):
                    column.append(value)
            for row in plan.flag_updates:
                for column, value in zip(
                    flagged, (row["k_name"], row["k_version"], row["is_latest"]), strict=True
                ):
                    column.append(value)
            for row in plan.tombstones:
                for column, value in zip(tombstoned, (row["k_name"], row["k_version"]), strict=True):
                    column.append(value)
            changed += _changed(plan)
        return [*published, *inserted, *flagged, *tombstoned, changed]

    def outcomes(
        self, plans: list[tuple[MergePlan, dict[tuple[str, str], _Served]] | bool | None], last: int
    ) -> list[Outcome]:
        generation = last - sum(_changed(plan) for _e, _d, _h, plan, _c in self.entries)
        written = iter(self.entries)
        out: list[Outcome] = []
        for planned in plans:
            if planned is None:
                out.append(None)
            elif planned is False:
                out.append((False, 0, []))
            else:
                _entry, document, _digest, plan, current = next(written)
                generation += _changed(plan)
                out.append((True, generation, _rows_after(current, plan, document)))
        return out


def _changed(plan: MergePlan) -> int:
    return 1 if plan.inserts or plan.flag_updates or plan.tombstones else 0


def _rows_after(
    current: dict[tuple[str, str], _Served], plan: MergePlan, document: str
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
    for insert in plan.inserts:
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
