"""Wires one registry server together: config → store → sources → syncer → current catalogue.

The store (SQLAlchemy) and the syncer are imported when the service starts, not with this module: a
read-only registry can serve its stored catalogue before they are loaded (`start`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.api.duration import parse_duration
from mcpfleet.registry.catalogue import Catalogue, items_of
from mcpfleet.registry.config import RegistryConfig
from mcpfleet.registry.memory import return_free_memory
from mcpfleet.registry.metrics import RegistryMetrics
from mcpfleet.registry.rows import (
    CatalogueRow,
    postgres_dsn,
    read_postgres,
    read_sqlite,
    sqlite_path,
)

if TYPE_CHECKING:
    from lightkube import AsyncClient
    from opentelemetry.trace import Tracer

    from mcpfleet.registry.publish import Publisher
    from mcpfleet.registry.sources.base import SourceReader
    from mcpfleet.registry.sources.kubernetes import WorkloadSource
    from mcpfleet.registry.store import Store
    from mcpfleet.registry.sync import Syncer

log = logging.getLogger(__name__)
_GENERATION_POLL_SECONDS = 2.0


def default_kube_client() -> AsyncClient:
    """A lightkube client from the environment; imported on first use (only Kubernetes sources need it)."""
    from lightkube import AsyncClient

    return AsyncClient()


class RegistryService:
    """Owns the store, the sync loops and the catalogue the API reads; start() / stop() bracket its life."""

    def __init__(
        self,
        config: RegistryConfig,
        base_dir: Path,
        kube_client: Callable[[], AsyncClient] = default_kube_client,
        workloads: WorkloadSource | None = None,
        run_loops: bool = True,
        tracer: Tracer | None = None,
        serve_stored_first: bool = False,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.config = config
        self.tracer = tracer  # for the sync spans; None: tracing off
        self.base_dir = base_dir
        self.metrics = RegistryMetrics()
        self.catalogue = Catalogue(0, [])
        self.run_loops = run_loops
        self._kube_client = kube_client
        self._workloads = workloads
        self._store: Store | None = None
        self._syncer: Syncer | None = None
        self.publisher: Publisher | None = None
        """The publishing API (None: read-only registry, no `publish` in the config)."""
        self._tasks: list[asyncio.Task[None]] = []
        self.serve_stored_first = serve_stored_first
        """`start` serves the catalogue stored in SQLite while the store opens (see there)."""
        self.on_failure = on_failure
        """Called when opening the store in the background fails (the process should stop)."""
        self.opening: asyncio.Task[None] | None = None
        """The background opening of the store after a start from the stored catalogue."""
        self.preload: list[str] = []
        """Modules the background opening loads first, before the store's: the app adds its
        operational endpoints, so that a first /health finds them loaded rather than importing them
        on the event loop while SQLAlchemy loads in the other thread."""

    @property
    def store(self) -> Store:
        assert self._store is not None, "service not started"
        return self._store

    @property
    def syncer(self) -> Syncer:
        assert self._syncer is not None, "service not started"
        return self._syncer

    @property
    def ready(self) -> bool:
        return self._syncer is not None and self._syncer.ready

    async def publishing(self) -> Publisher | None:
        """The publishing API once the store is open (None: a read-only registry, or a store that did
        not open). A start from the stored catalogue opens the store in the background: a write
        arriving meanwhile waits for it (about a second) rather than being refused."""
        opening = self.opening
        if self.publisher is None and opening is not None and self.config.publish is not None:
            await asyncio.wait([opening])  # (its failure is reported by `on_failure`, not raised here)
        return self.publisher

    def current(self) -> Catalogue:
        return self.catalogue

    async def reload(self) -> None:
        """Rebuild the in-memory catalogue from the store (after a sync changed it)."""
        # Serializing 10,000 entries takes a moment: off the event loop, chunk by chunk as rows arrive.
        generation, items = await self.store.catalogue_items(items_of)
        self._install(await asyncio.to_thread(Catalogue, generation, [], items))

    def _install(self, catalogue: Catalogue) -> None:
        """Serve `catalogue` from now on (unless a newer one is served already)."""
        if catalogue.generation < self.catalogue.generation:
            return  # a concurrent, newer reload already won; never go back in time
        self.catalogue = catalogue
        # The snapshot is hundreds of thousands of long-lived, acyclic objects: keep the cyclic GC from
        # rescanning them in every full collection (a latency spike at p99). Refcounting still frees
        # them when the next snapshot replaces this one.
        gc.freeze()
        return_free_memory()
        self.metrics.catalogue_entries.set(catalogue.active_count)
        self.metrics.generation.set(catalogue.generation)

    async def refresh(self, name: str, known: tuple[int, list[CatalogueRow]] | None = None) -> None:
        """Serve the store's current rows of `name` (after a publish or a status change wrote them):
        the catalogue's next generation with only that name's items replaced, as a full `reload`
        would build it, in the time of one name instead of every entry. Falls back to `reload` when
        the store moved on by more than this one change (another replica wrote meanwhile).
        `known`: the generation and rows of `name` the write read in its own transaction (else
        they are read here)."""
        generation, rows = known if known is not None else await self.store.name_rows(name)
        current = self.catalogue
        if generation == current.generation:
            return  # nothing changed
        if generation != current.generation + 1:
            await self.reload()
            return
        self.catalogue = current.replaced(generation, name, rows)
        self.metrics.catalogue_entries.set(self.catalogue.active_count)
        self.metrics.generation.set(generation)

    def _file(self, path: str | None) -> str | None:
        """A file path of the config, relative ones against the config file's folder."""
        return str(self.base_dir / path) if path else None

    async def start(self) -> None:
        """Open the store (migrating its schema), load the catalogue and start syncing.

        With `serve_stored_first`, a registry on a database at the current schema loads the catalogue stored there without SQLAlchemy (SQLite: the standard
        library's `sqlite3`; PostgreSQL: asyncpg, the driver the store uses) and returns: the API
        serves from then on what it would serve after a full start, while SQLAlchemy loads and the
        store, the syncer and the loops start in the background (`opening`); /readiness says ready
        once the syncer is, as always; writes wait for the store (`publishing`). Without a usable
        stored catalogue (no database or schema yet, another schema version, URL parameters only
        SQLAlchemy interprets, any read error), the store opens first.
        """
        default_path = self.base_dir / f"{self.config.registryName}.db"
        if self.serve_stored_first:
            # What is loaded by now (modules, config) lives as long as the process: frozen out of the
            # cyclic GC, it is not rescanned by the full collection that reading the catalogue's rows
            # would otherwise trigger (~35 ms of a start at 10,000 entries, measured).
            gc.freeze()
            stored = await self._read_stored(default_path)
            if stored is not None:
                self._install(stored)
                opening = self._open_in_background(default_path, stored.generation)
                self.opening = asyncio.create_task(opening, name="registry-open")
                return
        await self._open(default_path)

    async def _read_stored(self, default_path: Path) -> Catalogue | None:
        """The catalogue stored in the database, read without SQLAlchemy (None: not readable so)."""
        db = self.config.database
        path = sqlite_path(db.url, default_path)
        if path is not None:
            return await asyncio.to_thread(_stored_catalogue, path)
        dsn = postgres_dsn(db.url)
        if dsn is None:
            return None
        password_file = self._file(db.passwordFile)
        try:
            password = await asyncio.to_thread(Path(password_file).read_text) if password_file else None
        except OSError:
            return None  # (the store's open reports it)
        stored = await read_postgres(dsn, items_of, password.strip() if password else None)
        return None if stored is None else Catalogue(stored[0], [], stored[1])

    async def _open_in_background(self, default_path: Path, served_generation: int) -> None:
        try:
            # SQLAlchemy's import is a fifth of a second of CPU: in a thread, the event loop keeps
            # answering meanwhile (the GIL is handed over every few milliseconds).
            postgres = postgres_dsn(self.config.database.url) is not None
            await asyncio.to_thread(_import_all, [*self.preload, *_store_modules(postgres)])
            await self._open(default_path, served_generation)
            # SQLAlchemy, the driver's dialect and the syncer are long-lived too, and were loaded
            # after the served snapshot was frozen (`_install`): unfrozen, each full cyclic-GC pass
            # rescanned them (~0.1-0.2 s per pass under load, measured), which cost the read paths
            # throughput and tail latency — uncached searches most, as they allocate the most.
            gc.freeze()
        except Exception as exc:
            log.exception("cannot open the registry's store")
            if self.on_failure is not None:
                self.on_failure(exc)

    async def _open(self, default_path: Path, served_generation: int | None = None) -> None:
        from sqlalchemy.engine import make_url

        from mcpfleet.registry.store import Store, database_url
        from mcpfleet.registry.sync import Syncer, build_reader

        db = self.config.database
        url = database_url(db.url, default_path, self._file(db.passwordFile))
        migration_url = None
        if db.url is not None and db.migrationUser is not None:
            as_migrator = (
                make_url(db.url).set(username=db.migrationUser).render_as_string(hide_password=False)
            )
            migration_url = database_url(as_migrator, default_path, self._file(db.migrationPasswordFile))
        pool: dict[str, Any] = {}
        if db.poolSize is not None:
            pool["pool_size"] = db.poolSize
        if db.maxOverflow is not None:
            pool["max_overflow"] = db.maxOverflow
        if db.poolRecycle is not None:
            pool["pool_recycle"] = parse_duration(db.poolRecycle)
        postgres = db.url is not None and not db.url.startswith("sqlite")
        self._store = await Store.open(url, migration_url, pool if postgres else None)
        if served_generation is None or await self._store.generation() != served_generation:
            await self.reload()  # (else the catalogue served is the stored one already)
        readers: dict[str, SourceReader] = {
            s.name: build_reader(self.config, s, self.base_dir, self._kube_client, self._workloads)
            for s in self.config.sources
        }
        self._syncer = Syncer(
            self.config, self._store, readers, self.metrics, self.reload, tracer=self.tracer
        )
        await self._syncer.start()
        if self.config.publish is not None:
            from mcpfleet.registry.publish import Publisher

            auth = self.config.publish.auth
            resolved = auth.resolved(self.base_dir) if auth is not None else None
            update: dict[str, Any] = {"auth": resolved}
            if (key_file := self.config.publish.tokenSigningKeyFile) is not None:
                update["tokenSigningKeyFile"] = str(self.base_dir / key_file)  # relative: to the config
            self.publisher = Publisher(self.config.publish.model_copy(update=update), self)
            # Token validation's imports and the schema validator, loaded off the event loop now
            # rather than on it by the first publish (see `Publisher.warm`).
            self._tasks.append(asyncio.create_task(self.publisher.warm(), name="registry-publish-warm"))
        if self.run_loops:
            self._tasks.append(asyncio.create_task(self._syncer.run(), name="registry-sync"))
            self._tasks.append(asyncio.create_task(self._follow_generation(), name="registry-generation"))

    async def _follow_generation(self) -> None:
        # With a shared PostgreSQL several replicas sync; each one picks up the others' changes here.
        while True:
            await asyncio.sleep(_GENERATION_POLL_SECONDS)
            try:
                # Under the write lock: a publish of this replica between its commit and its
                # `refresh` is not mistaken for another replica's change (a needless full reload).
                async with self.syncer.write_lock:
                    if await self.store.generation() != self.catalogue.generation:
                        await self.reload()
            except Exception:
                log.exception("cannot check the catalogue generation")

    async def stop(self) -> None:
        if self.opening is not None:
            self.opening.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.opening
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self.publisher is not None:
            await self.publisher.close()
        if self._syncer is not None:
            await self._syncer.close()
        if self._store is not None:
            await self._store.close()


def _stored_catalogue(path: Path) -> Catalogue | None:
    """The catalogue stored in the SQLite database at `path` (None: none at the current schema)."""
    stored = read_sqlite(path, items_of)
    return None if stored is None else Catalogue(stored[0], [], stored[1])


def _store_modules(postgres: bool) -> list[str]:
    """The store, the syncer and the database driver's dialect (what `_open` will need)."""
    dialect = "postgresql.asyncpg" if postgres else "sqlite.aiosqlite"
    return ["mcpfleet.registry.store", "mcpfleet.registry.sync", f"sqlalchemy.dialects.{dialect}"]


def _import_all(names: list[str]) -> None:
    for name in names:
        importlib.import_module(name)
