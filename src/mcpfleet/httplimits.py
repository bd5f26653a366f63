"""HTTP-level limits of the proxy's and the vMCP gateway's servers: body size, body and header
read time, header size, keep-alive, JSON nesting depth.

Owns (the `HttpLimits` settings themselves are in `httpsettings`, light enough for the CLI's option
definitions, and re-exported here): the `BodyLimits` ASGI middleware (413 for a body over
the size limit, decided from Content-Length before reading anything and otherwise while reading;
408 for a body not received in time) and the uvicorn protocol that closes connections whose
request headers do not arrive in time or grow too large (uvicorn itself sets no timer before the
first request's headers, so a stalled client would hold its connection for ever).

The client side too: `read_capped`, the one bounded reader of a streamed httpx response body
(webhook answers, an upstream identity provider's JSON, client metadata documents, registry files
fetched by URL), raising `BodyTooLarge` past its byte limit of *decoded* bytes (a compressed body is
inflated here, a bounded step at a time) and `BodyUnreadable` for an encoding it does not read; each
caller maps those to its own error. `read_decoded` is the same reader for any raw byte stream (the
aiohttp fetches of auth/oidc.py).

Documented in docs/security.md. Changing a default here means changing it there.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, ClassVar

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from mcpfleet.httpsettings import ENV as ENV
from mcpfleet.httpsettings import FLAGS as FLAGS
from mcpfleet.httpsettings import HttpLimits as HttpLimits
from mcpfleet.httpsettings import MiB as MiB
from mcpfleet.jsonrpc import INVALID_REQUEST

if TYPE_CHECKING:
    import httpx

Scope = Mapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


def _error_body(message: str) -> bytes:
    return orjson.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    )


Refusal = Callable[[int, str], tuple[bytes, bytes]]
"""(status, message) -> (content type, body) of a refusal: JSON-RPC errors for the MCP servers,
problem documents for the registry."""


def jsonrpc_refusal(status: int, message: str) -> tuple[bytes, bytes]:
    return b"application/json", _error_body(message)


async def _refuse(send: Send, status: int, message: str, refusal: Refusal = jsonrpc_refusal) -> None:
    content_type, body = refusal(status, message)
    # `connection: close`: the unread rest of the body must not be parsed as a next request.
    headers = [(b"content-type", content_type), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimits:
    """ASGI middleware: request bodies are read here, within the size and time limits, and handed
    to the app whole (both services parse the whole JSON-RPC message anyway).

    Requests without a body (GET notification streams, DELETE) pass untouched, so their `receive`
    still reports the client's disconnect. `refusal` shapes the 4xx answers and `names` names each
    limit in them as the operator sets it (a CLI flag by default, a config key for the registry).
    """

    def __init__(
        self,
        app: ASGIApp,
        limits: HttpLimits,
        refusal: Refusal = jsonrpc_refusal,
        names: Mapping[str, str] = FLAGS,
    ) -> None:
        self.app = app
        self.limits = limits
        self.refusal = refusal
        self.names = names

    async def __call__(self, scope: Any, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length, chunked = _framing(scope["headers"])
        limit = self.limits.max_body_bytes
        too_large = f"Request body larger than {limit} bytes (limit: {self.names['max_body_bytes']})"
        if length is not None:
            if not length.strip().isdigit():
                await _refuse(send, 400, "Invalid Content-Length header", self.refusal)
                return
            if int(length) > limit:
                await _refuse(send, 413, too_large, self.refusal)
                return
            if int(length) == 0 and not chunked:
                await self.app(scope, receive, send)
                return
        elif not chunked:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.limits.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return  # nobody to answer
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        await _refuse(send, 413, too_large, self.refusal)
                        return
                    chunks.append(chunk)
                    if not message.get("more_body"):
                        break
        except TimeoutError:
            late = (
                f"Request body not received within {self.limits.body_timeout:g} s "
                f"(limit: {self.names['body_timeout']})"
            )
            await _refuse(send, 408, late, self.refusal)
            return
        await self.app(scope, replay_body(b"".join(chunks), receive), send)


def is_jsonrpc_post(scope: Any) -> bool:
    """A POST carrying client JSON-RPC messages: `/mcp` (both eras) or the SSE transport's `/messages`,
    what the middlewares that read bodies (rate limits, webhooks) look at."""
    path: str = scope.get("path", "")
    return (
        scope["type"] == "http"
        and scope.get("method") == "POST"
        and (path in ("/mcp", "/mcp/") or path.startswith("/messages"))
    )


async def read_body(receive: Receive) -> tuple[bytes | None, list[Message]]:
    """Read a request's body for a middleware to inspect before the app (rate limits, policy).

    Its size is bounded by `BodyLimits`, which wraps every server here. Returns the body (None when
    the request ended without one: the client went away or the limit refused it) and every message
    read, which `replay_messages` hands to the app unchanged (a disconnect included)."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return None, messages
        if not message.get("more_body", False):
            return b"".join(m.get("body", b"") for m in messages), messages


