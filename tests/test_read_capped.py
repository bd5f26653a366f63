"""`httplimits.read_capped`, the bounded reader of streamed httpx response bodies (webhook answers,
upstream identity provider JSON, client metadata documents, registry files fetched by URL).

The property test drives real `httpx.Response` objects over a byte stream the test controls (chunk
sizes, a Content-Length that is absent, honest, understated or overstated); the last tests read
from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.httplimits import BodyTooLarge, read_capped
from tests.local_http import serving


class CountingStream:
    """The response body, chunk by chunk, remembering how many chunks the reader pulled."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.pulled += 1
            yield chunk


def _response(stream: CountingStream, declared: int | None) -> httpx.Response:
    headers = {} if declared is None else {"content-length": str(declared)}
    return httpx.Response(200, headers=headers, content=stream)


async def _read(chunks: list[bytes], limit: int, declared: int | None = None) -> bytes:
    return await read_capped(_response(CountingStream(chunks), declared), limit)


async def test_exactly_the_limit_is_read_and_one_byte_more_is_refused() -> None:
    assert await _read([b"a" * 10], 10) == b"a" * 10
    assert await _read([b"a" * 4, b"b" * 6], 10, declared=10) == b"a" * 4 + b"b" * 6
    with pytest.raises(BodyTooLarge) as refused:
        await _read([b"a" * 10, b"b"], 10)
    assert (refused.value.limit, refused.value.size) == (10, 11)
    assert str(refused.value) == "response body larger than 10 bytes"


async def test_an_empty_body_and_a_zero_limit() -> None:
    assert await _read([], 0) == b""
    assert await _read([b"", b""], 0, declared=0) == b""
    with pytest.raises(BodyTooLarge):
        await _read([b"x"], 0)


async def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    stream = CountingStream([b"tiny"])
    with pytest.raises(BodyTooLarge) as refused:
        await read_capped(_response(stream, 1_000_000), 100)
    assert refused.value.size == 1_000_000 and stream.pulled == 0


async def test_an_understated_length_is_not_trusted() -> None:
    stream = CountingStream([b"a" * 60, b"b" * 60, b"c" * 60])
    with pytest.raises(BodyTooLarge) as refused:
        await read_capped(_response(stream, 5), 100)
    assert refused.value.size == 120 and stream.pulled == 2  # stopped at the chunk that crossed


lengths = st.one_of(st.none(), st.integers(min_value=0, max_value=3000))


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(st.binary(max_size=300), max_size=12),
    limit=st.integers(min_value=0, max_value=2000),
    declared=st.one_of(lengths, st.sampled_from(["honest", "limit", "limit+1"])),
)
async def test_property_body_returned_whole_or_refused_within_bounds(
    chunks: list[bytes], limit: int, declared: int | str | None
) -> None:
    total = sum(len(c) for c in chunks)
    if declared == "honest":
        declared = total
    elif declared == "limit":
        declared = limit
    elif declared == "limit+1":
        declared = limit + 1
    assert declared is None or isinstance(declared, int)
    stream = CountingStream(chunks)
    response = _response(stream, declared)
    if declared is not None and declared > limit:
        with pytest.raises(BodyTooLarge) as refused:
            await read_capped(response, limit)
        assert refused.value.size == declared and stream.pulled == 0
    elif total > limit:
        with pytest.raises(BodyTooLarge) as refused:
            await read_capped(response, limit)
        # It stopped at the first chunk that crossed the limit: nothing after it was pulled, and
        # what it reports received is exactly the body up to and including that chunk.
        crossed = next(i for i in range(len(chunks)) if sum(map(len, chunks[: i + 1])) > limit)
        assert stream.pulled == crossed + 1
        assert refused.value.size == sum(map(len, chunks[: crossed + 1]))
        assert refused.value.limit == limit
    else:
        assert await read_capped(response, limit) == b"".join(chunks)


async def _chunked(request: web.Request) -> web.StreamResponse:
    size = int(request.query["size"])
    response = web.StreamResponse()
    response.enable_chunked_encoding()
    await response.prepare(request)
    for start in range(0, size, 1000):
        await response.write(b"x" * min(1000, size - start))
    await response.write_eof()
    return response


async def _sized(request: web.Request) -> web.Response:
    return web.Response(body=b"y" * int(request.query["size"]))


async def test_over_a_real_connection_chunked_and_with_content_length() -> None:
    app = web.Application()
    app.router.add_get("/chunked", _chunked)
    app.router.add_get("/sized", _sized)
    limit = 4096
    async with serving(app) as base, httpx.AsyncClient(trust_env=False) as http:
        for path in ("/chunked", "/sized"):
            async with http.stream("GET", f"{base}{path}?size={limit}") as response:
                assert await read_capped(response, limit) == (b"x" if path == "/chunked" else b"y") * limit
            async with http.stream("GET", f"{base}{path}?size={limit + 1}") as response:
                with pytest.raises(BodyTooLarge) as refused:
                    await read_capped(response, limit)
            assert refused.value.size > limit, path
