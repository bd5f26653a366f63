"""uvicorn servers that tests run inside pytest's own process, leaving its signal handlers alone.

Why this exists: `uvicorn.Server.serve()` installs its `handle_exit` as the process's SIGINT and
SIGTERM handler and, when it returns, puts back whatever handler it found. Two servers whose
lifetimes overlap without nesting (A starts, B starts, A stops, B stops) therefore leave A's
`handle_exit` installed for good: B "restores" the handler it found, A's. sse-starlette (the MCP
SDK's SSE responses) looks up the uvicorn server behind the SIGTERM handler to drain its streams at
shutdown; finding A (stopped, `should_exit` true) it ends every later SSE stream of the process
right after its first event: a streamable HTTP request then gets only the SSE priming event and
uvicorn logs "ASGI callable returned without completing response". `mcpfleet up` hosts its
endpoints the same way (`server._serve`: `up` owns the signals); the operator's conversion webhook
disables uvicorn's signal capture too.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import uvicorn

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class InProcessServer(uvicorn.Server):
    """A uvicorn server that never installs signal handlers (the test stops it: `should_exit`)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def leaked_uvicorn_handlers() -> list[str]:
    """The signals whose handler is a uvicorn server's `handle_exit` (none outside a running `serve()`)."""
    return [
        signal.Signals(sig).name
        for sig in HANDLED_SIGNALS
        if isinstance(getattr(signal.getsignal(sig), "__self__", None), uvicorn.Server)
    ]
