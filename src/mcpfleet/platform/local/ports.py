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
import logging
import socket
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the console allocates ports without loading the models
    from mcpfleet.reconcile.model import Container

log = logging.getLogger(__name__)

DEFAULT_RANGE = (20000, 29999)
LOCAL_PORT_ANNOTATION = "mcpfleet.dev/local-port"
"""Pins the port of a workload's serving process under `mcpfleet up` (ignored on Kubernetes)."""


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


class PortChooser:
    """The port of each workload container: the one it binds itself, the one its object pins
    (LOCAL_PORT_ANNOTATION), else the allocator's; a port off its preferred number is noticed."""

    def __init__(self, allocator: PortAllocator, in_use: Callable[[], Collection[int]]) -> None:
        self.allocator = allocator
        self._in_use = in_use
        self.notices: list[str] = []
        """Ports that moved off their preferred number (and why), for the `up` terminal; append-only."""
        self._noticed: dict[str, str] = {}

    async def choose(self, key: str, container: Container, pinned: str | None = None) -> int | None:
        if container.port is None:
            return None
        if container.fixed_port and not any("{port}" in part for part in container.command):
            return container.port  # the server binds it itself; nothing to choose
        if pinned is not None:
            if pinned.isdigit() and 1024 <= int(pinned) <= 65535:
                return int(pinned)  # the user's choice: a busy port fails the process, with the bind error
            self._notice(
                key,
                f"annotation {LOCAL_PORT_ANNOTATION}: expected a port 1024-65535, got {pinned!r}; ignored",
            )
        port = await self.allocator.allocate(key, self._in_use())
        preferred = preferred_port(key, self.allocator.low, self.allocator.high)
        if port != preferred:
            self._notice(
                key,
                f"{key.rsplit('/', 2)[0]}: port {preferred} is taken by another program, so it listens on "
                f"{port} this time (its URL changed). It goes back to {preferred} at the next `mcpfleet up` "
                f"once that port is free; to pin a port, annotate the object with "
                f'{LOCAL_PORT_ANNOTATION}: "{port}"',
            )
        return port

    def _notice(self, key: str, text: str) -> None:
        """A message for the `up` terminal, once per key and text."""
        if self._noticed.get(key) != text:
            self._noticed[key] = text
            self.notices.append(text)
            log.warning("%s", text)
