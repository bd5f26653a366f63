"""Persistent catalogue (SQLAlchemy 2 Core, async): SQLite by default, PostgreSQL when configured.

Tables:
- `registry_source_entries`: the last good entries of each source (so a failing source keeps serving);
- `registry_servers`: the merged catalogue the API serves, with registry-managed timestamps, `isLatest`
  and tombstones (status `deleted`) for entries that left every source;
- `registry_source_state`: per-source sync bookkeeping (content/filter hash, last error);
- `registry_meta`: the catalogue generation, bumped by every sync that changes `registry_servers`.

Published entries (`POST /v0.1/publish`) are the entries of one more source, `PUBLISHED`, a name no
configured source can take (not a DNS label); they merge with the synced sources by the position the
config gives that name in the merge order, and are never pruned with the sources that left the config.
The schema is created by the alembic migrations shipped in `mcpfleet.registry.migrations`.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Integer,
    MetaData,
    Select,
    String,
    Table,
    Text,
    and_,
    bindparam,
    delete,
    event,
    exists,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from mcpfleet.registry import pgpublish
from mcpfleet.registry.entry import PUBLISHED, STATUS_DELETED, Entry
from mcpfleet.registry.merge import now_iso, plan_merge, winners
from mcpfleet.registry.rows import (
    CATALOGUE_COLUMNS,
    META_TABLE,
    SCHEMA_HEAD,
    SERVERS_TABLE,
    VERSION_TABLE,
    CatalogueRow,
    row_of,
)
from mcpfleet.registry.wal import WalCheckpointer

metadata = MetaData()

servers = Table(
    SERVERS_TABLE,
    metadata,
    Column("name", String(200), primary_key=True),
    Column("version", String(255), primary_key=True),
    Column("source", String(63), nullable=False),
    Column("status", String(16), nullable=False),
    Column("is_latest", Boolean, nullable=False),
    Column("published_at", String(32), nullable=False),
    Column("updated_at", String(32), nullable=False),
    Column("status_changed_at", String(32), nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("document", Text, nullable=False),
    Column("status_message", Text, nullable=True),
)

source_entries = Table(
    "registry_source_entries",
    metadata,
    Column("source", String(63), primary_key=True),
    Column("name", String(200), primary_key=True),
    Column("version", String(255), primary_key=True),
    Column("status", String(16), nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("document", Text, nullable=False),
    Column("status_message", Text, nullable=True),
)

source_state = Table(
    "registry_source_state",
    metadata,
    Column("source", String(63), primary_key=True),
    Column("content_hash", String(64), nullable=True),
    Column("filter_hash", String(64), nullable=True),
    Column("last_attempt", String(32), nullable=True),
    Column("last_success", String(32), nullable=True),
    Column("last_error", Text, nullable=True),
    Column("entry_count", Integer, nullable=False, default=0),
    Column("entry_errors", Text, nullable=False, default="[]"),
)

registry_meta = Table(
    META_TABLE,
    metadata,
    Column("id", Integer, primary_key=True),
    Column("generation", BigInteger, nullable=False),
    Column("merge_order", Text, nullable=True),
)

_CHUNK = 500
_COPY_THRESHOLD = 200
_MIGRATION_LOCK = 0x6D6370726567  # "mcpreg": an arbitrary, fixed advisory lock id


def content_hash(entry: Entry, status_message: str | None = None) -> str:
    parts: list[Any] = [entry.status, entry.server]
    if status_message is not None:
        parts.append(status_message)
    canonical = orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


@dataclass(slots=True)
class SourceState:
    source: str
    content_hash: str | None = None
    filter_hash: str | None = None
    last_attempt: str | None = None
    last_success: str | None = None
    last_error: str | None = None
    entry_count: int = 0
    entry_errors: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class MergeStats:
    added: int = 0
    updated: int = 0
    deleted: int = 0
    generation: int = 0
    rows: list[CatalogueRow] | None = None
    """A publish: the merged catalogue's rows of the published name at `generation`, read in the
    same transaction (what `RegistryService.refresh` serves, without another round of queries)."""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted)


_CATALOGUE_COLUMNS = tuple(servers.c[name] for name in CATALOGUE_COLUMNS)
T = TypeVar("T")


def _order_key(order: list[str]) -> str:
    """The merge order as stored (source names are DNS labels or `@published`: no newline in them)."""
    return "\n".join(order)


def database_url(url: str | None, default_path: Path, password_file: str | None) -> str:
    """The SQLAlchemy URL to open, with the password from `password_file` when given."""
    if url is None:
        return f"sqlite+aiosqlite:///{default_path}"
    if password_file:
        password = Path(password_file).read_text().strip()
        return make_url(url).set(password=password).render_as_string(hide_password=False)
    return url


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the API read while a sync writes; NORMAL is durable enough for a cache of the sources.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    # A 512 KiB page cache per connection instead of 2 MiB: the catalogue is read once per generation
    # into memory and served from there, so a larger cache only adds RSS (pooled connections each hold one).
    cursor.execute("PRAGMA cache_size=-512")
    # Checkpoints run in the background (`WalCheckpointer`), not inside whichever commit crosses
    # the WAL limit: that commit would wait for two fsyncs (a publish's p99).
    cursor.execute("PRAGMA wal_autocheckpoint=0")
    cursor.close()


async def _schema_version(conn: AsyncConnection) -> str | None:
    """The alembic revision the database is at (None: not created yet). Checked first so that a
    start on an up-to-date database does not import and run alembic (a large part of start-up)."""
    if not await conn.run_sync(lambda sync: inspect(sync).has_table(VERSION_TABLE)):
        return None
    value = await conn.scalar(text(f"SELECT version_num FROM {VERSION_TABLE}"))
    return str(value) if value is not None else None


_MIGRATION_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


def _migration_lock() -> asyncio.Lock:
    """One migration at a time per event loop: alembic keeps its migration context in module
    globals, so two registries starting in one process (`mcpfleet up` hosts them) must not
    interleave their migrations."""
    loop = asyncio.get_running_loop()
    lock = _MIGRATION_LOCKS.get(loop)
    if lock is None:
        lock = _MIGRATION_LOCKS[loop] = asyncio.Lock()
    return lock


def _run_migrations(connection: Connection) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")


def _merge_queries(order: list[str], names: set[str] | None) -> tuple[Select[Any], Select[Any]]:
    """What a merge reads: the source entries and the served rows (of `names` only, unless None)."""
    source_query = select(
        source_entries.c.source,
        source_entries.c.name,
        source_entries.c.version,
        source_entries.c.status,
        source_entries.c.content_hash,
    )
    served_query = select(
        servers.c.name,
        servers.c.version,
        servers.c.source,
        servers.c.status,
        servers.c.content_hash,
        servers.c.published_at,
        servers.c.is_latest,
    )
    if names is not None:
        # Sources outside `order` never win (`_winners`): naming them lets the primary key
        # (source, name, version) find the rows instead of a scan of every source entry.
        source_query = source_query.where(
            source_entries.c.source.in_(order), source_entries.c.name.in_(sorted(names))
        )
        served_query = served_query.where(servers.c.name.in_(sorted(names)))
    return source_query, served_query


class Store:
    """All database access of the registry; one instance per process, passed explicitly."""

    def __init__(self, engine: AsyncEngine, checkpointer: WalCheckpointer | None = None) -> None:
        self.engine = engine
        self.checkpointer = checkpointer
        """SQLite: checkpoints the WAL after commits, off the commit path (None: PostgreSQL)."""
        self._pg_publisher: pgpublish.PostgresPublisher | None = None
        """PostgreSQL: publishes on a connection of their own (made at the first publish)."""

    @classmethod
    async def open(
        cls, url: str, migration_url: str | None = None, pool: dict[str, Any] | None = None
    ) -> Store:
        """Connect, migrate to the newest schema and return the store. `migration_url` (PostgreSQL)
        connects as another user for the migrations only; `pool` holds SQLAlchemy pool settings."""
        is_sqlite = url.startswith("sqlite")
        engine = create_async_engine(url, pool_pre_ping=not is_sqlite, **(pool or {}))
        checkpointer: WalCheckpointer | None = None
        if is_sqlite:
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
            if engine.url.database not in (None, "", ":memory:"):
                wal = checkpointer = WalCheckpointer(str(engine.url.database))
                event.listen(engine.sync_engine, "commit", lambda _conn: wal.committed())
        store = cls(engine, checkpointer)
        migrator = engine if migration_url is None or is_sqlite else create_async_engine(migration_url)
        try:
            async with _migration_lock(), migrator.begin() as conn:
                if not is_sqlite:
                    # Replicas sharing PostgreSQL start together: one migrates, the others wait for it.
                    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
                if await _schema_version(conn) != SCHEMA_HEAD:
                    await conn.run_sync(_run_migrations)
        except BaseException:
            if checkpointer is not None:
                await checkpointer.close()  # (its task, started by the migrations' commits)
            raise
        finally:
            if migrator is not engine:
                await migrator.dispose()
        return store

    async def close(self) -> None:
        if self._pg_publisher is not None:
            await self._pg_publisher.close()
        if self.checkpointer is not None:
            await self.checkpointer.close()
        await self.engine.dispose()

    async def generation(self) -> int:
        async with self.engine.connect() as conn:
            value = await conn.scalar(select(registry_meta.c.generation).where(registry_meta.c.id == 1))
        return int(value or 0)

    async def source_states(self) -> dict[str, SourceState]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(source_state))).mappings().all()
        out: dict[str, SourceState] = {}
        for row in rows:
            data = dict(row)
            data["entry_errors"] = orjson.loads(data["entry_errors"] or "[]")
            out[row["source"]] = SourceState(**data)
        return out

    async def save_state(self, state: SourceState) -> None:
        async with self.engine.begin() as conn:
            await self._save_state(conn, state)

    async def _save_state(self, conn: AsyncConnection, state: SourceState) -> None:
        values = {
            "content_hash": state.content_hash,
            "filter_hash": state.filter_hash,
            "last_attempt": state.last_attempt,
            "last_success": state.last_success,
            "last_error": state.last_error,
            "entry_count": state.entry_count,
            "entry_errors": orjson.dumps(state.entry_errors).decode(),
        }
        result = await conn.execute(
            update(source_state).where(source_state.c.source == state.source).values(**values)
        )
        if result.rowcount == 0:
            await conn.execute(insert(source_state).values(source=state.source, **values))

    async def replace_source(self, state: SourceState, entries: list[Entry], order: list[str]) -> MergeStats:
        """Make `entries` the last good data of `state.source`, merge all sources, in one transaction."""
        docs = {e.key: (e, orjson.dumps(e.server).decode(), content_hash(e)) for e in entries}
        async with self.engine.begin() as conn:
            await conn.execute(delete(source_entries).where(source_entries.c.source == state.source))
            rows = [
                {
                    "source": state.source,
                    "name": e.name,
                    "version": e.version,
                    "status": e.status,
                    "content_hash": h,
                    "document": d,
                }
                for e, d, h in docs.values()
            ]
            await _bulk_insert(conn, source_entries, rows)
            await self._save_state(conn, state)
            return await self._merge(
                conn, order, {state.source: {k: (d, h) for k, (_, d, h) in docs.items()}}
            )

    async def source_entries(self, source: str) -> list[Entry]:
        """The last good entries of one source."""
        async with self.engine.connect() as conn:
            result = await conn.execute(
                select(
                    source_entries.c.name,
                    source_entries.c.version,
                    source_entries.c.status,
                    source_entries.c.document,
                ).where(source_entries.c.source == source)
            )
            return [Entry(r[0], r[1], orjson.loads(r[3]), r[2]) for r in result]

    async def prune_sources(self, order: list[str]) -> MergeStats:
        """Drop data of sources no longer configured and re-merge (a config change leaves nothing stale)."""
        async with self.engine.begin() as conn:
            # Published entries stay whatever the config says: switching publishing off must not lose them.
            keep = [*order, PUBLISHED]
            dropped = await conn.execute(delete(source_entries).where(source_entries.c.source.not_in(keep)))
            await conn.execute(delete(source_state).where(source_state.c.source.not_in(keep)))
            merged_with = await conn.scalar(
                select(registry_meta.c.merge_order).where(registry_meta.c.id == 1)
            )
            if not dropped.rowcount and merged_with == _order_key(order):
                # No data dropped and the same precedence as the last merge: the merged catalogue is
                # already right. Skipping the merge keeps a restart fast.
                stats = MergeStats()
                stats.generation = int(
                    await conn.scalar(select(registry_meta.c.generation).where(registry_meta.c.id == 1)) or 0
                )
                return stats
            return await self._merge(conn, order, {})

    async def served(self, name: str) -> list[tuple[str, str, str]]:
        """(version, source, status) of every row of `name` in the merged catalogue, tombstones too."""
        async with self.engine.connect() as conn:
            result = await conn.execute(
                select(servers.c.version, servers.c.source, servers.c.status).where(servers.c.name == name)
            )
            return [(r[0], r[1], r[2]) for r in result]

    async def publish(self, entry: Entry, order: list[str]) -> MergeStats | None:
        """Add one published version and merge; None when (name, version) was published before (any
        status) or is served by any source: versions are immutable."""
        return (await self.publish_many([entry], order))[0]

    async def publish_many(self, entries: list[Entry], order: list[str]) -> list[MergeStats | None]:
        """`publish` of each entry (distinct names), in order: on PostgreSQL in one read and one write
        for all of them (`pgpublish`; the group commit of concurrent publishes), else one
        transaction each. The generations they leave increase in `entries`' order."""
        prepared = [(e, orjson.dumps(e.server).decode(), content_hash(e)) for e in entries]
        outcomes: list[pgpublish.Outcome] = [None] * len(entries)
        if self.engine.dialect.name == "postgresql":
            if self._pg_publisher is None:
                self._pg_publisher = pgpublish.PostgresPublisher(self.engine)
            outcomes = await self._pg_publisher.publish_many(prepared, order)
        out: list[MergeStats | None] = []
        for (entry, document, digest), outcome in zip(prepared, outcomes, strict=True):
            if outcome is None:
                try:
                    out.append(await self._publish_one(entry, document, digest, order))
                except IntegrityError:
                    out.append(None)  # a concurrent publish of the same version (another replica) won
            elif outcome[0]:
                out.append(MergeStats(added=1, generation=outcome[1], rows=outcome[2]))
            else:
                out.append(None)
        return out

    async def _publish_one(
        self, entry: Entry, document: str, digest: str, order: list[str]
    ) -> MergeStats | None:
        async with self.engine.begin() as conn:
            # One query: served, or published before.
            taken = await conn.scalar(
                select(
                    exists().where(servers.c.name == entry.name, servers.c.version == entry.version)
                    | exists().where(
                        source_entries.c.source == PUBLISHED,
                        source_entries.c.name == entry.name,
                        source_entries.c.version == entry.version,
                    )
                )
            )
            if taken:
                return None
            # A concurrent publish of the same version fails here on the primary key (IntegrityError).
            await conn.execute(
                insert(source_entries).values(
                    source=PUBLISHED,
                    name=entry.name,
                    version=entry.version,
                    status=entry.status,
                    content_hash=digest,
                    document=document,
                )
            )
            # Only this name's rows can change (the merge is per name): a scoped merge, not a full one.
            stats = await self._merge(
                conn, order, {PUBLISHED: {entry.key: (document, digest)}}, names={entry.name}
            )
            result = await conn.execute(select(*_CATALOGUE_COLUMNS).where(servers.c.name == entry.name))
            stats.rows = [row_of(tuple(r)) for r in result]
            return stats

    async def replace_published(self, entry: Entry, order: list[str]) -> tuple[str, str, MergeStats] | None:
        """Replace the document of a published version (moderation), keeping its status and message;
        returns the previous and the new content hash and the merge, None when that version was
        never published."""
        document = orjson.dumps(entry.server).decode()
        key = and_(
            source_entries.c.source == PUBLISHED,
            source_entries.c.name == entry.name,
            source_entries.c.version == entry.version,
        )
        async with self.engine.begin() as conn:
            found = (
                await conn.execute(
                    select(
                        source_entries.c.status,
                        source_entries.c.status_message,
                        source_entries.c.content_hash,
                    )
                    .where(key)
                    .with_for_update()
                )
            ).first()
            if found is None:
                return None
            status, message, previous = found
            digest = content_hash(Entry(entry.name, entry.version, entry.server, status), message)
            await conn.execute(
                update(source_entries).where(key).values(document=document, content_hash=digest)
            )
            stats = await self._merge(conn, order, {}, names={entry.name})
            result = await conn.execute(select(*_CATALOGUE_COLUMNS).where(servers.c.name == entry.name))
            stats.rows = [row_of(tuple(r)) for r in result]
            return str(previous), digest, stats

    async def set_published_status(
        self, name: str, version: str | None, status: str, message: str | None, order: list[str]
    ) -> list[str] | None:
        """Set the status (and its message) of one published version (all of them: `version` None)
        and merge; returns the versions changed (empty: they already had that status and message),
        None when none is published."""
        async with self.engine.begin() as conn:
            where = [source_entries.c.source == PUBLISHED, source_entries.c.name == name]
            if version is not None:
                where.append(source_entries.c.version == version)
            rows = (
                await conn.execute(
                    select(
                        source_entries.c.version,
                        source_entries.c.status,
                        source_entries.c.document,
                        source_entries.c.status_message,
                    ).where(*where)
                )
            ).all()
            if not rows:
                return None
            changes = []
            for v, old, document, old_message in rows:
                if old == status and old_message == message:
                    continue
                # The message is part of the hash: a new message alone is a change the merge carries.
                digest = content_hash(Entry(name, v, orjson.loads(document), status), message)
                changes.append({"k_version": v, "status": status, "content_hash": digest, "message": message})
            if changes:
                key = and_(
                    source_entries.c.source == PUBLISHED,
                    source_entries.c.name == name,
                    source_entries.c.version == bindparam("k_version"),
                )
                values: dict[str, Any] = {
                    "status": bindparam("status"),
                    "content_hash": bindparam("content_hash"),
                    "status_message": bindparam("message"),
                }
                await conn.execute(update(source_entries).where(key).values(**values), changes)
                await self._merge(conn, order, {}, names={name})
            return sorted(c["k_version"] for c in changes)

    async def _merge(
        self,
        conn: AsyncConnection,
        order: list[str],
        known_docs: dict[str, dict[tuple[str, str], tuple[str, str]]],
        names: set[str] | None = None,
    ) -> MergeStats:
        """Bring `registry_servers` in line with the source entries and `order`; `names`: only those
        names (a publish or a status change touches one name, and which source wins, which version
        is the latest and what is a tombstone are all decided per name), None: every name."""
        source_query, served_query = _merge_queries(order, names)
        desired = winners((await conn.execute(source_query)).all(), order)
        current = {(r.name, r.version): r for r in (await conn.execute(served_query)).all()}
        plan = plan_merge(desired, current, known_docs, now_iso())
        now, inserts, updates = plan.now, plan.inserts, plan.updates
        flag_updates, tombstones = plan.flag_updates, plan.tombstones
        stats = MergeStats()
        docs = await self._documents(conn, plan.need_doc, known_docs, names)
        for row in inserts:
            row["document"], row["status_message"] = docs[(row["source"], row["name"], row["version"])]
        for row in updates:
            row["document"], row["status_message"] = docs[(row["source"], row["k_name"], row["k_version"])]
        await _bulk_insert(conn, servers, inserts)
        key_match = and_(servers.c.name == bindparam("k_name"), servers.c.version == bindparam("k_version"))
        changed_status = [u for u in updates if u["status_changed_at"] is not None]
        same_status = [u for u in updates if u["status_changed_at"] is None]
        for u in same_status:
            del u["status_changed_at"]
        for batch, stmt in (
            (changed_status, update(servers).where(key_match)),
            (same_status, update(servers).where(key_match)),
            (
                flag_updates,
                update(servers).where(key_match).values(updated_at=now),
            ),
            (
                tombstones,
                update(servers)
                .where(key_match)
                .values(status=STATUS_DELETED, is_latest=False, updated_at=now, status_changed_at=now),
            ),
        ):
            for chunk in _chunks(batch):
                await conn.execute(stmt, chunk)
        stats.added, stats.updated, stats.deleted = (
            len(inserts),
            len(updates) + len(flag_updates),
            len(tombstones),
        )
        # Only a full merge applies the order to every name: a scoped one must not record it.
        await _finish_merge(conn, stats, order if names is None else None)
        return stats

    async def _documents(
        self,
        conn: AsyncConnection,
        keys: list[tuple[str, str, str]],
        known: dict[str, dict[tuple[str, str], tuple[str, str]]],
        names: set[str] | None = None,
    ) -> dict[tuple[str, str, str], tuple[str, str | None]]:
        """(document, status message) of each (source, name, version); `known` documents (just
        written by a sync or a publish) carry no message."""
        out: dict[tuple[str, str, str], tuple[str, str | None]] = {}
        missing: dict[str, set[tuple[str, str]]] = defaultdict(set)
        for src, name, version in keys:
            doc = known.get(src, {}).get((name, version))
            if doc is not None:
                out[(src, name, version)] = (doc[0], None)
            else:
                missing[src].add((name, version))
        for src, wanted in missing.items():
            query = select(
                source_entries.c.name,
                source_entries.c.version,
                source_entries.c.document,
                source_entries.c.status_message,
            ).where(source_entries.c.source == src)
            if names is not None:
                query = query.where(source_entries.c.name.in_(sorted(names)))
            result = await conn.execute(query)
            for name, version, document, message in result:
                if (name, version) in wanted:
                    out[(src, name, version)] = (document, message)
        return out

    async def purge_deleted(self, changed_before: str) -> int:
        """Remove tombstones whose deletion is older than `changed_before`; bumps the generation if any."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                delete(servers).where(
                    servers.c.status == STATUS_DELETED, servers.c.status_changed_at < changed_before
                )
            )
            purged = int(result.rowcount or 0)
            if purged:
                await conn.execute(update(registry_meta).values(generation=registry_meta.c.generation + 1))
        return purged

    async def name_rows(self, name: str) -> tuple[int, list[CatalogueRow]]:
        """The generation and the merged catalogue's rows of one name, read together."""
        async with self.engine.connect() as conn:
            generation = await conn.scalar(select(registry_meta.c.generation).where(registry_meta.c.id == 1))
            result = await conn.execute(select(*_CATALOGUE_COLUMNS).where(servers.c.name == name))
            rows = [row_of(tuple(r)) for r in result]
        return int(generation or 0), rows

    async def catalogue_items(
        self, convert: Callable[[list[CatalogueRow]], list[T]], chunk: int = 1000
    ) -> tuple[int, list[T]]:
        """The generation and `convert` of every row of the merged catalogue, read `chunk` rows at a
        time (a server-side cursor) and converted off the event loop chunk by chunk: at 10,000
        entries the full row set (~16 MB of strings) never has to be held next to what is built."""
        out: list[T] = []
        async with self.engine.connect() as conn:
            generation = await conn.scalar(select(registry_meta.c.generation).where(registry_meta.c.id == 1))
            result = await conn.stream(select(*_CATALOGUE_COLUMNS))
            async for part in result.partitions(chunk):
                rows = [row_of(tuple(r)) for r in part]
                out.extend(await asyncio.to_thread(convert, rows))
        return int(generation or 0), out


