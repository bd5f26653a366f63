"""Port allocation (deterministic, collision-free, persisted) and the SQLite state."""

from __future__ import annotations

import socket
from pathlib import Path

from mcpfleet.platform.local.ports import PortAllocator, preferred_port
from mcpfleet.platform.local.state import State


async def _allocator(state: State, low: int = 40000, high: int = 40009) -> PortAllocator:
    return PortAllocator(state.ports, state.save_port, state.release_port, port_range=(low, high))


async def test_ports_are_deterministic_persisted_and_distinct(tmp_path: Path) -> None:
    state = await State.open(tmp_path / "s1")
    try:
        ports = await _allocator(state, 41000, 41999)
        a = await ports.allocate("MCPServer/default/a/proxy/0")
        b = await ports.allocate("MCPServer/default/b/proxy/0")
        assert a != b
        assert await ports.allocate("MCPServer/default/a/proxy/0") == a  # stable within a run
    finally:
        await state.close()
    # A fresh state dir gives the same ports for the same keys: the hash, not the order, decides.
    other = await State.open(tmp_path / "s2")
    try:
        ports = await _allocator(other, 41000, 41999)
        assert await ports.allocate("MCPServer/default/b/proxy/0") == b
        assert await ports.allocate("MCPServer/default/a/proxy/0") == a
    finally:
        await other.close()


async def test_ports_probe_past_taken_and_busy_ones(tmp_path: Path) -> None:
    state = await State.open(tmp_path)
    low, high = 42000, 42003
    start = preferred_port("k1", low, high)
    busy = socket.socket()
    busy.bind(("127.0.0.1", start))
    busy.listen()
    try:
        ports = await _allocator(state, low, high)
        first = await ports.allocate("k1")
        assert first != start  # the preferred port is busy on the machine
        given = {first}
        for key in ("k2", "k3"):
            given.add(await ports.allocate(key))
        assert len(given) == 3 and start not in given
        await ports.release("k2")
        assert len(await state.ports()) == 2
    finally:
        busy.close()
        await state.close()


async def test_generation_moves_with_the_spec_only_and_unchanged_status_writes_nothing(
    tmp_path: Path,
) -> None:
    state = await State.open(tmp_path)
    try:
        doc = {"kind": "MCPGroup", "metadata": {"name": "g"}, "spec": {"description": "one"}}
        first = await state.upsert_object("MCPGroup", "default", "g", doc, "a.yaml#1")
        assert first.generation == 1
        relabelled = {**doc, "metadata": {"name": "g", "labels": {"x": "y"}}}
        assert (await state.upsert_object("MCPGroup", "default", "g", relabelled, "a.yaml#1")).generation == 1
        changed = {**doc, "spec": {"description": "two"}}
        assert (await state.upsert_object("MCPGroup", "default", "g", changed, "a.yaml#1")).generation == 2
        assert await state.set_status("MCPGroup", "default", "g", {"phase": "Ready"}) is True
        assert await state.set_status("MCPGroup", "default", "g", {"phase": "Ready"}) is False
        stored = await state.get_object("MCPGroup", "default", "g")
        assert stored is not None and stored.as_document()["status"] == {"phase": "Ready"}
        await state.delete_object("MCPGroup", "default", "g")
        assert await state.objects() == []
    finally:
        await state.close()
