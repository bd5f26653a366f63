"""The one SSE parser (`mcpfleet.sse`): line ends, fields, BOM, bounds, any chunking; the encoder round trip.

Chunk boundaries anywhere (inside a CRLF, inside a UTF-8 sequence) give the same events; the
parser is linear in the input and refuses lines / events over its limit instead of buffering them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet import sse
from mcpfleet.sse import SSEError, SSEParser
from mcpfleet.vmcp import wire


def _events(chunks: list[bytes], limit: int = sse.MAX_SSE_EVENT_BYTES) -> list[tuple[str, str, str | None]]:
    p = SSEParser(limit)
    out = []
    for c in chunks:
        out += p.feed(c)
    out += p.close()
    return [(e.event, e.data, e.id) for e in out]


def test_basic_frames_and_line_endings() -> None:
    raw = b': keep-alive\r\nevent: message\r\nid: 1\r\ndata: {"a":1}\r\n\r\ndata: x\rdata: y\r\rdata:z\n\n'
    assert _events([raw]) == [("message", '{"a":1}', "1"), ("message", "x\ny", None), ("message", "z", None)]


def test_sse_frame_round_trip() -> None:
    frame = wire.sse_frame({"jsonrpc": "2.0", "id": 1, "result": {}}, event_id="7")
    assert _events([frame]) == [("message", '{"jsonrpc":"2.0","id":1,"result":{}}', "7")]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert _events([b"data: \xff\xfe\n\n"]) == [("message", "\ufffd\ufffd", None)]


def test_line_over_the_limit_is_refused() -> None:
    p = SSEParser(1000)
    with pytest.raises(SSEError):
        for _ in range(100):
            p.feed(b"data: " + b"x" * 100)


def test_event_over_the_limit_is_refused() -> None:
    p = SSEParser(1000)
    with pytest.raises(SSEError):
        for _ in range(100):
            p.feed(b"data: " + b"x" * 50 + b"\n")


def test_many_small_lines_in_one_big_chunk_is_linear() -> None:
    """The old parser copied the rest of the buffer per line: 400,000 lines in one 1.8 MB chunk took
    it 12 s (quadratic); linear parsing takes under a second on the same machine."""
    raw = b"data: x\n\n" * 200_000
    t = time.perf_counter()
    n = len(_events([raw]))
    assert n == 200_000
    assert time.perf_counter() - t < 8.0


def test_long_line_in_many_small_chunks_is_linear() -> None:
    """The old parser appended every chunk to one bytes buffer and searched all of it again: an 8 MB
    line in 100-byte chunks took it 34 s; now ~0.3 s."""
    line = b"data: " + b"y" * 8_000_000 + b"\n\n"
    chunks = [line[i : i + 100] for i in range(0, len(line), 100)]
    t = time.perf_counter()
    assert _events(chunks) == [("message", "y" * 8_000_000, None)]
    assert time.perf_counter() - t < 8.0


async def test_iter_sse_over_an_async_stream() -> None:
    async def gen() -> AsyncIterator[bytes]:
        for c in (b"data: a\r", b"\n\r\ndata: b", b"\n\n"):
            yield c
            await asyncio.sleep(0)

    assert [e.data async for e in sse.iter_sse(gen())] == ["a", "b"]


_text = st.text(
    alphabet=st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",)), max_size=30
)
_event = st.tuples(
    st.one_of(st.none(), _text.filter(lambda s: s != "")),  # event type
    st.lists(_text, min_size=1, max_size=4),  # data lines
    st.one_of(st.none(), _text),  # id
)


@settings(max_examples=500, deadline=None)
@given(
    events=st.lists(_event, max_size=8),
    eol=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    comments=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
)
def test_chunk_boundaries_anywhere_give_the_same_events(
    events: list[tuple[str | None, list[str], str | None]], eol: bytes, comments: bool, cuts: list[int]
) -> None:
    raw = b""
    expected = []
    for etype, data, eid in events:
        if comments:
            raw += b": ping" + eol
        if etype is not None:
            raw += b"event: " + etype.encode() + eol
        if eid is not None:
            raw += b"id: " + eid.encode() + eol
        for line in data:
            raw += b"data: " + line.encode() + eol
        raw += eol
        expected.append((etype or "message", "\n".join(data), eid))
    whole = _events([raw])
    assert whole == expected
    points = sorted({c % (len(raw) + 1) for c in cuts})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    assert _events(chunks) == expected


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=400), cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10))
def test_arbitrary_bytes_never_crash_and_split_equals_whole(raw: bytes, cuts: list[int]) -> None:
    whole = _events([raw], limit=10_000)
    points = sorted({c % (len(raw) + 1) for c in cuts})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    assert _events(chunks, limit=10_000) == whole


@pytest.mark.parametrize("split", [1, 2, 3, 4])
def test_one_leading_bom_is_dropped_even_split_across_chunks(split: int) -> None:
    stream = b"\xef\xbb\xbfdata: a\n\n\xef\xbb\xbfdata: b\n\n"
    chunks = [stream[:split], stream[split:]]
    # The first BOM is dropped as a client drops it; a later one is part of its line (an unknown field).
    assert [e[1] for e in _events(chunks)] == ["a"]


def test_a_stream_of_only_a_bom_prefix_gives_no_event() -> None:
    p = SSEParser(1000)
    assert p.feed(b"\xef") == [] and p.feed(b"\xbb") == [] and p.close() == []
