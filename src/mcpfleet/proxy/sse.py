"""The deprecated HTTP+SSE transport (2024-11-05): `GET /sse` opens a session stream whose first
event names the `/messages/?session_id=...` URL the client POSTs to.

Framing is the SDK's `SseServerTransport`; each SSE connection is relayed to the handshake-era
child like a streamable-HTTP session. A POST naming `session_id` twice is refused here (400 naming
it), with or without incoming auth: the transport would take the last value, and every check in
front of it (`auth.binding`, the policy layer) reads the parameter as one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import orjson
from mcp.server.sse import SseServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from mcpfleet.auth.binding import AmbiguousSession, query_session
from mcpfleet.jsonrpc import INVALID_REQUEST
from mcpfleet.proxy.backend import SessionServerLimit
from mcpfleet.proxy.mux import Multiplexer
from mcpfleet.proxy.relay import relay_session

log = logging.getLogger(__name__)


class SseEndpoints:
    """ASGI handlers for `/sse` and `/messages/`."""

    def __init__(
        self,
        acquire: Callable[[], Awaitable[Multiplexer]],
        release: Callable[[Multiplexer], Awaitable[None]],
        security: TransportSecuritySettings | None,
        message_path: str = "/messages/",
    ) -> None:
        self._acquire = acquire
        self._release = release
        self._transport = SseServerTransport(message_path, security_settings=security)
        self._tasks: set[asyncio.Task[None]] = set()

    async def handle_sse(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            mux = await self._acquire()
        except SessionServerLimit as exc:  # `--isolation session` at its cap of running servers
            body = orjson.dumps(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": str(exc)}}
            )
            headers = {"Retry-After": "5"}
            await Response(body, 503, headers=headers, media_type="application/json")(scope, receive, send)
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            async with self._transport.connect_sse(scope, receive, send) as (read_stream, write_stream):
                await relay_session(read_stream, write_stream, mux)
        except ValueError as exc:
            # connect_sse already answered (e.g. 403 from the Host/Origin check).
            log.debug("SSE connection refused: %s", exc)
        finally:
            await self._release(mux)
            if task is not None:
                self._tasks.discard(task)

    async def handle_post(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            query_session(scope.get("query_string", b""))
        except AmbiguousSession as exc:
            error = {"code": INVALID_REQUEST, "message": f"Bad request: {exc}"}
            body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": error})
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._transport.handle_post_message(scope, receive, send)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
