"""A bounded, streaming rewriter of a server-sent-events body whose events carry JSON-RPC messages.

The proxy filters the answer to a list request by authorization, and that answer may come as an
SSE stream (`text/event-stream`) in any chunking. `SseRewriter.feed` takes the bytes as they come and
returns the bytes to relay: every whole event, with its JSON `data` parsed and passed through
`rewrite` (then written back, one `data:` line), and its other fields (`event`, `id`, `retry`,
comments) kept. It parses as the SSE standard says a client does — one leading BOM is dropped,
lines end in CRLF, LF or a lone CR (even split across chunks), an event ends at a blank line, a
field value loses one leading space, `data` lines join with LF, an unfinished event at the end is
dropped — so what the client reads is what was authorized. Hostile streams are bounded and fail closed:

* an event larger than `max_event` bytes is not relayed (one `overflow` event is sent in its place,
  the rest of it is skipped without being kept);
* an event whose data is not JSON is dropped (a lenient client parser could read items from it);
* every relayed JSON event is re-serialized from what was parsed, so a client cannot read a
  different message (duplicate keys, odd numbers) than the one that was filtered.

`rewrite` and `overflow` may answer `DROP` (relay nothing) or `Events(...)` (one event per message);
`text` decides what to relay for an event whose data is not JSON (the legacy transport's
`endpoint` event: `policy.legacy_sse`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import orjson

from mcpfleet import jsonrpc

log = logging.getLogger(__name__)

MAX_EVENT_BYTES = 16 * 1024 * 1024
BOM = b"\xef\xbb\xbf"
"""A client drops one at the start of the stream (so `<BOM>data:` is data): so must the rewriter."""


DROP: Final = object()
"""What `rewrite` / `overflow` answer to relay nothing."""


class Events(tuple[Any, ...]):
    """What `rewrite` / `overflow` answer to relay several messages, one event each."""


class SseRewriter:
    def __init__(
        self,
        rewrite: Callable[[Any], Any],
        overflow: Callable[[], Any],
        max_event: int = MAX_EVENT_BYTES,
        text: Callable[[list[bytes], bytes], bytes] | None = None,
    ) -> None:
        self._rewrite = rewrite
        self._overflow = overflow
        self._text = text
        self._max = max_event
        self._buf = bytearray()  # bytes of a line not yet ended
        self._lines: list[bytes] = []  # the lines of the event being read
        self._size = 0  # bytes held for the event being read
        self._skipping = False  # the event being read overflowed: skip to its end
        self._cr = False  # the previous chunk ended in CR: a LF starting this one belongs to it
        self._blank = True  # the line being read is empty so far (its bytes may be skipped, not kept)
        self._head: bytearray | None = bytearray()  # the first bytes, until a BOM is ruled in or out

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to relay for `chunk` (whole events only)."""
        if self._head is not None:
            self._head += chunk
            if len(self._head) < len(BOM) and BOM.startswith(self._head):
                return b""
            chunk = bytes(self._head)
            self._head = None
            if chunk.startswith(BOM):
                chunk = chunk[len(BOM) :]
        out = bytearray()
        raw = chunk[1:] if self._cr and chunk[:1] == b"\n" else chunk
        self._cr = False
        start = 0
        n = len(raw)
        while start < n:
            cr, lf = raw.find(b"\r", start), raw.find(b"\n", start)
            ends = [i for i in (cr, lf) if i >= 0]
            if not ends:
                self._hold(raw[start:], out)
                break
            end = min(ends)
            self._hold(raw[start:end], out)
            line, blank = bytes(self._buf), self._blank
            self._buf.clear()
            self._blank = True
            step = 1
            if raw[end] == 13:  # CR: with a following LF, one terminator
                if end + 1 < n and raw[end + 1] == 10:
                    step = 2
                elif end + 1 == n:
                    self._cr = True
            start = end + step
            self._line(line, blank, out)
        return bytes(out)

    def end(self) -> bytes:
        """The stream ended: an unfinished event is dropped (as a client drops it)."""
        if self._lines or self._buf or self._head:
            log.info("an unfinished SSE event at the end of a filtered stream was dropped")
        self._buf.clear()
        self._lines = []
        self._size = 0
        self._blank = True
        self._skipping = False
        return b""

    def _hold(self, part: bytes, out: bytearray) -> None:
        if part:
            self._blank = False
        if self._skipping:
            return
        self._buf += part
        if self._size + len(self._buf) > self._max:
            self._skip(out)

    def _skip(self, out: bytearray) -> None:
        self._skipping = True
        self._buf.clear()
        self._lines = []
        self._size = 0
        log.warning("an SSE event over %d bytes in a filtered stream was not relayed", self._max)
        out += _events([], self._overflow())

    def _line(self, line: bytes, blank: bool, out: bytearray) -> None:
        if not blank:
            if not self._skipping:
                self._lines.append(line)
                self._size += len(line) + 1
                if self._size > self._max:
                    self._skip(out)
            return
        lines, self._lines, self._size = self._lines, [], 0
        if self._skipping:
            self._skipping = False
            return
        if lines:
            out += self._dispatch(lines)

    def _dispatch(self, lines: list[bytes]) -> bytes:
        others: list[bytes] = []
        data: list[bytes] = []
        for line in lines:
            name, colon, value = line.partition(b":")
            if colon and value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data.append(value)
            else:
                others.append(line)
        if not data:
            return b"\n".join(others) + b"\n\n"
        raw = b"\n".join(data)
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            if self._text is not None:
                return self._text(others, raw)
            log.warning("an SSE event whose data is not JSON was dropped from a filtered stream")
            return b""
        # Nested too deep to write back: a response becomes an error, anything else is dropped.
        message = jsonrpc.relayable(message, raw, "the server")
        if message is jsonrpc.UNRELAYABLE:
            log.warning("an SSE event nested too deep to relay was dropped from a filtered stream")
            return b""
        return _events(others, self._rewrite(message))


def _events(others: list[bytes], answer: Any) -> bytes:
    if answer is DROP:
        return b""
    if isinstance(answer, Events):
        return b"".join(_event(others, message) for message in answer)
    return _event(others, answer)


def _event(others: list[bytes], message: Any) -> bytes:
    return b"\n".join([*others, b"data: " + orjson.dumps(message)]) + b"\n\n"


def event(message: Any) -> bytes:
    """A JSON-RPC message as one `message` event (the legacy transport's form)."""
    return _event([b"event: message"], message)


def text_event(others: list[bytes], data: bytes) -> bytes:
    """An event with these non-data lines and this (non-JSON) data, as a client reads it back."""
    return b"\n".join([*others, *(b"data: " + line for line in data.split(b"\n"))]) + b"\n\n"
