"""Compressed answers are read within the same decoded-byte limit as plain ones (issue 27 item 10).

A gzip (or deflate) body of about half a MiB that decodes to 512 MiB of zeros, served on 127.0.0.1
to every bounded reader: `read_capped` itself, the webhook client, the authorization server's
upstream identity provider and client metadata document fetches, the registry's URL source and the
OIDC discovery / key-set fetch. Each must refuse it with its own clear error, having decoded at most
its limit plus one byte (traced memory stays a few MiB; httpx's and aiohttp's own decoders inflate
a whole network chunk at once, 64 KiB becoming 64 MiB), and each asks for no compression at all
(`Accept-Encoding: identity`). Property tests: any body, any chunking, gzip or deflate (zlib or raw),
decodes to itself under the limit and is refused past it.
"""

from __future__ import annotations

import functools
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.auth.authserver.cimd import CIMDResolver
from mcpfleet.auth.authserver.config import Upstream
from mcpfleet.auth.authserver.server import OAuthError
from mcpfleet.auth.authserver.upstream import UpstreamClient, UpstreamError
from mcpfleet.auth.oidc import AuthError, OIDCAuthenticator, OIDCSettings
from mcpfleet.httplimits import BodyTooLarge, BodyUnreadable, read_capped, read_decoded
from mcpfleet.registry.sources.base import MAX_DOCUMENT_BYTES, SourceError
from mcpfleet.registry.sources.url import UrlReader
from mcpfleet.webhook.client import CallFailed, WebhookClient
from mcpfleet.webhook.config import Endpoint
from tests.local_http import serving

MiB = 1024 * 1024
BOMB_DECODED = 512 * MiB
MEMORY_BUDGET = 16 * MiB
"""Traced peak allowed beyond the reader's own limit while it meets the bomb."""


