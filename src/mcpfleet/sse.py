"""The one SSE (server-sent events) parser: a byte stream in any chunking -> events, bounded.

It parses as the WHATWG HTML standard says a client does: one leading byte-order mark is dropped, lines
end in CRLF, LF or a lone CR (also split across chunks), an event ends at a blank line, a field value
loses one leading space, `data` lines join with LF, comments (`:` lines, keep-alives) are ignored, an
`id` holding NUL is ignored, `retry` must be digits. Linear in the input, memory bounded by
`max_event_bytes` (a longer line or event raises `SSEError`).

Readers: the gateway's upstream client (responses and standing notification streams) and the proxy's
policy layer (finding the answer to a request in an SSE body it peeked at). The proxy's filtering
rewriter (`policy/sse.py`) keeps its own streaming line handling because it relays bytes as it goes
and skips an oversize event instead of failing the stream.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Final

BOM: Final = b"\xef\xbb\xbf"

# Bounds: one event's data, and one line (what is buffered before its end).
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

    __slots__ = ("_data", "_data_bytes", "_ev", "_head", "_max", "_partial", "_partial_bytes", "_skip_lf")

    def __init__(self, max_event_bytes: int = MAX_SSE_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        self._partial: list[bytes] = []
        self._partial_bytes = 0
        self._skip_lf = False  # the last chunk ended in CR: a LF starting the next one is its pair
        self._head: bytes | None = b""  # the stream's first bytes, until a BOM is ruled in or out
        self._ev = SSEEvent()
        self._data: list[str] = []
        self._data_bytes = 0

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if self._head is not None:
            head = self._head + chunk
            if len(head) < len(BOM) and BOM.startswith(head):
                self._head = head  # maybe the start of a BOM split across chunks
                return []
            self._head = None
            chunk = head[len(BOM) :] if head.startswith(BOM) else head
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