def replay_messages(messages: list[Message], original: Receive) -> Receive:
    """A `receive` that yields the messages read already, then the connection's own events."""
    queue = list(messages)

    async def receive() -> Message:
        if queue:
            return queue.pop(0)
        return await original()

    return receive


def replay_body(body: bytes, original: Receive) -> Receive:
    """A `receive` that yields the body read already, then the connection's own events."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await original()

    return receive


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the header deadline and size cap of `guard_limits`."""

    guard_limits: ClassVar[HttpLimits]
    _header_timer: asyncio.TimerHandle | None = None
    _header_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # bytes of a new request: its headers get the same deadline
        super().data_received(data)

    def on_message_begin(self) -> None:
        self._header_bytes = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm()
        if self.transport.is_closing():
            return
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.guard_limits.header_timeout, self._late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _late(self) -> None:
        self._header_timer = None
        self._close_with(408, "Request Timeout")

    def _count(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > self.guard_limits.max_header_bytes and not self.transport.is_closing():
            self._disarm()
            self._close_with(431, "Request Header Fields Too Large")

    def _close_with(self, status: int, reason: str) -> None:
        if self.transport.is_closing():
            return
        self.transport.write(
            f"HTTP/1.1 {status} {reason}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".encode()
        )
        self.transport.close()


def protocol_class(limits: HttpLimits) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol plus a header deadline and a header size cap.

    The deadline runs from the connection's opening (and from the first byte of each follow-up
    request on a kept-alive connection) to the end of the request headers; idle time between
    requests is uvicorn's keep-alive timer. A connection over either limit gets a 408 / 431 and
    is closed, so stalled clients (slowloris) cost a socket for seconds, not for ever.
    """
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), {"guard_limits": limits})


def uvicorn_options(limits: HttpLimits) -> dict[str, Any]:
    """The uvicorn.Config keyword arguments that apply `limits` (the body limits are the
    middleware's: wrap the app in `BodyLimits`)."""
    return {"http": protocol_class(limits), "timeout_keep_alive": limits.keep_alive_timeout}


def _framing(headers: Any) -> tuple[str | None, bool]:
    """(Content-Length as sent, whether a Transfer-Encoding is present) of a request's raw headers."""
    length: str | None = None
    chunked = False
    for key, value in headers:
        if key == b"content-length":
            length = value.decode("latin-1")
        elif key == b"transfer-encoding":
            chunked = True
    return length, chunked


class BodyTooLarge(ValueError):
    """A response body longer than the reader's limit (declared by Content-Length or counted).

    `size`: the length Content-Length declared, or the bytes received (decoded) when reading stopped
    (a lower bound of the real length).
    """

    def __init__(self, limit: int, size: int) -> None:
        super().__init__(f"response body larger than {limit} bytes")
        self.limit = limit
        self.size = size


class BodyUnreadable(ValueError):
    """A response body in a Content-Encoding the reader does not decode, or not valid in it."""


IDENTITY = {"accept-encoding": "identity"}
"""Request header of every bounded fetch: nothing here needs a compressed answer, so none is asked for
(a server may still send one: `read_capped` then decodes it within the same limit)."""

_STEP = 64 * 1024
_ZLIB_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class _Inflater:
    """A gzip / deflate body decoded as it arrives, never more than `limit` + 1 bytes of output.

    zlib is asked for at most the room left under the limit (`max_length`, and at most `_STEP` bytes a
    step), so a small compressed answer that would decode to gigabytes stops at limit + 1 decoded
    bytes, whatever the chunking.
    """

    def __init__(self, coding: str, limit: int) -> None:
        if coding not in _ZLIB_WBITS:
            raise BodyUnreadable(f"response body in Content-Encoding {coding!r}, which is not accepted")
        self._coding, self._limit = coding, limit
        # "deflate" is zlib-wrapped by the standard, raw deflate from some servers: told apart by the
        # first two bytes (a zlib header), so the decoder is made once those arrived.
        self._zlib = None if coding == "deflate" else zlib.decompressobj(_ZLIB_WBITS[coding])
        self._head = b""
        self.body = bytearray()

    def feed(self, data: bytes) -> None:
        if self._zlib is None:
            self._head += data
            if len(self._head) < 2:
                return
            data, self._head = self._head, b""
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS if _zlib_header(data) else -zlib.MAX_WBITS)
        while data and not self._zlib.eof:  # data after the end of the stream is ignored (as httpx does)
            # One step's output is at most 64 KiB: only the body itself grows toward the limit.
            room = min(self._limit - len(self.body) + 1, _STEP)
            try:
                out = self._zlib.decompress(data, room)
            except zlib.error:
                raise BodyUnreadable(f"response body is not valid {self._coding}") from None
            self.body += out
            if len(self.body) > self._limit:
                raise BodyTooLarge(self._limit, len(self.body))
            data = self._zlib.unconsumed_tail

    def finish(self) -> bytes:
        if self._zlib is None and self._head:  # a one-byte deflate body: not a zlib stream
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            self.feed(self._head)
        return bytes(self.body)