async def _finish_merge(conn: AsyncConnection, stats: MergeStats, order: list[str] | None) -> None:
    """Bump the generation when the merge changed rows, record `order` (unless None), and read the
    generation into `stats`."""
    bump = update(registry_meta).where(registry_meta.c.id == 1)
    if stats.changed:
        bump = bump.values(generation=registry_meta.c.generation + 1)
    if order is not None:
        bump = bump.values(merge_order=_order_key(order))
    if (stats.changed or order is not None) and conn.dialect.update_returning:
        # The new generation with the update (a round trip less per publish on PostgreSQL).
        stats.generation = int(await conn.scalar(bump.returning(registry_meta.c.generation)) or 0)
        return
    if stats.changed or order is not None:
        await conn.execute(bump)
    stats.generation = int(
        await conn.scalar(select(registry_meta.c.generation).where(registry_meta.c.id == 1)) or 0
    )


async def _bulk_insert(conn: AsyncConnection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert many rows; on PostgreSQL with COPY (inside the same transaction), ~10x faster for a
    full sync than batched INSERTs."""
    if not rows:
        return
    if conn.dialect.name == "postgresql" and len(rows) > _COPY_THRESHOLD:
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None, "no asyncpg connection behind the pool entry"
        columns = [c.name for c in table.columns]
        records = [tuple(row.get(c) for c in columns) for row in rows]
        await driver.copy_records_to_table(table.name, records=records, columns=columns)
        return
    for chunk in _chunks(rows):
        await conn.execute(insert(table), chunk)


def _chunks(rows: list[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    for i in range(0, len(rows), _CHUNK):
        yield rows[i : i + _CHUNK]
