"""The state files are owner-only (issue 27 item 13): state.db holds every manifest, an
MCPRemoteProxy's `remoteURL` with its credentials included, and was created 0644.

A new state.db is created 0600 before SQLite opens it, existing files (state.db, -wal, -shm) are
narrowed by path; and making them private never costs a write: closing a descriptor of the file in
a process that holds an SQLite connection on it would drop that process's POSIX locks, and SQLite's
WAL would then lose writes (the trap that made test_up_e2e fail intermittently once).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from mcpfleet.platform.local.state import STATE_FILES, State

READ_AND_CLOSE = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=5)
print(db.execute('SELECT count(*) FROM meta').fetchone()[0])
db.close()
"""


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_new_state_file_is_created_owner_only(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)  # the usual umask: what made the file 0644
    try:
        state = await State.open(tmp_path / "state")
        await state.set_meta("k", "v")
    finally:
        os.umask(old_umask)
    try:
        present = [tmp_path / "state" / name for name in STATE_FILES if (tmp_path / "state" / name).exists()]
        assert tmp_path / "state" / "state.db" in present
        assert {p.name: _mode(p) for p in present} == {p.name: 0o600 for p in present}
    finally:
        await state.close()


async def test_existing_state_files_are_narrowed(tmp_path: Path) -> None:
    """A state dir written by an older `up` (0644 files, WAL companions left behind by a crash)."""
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    db = sqlite3.connect(state_dir / "state.db")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.commit()
    for name in STATE_FILES:
        if (state_dir / name).exists():
            os.chmod(state_dir / name, 0o644)
    state = await State.open(state_dir)
    try:
        await state.set_meta("k", "v")
        for name in STATE_FILES:
            path = state_dir / name
            if path.exists():
                assert _mode(path) == 0o600, (name, oct(_mode(path)))
    finally:
        await state.close()
        db.close()


async def test_a_second_state_in_the_same_process_loses_no_write_of_the_first(tmp_path: Path) -> None:
    """Two State objects open in one process (as `up` and a reader in it have), the second opened
    after the first wrote: every write of the first is still there. With a descriptor opened and
    closed on state.db, the first's POSIX locks went; the second, closing, then believed itself the
    last connection, checkpointed and deleted the WAL the first still wrote to."""
    state_dir = tmp_path / "state"
    first = await State.open(state_dir)
    try:
        for i in range(40):
            await first.set_meta(f"first-{i}", str(i))
        second = await State.open(state_dir)
        await second.set_meta("second", "x")
        assert await second.get_meta("first-39") == "39"
        await second.close()
        # Another process reads and closes (as `mcpfleet get`, `down` and the discovery readers
        # do): it must still see the first State's connection (its POSIX lock), and so must leave
        # the WAL alone.
        reader = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", READ_AND_CLOSE, str(state_dir / "state.db")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert reader.returncode == 0 and reader.stdout.strip() == "41", reader
        for i in range(40, 80):
            await first.set_meta(f"first-{i}", str(i))
        third = await State.open(state_dir, create=False)
        try:
            assert [await third.get_meta(f"first-{i}") for i in range(80)] == [str(i) for i in range(80)]
        finally:
            await third.close()
    finally:
        await first.close()
    # And from a fresh connection, after every State closed: nothing lost.
    with closing(sqlite3.connect(f"file:{state_dir / 'state.db'}?mode=ro", uri=True)) as db:
        keys = {row[0] for row in db.execute('SELECT "key" FROM meta')}
    assert {f"first-{i}" for i in range(80)} | {"second"} <= keys, sorted(keys)
    assert _mode(state_dir / "state.db") == 0o600
