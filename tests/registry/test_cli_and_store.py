"""The CLI entry point as a real process, and the migrations matching the table models."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from sqlalchemy import create_engine

from tests.reference import TOOLHIVE_FILE

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcpfleet.cli.main", "registry", *args]


def test_serve_bad_config_names_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "registryName: r\nsources:\n  - name: a\n    file: {path: x}\n    syncPolicy: {interval: often}\n"
    )
    result = subprocess.run(
        _cli("serve", "--config", str(cfg)), capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 2
    assert "sources[0].syncPolicy.interval" in result.stderr


def test_serve_runs_syncs_and_answers(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        json.dumps(
            {
                "registryName": "cli",
                "sources": [{"name": "th", "format": "toolhive", "file": {"path": str(TOOLHIVE_FILE)}}],
            }
        )
    )
    port = _free_port()
    proc = subprocess.Popen(
        _cli("serve", "--config", str(cfg), "--port", str(port), "--log-level", "warning"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readiness", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.time() < deadline, "registry did not become ready"
            time.sleep(0.2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v0.1/servers?limit=100") as r:
            assert len(json.loads(r.read())["servers"]) == 100
        # the default SQLite file sits beside the config
        assert (tmp_path / "cli.db").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_migrations_match_the_models(tmp_path: Path) -> None:
    import asyncio

    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from mcpfleet.registry.store import Store, metadata

    url = f"sqlite+aiosqlite:///{tmp_path / 'm.db'}"

    async def migrate() -> None:
        store = await Store.open(url)
        await store.close()

    asyncio.run(migrate())
    engine = create_engine(f"sqlite:///{tmp_path / 'm.db'}")
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    engine.dispose()
    # alembic's own version table is the only thing the models do not describe
    assert [d for d in diff if not (d[0] == "remove_table" and d[1].name == "registry_alembic_version")] == []


def test_replicas_open_the_same_postgres_at_once(postgres: object) -> None:
    """Migrations are serialized by an advisory lock: concurrent starts all succeed."""
    import asyncio
    import uuid

    from mcpfleet.registry.store import Store

    pg = postgres
    name = "mig_" + uuid.uuid4().hex[:12]
    pg.admin(f"CREATE DATABASE {name}")  # type: ignore[attr-defined]
    url = pg.url(name)  # type: ignore[attr-defined]

    async def open_close() -> int:
        store = await Store.open(url)
        try:
            return await store.generation()
        finally:
            await store.close()

    async def main() -> list[int]:
        # without the lock, concurrent migrations block each other: fail in 60 s instead of hanging
        return list(await asyncio.wait_for(asyncio.gather(*(open_close() for _ in range(4))), 60))

    assert asyncio.run(main()) == [0, 0, 0, 0]


def test_schema_head_is_alembics_head() -> None:
    """`Store.open` skips alembic when the database is at SCHEMA_HEAD: it must name the newest migration."""
    from pathlib import Path

    from alembic.config import Config
    from alembic.script import ScriptDirectory

    import mcpfleet.registry.store as store

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(store.__file__).parent / "migrations"))
    assert ScriptDirectory.from_config(cfg).get_current_head() == store.SCHEMA_HEAD
    assert "registry_alembic_version" in (Path(store.__file__).parent / "migrations" / "env.py").read_text()
