"""Group commit of concurrent publishes (issue 32).

A publish waits for the database (a round trip, the commit's WAL flush) far longer than it computes.
Publishes that arrive while one batch is being written queue up and are written together as the
next batch (`Store.publish_many`: on PostgreSQL one read and one write for the whole batch), so the
waits are shared instead of taken one after another under the registry's write lock.

One batch at a time, by a task of its own (a publisher whose client goes away does not stop the
others' batch); a batch holds distinct names (a second publish of a name waits for the next one, so
each is merged over the other), at most `MAX_BATCH` publishes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from mcpfleet.registry.entry import Entry

MAX_BATCH = 64
R = TypeVar("R")


class GroupCommit(Generic[R]):
    """Runs `write(entries)` for batches of the entries `submit`ted; each submitter gets its own
    result (or the batch's exception)."""

    def __init__(self, write: Callable[[list[Entry]], Awaitable[list[R]]]) -> None:
        self._write = write
        self._queue: list[tuple[Entry, asyncio.Future[R]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, entry: Entry) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((entry, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain(), name="registry-group-commit")
        return await future

    async def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer

    def _next_batch(self) -> list[tuple[Entry, asyncio.Future[R]]]:
        batch: list[tuple[Entry, asyncio.Future[R]]] = []
        names: set[str] = set()
        later: list[tuple[Entry, asyncio.Future[R]]] = []
        for entry, future in self._queue:
            if future.done():
                continue  # (its submitter was cancelled: nothing to write for it)
            if entry.name in names or len(batch) == MAX_BATCH:
                later.append((entry, future))
            else:
                names.add(entry.name)
                batch.append((entry, future))
        self._queue = later
        return batch

    async def _drain(self) -> None:
        batch: list[tuple[Entry, asyncio.Future[R]]] = []
        try:
            while batch := self._next_batch():
                try:
                    results = await self._write([entry for entry, _future in batch])
                except Exception as exc:
                    _fail(batch, exc)
                    continue
                for (_entry, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        except BaseException:  # cancelled (the loop is closing): no submitter waits forever
            _fail(batch + self._queue, RuntimeError("the registry is shutting down"))
            self._queue = []
            raise


def _fail(waiting: list[tuple[Entry, asyncio.Future[R]]], exc: BaseException) -> None:
    for _entry, future in waiting:
        if not future.done():
            future.set_exception(exc)