def _compress(wbits: int, size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    zeros = bytes(MiB)
    parts = [packer.compress(zeros) for _ in range(size // MiB)]
    return b"".join([*parts, packer.flush()])


@functools.cache
def bomb(coding: str) -> bytes:
    """512 MiB of zeros, gzip or deflate (zlib-wrapped) encoded: about 0.5 MiB."""
    return _compress(16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS, BOMB_DECODED)


async def within_memory(action: Callable[[], Awaitable[Any]], limit: int = MiB) -> Any:
    """Run `action`; fail when the traced peak passes the reader's `limit` plus `MEMORY_BUDGET`.
    Returns what it raised."""
    tracemalloc.start()
    try:
        try:
            await action()
        except Exception as exc:
            raised: Any = exc
        else:
            raised = None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < limit + MEMORY_BUDGET, f"peak {peak // MiB} MiB while reading the bomb"
    return raised


class BombServer:
    """Serves the bomb at every path (POST and GET), remembering each request's Accept-Encoding."""

    def __init__(self, coding: str = "gzip") -> None:
        self.coding = coding
        self.accept_encodings: list[str | None] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.accept_encodings.append(request.headers.get("accept-encoding"))
        await request.read()
        response = web.StreamResponse(
            headers={"content-type": "application/json", "content-encoding": self.coding}
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        body = bomb(self.coding)
        for start in range(0, len(body), 64 * 1024):
            await response.write(body[start : start + 64 * 1024])
        await response.write_eof()
        return response

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app


async def _serve(coding: str = "gzip") -> AsyncIterator[tuple[str, BombServer]]:
    server = BombServer(coding)
    async with serving(server.app()) as base:
        yield base, server


@pytest.fixture
async def gzip_bomb() -> AsyncIterator[tuple[str, BombServer]]:
    async for served in _serve("gzip"):
        yield served


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_read_capped_stops_at_the_limit_of_decoded_bytes(coding: str) -> None:
    async for base, _ in _serve(coding):
        async with httpx.AsyncClient(trust_env=False) as http, http.stream("GET", base) as response:
            refused = await within_memory(lambda: read_capped(response, MiB))
        assert isinstance(refused, BodyTooLarge), refused
        assert MiB < refused.size <= MiB + 1  # stopped at the first byte past the limit


async def test_the_webhook_client_refuses_a_bomb(gzip_bomb: tuple[str, BombServer]) -> None:
    base, server = gzip_bomb
    client = WebhookClient(Endpoint.model_validate({"name": "bomb", "url": f"{base}/hook"}))
    try:
        refused = await within_memory(lambda: client.call(b"{}"))
    finally:
        await client.aclose()
    assert isinstance(refused, CallFailed) and "answer larger than" in str(refused), refused
    assert server.accept_encodings == ["identity"]


async def test_the_upstream_identity_provider_answer_is_bounded(gzip_bomb: tuple[str, BombServer]) -> None:
    base, server = gzip_bomb
    cfg = Upstream.model_validate({"name": "idp", "type": "oidc", "issuerUrl": base, "clientId": "c"})
    async with httpx.AsyncClient(trust_env=False) as http:
        upstream = UpstreamClient(cfg, http, "http://127.0.0.1/cb")
        refused = await within_memory(
            lambda: upstream._get_json(f"{base}/.well-known/openid-configuration", "idp")
        )
    assert isinstance(refused, UpstreamError) and "larger than" in str(refused), refused
    assert server.accept_encodings == ["identity"]


async def test_a_client_metadata_document_bomb_is_refused() -> None:
    """CIMD documents are https-only: served by a mock transport (the same reader reads them)."""
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("accept-encoding"))
        body = bomb("gzip")  # streamed: httpx decodes a body given whole as soon as it is made
        chunks = [body[i : i + 64 * 1024] for i in range(0, len(body), 64 * 1024)]
        return httpx.Response(200, headers={"content-encoding": "gzip"}, content=_chunks(chunks))

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        resolver = CIMDResolver(ttl=60, max_size=10, allow_private=False, http=http)
        refused = await within_memory(lambda: resolver.resolve("https://client.example/metadata.json"))
    assert isinstance(refused, OAuthError) and "too large" in str(refused.description), refused
    assert seen == ["identity"]


async def test_a_registry_url_source_bomb_is_refused(gzip_bomb: tuple[str, BombServer]) -> None:
    base, server = gzip_bomb
    reader = UrlReader("bomb", "upstream", f"{base}/registry.json", {}, timeout=30)
    try:
        refused = await within_memory(reader.fetch, MAX_DOCUMENT_BYTES)  # 64 MiB: registry files are big
    finally:
        await reader.close()
    assert isinstance(refused, SourceError) and "more than the" in str(refused), refused
    assert server.accept_encodings == ["identity"]


async def test_oidc_discovery_bomb_is_refused(gzip_bomb: tuple[str, BombServer]) -> None:
    base, server = gzip_bomb
    auth = OIDCAuthenticator(
        OIDCSettings.model_validate({"issuer": base, "audience": "a", "insecureAllowHTTP": True})
    )
    try:
        refused = await within_memory(auth._refresh)
    finally:
        await auth.close()
    assert isinstance(refused, AuthError) and "BodyTooLarge" in str(refused), refused
    assert server.accept_encodings == ["identity"]


async def test_a_webhook_answer_in_another_encoding_is_unreadable() -> None:
    async def brotli(request: web.Request) -> web.Response:
        return web.Response(body=b"\x1b\x00\x00", headers={"content-encoding": "br"})

    app = web.Application()
    app.router.add_post("/hook", brotli)
    async with serving(app) as base:
        client = WebhookClient(Endpoint.model_validate({"name": "br", "url": f"{base}/hook"}))
        try:
            with pytest.raises(CallFailed, match="answer unreadable"):
                await client.call(b"{}")
        finally:
            await client.aclose()


async def test_an_unknown_or_stacked_encoding_is_refused() -> None:
    for coding in ("br", "zstd", "gzip, gzip", "compress"):
        with pytest.raises(BodyUnreadable, match="not accepted"):
            await read_decoded(_chunks([b"x"]), coding, 100)
    with pytest.raises(BodyUnreadable, match="not valid gzip"):
        await read_decoded(_chunks([b"not gzip at all"]), "gzip", 100)


async def _chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "raw-deflate": -zlib.MAX_WBITS}


@settings(max_examples=150, deadline=None)
@given(
    body=st.one_of(st.binary(max_size=3000), st.integers(0, 5000).map(bytes)),
    coding=st.sampled_from(sorted(CODINGS)),
    cuts=st.lists(st.integers(0, 10_000), max_size=8),
    limit=st.integers(0, 4000),
)
async def test_property_any_chunking_decodes_whole_or_stops_at_the_limit(
    body: bytes, coding: str, cuts: list[int], limit: int
) -> None:
    packer = zlib.compressobj(6, zlib.DEFLATED, CODINGS[coding])
    encoded = packer.compress(body) + packer.flush()
    header = "deflate" if coding == "raw-deflate" else coding
    stream = _chunks(_split(encoded, cuts))
    if len(body) <= limit:
        assert await read_decoded(stream, header, limit) == body
    else:
        with pytest.raises(BodyTooLarge) as refused:
            await read_decoded(stream, header, limit)
        assert refused.value.size == limit + 1


@settings(max_examples=100, deadline=None)
@given(garbage=st.binary(max_size=500), coding=st.sampled_from(["gzip", "deflate", "x-gzip"]))
async def test_property_garbage_is_refused_clearly(garbage: bytes, coding: str) -> None:
    """Bytes that are not the coding they claim: a BodyUnreadable (or, when they happen to decode,
    a bounded body), never another exception."""
    try:
        body = await read_decoded(_chunks([garbage]), coding, 1000)
    except (BodyUnreadable, BodyTooLarge):
        return
    assert len(body) <= 1000
