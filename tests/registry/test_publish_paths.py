"""The two publish paths decide alike (issue 32).

On PostgreSQL a publish reads and writes in two round trips (`registry/pgpublish.py`); everywhere
else, and on PostgreSQL whenever the plan needs another document than the published one, the general
path (`Store.publish`, SQLAlchemy) runs. After every publish here: the rows the publish hands the
served catalogue are the rows stored, and a full merge of every source finds nothing to change (the
publish left `registry_servers` exactly as the general merge would have).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpfleet.registry import pgpublish
from mcpfleet.registry.entry import PUBLISHED, STATUS_DELETED, Entry
from mcpfleet.registry.store import SourceState, Store

SYNCED = "gen"


def doc(name: str, version: str) -> dict[str, Any]:
    return {"name": name, "version": version, "description": f"{name} at {version}"}


class Recorder:
    """Counts how each PostgreSQL publish went: True/False (two round trips), None (general path)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.outcomes: list[bool | None] = []
        real = pgpublish.PostgresPublisher.publish_many

        async def recorded(publisher: Any, *args: Any) -> Any:
            results = await real(publisher, *args)
            self.outcomes.extend(None if result is None else result[0] for result in results)
            return results

        monkeypatch.setattr(pgpublish.PostgresPublisher, "publish_many", recorded)


async def publish_and_check(store: Store, entry: Entry, order: list[str]) -> bool:
    """Publish; assert the handed rows are the stored ones and a full merge changes nothing."""
    stats = await store.publish(entry, order)
    if stats is None:
        return False
    generation, stored = await store.name_rows(entry.name)
    assert stats.generation == generation
    assert sorted(stats.rows or [], key=lambda r: r.version) == sorted(stored, key=lambda r: r.version)
    async with store.engine.begin() as conn:
        again = await store._merge(conn, order, {})
    assert not again.changed, (again.added, again.updated, again.deleted)
    return True


