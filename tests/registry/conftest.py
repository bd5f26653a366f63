"""Fixtures of the registry tests: a real PostgreSQL (Debian's packages), databases per test, services.

PostgreSQL refuses to run as root, so initdb / pg_ctl run as the `postgres` user in a temporary
directory, on a free port, with the unix socket inside that directory. If it cannot start, the tests
that need it fail with the reason (they are never skipped).
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from mcpfleet.registry.app import RegistryApp, create_app
from mcpfleet.registry.config import RegistryConfig, parse_config
from mcpfleet.registry.service import RegistryService


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        pytest.fail(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/pg_ctl): run scripts/system-deps.sh "
            "or apt-get install -y postgresql"
        )
    return Path(found[-1]).parent


@dataclass
class Postgres:
    host: str
    port: int

    def url(self, database: str) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        bin_dir = _pg_bin()
        subprocess.run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(bin_dir / "psql"),
                "-h",
                self.host,
                "-p",
                str(self.port),
                "-d",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-qc",
                sql,
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )


_PG_PREFIX = "mcpfleet-registry-pg-"


def _reap_orphans(bin_dir: Path) -> None:
    """Stop instances this fixture started in test runs that were killed before their teardown."""
    for root in Path(tempfile.gettempdir()).glob(_PG_PREFIX + "*"):
        try:
            owner = int((root / "owner.pid").read_text())
            os.kill(owner, 0)
            continue  # its test run is still alive
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            continue  # not ours to judge (no or unreadable owner file)
        subprocess.run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                str(bin_dir / "pg_ctl"),
                "-D",
                str(root / "data"),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    bin_dir = _pg_bin()
    if shutil.which("runuser") is None:
        pytest.fail("runuser is missing: cannot run PostgreSQL as the postgres user")
    _reap_orphans(bin_dir)
    root = Path(tempfile.mkdtemp(prefix=_PG_PREFIX))
    (root / "owner.pid").write_text(str(os.getpid()))
    os.chmod(root, 0o777)
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    subprocess.run(["chown", "-R", "postgres:postgres", str(root)], check=True)
    port = _free_port()

    def pg(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["runuser", "-u", "postgres", "--", *args], capture_output=True, text=True, timeout=120
        )

    init = pg(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
    if init.returncode != 0:
        pytest.fail(f"initdb failed: {init.stderr.strip()}")
    opts = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
    start = pg(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start")
    if start.returncode != 0:
        log = (root / "log").read_text() if (root / "log").exists() else ""
        pytest.fail(f"PostgreSQL did not start: {start.stderr.strip()} {log[-2000:]}")
    try:
        yield Postgres(str(sock), port)
    finally:
        pg(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database on each backend."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'registry.db'}"
        return
    pg: Postgres = request.getfixturevalue("postgres")
    name = "reg_" + uuid.uuid4().hex[:12]
    pg.admin(f"CREATE DATABASE {name}")
    yield pg.url(name)
    with contextlib.suppress(subprocess.CalledProcessError):
        pg.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def make_config(sources: list[dict[str, Any]], db_url: str, name: str = "test") -> RegistryConfig:
    return parse_config({"registryName": name, "sources": sources, "database": {"url": db_url}})


@dataclass
class Harness:
    """A started service (sync loops off: tests drive syncs) and an in-process HTTP client."""

    service: RegistryService
    app: RegistryApp
    client: httpx.AsyncClient

    async def sync(self) -> None:
        await self.service.syncer.sync_all()

    async def get(self, path: str, **kw: Any) -> httpx.Response:
        return await self.client.get(path, **kw)


@contextlib.asynccontextmanager
async def running(config: RegistryConfig, base_dir: Path, **kw: Any) -> AsyncIterator[Harness]:
    service = RegistryService(config, base_dir, run_loops=False, **kw)
    await service.start()
    app = create_app(service, manage_lifespan=False)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://registry.test") as client:
            yield Harness(service, app, client)
    finally:
        await service.stop()


def write_json(path: Path, data: Any) -> Path:
    import json

    path.write_text(json.dumps(data))
    return path


def server_doc(
    name: str, version: str = "1.0.0", description: str = "A test server", **extra: Any
) -> dict[str, Any]:
    return {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": name,
        "description": description,
        "version": version,
        "remotes": [{"type": "streamable-http", "url": f"https://{name.split('/')[1]}.example.com/mcp"}],
        **extra,
    }


def dump_yaml(data: Any) -> str:
    return yaml.safe_dump(data)


async def settle() -> None:
    await asyncio.sleep(0)
