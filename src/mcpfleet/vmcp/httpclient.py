"""A minimal pooled HTTP/1.1 client for the gateway's hot path (asyncio protocol + httptools).

Why not aiohttp here: on this 2-core machine a request through aiohttp's client costs about as
much CPU as everything else the gateway does per call (docs/vmcp.md, re-measured in
docs/bench-vmcp.md). This client does only what the upstream needs - keep-alive connections per
host, one request at a time per connection, Content-Length or chunked bodies, streamed (SSE) or
buffered - and leaves the HTTP grammar to httptools (llhttp, the parser of Node.js, already a
uvicorn dependency). Anything unusual (TLS, proxies) goes through aiohttp instead.

The rules that make it safe against a hostile or failing server (docs/security.md):

* **Never re-send a request the server may have seen.** A request is re-sent on another connection
  only when no byte of it was written: a pooled connection found closed (or closing) at the moment
  of use is dropped before writing. Once bytes are written, a failure before the response is
  retried only for methods RFC 9110 9.2.2 calls idempotent (GET, HEAD, OPTIONS, PUT, DELETE,
  TRACE) or when the caller says the request is safe to repeat (`idempotent=True`, e.g. a JSON-RPC
  `tools/list`). A `tools/call` POST whose connection drops is reported, never run twice.
  Pooled connections idle longer than `IDLE_SECONDS` are not reused, which avoids the race with a
  server's keep-alive timer (uvicorn closes idle connections after 5 s).
* **Bounded memory.** Status line + headers are capped (`MAX_HEAD_BYTES`, `MAX_HEADERS`), a response
  body is capped (`max_body`, checked against Content-Length up front and while reading), and a
  streamed body the caller reads slowly pauses the socket instead of buffering without end.
* **No header injection.** Method, path, header names and values are checked (no CR, LF or NUL;
  names are RFC 9110 tokens) before anything is written; an IPv6 host goes into `Host` in brackets.
* Unsolicited bytes (a response nobody asked for, data after the end of a response) close the
  connection instead of being attributed to the next request.
"""

from __future__ import annotations

import asyncio
import collections
import re
import time
from collections.abc import AsyncIterator, Mapping
from typing import cast
from urllib.parse import urlsplit

import httptools

# How long a released response may take to end before its connection is closed instead of reused.
DRAIN_SECONDS = 2.0
# A pooled connection idle for longer is closed, not reused (below common server keep-alive timers).
IDLE_SECONDS = 4.0
# Status line plus all header lines of one response.
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 128
# Default cap on one response body (a buffered JSON answer or a whole SSE response stream).
MAX_BODY_BYTES = 64 * 1024 * 1024
# Unread streamed body above which the socket stops being read (resumed below half of it).
_HIGH_WATER = 256 * 1024
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_BAD_TARGET = re.compile(r"[\x00-\x20\x7f]")
# Names and targets already checked (a gateway uses a handful): the per-request check is a set lookup.
_GOOD_NAMES: set[str] = set()
_GOOD_TARGETS: set[str] = set()


class HTTPError(OSError):
    """Connection-level failure (refused, reset, closed mid-response, malformed or over-size answer)."""


class RequestNotSent(HTTPError):
    """The request could not be written; the server has seen none of it."""


class InvalidRequest(ValueError):
    """The request itself is malformed (CR/LF in a header, bad method or path); nothing was sent."""


class Response:
    __slots__ = ("_buffered", "_chunks", "_conn", "_done", "_error", "_waiter", "headers", "status")

    def __init__(self, conn: _Connection) -> None:
        self._conn = conn
        self.status = 0
        self.headers: dict[str, str] = {}
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
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
        """The whole body; raises HTTPError if it was cut short, malformed or over the size cap."""
        parts: list[bytes] = []
        while True:
            if self._chunks:
                parts.extend(self._chunks)
                self._chunks.clear()
                self._buffered = 0
                self._conn.resume()
            if self._error is not None:
                raise self._error  # an error wins over the end: a truncated body is not a body
            if self._done:
                return parts[0] if len(parts) == 1 else b"".join(parts)
            await self._wait()

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        while True:
            while self._chunks:
                chunk = self._chunks.popleft()
                self._buffered -= len(chunk)
                if self._buffered < _HIGH_WATER // 2:
                    self._conn.resume()
                yield chunk
            if self._error is not None:
                raise self._error  # an error wins over the end: a truncated body is not a body
            if self._done:
                return
            await self._wait()

    def release(self) -> None:
        self._conn.finish(self)

    def abort(self) -> None:
        """Done with the response, whether or not it ended: its connection is closed, never reused
        (a standing stream, which would otherwise be drained in the background first)."""
        if self._conn.response is self:
            self._conn.response = None
        self._conn.close()


