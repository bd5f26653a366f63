"""Relay between one SDK transport session (streamable HTTP or SSE) and the multiplexer.

The SDK's server transports (`StreamableHTTPServerTransport`, `SseServerTransport`) own the
HTTP details (SSE framing, session ids, protocol-version and Origin/Host checks, per-request
response streams). They hand over a pair of memory streams of `SessionMessage`s, exactly as they
would to an MCP `Server`. Here, instead of a server, the messages are relayed as plain JSON-RPC
dicts to the child; the child's messages come back with `related_request_id` metadata so the
transport puts them on the stream of the request they belong to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterable
from typing import Protocol

from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from mcpfleet.proxy.mux import JSON, Multiplexer, RequestId

log = logging.getLogger(__name__)


class WriteStream(Protocol):
    """The send side the SDK transports hand out (typed here rather than importing SDK internals)."""

    async def send(self, item: SessionMessage, /) -> None: ...


def to_dict(message: JSONRPCMessage) -> JSON:
    """The wire dict of an SDK JSON-RPC model, built field by field so params pass through verbatim."""
    out: JSON = {"jsonrpc": "2.0"}
    if isinstance(message, JSONRPCRequest):
        out["id"] = message.id
        out["method"] = message.method
        if message.params is not None:
            out["params"] = message.params
    elif isinstance(message, JSONRPCNotification):
        out["method"] = message.method
        if message.params is not None:
            out["params"] = message.params
    elif isinstance(message, JSONRPCResponse):
        out["id"] = message.id
        out["result"] = message.result
    else:
        out["id"] = message.id
        error: JSON = {"code": message.error.code, "message": message.error.message}
        if message.error.data is not None:
            error["data"] = message.error.data
        out["error"] = error
    return out


def from_dict(message: JSON) -> JSONRPCMessage:
    """The SDK model for a wire dict from the child."""
    if "method" in message:
        if "id" in message:
            return JSONRPCRequest.model_validate(message)
        return JSONRPCNotification.model_validate(message)
    if "error" in message:
        return JSONRPCError.model_validate(message)
    return JSONRPCResponse.model_validate(message)


class StreamPeer:
    """A peer whose messages go to an SDK transport's write stream.

    Deliveries are queued and written by a pump task, so a slow client never stalls the
    child's reader (which serves every other client too).
    """

    def __init__(self, write_stream: WriteStream, broadcast: bool = True) -> None:
        self._write = write_stream
        self._queue: asyncio.Queue[tuple[JSON, RequestId | None] | None] = asyncio.Queue()
        self._broadcast = broadcast

    @property
    def broadcast(self) -> bool:
        return self._broadcast

    async def deliver(self, message: JSON, related_request_id: RequestId | None) -> None:
        self._queue.put_nowait((message, related_request_id))

    def close(self) -> None:
        self._queue.put_nowait(None)

    async def pump(self) -> None:
        while (item := await self._queue.get()) is not None:
            message, related = item
            try:
                model = from_dict(message)
            except ValueError:
                log.warning("dropping a malformed message from the server: %.200r", message)
                continue
            metadata = ServerMessageMetadata(related_request_id=related) if related is not None else None
            try:
                await self._write.send(SessionMessage(message=model, metadata=metadata))
            except Exception as exc:  # anyio's Closed/BrokenResourceError once the session ended
                log.debug("session write stream closed: %s", exc)
                return


async def relay_session(
    read_stream: AsyncIterable[SessionMessage | Exception],
    write_stream: WriteStream,
    mux: Multiplexer,
) -> None:
    """Relay one session until the client side closes its read stream."""
    peer = StreamPeer(write_stream)
    mux.add_peer(peer)
    pump = asyncio.create_task(peer.pump())
    try:
        async for item in read_stream:
            if isinstance(item, Exception):
                log.debug("transport reported: %s", item)
                continue
            message = to_dict(item.message)
            if isinstance(item.message, JSONRPCRequest):
                await mux.request(peer, message)
            elif isinstance(item.message, JSONRPCNotification):
                await mux.notify(peer, message)
            else:
                await mux.respond(peer, message)
    except Exception as exc:  # anyio raises ClosedResourceError etc. when the session is torn down
        log.debug("session read loop ended: %s", exc)
    finally:
        await mux.remove_peer(peer)
        peer.close()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(pump, 1.0)
