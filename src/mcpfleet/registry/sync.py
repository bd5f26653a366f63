"""Keeps the catalogue in step with the sources: fetch, hash, parse, filter, store, merge.

Each source is fetched when its `syncPolicy.interval` elapses; the fetched content is applied only when
its hash or the source's filter changed since the last good sync (so an idle registry writes nothing).
A failed fetch, a structurally wrong document (unreadable, or its entries' container missing or of the
wrong type) or a document whose every entry is rejected is a failed sync: the source keeps its last good
data and records the error. Otherwise per-entry problems (schema violations, duplicates) are recorded
while valid entries load; a document with no entries at all (`[]`, `{"servers": {}}`) is a good, empty
sync.
With a tracer, each sync of a source is a span `registry.sync <source>` (kind, result, entries, errors).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import SpanKind

from mcpfleet import telemetry
from mcpfleet.api.duration import parse_duration
from mcpfleet.api.registrysource import Source
from mcpfleet.registry.config import RegistryConfig, merge_order
from mcpfleet.registry.filters import apply_filter, filter_hash
from mcpfleet.registry.memory import return_free_memory
from mcpfleet.registry.merge import now_iso
from mcpfleet.registry.metrics import RegistryMetrics
from mcpfleet.registry.sources.base import SourceError, SourceReader
from mcpfleet.registry.store import SourceState, Store

if TYPE_CHECKING:
    from lightkube import AsyncClient
    from opentelemetry.trace import Tracer

    from mcpfleet.registry.sources.kubernetes import WorkloadSource

log = logging.getLogger(__name__)
_MAX_REPORTED_ERRORS = 200
_PURGE_INTERVAL = 3600.0


def build_reader(
    config: RegistryConfig,
    source: Source,
    base_dir: Path,
    kube_client: Callable[[], AsyncClient],
    workloads: WorkloadSource | None = None,
) -> SourceReader:
    """The reader for one configured source. `workloads` replaces Kubernetes discovery (local platform).

    Each reader is imported when a source needs it: a registry that reads files does not load the
    Kubernetes client, git or HTTP stacks at start-up."""
    if source.file is not None:
        from mcpfleet.registry.sources.file import FileReader

        path = Path(source.file.path)
        return FileReader(source.name, source.format, path if path.is_absolute() else base_dir / path)
    if source.url is not None:
        from mcpfleet.registry.sources.url import UrlReader

        u = source.url
        return UrlReader(source.name, source.format, u.endpoint, u.headers, parse_duration(u.timeout))
    if source.git is not None:
        from mcpfleet.registry.sources.git import GitReader

        g = source.git
        username = g.auth.username if g.auth else None
        password_file = None
        if g.auth is not None:
            pw = Path(g.auth.password_file)
            password_file = pw if pw.is_absolute() else base_dir / pw
        return GitReader(
            source.name,
            source.format,
            g.repository,
            g.path,
            g.branch,
            g.tag,
            g.commit,
            username,
            password_file,
        )
    if source.api is not None:
        from mcpfleet.registry.sources.api import ApiReader

        a = source.api
        return ApiReader(source.name, a.endpoint, a.page_size, a.headers, parse_duration(a.timeout))
    if source.config_map is not None:
        from mcpfleet.registry.sources.configmap import ConfigMapReader

        c = source.config_map
        return ConfigMapReader(source.name, source.format, c.namespace, c.name, c.key, kube_client)
    from mcpfleet.registry.sources.kubernetes import KubernetesWorkloads, WorkloadReader

    assert source.kubernetes is not None
    discovery = workloads or KubernetesWorkloads(
        config.registryName, source.kubernetes.namespaces, kube_client
    )
    return WorkloadReader(source.name, discovery)


def _adopt(state: SourceState, new: SourceState) -> None:
    for f in dataclasses.fields(SourceState):
        setattr(state, f.name, getattr(new, f.name))


class Syncer:
    """Runs the sync loops of all sources; serializes writes to the store."""

    def __init__(
        self,
        config: RegistryConfig,
        store: Store,
        readers: dict[str, SourceReader],
        metrics: RegistryMetrics,
        on_change: Callable[[], Awaitable[None]],
        *,
        tracer: Tracer | None = None,
    ) -> None:
        self.config = config
        self.tracer = tracer
        self.store = store
        self.readers = readers
        self.metrics = metrics
        self.on_change = on_change
        self.order = [s.name for s in config.sources]
        self.merge_order = merge_order(config)
        """`order` with the published entries where the config ranks them: what every merge uses."""
        self.states: dict[str, SourceState] = {}
        self.initial_round_done = False
        self.write_lock = asyncio.Lock()

    async def start(self) -> None:
        """Load persisted state and drop data of sources that left the config."""
        self.states = {k: v for k, v in (await self.store.source_states()).items() if k in self.order}
        stats = await self.store.prune_sources(self.merge_order)
        changed = stats.changed
        # A filter that changed while the registry was down applies at once to the stored data, so
        # nothing it now excludes is served even if the source cannot be fetched. The content hash
        # is forgotten so the next fetch re-applies in full (a widened filter needs the source).
        for source in self.config.sources:
            state = self.states.get(source.name)
            fhash = filter_hash(source.filter)
            if state is None or state.last_success is None or state.filter_hash == fhash:
                continue
            kept = apply_filter(await self.store.source_entries(source.name), source.filter)
            state.content_hash, state.filter_hash, state.entry_count = None, fhash, len(kept)
            async with self.write_lock:
                changed |= (await self.store.replace_source(state, kept, self.merge_order)).changed
        if changed:
            await self.on_change()

    @property
    def ready(self) -> bool:
        """After the first sync round, once every source has good data (now or from before a restart)."""
        return self.initial_round_done and all(
            self.states.get(n) is not None and self.states[n].last_success is not None for n in self.order
        )

    def failing(self) -> list[dict[str, str]]:
        """Sources whose last sync failed (they serve their last good data, if any), with the error."""
        return [
            {"name": n, "lastError": self.states[n].last_error or ""}
            for n in self.order
            if n in self.states and self.states[n].last_error
        ]

    async def sync_source(self, name: str) -> str:
        """Sync one source; returns "applied", "unchanged" or "failed"."""
        if self.tracer is None:
            return await self._sync_source(name)
        source = next(s for s in self.config.sources if s.name == name)
        attrs = {telemetry.REGISTRY_SOURCE: name, telemetry.REGISTRY_SOURCE_KIND: source.kind}
        with telemetry.current_span(self.tracer, f"registry.sync {name}", SpanKind.INTERNAL, attrs) as span:
            result = await self._sync_source(name)
            state = self.states[name]
            span.set_attributes(
                {
                    telemetry.REGISTRY_SYNC_RESULT: result,
                    telemetry.REGISTRY_SYNC_ENTRIES: state.entry_count,
                    telemetry.REGISTRY_SYNC_ENTRY_ERRORS: len(state.entry_errors),
                }
            )
            if result == "failed":
                telemetry.record_error(span, "sync_failed", state.last_error)
            return result

    async def _sync_source(self, name: str) -> str:
        source = next(s for s in self.config.sources if s.name == name)
        state = self.states.setdefault(name, SourceState(name))
        started = time.perf_counter()
        state.last_attempt = now_iso()
        result = "failed"
        try:
            result = await self._sync(source, state)
        except SourceError as exc:
            state.last_error = str(exc)
        except Exception as exc:  # a bug or a database outage must not stop the loop; keep last good data
            log.exception("sync of source %s failed", name)
            state.last_error = f"{type(exc).__name__}: {exc}"
        if result == "failed":
            log.warning("sync of source %s failed: %s", name, state.last_error)
            try:
                await self.store.save_state(state)
            except Exception:
                log.exception("cannot record the sync failure of source %s", name)
        # The fetched document (and, when applied, its parsed entries) are garbage now: give their
        # pages back rather than keep them in the RSS until the next sync.
        return_free_memory()
        self.metrics.syncs.labels(name, result).inc()
        self.metrics.sync_seconds.labels(name).observe(time.perf_counter() - started)
        self.metrics.source_up.labels(name).set(0 if result == "failed" else 1)
        self.metrics.source_entries.labels(name).set(state.entry_count)
        self.metrics.source_entry_errors.labels(name).set(len(state.entry_errors))
        if result != "failed":
            self.metrics.last_success.labels(name).set(time.time())
        return result

    async def _sync(self, source: Source, state: SourceState) -> str:
        fetched = await self.readers[source.name].fetch()
        fhash = filter_hash(source.filter)
        if (
            state.last_success is not None
            and state.content_hash == fetched.content_hash
            and state.filter_hash == fhash
        ):
            checked = dataclasses.replace(state, last_success=now_iso(), last_error=None)
            await self.store.save_state(checked)
            _adopt(state, checked)
            return "unchanged"
        # Parsing 10,000 entries takes a while: off the event loop so requests keep flowing.
        parsed = await asyncio.to_thread(fetched.parse)
        whole_document = [e for e in parsed.errors if e.index is None and e.name is None]
        if whole_document:
            raise SourceError("; ".join(e.message for e in whole_document))
        if parsed.errors and not parsed.entries:
            # Nothing usable: a wrong document, not a registry that emptied (which would tombstone all).
            shown = "; ".join(e.message for e in parsed.errors[:3])
            more = f" (and {len(parsed.errors) - 3} more)" if len(parsed.errors) > 3 else ""
            raise SourceError(f"every entry was rejected ({len(parsed.errors)}): {shown}{more}")
        entries = apply_filter(parsed.entries, source.filter)
        # The new state is adopted only once it is stored: after a failed write (database down) the
        # next sync must still see the old hash and apply the change.
        applied = dataclasses.replace(
            state,
            content_hash=fetched.content_hash,
            filter_hash=fhash,
            last_success=now_iso(),
            last_error=None,
            entry_count=len(entries),
            entry_errors=[e.as_dict() for e in parsed.errors[:_MAX_REPORTED_ERRORS]],
        )
        for error in parsed.errors[:20]:
            log.warning(
                "source %s: entry %s (%s) rejected: %s", source.name, error.index, error.name, error.message
            )
        async with self.write_lock:
            stats = await self.store.replace_source(applied, entries, self.merge_order)
        _adopt(state, applied)
        log.info(
            "source %s synced: %d entries (%d rejected); catalogue +%d ~%d -%d, generation %d",
            source.name,
            len(entries),
            len(parsed.errors),
            stats.added,
            stats.updated,
            stats.deleted,
            stats.generation,
        )
        if stats.changed:
            await self.on_change()
        return "applied"

    async def sync_all(self) -> None:
        for name in self.order:
            await self.sync_source(name)
        self.initial_round_done = True
        await self.purge_deleted()

    async def purge_deleted(self) -> None:
        """Drop tombstones older than `deletedRetention` (runs after each round and hourly)."""
        retention = timedelta(seconds=parse_duration(self.config.deletedRetention))
        cutoff = (datetime.now(UTC) - retention).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        try:
            async with self.write_lock:
                purged = await self.store.purge_deleted(cutoff)
        except Exception:
            log.exception("purging deleted entries failed")
            return
        if purged:
            log.info("purged %d deleted entries older than %s", purged, self.config.deletedRetention)
            await self.on_change()

    async def run(self) -> None:
        """The initial round, then one loop per source at its own interval (until cancelled)."""
        await self.sync_all()
        async with asyncio.TaskGroup() as group:
            for source in self.config.sources:
                group.create_task(self._loop(source))
            group.create_task(self._purge_loop())

    async def _purge_loop(self) -> None:
        while True:
            await asyncio.sleep(_PURGE_INTERVAL)
            await self.purge_deleted()

    async def _loop(self, source: Source) -> None:
        """Sync at every interval, and early when the reader can watch its content (file sources)."""
        wake = asyncio.Event()
        watch = getattr(self.readers[source.name], "watch", None)
        watcher = asyncio.create_task(self._watch(source.name, watch, wake)) if watch else None
        try:
            while True:
                try:
                    await asyncio.wait_for(wake.wait(), source.sync_policy.seconds)
                except TimeoutError:
                    pass
                wake.clear()
                await self.sync_source(source.name)
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _watch(self, name: str, watch: Callable[[], AsyncIterator[None]], wake: asyncio.Event) -> None:
        try:
            async for _ in watch():
                wake.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # no inotify here: the interval alone still applies
            log.warning("cannot watch source %s for changes (%s); syncing on the interval only", name, exc)

    def status(self) -> dict[str, Any]:
        sources = []
        for source in self.config.sources:
            state = self.states.get(source.name) or SourceState(source.name)
            sources.append(
                {
                    "name": source.name,
                    "kind": source.kind,
                    "format": source.format,
                    "interval": source.sync_policy.interval,
                    "lastAttempt": state.last_attempt,
                    "lastSuccess": state.last_success,
                    "lastError": state.last_error,
                    "entries": state.entry_count,
                    "entryErrors": state.entry_errors,
                }
            )
        return {"ready": self.ready, "sources": sources}

    async def close(self) -> None:
        for reader in self.readers.values():
            try:
                await reader.close()
            except Exception:
                log.exception("closing a source reader failed")