class _Connection(asyncio.Protocol):
    def __init__(self, pool: Pool, max_body: int) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: Response | None = None
        self.closed = False
        self.idle_since = 0.0
        self._max_body = max_body
        self._headers_done: asyncio.Future[None] | None = None
        self._head_bytes = 0
        self._header_count = 0
        self._body_bytes = 0
        self._informational = False
        self._paused = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        r = self.response
        if r is None or r._done or r._error is not None:
            # Nothing was asked on this connection (or the answer has ended): the bytes cannot belong
            # to any request, and must not be taken for the answer to the next one.
            self._fail(HTTPError("unsolicited data from the server"))
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(HTTPError("unexpected protocol upgrade in response"))
            return
        except httptools.HttpParserError as exc:
            cause = exc.__context__
            self._fail(cause if isinstance(cause, HTTPError) else HTTPError(f"bad HTTP response: {exc}"))
            return
        if not r.status:
            # Still in the status line / headers: bound what the parser may buffer for them.
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._fail(HTTPError(f"response head over {MAX_HEAD_BYTES} bytes"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        r = self.response
        if r is not None and not r._done and r._error is None:
            if r.status and "content-length" not in r.headers and "transfer-encoding" not in r.headers:
                r._done = True  # a body delimited by the end of the connection (RFC 9112 6.3)
                r._wake()
            else:
                self._fail(HTTPError("connection closed by the server"))

    def pause(self) -> None:
        if not self._paused and self.transport is not None and not self.closed:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()

    # httptools callbacks (an exception raised here aborts feed_data with HttpParserCallbackError)
    def on_message_begin(self) -> None:
        r = self.response
        if r is None or r._done:
            raise HTTPError("a second response to one request")

    def on_header(self, name: bytes, value: bytes) -> None:
        r = self.response
        assert r is not None
        self._header_count += 1
        if self._header_count > MAX_HEADERS:
            raise HTTPError(f"more than {MAX_HEADERS} response headers")
        r.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        r = self.response
        assert r is not None
        status = self.parser.get_status_code()
        if 100 <= status < 200:
            # 1xx interim answer (100 Continue, 103 Early Hints): the real one follows.
            self._informational = True
            r.headers = {}
            self._header_count = 0
            return
        self._informational = False
        cl = r.headers.get("content-length")
        if cl is not None and cl.isdigit() and int(cl) > self._max_body:
            raise HTTPError(f"response body of {cl} bytes is over the {self._max_body}-byte limit")
        r.status = status
        if self._headers_done is not None and not self._headers_done.done():
            self._headers_done.set_result(None)

    def on_body(self, body: bytes) -> None:
        r = self.response
        assert r is not None
        self._body_bytes += len(body)
        if self._body_bytes > self._max_body:
            raise HTTPError(f"response body over the {self._max_body}-byte limit")
        r._chunks.append(body)
        r._buffered += len(body)
        if r._buffered > _HIGH_WATER:
            self.pause()  # the reader is slower than the server: stop reading the socket for now
        r._wake()

    def on_message_complete(self) -> None:
        r = self.response
        assert r is not None
        if self._informational:
            self._informational = False
            return
        r._done = True
        if not self.parser.should_keep_alive():
            self.closed = True
        r._wake()

    def _fail(self, exc: BaseException) -> None:
        self.closed = True
        if self._headers_done is not None and not self._headers_done.done():
            self._headers_done.set_exception(exc)
        r = self.response
        if r is not None and not r._done and r._error is None:
            r._error = exc
            r._wake()
        if self.transport is not None:
            self.transport.close()

    def usable(self) -> bool:
        """Still open, as far as this side can tell without writing."""
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    async def send(self, head: bytes, body: bytes) -> Response:
        if not self.usable():
            raise RequestNotSent("connection closed before the request was written")
        assert self.transport is not None
        r = self.response = Response(self)
        self._head_bytes = self._header_count = self._body_bytes = 0
        self._headers_done = asyncio.get_running_loop().create_future()
        self.transport.write(head + body)
        try:
            await self._headers_done
        except BaseException:
            # Cancelled or failed mid-request: the connection is in an unknown state; never reuse it.
            self.close()
            if r._error is None:
                r._error = HTTPError("request abandoned")
            raise
        return r

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


def _check_request(method: str, path: str, headers: Mapping[str, str]) -> None:
    if method not in _GOOD_NAMES:
        if not _TOKEN.match(method):
            raise InvalidRequest(f"invalid HTTP method {method!r}")
        if method == "HEAD":  # the response parser does not know a HEAD answer has no body
            raise InvalidRequest("HEAD is not supported by this client")
        _remember(_GOOD_NAMES, method)
    if path not in _GOOD_TARGETS:
        if not path or _BAD_TARGET.search(path):
            raise InvalidRequest("invalid request target (empty, or control characters / spaces)")
        _remember(_GOOD_TARGETS, path)
    for k, v in headers.items():
        if k not in _GOOD_NAMES:
            if not _TOKEN.match(k):
                raise InvalidRequest(f"invalid header name {k!r}")
            _remember(_GOOD_NAMES, k)
        if "\r" in v or "\n" in v or "\x00" in v:
            raise InvalidRequest(f"header {k!r}: value contains CR, LF or NUL")


def _remember(cache: set[str], value: str) -> None:
    if len(cache) < 4096:  # bounded: names and targets come from config, but be safe
        cache.add(value)


def host_header(host: str, port: int) -> str:
    """`Host` for host:port; IPv6 literals in brackets (RFC 9110 7.2, RFC 3986 3.2.2)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Pool:
    """Keep-alive connections to one host:port."""

    def __init__(self, host: str, port: int, max_idle: int = 64, max_body: int = MAX_BODY_BYTES) -> None:
        self.host = host
        self.port = port
        self._idle: collections.deque[_Connection] = collections.deque()
        self.draining: set[asyncio.Task[None]] = set()
        self._max_idle = max_idle
        self._max_body = max_body
        self._host_header = host_header(host, port).encode("ascii")
        # Counters for tests and diagnostics: connections opened, requests re-sent.
        self.connects = 0
        self.resends = 0

    def put_back(self, conn: _Connection) -> None:
        if len(self._idle) < self._max_idle:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()

    def _pooled(self) -> _Connection | None:
        """The most recently used live connection; stale and closed ones are closed on the way."""
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable() and now - conn.idle_since < IDLE_SECONDS:
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, proto = await loop.create_connection(
                lambda: _Connection(self, self._max_body), self.host, self.port
            )
        except OSError as exc:
            raise HTTPError(f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}") from None
        self.connects += 1
        return proto

    async def request(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes = b"",
        *,
        idempotent: bool = False,
    ) -> Response:
        _check_request(method, path, headers)
        lines = [f"{method} {path} HTTP/1.1".encode(), b"host: " + self._host_header]
        lines += [f"{k}: {v}".encode("latin-1") for k, v in headers.items()]
        lines.append(b"content-length: " + str(len(body)).encode())
        head = b"\r\n".join(lines) + b"\r\n\r\n"
        may_repeat = idempotent or method in IDEMPOTENT_METHODS
        conn = self._pooled()
        if conn is not None:
            try:
                return await conn.send(head, body)
            except RequestNotSent:
                pass  # closed between the check in _pooled and the write: nothing was sent
            except HTTPError:
                # Written on a reused connection that then failed before the answer: the server
                # may have received (and acted on) the request, so only a repeatable one goes again.
                if not may_repeat:
                    raise
            self.resends += 1
        conn = await self._connect()
        return await conn.send(head, body)

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


class Client:
    """Pools by host:port; `request(url, ...)` returns a Response to read and then `release()`."""

    def __init__(self, max_body: int = MAX_BODY_BYTES) -> None:
        self._pools: dict[tuple[str, int], Pool] = {}
        self._paths: dict[str, tuple[Pool, str]] = {}
        self.max_body = max_body

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
            pool = self._pools[(host, port)] = Pool(host, port, max_body=self.max_body)
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self._paths[url] = (pool, path)
        return pool, path

    async def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes = b"",
        *,
        idempotent: bool = False,
    ) -> Response:
        pool, path = self._target(url)
        return await pool.request(method, path, headers, body, idempotent=idempotent)

    def close(self) -> None:
        for p in self._pools.values():
            p.close()
        self._pools.clear()
        self._paths.clear()
