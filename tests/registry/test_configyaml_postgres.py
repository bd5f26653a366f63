"""configYAML's PostgreSQL block on a real PostgreSQL that checks passwords: the schema migrations run as
`migrationUser`, the registry serves as `user`, and both passwords come from the pgpass file that
`PGPASSFILE` names (what `spec.pgpassSecretRef` provides) — a wrong entry there and the registry does
not start."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import asyncpg
import pytest
import yaml
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.reconcile import mcpregistry
from mcpfleet.reconcile.model import World
from mcpfleet.registry.config import parse_config
from tests.registry.conftest import Postgres, running, server_doc, write_json
from tests.waiting import wait_until


def _require_passwords(pg: Postgres) -> None:
    """The fixture's cluster trusts everyone; make TCP logins of every role but `postgres` need a password."""
    hba = Path(pg.host).parent / "data" / "pg_hba.conf"
    wanted = "host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
    if hba.read_text().startswith(wanted):
        return
    local = "\n".join(line for line in hba.read_text().splitlines() if line.startswith("local"))
    hba.write_text(wanted + local + "\n")
    subprocess.run(["chown", "postgres:postgres", str(hba)], check=True)
    pg.admin("SELECT pg_reload_conf()")


async def test_migration_user_and_pgpass(
    postgres: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _require_passwords(postgres)
    suffix = uuid.uuid4().hex[:8]
    app, migrator, database = f"app_{suffix}", f"mig_{suffix}", f"reg_{suffix}"
    postgres.admin(f"CREATE ROLE {app} LOGIN PASSWORD 'app-pw-{suffix}'")
    postgres.admin(f"CREATE ROLE {migrator} LOGIN PASSWORD 'mig-pw-{suffix}'")
    postgres.admin(f"CREATE DATABASE {database} OWNER {migrator}")
    # Tables the migrator creates are usable by the serving user (default privileges are per database).
    admin = create_async_engine(postgres.url(database))
    try:
        async with admin.begin() as conn:
            for objects in ("TABLES", "SEQUENCES"):
                await conn.execute(
                    text(f"ALTER DEFAULT PRIVILEGES FOR ROLE {migrator} GRANT ALL ON {objects} TO {app}")
                )
    finally:
        await admin.dispose()

    async def refused() -> bool:
        # pg_reload_conf() only signals the postmaster: wait until the new pg_hba.conf is in force.
        try:
            connection = await asyncpg.connect(
                host="127.0.0.1", port=postgres.port, user=app, password="nope", database=database
            )
        except asyncpg.InvalidPasswordError:
            return True
        await connection.close()
        return False

    await wait_until(refused, "PostgreSQL checks passwords", within=20, interval=0.2)
    data = write_json(tmp_path / "data.json", [server_doc("com.acme/tool")])
    config = {
        "sources": [{"name": "local", "file": {"path": str(data)}}],
        "registries": [{"name": "default", "sources": ["local"]}],
        "database": {
            "host": "127.0.0.1",
            "port": postgres.port,
            "user": app,
            "migrationUser": migrator,
            "database": database,
            "sslMode": "disable",
            "maxOpenConns": 4,
        },
        "auth": {"mode": "anonymous"},
    }
    registry = parse_manifest(
        {
            "apiVersion": "mcpfleet.dev/v1beta1",
            "kind": "MCPRegistry",
            "metadata": {"name": "pg", "namespace": "team"},
            "spec": {
                "configYAML": yaml.safe_dump(config),
                "pgpassSecretRef": {"name": "pgpass", "key": ".pgpass"},
            },
        }
    )
    assert isinstance(registry, MCPRegistry)
    plan = mcpregistry.plan(registry, World(platform="local", namespace="team"))
    assert plan.problems == ()
    served = parse_config(yaml.safe_load(plan.config_files[0].content))
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(
        f"127.0.0.1:{postgres.port}:{database}:{app}:app-pw-{suffix}\n"
        f"127.0.0.1:{postgres.port}:{database}:{migrator}:wrong\n"
    )
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    with pytest.raises(Exception, match="password authentication failed"):
        async with running(served, tmp_path):
            pass
    pgpass.write_text(pgpass.read_text().replace(":wrong", f":mig-pw-{suffix}"))
    async with running(served, tmp_path) as h:
        await h.sync()
        answer = await h.get("/v0.1/servers")
        assert [s["server"]["name"] for s in answer.json()["servers"]] == ["com.acme/tool"]
    engine = create_async_engine(postgres.url(database))
    try:
        async with engine.connect() as conn:
            owner = await conn.scalar(
                text("SELECT tableowner FROM pg_tables WHERE tablename = 'registry_servers'")
            )
    finally:
        await engine.dispose()
    assert owner == migrator
