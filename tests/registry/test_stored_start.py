"""A registry serves its stored catalogue while the store opens (issue 17).

`RegistryService(serve_stored_first=True)` (what `mcpfleet registry serve` runs) loads the catalogue
from the database without SQLAlchemy (SQLite: the standard library; PostgreSQL: asyncpg) and serves
at once; SQLAlchemy, the store and the syncer
start in the background. What it serves must be exactly what a full start serves, and the cases it
cannot read (no database yet, an older schema) start as before. A publishing registry serves its stored
catalogue first too; a write waits for the store.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import asyncpg

from mcpfleet.registry.catalogue import items_of
from mcpfleet.registry.rows import postgres_dsn, read_postgres, read_sqlite, sqlite_path
from tests.auth.test_token_corpus import local_issuer
from tests.registry.conftest import Postgres, make_config, running, server_doc, write_json
from tests.registry.test_cli_and_store import _cli
from tests.registry.test_publish import bearer
from tests.registry.test_publish import config as publish_config
from tests.registry.test_publish import token as publish_token

PAGES = ("/v0.1/servers?limit=100", "/v0.1/servers/io.example%2Fs007/versions", "/v0.1/servers?search=s01")


def _config(tmp_path: Path, count: int = 30, url: str | None = None) -> object:
    docs = [server_doc(f"io.example/s{i:03d}") for i in range(count)]
    docs.append(server_doc("io.example/s007", version="2.0.0"))
    source = {"name": "f", "file": {"path": str(write_json(tmp_path / "s.json", {"servers": docs}))}}
    return make_config([source], url or f"sqlite+aiosqlite:///{tmp_path / 'r.db'}")


async def _synced_then_broken(config: object, tmp_path: Path, db_file: Path) -> None:
    """Sync `config`'s database, then drop a table only the store reads: the stored catalogue still
    reads, the store does not open."""
    async with running(config, tmp_path) as h:  # type: ignore[arg-type]
        await h.sync()
    db = sqlite3.connect(db_file)
    db.execute("DROP TABLE registry_source_state")
    db.commit()
    db.close()


async def _served(config: object, tmp_path: Path, **kw: object) -> dict[str, object]:
    async with running(config, tmp_path, **kw) as h:  # type: ignore[arg-type]
        if h.service.opening is not None:
            await asyncio.wait_for(asyncio.shield(h.service.opening), 60)
        return {p: (await h.get(p)).json() for p in PAGES} | {"generation": h.service.catalogue.generation}


async def test_stored_catalogue_is_what_a_full_start_serves(tmp_path: Path, db_url: str) -> None:
    """On each backend (`db_url`: SQLite, then PostgreSQL)."""
    config = _config(tmp_path, url=db_url)
    async with running(config, tmp_path) as h:  # type: ignore[arg-type]
        await h.sync()  # the database now holds the catalogue
    full = await _served(config, tmp_path)
    async with running(config, tmp_path, serve_stored_first=True) as h:  # type: ignore[arg-type]
        # Served before the store is open: the same pages as after a full start.
        assert h.service.opening is not None and h.service._store is None
        assert not h.service.ready
        early = {p: (await h.get(p)).json() for p in PAGES}
        assert early == {p: full[p] for p in PAGES}
        await asyncio.wait_for(asyncio.shield(h.service.opening), 60)
        assert h.service._store is not None
        assert h.service.catalogue.generation == full["generation"]
        assert {p: (await h.get(p)).json() for p in PAGES} == early
        await h.sync()  # (the test harness runs no sync loop)
        assert h.service.ready and h.service.catalogue.generation == full["generation"]


async def test_cases_without_a_usable_stored_catalogue_open_the_store_first(tmp_path: Path) -> None:
    config = _config(tmp_path)
    # No database yet: opened (and created) first.
    async with running(config, tmp_path, serve_stored_first=True) as h:  # type: ignore[arg-type]
        assert h.service.opening is None and h.service._store is not None
        await h.sync()
    # An older schema: the store opens first and migrates.
    db = sqlite3.connect(tmp_path / "r.db")
    db.execute("UPDATE registry_alembic_version SET version_num = '0001'")
    db.commit()
    db.close()
    assert read_sqlite(tmp_path / "r.db", items_of) is None


async def test_a_publishing_registry_serves_stored_first_and_a_publish_waits_for_the_store(
    tmp_path: Path, db_url: str
) -> None:
    """On each backend: the stored catalogue is served before the store opens, as for a read-only
    registry; a publish sent meanwhile waits for the store and is served at once, as always."""
    async with local_issuer() as issuer:
        config = publish_config(issuer, db_url, tmp_path)
        async with running(config, tmp_path) as h:  # type: ignore[arg-type]
            await h.sync()
            stored = (await h.get("/v0.1/servers")).json()
        async with running(config, tmp_path, serve_stored_first=True) as h:  # type: ignore[arg-type]
            assert h.service.opening is not None and h.service._store is None
            assert h.service.publisher is None
            assert (await h.get("/v0.1/servers")).json() == stored
            doc = server_doc("com.acme/early", "1.0.0")
            r = await h.client.post("/v0.1/publish", json=doc, headers=bearer(publish_token(issuer)))
            assert r.status_code == 200, r.text
            assert h.service.opening.done() and h.service.publisher is not None
            got = await h.get("/v0.1/servers/com.acme%2Fearly/versions/latest")
            assert got.status_code == 200 and got.json()["server"] == doc


async def test_a_publish_while_the_store_fails_to_open_is_unavailable(tmp_path: Path) -> None:
    """The store does not open after the stored catalogue was served: a publish waiting for it is
    answered 503 (a problem document), not 405 as on a read-only registry, nor a 5xx traceback."""
    async with local_issuer() as issuer:
        db_url = f"sqlite+aiosqlite:///{tmp_path / 'p.db'}"
        config = publish_config(issuer, db_url, tmp_path)
        await _synced_then_broken(config, tmp_path, tmp_path / "p.db")
        failures: list[BaseException] = []
        kw = {"serve_stored_first": True, "on_failure": failures.append}
        async with running(config, tmp_path, **kw) as h:  # type: ignore[arg-type]
            doc = server_doc("com.acme/late", "1.0.0")
            r = await h.client.post("/v0.1/publish", json=doc, headers=bearer(publish_token(issuer)))
            assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json", r.text
            assert r.json()["status"] == 503 and "not open" in r.json()["detail"]
            assert failures


async def test_postgres_without_a_usable_stored_catalogue_opens_the_store_first(
    tmp_path: Path, postgres: Postgres
) -> None:
    name = "reg_" + uuid.uuid4().hex[:12]
    postgres.admin(f"CREATE DATABASE {name}")
    try:
        url = postgres.url(name)
        dsn = postgres_dsn(url)
        assert dsn is not None
        assert await read_postgres(dsn, items_of) is None  # no schema yet
        config = _config(tmp_path, url=url)
        async with running(config, tmp_path, serve_stored_first=True) as h:  # type: ignore[arg-type]
            assert h.service.opening is None and h.service._store is not None
            await h.sync()
        stored = await read_postgres(dsn, items_of)
        assert stored is not None and len(stored[1]) == 31  # 30 names, s007 in two versions
        # Read without SQLAlchemy (a fresh interpreter).
        code = f"""
