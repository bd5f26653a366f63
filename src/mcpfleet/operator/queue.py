"""A de-duplicating work queue: a key waits at most once, and a key enqueued while it is being
reconciled runs once more afterwards (so no change is lost and no object is reconciled twice at once)."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._pending: set[K] = set()
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}

    def add(self, key: K) -> None:
        if key in self._active:
            self._dirty.add(key)
            return
        if key in self._pending:
            return
        self._pending.add(key)
        self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` after `delay` seconds; replaces a delayed add of the same key not yet due."""
        self.cancel_after(key)
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.pop(key, None)
            self.add(key)

        self._timers[key] = loop.call_later(delay, fire)

    def cancel_after(self, key: K) -> None:
        """Drop a delayed add of `key` (its reason went away, e.g. the status it waited for was written)."""
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    async def get(self) -> K:
        key = await self._queue.get()
        self._pending.discard(key)
        self._active.add(key)
        return key

    def done(self, key: K) -> None:
        self._active.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    @property
    def idle(self) -> bool:
        """Nothing waiting and nothing running (retries scheduled for later do not count)."""
        return not self._pending and not self._active

    def __len__(self) -> int:
        return len(self._pending) + len(self._active)

    def close(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