async def test_versions_published_one_by_one(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(monkeypatch)
    store = await Store.open(db_url)
    order = [PUBLISHED]
    try:
        name = "com.example/paths"
        for version in ("1.0.0", "2.0.0", "1.5.0", "nightly", "2.0.1-rc.1", "v2.9", "3.0.0"):
            assert await publish_and_check(store, Entry(name, version, doc(name, version)), order)
        # Immutable: the same version again is refused, whatever its content.
        assert not await publish_and_check(store, Entry(name, "1.5.0", doc(name, "other")), order)
        _generation, rows = await store.name_rows(name)
        assert [r.version for r in rows if r.is_latest] == ["3.0.0"]
        # A deleted latest version: the next publish re-flags against the live ones.
        assert await store.set_published_status(name, "3.0.0", STATUS_DELETED, None, order) == ["3.0.0"]
        _generation, rows = await store.name_rows(name)
        assert [r.version for r in rows if r.is_latest] == ["v2.9"]
        assert await publish_and_check(store, Entry(name, "3.5.0", doc(name, "3.5.0")), order)
        _generation, rows = await store.name_rows(name)
        assert [r.version for r in rows if r.is_latest] == ["3.5.0"]
    finally:
        await store.close()
    if db_url.startswith("postgresql"):
        assert recorder.outcomes == [True] * 7 + [False, True]


async def test_publishing_takes_a_name_over_from_a_synced_source(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(monkeypatch)
    store = await Store.open(db_url)
    order = [PUBLISHED, SYNCED]
    name = "com.example/synced"
    try:
        entries = [Entry(name, v, doc(name, v)) for v in ("1.0.0", "1.1.0")]
        await store.replace_source(SourceState(SYNCED), entries, order)
        # Served by the synced source: taken.
        assert not await publish_and_check(store, Entry(name, "1.1.0", doc(name, "1.1.0")), order)
        # A new version: published entries rank first, so the synced versions become tombstones.
        assert await publish_and_check(store, Entry(name, "2.0.0", doc(name, "2.0.0")), order)
        _generation, rows = await store.name_rows(name)
        assert {(r.version, r.status, r.is_latest) for r in rows} == {
            ("1.0.0", STATUS_DELETED, False),
            ("1.1.0", STATUS_DELETED, False),
            ("2.0.0", "active", True),
        }
    finally:
        await store.close()
    if db_url.startswith("postgresql"):
        assert recorder.outcomes == [False, True]


async def test_a_name_a_higher_source_serves_is_stored_not_served(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    Recorder(monkeypatch)
    store = await Store.open(db_url)
    order = [SYNCED, PUBLISHED]
    name = "com.example/above"
    try:
        await store.replace_source(SourceState(SYNCED), [Entry(name, "1.0.0", doc(name, "1.0.0"))], order)
        generation = await store.generation()
        assert await publish_and_check(store, Entry(name, "2.0.0", doc(name, "2.0.0")), order)
        assert await store.generation() == generation  # nothing served changed
        _generation, rows = await store.name_rows(name)
        assert [(r.version, r.is_latest) for r in rows] == [("1.0.0", True)]
        # Published before (though not served): the same version is refused.
        assert not await publish_and_check(store, Entry(name, "2.0.0", doc(name, "2.0.0")), order)
    finally:
        await store.close()


async def test_concurrent_publishes_written_together(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch (the group commit of concurrent publishes): new names, a new version of a published
    name, a taken version and a name a synced source serves above published entries; consecutive
    generations in the batch's order for what changed, the rows each hands are the stored ones."""
    recorder = Recorder(monkeypatch)
    store = await Store.open(db_url)
    order = [SYNCED, PUBLISHED]
    try:
        await store.replace_source(
            SourceState(SYNCED), [Entry("com.example/s", "1.0.0", doc("s", "1"))], order
        )
        assert await publish_and_check(store, Entry("com.example/b", "1.0.0", doc("b", "1")), order)
        start = await store.generation()
        batch = [
            Entry("com.example/a", "1.0.0", doc("a", "1")),
            Entry("com.example/b", "1.0.0", doc("b", "again")),  # taken
            Entry("com.example/s", "2.0.0", doc("s", "2")),  # stored, not served
            Entry("com.example/c", "1", doc("c", "1")),
            Entry("com.example/d", "0.1.0", doc("d", "0.1")),
        ]
        results = await store.publish_many(batch, order)
        assert [r is not None for r in results] == [True, False, True, True, True]
        assert [r.generation for r in results if r is not None] == [
            start + 1,
            start + 1,
            start + 2,
            start + 3,
        ]
        for entry, result in zip(batch, results, strict=True):
            if result is not None:
                _generation, stored = await store.name_rows(entry.name)
                assert sorted(result.rows or [], key=lambda r: r.version) == sorted(
                    stored, key=lambda r: r.version
                )
        async with store.engine.begin() as conn:
            assert not (await store._merge(conn, order, {})).changed
    finally:
        await store.close()
    if db_url.startswith("postgresql"):
        assert recorder.outcomes == [True, True, False, True, True, True]


async def test_a_connection_closed_by_the_server_is_replaced(postgres: Any, tmp_path: Path) -> None:
    """The kept publish connection, terminated by PostgreSQL between publishes: the next publish
    reconnects and succeeds."""
    import uuid

    database = "reg_" + uuid.uuid4().hex[:12]
    postgres.admin(f"CREATE DATABASE {database}")
    store = await Store.open(postgres.url(database))
    order = [PUBLISHED]
    try:
        assert await publish_and_check(store, Entry("com.example/kept", "1.0.0", doc("x", "1")), order)
        postgres.admin(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}' "
            "AND pid <> pg_backend_pid()"
        )
        assert await publish_and_check(store, Entry("com.example/kept", "2.0.0", doc("x", "2")), order)
    finally:
        await store.close()