import asyncio, sys
from mcpfleet.registry.catalogue import items_of
from mcpfleet.registry.rows import read_postgres
stored = asyncio.run(read_postgres({dsn!r}, items_of))
assert stored is not None and len(stored[1]) == 31, stored
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "alembic"))
assert not loaded, loaded
"""
        await asyncio.to_thread(subprocess.run, [sys.executable, "-c", code], check=True, timeout=60)
        # An older schema: not read (the store opens first and migrates).
        conn = await asyncpg.connect(dsn)
        await conn.execute("UPDATE registry_alembic_version SET version_num = '0001'")
        await conn.close()
        assert await read_postgres(dsn, items_of) is None
        # A refused connection, a wrong database: None, never an exception.
        assert await read_postgres(dsn.rsplit("/", 1)[0] + "/nosuchdb", items_of) is None
        assert await read_postgres("postgresql://postgres@127.0.0.1:9/x", items_of, connect_timeout=5) is None
    finally:
        postgres.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_postgres_dsn_follows_the_store_url() -> None:
    assert postgres_dsn("postgresql+asyncpg://u:p%40@h:5/db") == "postgresql://u:p%40@h:5/db"
    for other in (None, "sqlite+aiosqlite:///r.db", "postgresql+asyncpg://u@h/db?ssl=require"):
        assert postgres_dsn(other) is None


def test_sqlite_path_follows_the_store_url() -> None:
    default = Path("/d/r.db")
    assert sqlite_path(None, default) == default
    assert sqlite_path("sqlite+aiosqlite:////abs/r.db", default) == Path("/abs/r.db")
    assert sqlite_path("sqlite+aiosqlite:///rel.db", default) == Path("rel.db")
    for other in ("postgresql+asyncpg://u@h/db", "sqlite+aiosqlite://", "sqlite+aiosqlite:///:memory:"):
        assert sqlite_path(other, default) is None
    assert sqlite_path("sqlite+aiosqlite:///r.db?timeout=3", default) is None


def test_stored_catalogue_is_read_without_sqlalchemy(tmp_path: Path) -> None:
    """The registry app and the stored catalogue load without SQLAlchemy (a fresh interpreter)."""
    config = _config(tmp_path)

    async def fill() -> None:
        async with running(config, tmp_path) as h:  # type: ignore[arg-type]
            await h.sync()

    asyncio.run(fill())
    code = f"""
