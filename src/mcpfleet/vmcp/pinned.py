"""Large cached list answers laid out once at a fixed page offset, sent without copying (issue 19).

Owns the wire form of a cached list result of 64 KiB or more (a `tools/list` of 1,000 tools is
~172 KB): `"result":<list>}` (JSON) and the same with the SSE frame's `\\n\\n`, built once per cache
rebuild in an anonymous mapping at page offset 2048, and handed to the HTTP server as a read-only
view. The request's own part (`{"jsonrpc":"2.0","id":N,` and the SSE `event:`/`data:` lines) is a
separate small piece, and the answer carries a Content-Length, so no copy of the list is made per
request (before: five, the last by uvicorn's chunked framing), and the kernel copies it into the
socket from an address whose page offset does not depend on where malloc happened to put things.

Why the page offset matters: on this AMD EPYC (Zen 4) `rep movsb` — glibc 2.36's `memmove` for
large copies and the kernel's copy from user memory into a socket buffer — is ~15 times slower
when the destination is 1 to 15 bytes past the source modulo 4096 (4K aliasing; a 172 KB copy
takes 50-80 µs instead of 3.5-4 µs, `bench/vmcp_steady.py --aliasing`). A gateway's heap layout is
fixed after its first requests, so a process whose buffers landed at such an offset stayed slow on
every list. The socket buffer's page offset is the response header's length (the kernel starts a
fresh page fragment for each answer on an idle connection), a few hundred bytes; a source at page
offset 2048 is far from it. Views of an mmap (always page-aligned) give that offset without
asking for addresses.
"""

from __future__ import annotations

import mmap
from typing import Final

MIN_BYTES: Final = 64 * 1024
"""Smaller results are framed by copying as before: a copy that size costs little either way."""
PAGE_OFFSET: Final = 2048
_TAIL_JSON: Final = b"}"
_TAIL_SSE: Final = b"}\n\n"


class Pinned:
    """One cached result's `"result":...}` (`json`) and `"result":...}\\n\\n` (`sse`) views."""

    __slots__ = ("json", "source", "sse")

    def __init__(self, result: bytes) -> None:
        self.source = result
        body = b'"result":' + result + _TAIL_SSE
        # An anonymous mapping is page-aligned: the data starts at PAGE_OFFSET within a page. The
        # mapping lives as long as a view of it (a write still under way keeps its view).
        region = mmap.mmap(-1, PAGE_OFFSET + len(body))
        region[PAGE_OFFSET:] = body
        view = memoryview(region)[PAGE_OFFSET:].toreadonly()
        self.sse = view
        self.json = view[: len(view) - len(_TAIL_SSE) + len(_TAIL_JSON)]


class PinnedCache:
    """The pinned form of results the gateway serves from its cache, looked up by identity."""

    __slots__ = ("_pins",)

    def __init__(self) -> None:
        self._pins: dict[int, Pinned] = {}

    def clear(self) -> None:
        """Forget every pinned form (the cache was rebuilt)."""
        self._pins.clear()

    def get(self, result: bytes) -> Pinned | None:
        """The pinned form of `result`, if it was added (the same object) since the last clear."""
        pin = self._pins.get(id(result))
        return pin if pin is not None and pin.source is result else None

    def add(self, result: bytes) -> Pinned | None:
        """Pin `result`, an object the cache serves unchanged until its next rebuild; None (nothing
        kept) when it is smaller than `MIN_BYTES`."""
        if len(result) < MIN_BYTES:
            return None
        pin = Pinned(result)
        self._pins[id(result)] = pin
        return pin


def json_head(req_id: bytes) -> bytes:
    """The JSON answer's part before `"result":`, for a serialized request id."""
    return b'{"jsonrpc":"2.0","id":' + req_id + b","


def sse_head(req_id: bytes) -> bytes:
    """The SSE frame's part before `"result":`, for a serialized request id."""
    return b'event: message\ndata: {"jsonrpc":"2.0","id":' + req_id + b","
