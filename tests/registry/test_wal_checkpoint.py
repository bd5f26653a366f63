"""SQLite WAL checkpoints run in the background, never inside a commit (mcpfleet.registry.wal)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from mcpfleet.registry import wal
from mcpfleet.registry.entry import PUBLISHED, Entry


def _wal_frames(path: Path) -> tuple[int, int]:
    """(frames in the WAL, frames of it already copied into the database), read without writing."""
    conn = sqlite3.connect(path)
    try:
        # PASSIVE with nothing new to copy only reports; the test's own checkpointer did the work.
        busy, log, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0
        return int(log), int(done)
    finally:
        conn.close()


def _server(i: int) -> Entry:
    name = f"com.example.wal/server-{i}"
    return Entry(name, "1.0.0", {"name": name, "version": "1.0.0", "description": "wal test"})


def test_commits_do_not_checkpoint_the_checkpointer_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's connections have automatic checkpoints off (a commit never waits for the copy
    and its two fsyncs); after writes the checkpointer copies the WAL in the background: at once
    after `_EVERY_WRITES` commits, else after `_DELAY_SECONDS`."""
    from mcpfleet.registry.store import Store

    monkeypatch.setattr(wal, "_EVERY_WRITES", 5)
    monkeypatch.setattr(wal, "_DELAY_SECONDS", 30.0)
    path = tmp_path / "w.db"

    async def run() -> None:
        store = await Store.open(f"sqlite+aiosqlite:///{path}")
        try:
            checkpointer = store.checkpointer
            assert checkpointer is not None
            async with store.engine.connect() as conn:
                from sqlalchemy import text

                assert await conn.scalar(text("PRAGMA wal_autocheckpoint")) == 0
            before = checkpointer.checkpoints
            for i in range(6):  # (the threshold, whatever the migrations' commits counted)
                assert await store.publish(_server(i), [PUBLISHED]) is not None
            for _ in range(100):
                if checkpointer.checkpoints > before:
                    break
                await asyncio.sleep(0.05)
            assert checkpointer.checkpoints == before + 1
            # Fewer commits than the threshold and the delay not over: nothing checkpointed yet.
            for i in range(6, 8):
                assert await store.publish(_server(i), [PUBLISHED]) is not None
            await asyncio.sleep(0.3)
            assert checkpointer.checkpoints == before + 1
            # The delay alone triggers one too, and it copies the whole WAL.
            monkeypatch.setattr(wal, "_DELAY_SECONDS", 0.1)
            assert await store.publish(_server(99), [PUBLISHED]) is not None
            for _ in range(100):
                if checkpointer.checkpoints > before + 1:
                    break
                await asyncio.sleep(0.05)
            assert checkpointer.checkpoints == before + 2
            log, done = _wal_frames(path)
            assert log > 0 and done == log, (log, done)
        finally:
            await store.close()
        # Every publish is there after the close (the last connection's close checkpoints the rest).
        conn = sqlite3.connect(path)
        try:
            count = conn.execute(
                "SELECT count(*) FROM registry_source_entries WHERE source = ?", (PUBLISHED,)
            ).fetchone()[0]
        finally:
            conn.close()
        assert count == 9

    asyncio.run(run())
