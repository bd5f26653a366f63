"""Port allocation (deterministic, collision-free, persisted) and the SQLite state."""

from __future__ import annotations

import socket
from pathlib import Path

from mcpfleet.platform.local.ports import PortAllocator, port_is_free, preferred_port
from mcpfleet.platform.local.state import State


def _allocator(state: State, low: int, high: int, busy: set[int] | None = None) -> PortAllocator:
    # "Busy on the machine" is injected: the test must not depend on what else runs here.
    taken = busy or set()
    return PortAllocator(
        state.ports,
        state.save_port,
        state.release_port,
        port_range=(low, high),
        is_free=lambda p: p not in taken,
    )


async def test_ports_are_deterministic_persisted_and_distinct(tmp_path: Path) -> None:
    state = await State.open(tmp_path / "s1")
    try:
        ports = _allocator(state, 41000, 41999)
        a = await ports.allocate("MCPServer/default/a/proxy/0")
        b = await ports.allocate("MCPServer/default/b/proxy/0")
        assert a != b
        assert await ports.allocate("MCPServer/default/a/proxy/0") == a  # stable within a run
    finally:
        await state.close()
    # A fresh state dir gives the same ports for the same keys: the hash, not the order, decides.
    other = await State.open(tmp_path / "s2")
    try:
        ports = _allocator(other, 41000, 41999)
        assert await ports.allocate("MCPServer/default/b/proxy/0") == b
        assert await ports.allocate("MCPServer/default/a/proxy/0") == a
    finally:
        await other.close()


async def test_ports_probe_past_taken_and_busy_ones(tmp_path: Path) -> None:
    state = await State.open(tmp_path)
    low, high = 42000, 42003
    start = preferred_port("k1", low, high)
    try:
        ports = _allocator(state, low, high, busy={start})
        first = await ports.allocate("k1")
        assert first != start  # the preferred port is busy on the machine
        given = {first}
        for key in ("k2", "k3"):
            given.add(await ports.allocate(key))
        assert len(given) == 3 and start not in given
        try:
            await ports.allocate("k4")
        except RuntimeError as exc:
            assert "no free port left in 42000-42003" in str(exc)
        else:
            raise AssertionError("a fourth key got a port from a range with one busy port of four")
        held = await state.ports()
        await ports.release("k2")
        assert len(await state.ports()) == 2
        # The released port is free again: k4 gets it, not one still held by k1 or k3.
        assert await ports.allocate("k4") == held["k2"]
    finally:
        await state.close()


def test_port_is_free_sees_a_listening_socket() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        assert not port_is_free(sock.getsockname()[1])


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


async def test_a_moved_port_goes_back_to_the_preferred_one_once_it_is_free(tmp_path: Path) -> None:
    state = await State.open(tmp_path)
    low, high = 43000, 43009
    start = preferred_port("k1", low, high)
    busy = {start}
    try:
        ports = _allocator(state, low, high, busy=busy)
        moved = await ports.allocate("k1")
        assert moved != start
        # While our own process holds the moved port, it stays (a restart must not move it).
        busy.clear()
        assert await ports.allocate("k1", in_use_by_us={moved}) == moved
        # At the next start (nothing of ours holds it) the preferred port is free again: back to it.
        assert await ports.allocate("k1") == start
        assert (await state.ports())["k1"] == start
    finally:
        await state.close()