import sys
import mcpfleet.registry.app
from mcpfleet.registry.catalogue import items_of
from mcpfleet.registry.service import _stored_catalogue
from pathlib import Path
catalogue = _stored_catalogue(Path({str(tmp_path / "r.db")!r}))
assert catalogue is not None and catalogue.active_count == 31, catalogue.active_count
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "aiosqlite", "alembic"))
assert not loaded, loaded
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_a_store_failing_to_open_after_the_first_answers_stops_the_server(tmp_path: Path) -> None:
    """The stored catalogue reads, the store then does not open (a table is missing): the service
    reports it, and `mcpfleet registry serve` exits with uvicorn's start-failure status."""
    config = _config(tmp_path)
    await _synced_then_broken(config, tmp_path, tmp_path / "r.db")
    failures: list[BaseException] = []
    async with running(config, tmp_path, serve_stored_first=True, on_failure=failures.append) as h:  # type: ignore[arg-type]
        assert h.service.opening is not None
        await asyncio.wait_for(asyncio.shield(h.service.opening), 60)
        assert failures and "registry_source_state" in str(failures[0]), failures
        assert not h.service.ready
    cfg = tmp_path / "c.json"
    cfg.write_text(
        '{"registryName": "r", "sources": [{"name": "f", "file": {"path": "s.json"}}], '
        f'"database": {{"url": "sqlite+aiosqlite:///{tmp_path / "r.db"}"}}}}'
    )
    cli = _cli("serve", "--config", str(cfg), "--port", "0")
    result = await asyncio.to_thread(subprocess.run, cli, capture_output=True, text=True, timeout=120)
    assert result.returncode == 3, result.stderr[-2000:]
    assert "cannot open the registry's store" in result.stderr


async def test_the_operational_endpoints_load_in_the_background_after_a_stored_start(tmp_path: Path) -> None:
    """The app asks the service to load its operational module before the store's modules (a first
    /health then finds Starlette loaded); the name it gives is that module's."""
    from mcpfleet.registry import app, operational

    assert app._OPERATIONAL == operational.__name__
    config = _config(tmp_path)
    async with running(config, tmp_path) as h:  # type: ignore[arg-type]
        await h.sync()
        assert h.service.preload == [operational.__name__]
    async with running(config, tmp_path, serve_stored_first=True) as h:  # type: ignore[arg-type]
        assert h.service.opening is not None
        await asyncio.wait_for(asyncio.shield(h.service.opening), 60)
        health = await h.get("/v0.1/health")
        assert health.status_code == 200 and health.json() == {"status": "ok"}
