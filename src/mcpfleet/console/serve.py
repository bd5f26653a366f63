"""Serving the console: inside `mcpfleet up` (`hosted`) or on its own (`serve`, `mcpfleet console serve`).

On a loopback address (the console has no sign-in: whoever reaches it sees the fleet), except in a
cluster's pod, which listens on the pod's address for `kubectl port-forward` or an authenticating
proxy in front of its Service (`mcpfleet console serve --kubernetes --listen 0.0.0.0`); the Host and
Origin checks then accept the names given with `--allowed-host` besides loopback. The
server is uvicorn with the data plane's HTTP limits (`httplimits`: header deadline and size,
keep-alive; body size and time through `BodyLimits`, tighter again in `security.Guard`). Inside
`up` it is served on `up`'s own event loop without taking over `up`'s signal handlers (as the
hosted endpoints are), on a port kept in the fleet's state like a workload's, so its URL is the
same run after run.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.console.app import create_app
from mcpfleet.console.security import MAX_BODY_BYTES
from mcpfleet.console.source import FleetSource
from mcpfleet.httplimits import BodyLimits, HttpLimits, uvicorn_options

if TYPE_CHECKING:
    from mcpfleet.platform.local.state import State

HOST = "127.0.0.1"
PORT_KEY = "Console/mcpfleet/console"
"""The console's key in the state's port table (workloads' keys are KIND/NAMESPACE/NAME/...)."""
START_SECONDS = 15.0


def bind(port: int, host: str = HOST) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _server(fleet: Path | FleetSource, log_level: str, extra_hosts: list[str] | None = None) -> Any:
    from mcpfleet import uvicornserver

    limits = HttpLimits(max_body_bytes=MAX_BODY_BYTES)
    return uvicornserver.server(
        BodyLimits(create_app(fleet, extra_hosts=extra_hosts), limits),
        lifespan="off",
        ws="none",
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=2,
        **uvicorn_options(limits),
    )


async def serve(
    fleet: Path | FleetSource,
    port: int,
    log_level: str = "warning",
    on_ready: Callable[[str], None] | None = None,
    *,
    host: str = HOST,
    extra_hosts: list[str] | None = None,
) -> None:
    """Serve until Ctrl-C / SIGTERM (the standalone command); `on_ready` gets the URL once it listens."""
    sock = bind(port, host)
    server = _server(fleet, log_level, extra_hosts)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    # uvicorn says it started only through `started`: polled.
    while not server.started and not task.done():  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    if on_ready is not None and server.started:
        on_ready(url_of(sock))
    await task


def url_of(sock: socket.socket) -> str:
    host = sock.getsockname()[0]
    shown = HOST if host in ("0.0.0.0", "::") else (f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{sock.getsockname()[1]}/"


@contextlib.asynccontextmanager
async def hosted(state: State, port_range: tuple[int, int] | None = None) -> AsyncIterator[str]:
    """The console of `up`'s fleet, served on `up`'s loop while the context is open; yields its URL."""
    from mcpfleet.platform.local.ports import DEFAULT_RANGE, PortAllocator

    allocator = PortAllocator(state.ports, state.save_port, state.release_port, port_range or DEFAULT_RANGE)
    port = await allocator.allocate(PORT_KEY)
    sock = bind(port)
    server = _server(state.state_dir, "warning")
    # `_serve`, not `serve`: `serve()` would take over `up`'s signal handlers.
    task = asyncio.create_task(server._serve(sockets=[sock]), name="console")
    try:
        async with asyncio.timeout(START_SECONDS):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("the console did not start")
                await asyncio.sleep(0.05)
        yield url_of(sock)
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(task, 5)
        sock.close()
