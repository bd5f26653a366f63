"""The local platform's state: one SQLite file in the state dir (SQLAlchemy 2, aiosqlite).

Owns three tables: `objects` (each manifest as last loaded, its local generation and its status,
in exactly the Kubernetes status shape), `processes` (what `up` started: pid, port, log file) and
`ports` (persisted port allocations, see `ports`). Readers are other processes too (`mcpfleet get`,
`mcpfleet down`, the vMCP and registry discovery), so the file runs in WAL mode and every
operation is a short transaction.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

from sqlalchemy import Integer, String, Text, delete, event, select
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from mcpfleet.api.meta import now_rfc3339
from mcpfleet.platform.local.snapshot import DB_FILENAME, StoredObject


class Base(DeclarativeBase):
    pass


class ObjectRow(Base):
    __tablename__ = "objects"

    kind: Mapped[str] = mapped_column(String, primary_key=True)
    namespace: Mapped[str] = mapped_column(String, primary_key=True)
    name: Mapped[str] = mapped_column(String, primary_key=True)
    manifest: Mapped[str] = mapped_column(Text)
    spec_hash: Mapped[str] = mapped_column(String)
    generation: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[str] = mapped_column(Text, default="{}")
    source: Mapped[str] = mapped_column(String, default="")
    created: Mapped[str] = mapped_column(String)


class ProcessRow(Base):
    __tablename__ = "processes"

    key: Mapped[str] = mapped_column(String, primary_key=True)
    """kind/namespace/name/container/replica."""
    kind: Mapped[str] = mapped_column(String)
    name: Mapped[str] = mapped_column(String)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    port: Mapped[int | None] = mapped_column(Integer, nullable=True)
    log_path: Mapped[str] = mapped_column(String)
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    started: Mapped[str] = mapped_column(String)


class PortRow(Base):
    __tablename__ = "ports"

    key: Mapped[str] = mapped_column(String, primary_key=True)
    port: Mapped[int] = mapped_column(Integer, unique=True)


class MetaRow(Base):
    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String, primary_key=True)
    value: Mapped[str] = mapped_column(Text)


def spec_hash(manifest: dict[str, Any]) -> str:
    """What bumps the generation: the spec, as on Kubernetes (labels and annotations do not)."""
    return hashlib.sha256(json.dumps(manifest.get("spec") or {}, sort_keys=True).encode()).hexdigest()


def _row_to_object(row: ObjectRow) -> StoredObject:
    return StoredObject(
        kind=row.kind,
        namespace=row.namespace,
        name=row.name,
        manifest=json.loads(row.manifest),
        generation=row.generation,
        status=json.loads(row.status or "{}"),
        source=row.source,
        created=row.created,
    )


class State:
    """Async access to the state file. Create with `await State.open(state_dir)`; `close()` at the end."""

    def __init__(self, engine: AsyncEngine, state_dir: Path) -> None:
        self.engine = engine
        self.state_dir = state_dir
        self._session = async_sessionmaker(engine, expire_on_commit=False)

    @classmethod
    async def open(cls, state_dir: Path, create: bool = True) -> State:
        if create:
            await asyncio.to_thread(state_dir.mkdir, parents=True, exist_ok=True)
        engine = create_async_engine(f"sqlite+aiosqlite:///{state_dir / DB_FILENAME}")

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            # WAL: `mcpfleet get` and the discovery readers never block the reconcile loop's writes.
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA busy_timeout=5000")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        if create:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
        return cls(engine, state_dir)

    async def close(self) -> None:
        await self.engine.dispose()

    # -- objects ------------------------------------------------------------------------------

    async def upsert_object(
        self, kind: str, namespace: str, name: str, manifest: dict[str, Any], source: str
    ) -> StoredObject:
        """Store the manifest; the generation goes up by one when the spec changed."""
        digest = spec_hash(manifest)
        async with self._session.begin() as session:
            row = await session.get(ObjectRow, (kind, namespace, name))
            if row is None:
                row = ObjectRow(
                    kind=kind,
                    namespace=namespace,
                    name=name,
                    manifest=json.dumps(manifest),
                    spec_hash=digest,
                    generation=1,
                    status="{}",
                    source=source,
                    created=now_rfc3339(),
                )
                session.add(row)
            else:
                if row.spec_hash != digest:
                    row.generation += 1
                    row.spec_hash = digest
                encoded = json.dumps(manifest)
                if row.manifest != encoded or row.source != source:  # an unchanged re-read writes nothing
                    row.manifest = encoded
                    row.source = source
            return _row_to_object(row)

    async def delete_object(self, kind: str, namespace: str, name: str) -> None:
        async with self._session.begin() as session:
            await session.execute(
                delete(ObjectRow).where(
                    ObjectRow.kind == kind, ObjectRow.namespace == namespace, ObjectRow.name == name
                )
            )

    async def objects(self, kind: str | None = None) -> list[StoredObject]:
        async with self._session() as session:
            query = select(ObjectRow)
            if kind is not None:
                query = query.where(ObjectRow.kind == kind)
            rows = (
                await session.scalars(query.order_by(ObjectRow.kind, ObjectRow.namespace, ObjectRow.name))
            ).all()
            return [_row_to_object(r) for r in rows]

    async def get_object(self, kind: str, namespace: str, name: str) -> StoredObject | None:
        async with self._session() as session:
            row = await session.get(ObjectRow, (kind, namespace, name))
            return None if row is None else _row_to_object(row)

    async def set_status(self, kind: str, namespace: str, name: str, status: dict[str, Any]) -> bool:
        """Write the status; returns False (and writes nothing) when it is unchanged."""
        encoded = json.dumps(status, sort_keys=True)
        async with self._session.begin() as session:
            row = await session.get(ObjectRow, (kind, namespace, name))
            if row is None or row.status == encoded:
                return False
            row.status = encoded
            return True

    # -- processes ----------------------------------------------------------------------------

    async def record_process(
        self, key: str, kind: str, name: str, pid: int, port: int | None, log_path: str, restarts: int
    ) -> None:
        async with self._session.begin() as session:
            await session.merge(
                ProcessRow(
                    key=key,
                    kind=kind,
                    name=name,
                    pid=pid,
                    port=port,
                    log_path=log_path,
                    restarts=restarts,
                    started=now_rfc3339(),
                )
            )

    async def forget_process(self, key: str) -> None:
        async with self._session.begin() as session:
            await session.execute(delete(ProcessRow).where(ProcessRow.key == key))

    async def processes(self) -> list[ProcessRow]:
        async with self._session() as session:
            return list((await session.scalars(select(ProcessRow).order_by(ProcessRow.key))).all())

    # -- ports --------------------------------------------------------------------------------

    async def ports(self) -> dict[str, int]:
        async with self._session() as session:
            return {r.key: r.port for r in (await session.scalars(select(PortRow))).all()}

    async def save_port(self, key: str, port: int) -> None:
        async with self._session.begin() as session:
            await session.merge(PortRow(key=key, port=port))

    async def release_port(self, key: str) -> None:
        async with self._session.begin() as session:
            await session.execute(delete(PortRow).where(PortRow.key == key))

    # -- meta ---------------------------------------------------------------------------------

    async def set_meta(self, key: str, value: str | None) -> None:
        async with self._session.begin() as session:
            if value is None:
                await session.execute(delete(MetaRow).where(MetaRow.key == key))
            else:
                await session.merge(MetaRow(key=key, value=value))

    async def get_meta(self, key: str) -> str | None:
        async with self._session() as session:
            row = await session.get(MetaRow, key)
            return None if row is None else row.value