def _zlib_header(data: bytes) -> bool:
    """Whether `data` starts with a zlib header (RFC 1950: method 8, window <= 32K, check bits)."""
    return data[0] & 0x0F == 8 and data[0] >> 4 <= 7 and (data[0] << 8 | data[1]) % 31 == 0


async def read_decoded(chunks: AsyncIterable[bytes], encoding: str, limit: int) -> bytes:
    """The body made of the raw (still encoded) `chunks` of a response with this Content-Encoding,
    decoded as it arrives: at most `limit` decoded bytes are ever held (`BodyTooLarge` past them).
    Identity, gzip and deflate are read; any other coding (or more than one) is `BodyUnreadable`."""
    coding = encoding.strip().lower()
    if coding in ("", "identity"):
        body = bytearray()
        async for chunk in chunks:
            if len(body) + len(chunk) > limit:
                raise BodyTooLarge(limit, len(body) + len(chunk))
            body += chunk
        return bytes(body)
    inflater = _Inflater(coding, limit)
    async for chunk in chunks:
        inflater.feed(chunk)
    return inflater.finish()


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """The (decoded) body of a streamed `response`: at most `limit` decoded bytes are ever held.

    Raises `BodyTooLarge` before reading anything when Content-Length declares more than `limit`,
    and otherwise as soon as the bytes counted pass it: a Content-Length that understates (or a
    chunked body) is never trusted, the count is. A compressed body is read raw and decoded here
    (`read_decoded`), never by httpx: its decoder inflates a whole network chunk at once, so a
    64 KiB gzip chunk could become 64 MiB before any count. Callers send `IDENTITY` as well.
    """
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit, int(declared))
    return await read_decoded(response.aiter_raw(), response.headers.get("content-encoding", ""), limit)
