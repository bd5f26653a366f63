"""Group commit of concurrent publishes (`registry/groupcommit.py`): batches, names, failures."""

from __future__ import annotations

import asyncio

import pytest

from mcpfleet.registry.entry import Entry
from mcpfleet.registry.groupcommit import MAX_BATCH, GroupCommit


def entry(name: str, version: str = "1.0.0") -> Entry:
    return Entry(name, version, {"name": name, "version": version})


class Writer:
    """Records each batch; the first batch waits until released, so the others queue up meanwhile."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, str]]] = []
        self.release = asyncio.Event()
        self.fail: Exception | None = None

    async def __call__(self, entries: list[Entry]) -> list[str]:
        self.batches.append([e.key for e in entries])
        if len(self.batches) == 1:
            await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return [f"{e.name}@{e.version}" for e in entries]


async def test_publishes_arriving_meanwhile_are_written_together() -> None:
    writer = Writer()
    group: GroupCommit[str] = GroupCommit(writer)
    first = asyncio.create_task(group.submit(entry("a")))
    await asyncio.sleep(0)
    others = [asyncio.create_task(group.submit(entry(n))) for n in ("b", "c", "d")]
    # Same name twice: the second waits for the next batch (merged over the first).
    again = asyncio.create_task(group.submit(entry("b", "2.0.0")))
    await asyncio.sleep(0.01)
    writer.release.set()
    assert await first == "a@1.0.0"
    assert [await t for t in others] == ["b@1.0.0", "c@1.0.0", "d@1.0.0"]
    assert await again == "b@2.0.0"
    assert writer.batches == [
        [("a", "1.0.0")],
        [("b", "1.0.0"), ("c", "1.0.0"), ("d", "1.0.0")],
        [("b", "2.0.0")],
    ]


async def test_a_batch_is_bounded() -> None:
    writer = Writer()
    group: GroupCommit[str] = GroupCommit(writer)
    first = asyncio.create_task(group.submit(entry("first")))
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(group.submit(entry(f"n{i}"))) for i in range(MAX_BATCH + 3)]
    await asyncio.sleep(0.01)
    writer.release.set()
    await first
    await asyncio.gather(*tasks)
    assert [len(b) for b in writer.batches] == [1, MAX_BATCH, 3]


async def test_a_failed_write_fails_its_batch_only() -> None:
    writer = Writer()
    writer.fail = RuntimeError("database gone")
    group: GroupCommit[str] = GroupCommit(writer)
    first = asyncio.create_task(group.submit(entry("a")))
    await asyncio.sleep(0)
    second = asyncio.create_task(group.submit(entry("b")))
    await asyncio.sleep(0.01)
    writer.release.set()
    with pytest.raises(RuntimeError, match="database gone"):
        await first
    with pytest.raises(RuntimeError, match="database gone"):
        await second
    writer.fail = None
    assert await group.submit(entry("c")) == "c@1.0.0"  # the next batch is written


async def test_a_cancelled_submitter_does_not_stop_the_others() -> None:
    writer = Writer()
    group: GroupCommit[str] = GroupCommit(writer)
    first = asyncio.create_task(group.submit(entry("a")))
    await asyncio.sleep(0)
    gone = asyncio.create_task(group.submit(entry("b")))
    kept = asyncio.create_task(group.submit(entry("c")))
    await asyncio.sleep(0)
    first.cancel()  # the client of the batch being written goes away
    gone.cancel()  # and one queued
    writer.release.set()
    assert await kept == "c@1.0.0"
    assert writer.batches == [[("a", "1.0.0")], [("c", "1.0.0")]]
    await group.close()
