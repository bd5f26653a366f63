"""`policy.sse.SseRewriter` against hostile streams: any chunking, every line ending, huge events,
garbage data, unfinished tails. The oracle is a plain whole-body parser written from the SSE
standard's client algorithm: what a client reads from the rewritten stream must be exactly the
input's events with their JSON data rewritten, minus the events a client could not safely get."""

from __future__ import annotations

import re
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.policy.sse import SseRewriter

OVERFLOW = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "too large"}}


def client_events(stream: bytes) -> list[tuple[list[tuple[bytes, bytes]], bytes | None]]:
    """The events a standard SSE client dispatches: (non-data fields, data or None), whole-body."""
    events: list[tuple[list[tuple[bytes, bytes]], bytes | None]] = []
    fields: list[tuple[bytes, bytes]] = []
    data: list[bytes] | None = None
    if stream.startswith(b"\xef\xbb\xbf"):
        stream = stream[3:]  # one leading BOM is dropped
    lines = re.split(rb"\r\n|\r|\n", stream)
    for line in lines[:-1]:  # the last piece has no terminator: an unfinished line
        if not line:
            if fields or data is not None:
                events.append((fields, b"\n".join(data) if data is not None else None))
            fields, data = [], None
            continue
        if line.startswith(b":"):
            continue  # a comment
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data = [*(data or []), value]
        else:
            fields.append((name, value))
    return events  # an unfinished event at the end is dropped


def tag(message: Any) -> Any:
    """The test's rewrite: marks what went through it."""
    return {"rewritten": message}


def expected(stream: bytes, max_event: int) -> list[tuple[list[tuple[bytes, bytes]], Any]]:
    out: list[tuple[list[tuple[bytes, bytes]], Any]] = []
    for fields, data in client_events(stream):
        if data is None:
            out.append((fields, None))
            continue
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue  # not JSON: dropped
        out.append((fields, tag(message)))
    return out


def feed(rewriter: SseRewriter, chunks: list[bytes]) -> bytes:
    out = b"".join(rewriter.feed(c) for c in chunks)
    return out + rewriter.end()


def split(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(stream[last:p])
        last = p
    pieces.append(stream[last:])
    return pieces


json_message = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=6)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
newline = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def event(draw: st.DrawFn) -> bytes:
    nl = draw(newline)
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 2))):
        lines.append(
            draw(st.sampled_from([b"event: message", b"id: 7", b"retry: 10", b": keep-alive", b"event"]))
        )
    kind = draw(st.sampled_from(["json", "json-split", "garbage", "none"]))
    if kind == "json":
        lines.append(b"data: " + orjson.dumps(draw(json_message)))
    elif kind == "json-split":
        text = orjson.dumps(draw(st.lists(st.integers(-(2**53), 2**53), min_size=2, max_size=4)))
        cut = draw(st.integers(1, len(text) - 1))
        lines += [b"data:" + text[:cut], b"data:" + text[cut:]]
    elif kind == "garbage":
        lines.append(b"data: " + draw(st.binary(max_size=20)).replace(b"\r", b"").replace(b"\n", b""))
    lines = draw(st.permutations(lines))
    return nl.join(lines) + nl + draw(newline)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([b"", b"\xef\xbb\xbf"]),
    st.lists(event(), max_size=6),
    st.binary(max_size=30),
    st.lists(st.integers(0, 10_000), max_size=8),
)
def test_any_chunking_gives_the_client_exactly_the_rewritten_events(
    bom: bytes, events: list[bytes], tail: bytes, cuts: list[int]
) -> None:
    stream = bom + b"".join(events) + tail  # tail: noise, maybe an unfinished event
    got = feed(SseRewriter(tag, lambda: OVERFLOW), split(stream, cuts))
    want = expected(stream, 1 << 20)
    seen = [(fields, orjson.loads(data) if data is not None else None) for fields, data in client_events(got)]
    assert seen == want
    # Whatever the chunking, the same bytes come out.
    assert got == feed(SseRewriter(tag, lambda: OVERFLOW), [stream])
    # Every data line that goes out went through the rewrite (or is the overflow error).
    for _, data in client_events(got):
        if data is not None:
            assert "rewritten" in orjson.loads(data)


def test_a_huge_event_is_replaced_by_one_error_and_never_held() -> None:
    rewriter = SseRewriter(tag, lambda: OVERFLOW, max_event=1000)
    head = rewriter.feed(b'data: {"a": 1}\n\n')
    out = bytearray()
    # 1 MB of one line, in 1 kB chunks: the rewriter must not keep it.
    out += rewriter.feed(b'data: {"tools": [')
    for _ in range(1000):
        out += rewriter.feed(b'"x",' * 250)
        assert len(rewriter._buf) + rewriter._size <= 1000
    out += rewriter.feed(b'"x"]}\r\n\r\ndata: {"b": 2}\n\n')
    events = client_events(head + bytes(out) + rewriter.end())
    assert [orjson.loads(d) for _, d in events if d is not None] == [tag({"a": 1}), OVERFLOW, tag({"b": 2})]


def test_many_small_data_lines_adding_up_overflow_too() -> None:
    rewriter = SseRewriter(tag, lambda: OVERFLOW, max_event=100)
    out = rewriter.feed(b"data: 1\n" * 200 + b"\n" + b"data: 2\n\n")
    assert [orjson.loads(d) for _, d in client_events(out) if d is not None] == [OVERFLOW, tag(2)]


def test_a_split_crlf_is_one_line_end() -> None:
    rewriter = SseRewriter(tag, lambda: OVERFLOW)
    out = rewriter.feed(b"data: 1\r") + rewriter.feed(b"\n\r") + rewriter.feed(b"\ndata: 2\r\r")
    assert [orjson.loads(d) for _, d in client_events(out) if d is not None] == [tag(1), tag(2)]


def test_a_leading_bom_split_across_chunks_does_not_hide_data() -> None:
    rewriter = SseRewriter(tag, lambda: OVERFLOW)
    out = b"".join(rewriter.feed(c) for c in (b"\xef", b"\xbb", b"\xbfdata: [1]\n", b"\n"))
    assert out == b'data: {"rewritten":[1]}\n\n'


def test_an_unfinished_event_and_garbage_are_not_relayed() -> None:
    rewriter = SseRewriter(tag, lambda: OVERFLOW)
    out = rewriter.feed(b'data: not json\n\ndata: {"tools": [1, 2]}')
    assert out == b""
    assert rewriter.end() == b""


def test_an_event_nested_too_deep_is_an_error_or_dropped() -> None:
    """Issue 27, defect 4: a (remote) server's answer nested past what orjson writes was a 500 as the
    filtered stream was re-encoded. A response becomes a -32603 error; anything else is dropped."""
    deep = b"[" * 300 + b"]" * 300
    stream = (
        b'data: {"jsonrpc":"2.0","id":7,"result":' + deep + b"}\n\n"
        b'data: {"jsonrpc":"2.0","method":"notifications/x","params":{"a":' + deep + b"}}\n\n"
    )
    rw = SseRewriter(lambda m: m, lambda: OVERFLOW)
    out = rw.feed(stream) + rw.end()
    events = client_events(out)
    assert len(events) == 1, out[:300]
    answer = orjson.loads(events[0][1] or b"")
    assert answer["id"] == 7 and answer["error"]["code"] == -32603
    assert "nested deeper than 128 levels" in answer["error"]["message"]
