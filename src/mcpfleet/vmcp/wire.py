"""MCP wire details shared by the front-end and the upstream clients.

Owns: protocol-version sets and header names, JSON encode/decode (orjson), JSON-RPC error
values, the SSE frame parser (linear, bounded) and encoder, and the HTTP status table for
2026-07-28 errors. Kept free of SDK session machinery so the hot path stays a few dict operations.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any, Final

import orjson

HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS: Final = ("2026-07-28",)
LATEST_HANDSHAKE: Final = HANDSHAKE_VERSIONS[-1]
LATEST_MODERN: Final = MODERN_VERSIONS[-1]

H_SESSION: Final = "mcp-session-id"
H_VERSION: Final = "mcp-protocol-version"
H_METHOD: Final = "mcp-method"
H_NAME: Final = "mcp-name"
H_PARAM_PREFIX: Final = "mcp-param-"

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPS: Final = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

# Request methods that exist on the 2026-07-28 wire; anything else is -32601 / HTTP 404 there.
MODERN_METHODS: Final = frozenset(
    {
        "completion/complete",
        "prompts/get",
        "prompts/list",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "server/discover",
        "subscriptions/listen",
        "tools/call",
        "tools/list",
    }
)

# Methods whose name-bearing parameter is mirrored in the Mcp-Name header (2026-07-28).
NAME_PARAM: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
RESOURCE_NOT_FOUND: Final = -32002
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_VERSION: Final = -32022
# Gateway-specific (implementation-defined server error range).
BACKEND_UNAVAILABLE: Final = -32010
UNAUTHORIZED: Final = -32011

# JSON-RPC error code -> HTTP status on the 2026-07-28 wire (other codes: 200).
ERROR_HTTP_STATUS: Final = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_VERSION: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    METHOD_NOT_FOUND: 404,
}

dumps = orjson.dumps
loads = orjson.loads


class RPCError(Exception):
    """A JSON-RPC error to return to the caller (code, message, optional data)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def error_message(req_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": req_id, "error": err}


def sse_frame(msg: Any, event_id: str | None = None) -> bytes:
    head = b"event: message\n"
    if event_id is not None:
        head += b"id: " + event_id.encode() + b"\n"
    return head + b"data: " + dumps(msg) + b"\n\n"


# Bounds of the SSE parser: one event's data, and one line (what is buffered before its end).
MAX_SSE_EVENT_BYTES: Final = 16 * 1024 * 1024
_EOL: Final = re.compile(rb"\r\n|\r|\n")


class SSEError(ValueError):
    """A malformed or over-size SSE stream."""


class SSEEvent:
    __slots__ = ("data", "event", "id", "retry")

    def __init__(self) -> None:
        self.event = "message"
        self.data = ""
        self.id: str | None = None
        self.retry: int | None = None

    def __repr__(self) -> str:
        return f"SSEEvent(event={self.event!r}, data={self.data!r}, id={self.id!r}, retry={self.retry!r})"


class SSEParser:
    """Incremental SSE parser (WHATWG HTML, server-sent events): `feed(bytes)` -> complete events.

    Linear in the input: each chunk is scanned once for line ends (CRLF, LF or CR, also split
    across chunks); only an unfinished line is kept, as a list of pieces joined once. Memory is
    bounded: a line or an event's data over `max_event_bytes` raises `SSEError`.
    """

    __slots__ = ("_data", "_data_bytes", "_ev", "_max", "_partial", "_partial_bytes", "_skip_lf")

    def __init__(self, max_event_bytes: int = MAX_SSE_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        self._partial: list[bytes] = []
        self._partial_bytes = 0
        self._skip_lf = False  # the last chunk ended in CR: a LF starting the next one is its pair
        self._ev = SSEEvent()
        self._data: list[str] = []
        self._data_bytes = 0

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        pos = 0
        if self._skip_lf and chunk[:1] == b"\n":
            pos = 1
        self._skip_lf = False
        end = len(chunk)
        for m in _EOL.finditer(chunk, pos):
            piece = chunk[pos : m.start()]
            if self._partial:
                self._partial.append(piece)
                line = b"".join(self._partial)
                self._partial.clear()
                self._partial_bytes = 0
            else:
                line = piece
            pos = m.end()
            if pos == end and m.group() == b"\r":
                self._skip_lf = True
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        if pos < end:
            self._partial_bytes += end - pos
            if self._partial_bytes > self._max:
                raise SSEError(f"SSE line over {self._max} bytes")
            self._partial.append(chunk[pos:])
        return out

    def close(self) -> list[SSEEvent]:
        """End of stream: an event with data but no closing blank line is still delivered."""
        if self._data:
            self._ev.data = "\n".join(self._data)
            self._data = []
            return [self._ev]
        return []

    def _line(self, raw: bytes) -> SSEEvent | None:
        if not raw:
            ev = self._ev
            if self._data or ev.id is not None or ev.retry is not None:
                ev.data = "\n".join(self._data)
                self._ev = SSEEvent()
                self._data = []
                self._data_bytes = 0
                return ev
            self._ev = SSEEvent()
            return None
        if raw[:1] == b":":
            return None  # comment (keep-alive)
        line = raw.decode("utf-8", "replace")
        field, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if field == "data":
            self._data_bytes += len(raw)
            if self._data_bytes > self._max:
                raise SSEError(f"SSE event over {self._max} bytes")
            self._data.append(value)
        elif field == "event":
            self._ev.event = value
        elif field == "id":
            if "\x00" not in value:
                self._ev.id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self._ev.retry = int(value)
        return None


async def iter_sse(
    chunks: AsyncIterator[bytes], max_event_bytes: int = MAX_SSE_EVENT_BYTES
) -> AsyncIterator[SSEEvent]:
    """Parse an SSE byte stream into events (see `SSEParser`); raises `SSEError` over the limits."""
    parser = SSEParser(max_event_bytes)
    async for chunk in chunks:
        for ev in parser.feed(chunk):
            yield ev
    for ev in parser.close():
        yield ev
