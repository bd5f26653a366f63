"""SQLite WAL checkpoints in the background, not inside the transaction that happens to cross the limit.

SQLite's automatic checkpoint (every 1,000 WAL pages) runs in the connection that commits, as part of
its commit: that commit waits for every WAL frame to be copied into the database file and for both
files to be fsynced. In the registry that commit is a publish holding the write lock, so one publish
in a few hundred (and the one queued behind it) took as long as two fsyncs on a busy disk — 0.3 to
1.1 s measured under load, against a publish's 15-20 ms: the whole p99 of publishing
(docs/registry.md, "The publish tail").

So the store's connections run with `wal_autocheckpoint=0` and this checkpointer runs
`PRAGMA wal_checkpoint(PASSIVE)` on a connection of its own, in a worker thread, after writes:
a PASSIVE checkpoint takes no lock a writer needs, so publishes keep committing meanwhile. Writes are
coalesced (one checkpoint after `_EVERY_WRITES` small commits or `_DELAY_SECONDS` after the first one),
so the WAL wraps around rarely: the first commit after a wrap still fsyncs the WAL header itself
(SQLite's `synchronous=NORMAL` rule), and that is one commit in hundreds instead of one in a hundred.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading

log = logging.getLogger(__name__)

_EVERY_WRITES = 256
"""Small commits (a publish is ~5 WAL pages) after which a checkpoint runs at once."""
_DELAY_SECONDS = 5.0
"""Otherwise a checkpoint runs this long after the first commit not checkpointed yet."""


class WalCheckpointer:
    """Checkpoints one SQLite database's WAL off the commit path (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.checkpoints = 0
        self._pending = 0
        self._task: asyncio.Task[None] | None = None
        self._first = asyncio.Event()
        self._full = asyncio.Event()
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._closed = False

    def committed(self) -> None:
        """A write transaction committed (called on the event loop's thread, by the engine's event)."""
        self._pending += 1
        if self._task is None and not self._closed:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop (a synchronous use of the engine): the next commit schedules it
            self._task = loop.create_task(self._run(), name="registry-wal-checkpoint")
        self._first.set()
        if self._pending >= _EVERY_WRITES:
            self._full.set()

    async def _run(self) -> None:
        while True:
            await self._first.wait()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._full.wait(), _DELAY_SECONDS)
            self._first.clear()
            self._full.clear()
            self._pending = 0
            try:
                await asyncio.to_thread(self._checkpoint)
            except sqlite3.Error as exc:  # the next commit retries; the WAL only grows meanwhile
                log.warning("WAL checkpoint of %s failed: %s", self.path, exc)

    def _checkpoint(self) -> None:
        with self._lock:  # (a checkpoint still running in its thread when `close` is called)
            if self._closed:
                return
            if self._conn is None:
                self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def close(self) -> None:
        """Stop checkpointing (closing the last connection checkpoints what is left, as always)."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await asyncio.to_thread(self._close)
