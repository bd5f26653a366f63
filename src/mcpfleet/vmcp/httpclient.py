"""A minimal pooled HTTP/1.1 client for the gateway's hot path (asyncio protocol + httptools).

Why not aiohttp here: on this 2-core machine a request through aiohttp's client costs about as
much CPU as everything else the gateway does per call (docs/vmcp.md). This client does only what
the upstream needs - keep-alive connections per host, one request at a time per connection,
Content-Length or chunked bodies, streamed (SSE) or buffered - with httptools (already a uvicorn
dependency) parsing responses in C. Anything unusual (TLS, proxies) goes through aiohttp instead.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Mapping
from typing import cast
from urllib.parse import urlsplit

import httptools

# How long a released response may take to end before its connection is closed instead of reused.
DRAIN_SECONDS = 2.0


class HTTPError(OSError):
    """Connection-level failure (refused, reset, closed mid-response)."""


class Response:
    __slots__ = ("_chunks", "_conn", "_done", "_error", "_waiter", "headers", "status")

    def __init__(self, conn: _Connection) -> None:
        self._conn = conn
        self.status = 0
        self.headers: dict[str, str] = {}
        self._chunks: collections.deque[bytes] = collections.deque()
        self._done = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def _wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def read(self) -> bytes:
        while not self._done:
            if self._error is not None:
                raise self._error
            await self._wait()
        if self._error is not None and not self._chunks:
            raise self._error
        data = b"".join(self._chunks)
        self._chunks.clear()
        return data

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        while True:
            while self._chunks:
                yield self._chunks.popleft()
            if self._done:
                return
            if self._error is not None:
                raise self._error
            await self._wait()

    def release(self) -> None:
        self._conn.finish(self)


class _Connection(asyncio.Protocol):
    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: Response | None = None
        self.closed = False
        self._headers_done: asyncio.Future[None] | None = None
        self._cur_header = b""

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HTTPError(f"bad HTTP response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        r = self.response
        if r is not None and not r._done:
            if r.status and "content-length" not in r.headers and "transfer-encoding" not in r.headers:
                r._done = True  # a body delimited by the end of the connection (RFC 9112 6.3)
                r._wake()
            else:
                self._fail(HTTPError("connection closed by the server"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        assert self.response is not None
        self.response.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        r = self.response
        assert r is not None
        r.status = self.parser.get_status_code()
        if self._headers_done is not None and not self._headers_done.done():
            self._headers_done.set_result(None)

    def on_body(self, body: bytes) -> None:
        r = self.response
        assert r is not None
        r._chunks.append(body)
        r._wake()

    def on_message_complete(self) -> None:
        r = self.response
        assert r is not None
        r._done = True
        if not self.parser.should_keep_alive():
            self.closed = True
        r._wake()

    def _fail(self, exc: BaseException) -> None:
        self.closed = True
        if self._headers_done is not None and not self._headers_done.done():
            self._headers_done.set_exception(exc)
        if self.response is not None:
            self.response._error = exc
            self.response._wake()
        if self.transport is not None:
            self.transport.close()

    async def send(self, head: bytes, body: bytes) -> Response:
        assert self.transport is not None
        self.response = Response(self)
        self._headers_done = asyncio.get_running_loop().create_future()
        self.transport.write(head + body)
        await self._headers_done
        return self.response

    def finish(self, r: Response) -> None:
        if self.response is not r:
            return
        if not r._done and not self.closed and r._error is None:
            # The caller has what it needs but the body has not ended yet (an SSE stream whose
            # terminating chunk is still in flight): finish reading it in the background so the
            # connection can be reused instead of paying a new TCP connection per call.
            task = asyncio.get_running_loop().create_task(self._drain(r))
            self.pool.draining.add(task)
            task.add_done_callback(self.pool.draining.discard)
            return
        self.response = None
        if r._done and not self.closed and r._error is None:
            self.pool.put_back(self)
        else:
            self.close()

    async def _drain(self, r: Response) -> None:
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                await r.read()
        except (TimeoutError, OSError):
            self.close()
        self.finish(r)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Pool:
    """Keep-alive connections to one host:port."""

    def __init__(self, host: str, port: int, max_idle: int = 64) -> None:
        self.host = host
        self.port = port
        self._idle: collections.deque[_Connection] = collections.deque()
        self.draining: set[asyncio.Task[None]] = set()
        self._max_idle = max_idle
        self._host_header = f"{host}:{port}".encode()

    def put_back(self, conn: _Connection) -> None:
        if len(self._idle) < self._max_idle:
            self._idle.append(conn)
        else:
            conn.close()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, proto = await loop.create_connection(lambda: _Connection(self), self.host, self.port)
        except OSError as exc:
            raise HTTPError(f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}") from None
        return proto

    async def request(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Response:
        lines = [f"{method} {path} HTTP/1.1".encode(), b"host: " + self._host_header]
        lines += [f"{k}: {v}".encode("latin-1") for k, v in headers.items()]
        lines.append(b"content-length: " + str(len(body)).encode())
        head = b"\r\n".join(lines) + b"\r\n\r\n"
        # A pooled connection may have been closed by the server while idle: retry once on a new one
        # if it fails before any response byte arrived (requests here are safe to resend then).
        while self._idle:
            conn = self._idle.pop()
            if conn.closed:
                continue
            try:
                return await conn.send(head, body)
            except HTTPError:
                conn.close()
        conn = await self._connect()
        try:
            return await conn.send(head, body)
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


class Client:
    """Pools by host:port; `request(url, ...)` returns a Response to read and then `release()`."""

    def __init__(self) -> None:
        self._pools: dict[tuple[str, int], Pool] = {}
        self._paths: dict[str, tuple[Pool, str]] = {}

    def supports(self, url: str) -> bool:
        return url.startswith("http://")

    def _target(self, url: str) -> tuple[Pool, str]:
        hit = self._paths.get(url)
        if hit is not None:
            return hit
        u = urlsplit(url)
        port = u.port or 80
        host = u.hostname or "127.0.0.1"
        pool = self._pools.get((host, port))
        if pool is None:
            pool = self._pools[(host, port)] = Pool(host, port)
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self._paths[url] = (pool, path)
        return pool, path

    async def request(self, method: str, url: str, headers: Mapping[str, str], body: bytes = b"") -> Response:
        pool, path = self._target(url)
        return await pool.request(method, path, headers, body)

    def close(self) -> None:
        for p in self._pools.values():
            p.close()
        self._pools.clear()
        self._paths.clear()
