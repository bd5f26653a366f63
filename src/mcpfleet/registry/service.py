"""Wires one registry server together: config → store → sources → syncer → current catalogue."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from mcpfleet.api.duration import parse_duration
from mcpfleet.registry.catalogue import Catalogue, items_of
from mcpfleet.registry.config import RegistryConfig
from mcpfleet.registry.memory import return_free_memory
from mcpfleet.registry.metrics import RegistryMetrics
from mcpfleet.registry.sources.base import SourceReader
from mcpfleet.registry.store import Store, database_url
from mcpfleet.registry.sync import Syncer, build_reader

if TYPE_CHECKING:
    from lightkube import AsyncClient
    from opentelemetry.trace import Tracer

    from mcpfleet.registry.publish import Publisher
    from mcpfleet.registry.sources.kubernetes import WorkloadSource

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

    def current(self) -> Catalogue:
        return self.catalogue

    async def reload(self) -> None:
        """Rebuild the in-memory catalogue from the store (after a sync changed it)."""
        # Serializing 10,000 entries takes a moment: off the event loop, chunk by chunk as rows arrive.
        generation, items = await self.store.catalogue_items(items_of)
        catalogue = await asyncio.to_thread(Catalogue, generation, [], items)
        if catalogue.generation < self.catalogue.generation:
            return  # a concurrent, newer reload already won; never go back in time
        self.catalogue = catalogue
        # The snapshot is hundreds of thousands of long-lived, acyclic objects: keep the cyclic GC from
        # rescanning them in every full collection (a latency spike at p99). Refcounting still frees
        # them when the next snapshot replaces this one.
        gc.freeze()
        return_free_memory()
        self.metrics.catalogue_entries.set(catalogue.active_count)
        self.metrics.generation.set(generation)

    async def refresh(self, name: str) -> None:
        """Serve the store's current rows of `name` (after a publish or a status change wrote them):
        the catalogue's next generation with only that name's items replaced, as a full `reload`
        would build it, in the time of one name instead of every entry. Falls back to `reload` when
        the store moved on by more than this one change (another replica wrote meanwhile)."""
        generation, rows = await self.store.name_rows(name)
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
        db = self.config.database
        default_path = self.base_dir / f"{self.config.registryName}.db"
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
        await self.reload()
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

            auth = self.config.publish.auth.resolved(self.base_dir)
            self.publisher = Publisher(self.config.publish.model_copy(update={"auth": auth}), self)
        if self.run_loops:
            self._tasks.append(asyncio.create_task(self._syncer.run(), name="registry-sync"))
            self._tasks.append(asyncio.create_task(self._follow_generation(), name="registry-generation"))

    async def _follow_generation(self) -> None:
        # With a shared PostgreSQL several replicas sync; each one picks up the others' changes here.
        while True:
            await asyncio.sleep(_GENERATION_POLL_SECONDS)
            try:
                if await self.store.generation() != self.catalogue.generation:
                    await self.reload()
            except Exception:
                log.exception("cannot check the catalogue generation")

    async def stop(self) -> None:
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
