"""Deterministic, collision-free port allocation for local workloads.

A workload container's port starts from a hash of `kind/namespace/name/container/replica` into a
range, then probes upward past ports already given to another key or busy on the machine. The
result is persisted in the state file, so the same manifests get the same URLs run after run (a
client config written once keeps working), and two keys never share a port. A key moved off its
preferred port (busy at the time) goes back to it at the next start once it is free; `up` says
loudly when a port moved (`Runner.port_notices`).
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Awaitable, Callable, Collection

DEFAULT_RANGE = (20000, 29999)


def preferred_port(key: str, low: int, high: int) -> int:
    """Where probing starts for `key`: stable across runs and machines."""
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return low + digest % (high - low + 1)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on host:port (we can bind it right now)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


class PortAllocator:
    """Hands out ports; `load`/`save` persist them (the state's ports table)."""

    def __init__(
        self,
        load: Callable[[], Awaitable[dict[str, int]]],
        save: Callable[[str, int], Awaitable[None]],
        release: Callable[[str], Awaitable[None]],
        port_range: tuple[int, int] = DEFAULT_RANGE,
        is_free: Callable[[int], bool] = port_is_free,
    ) -> None:
        low, high = port_range
        if not (1024 <= low <= high <= 65535):
            raise ValueError(f"port range: expected 1024 <= low <= high <= 65535, got {low}-{high}")
        self._load, self._save, self._release = load, save, release
        self.low, self.high = low, high
        self._is_free = is_free

    async def allocate(self, key: str, in_use_by_us: Collection[int] = ()) -> int:
        """The port of `key`: its persisted one when still usable, else the next free from its hash.

        `in_use_by_us` are ports our own running processes hold: busy on the machine, but still
        theirs (a restart of the same process must not move it).
        """
        taken = await self._load()
        current = taken.get(key)
        others = {port for other, port in taken.items() if other != key}
        size = self.high - self.low + 1
        start = preferred_port(key, self.low, self.high)
        if current is not None and current in in_use_by_us:
            return current
        if (
            current not in (None, start)
            and start not in others
            and start not in in_use_by_us
            and self._is_free(start)
        ):
            # Moved away once because the preferred port was busy: back to it as soon as it is
            # free, so the URL a client was configured with (the README's) works again.
            await self._save(key, start)
            return start
        if current is not None and self._is_free(current):
            return current
        for offset in range(size):
            port = self.low + (start - self.low + offset) % size
            if port in others or port in in_use_by_us:
                continue
            if self._is_free(port):
                await self._save(key, port)
                return port
        raise RuntimeError(f"no free port left in {self.low}-{self.high}")

    async def release(self, key: str) -> None:
        await self._release(key)
