"""Query parameters as the official registry reads them (issue 32 item 5): an empty value is no value
(200), a search of only spaces is too short (422, length counted after trimming), a cursor that is
not ours is a position (200), a NUL (`%00`) in the query is a 400. A corpus of hostile query strings
with the answer each must get, and a property test: any query string gets a 200 or a 4xx problem."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.registry.conftest import Harness, make_config, running, server_doc, write_json

NAMES = [f"com.example/q{i:02d}" for i in range(8)]


@pytest.fixture(scope="module")
async def reg(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Harness]:
    tmp = tmp_path_factory.mktemp("query")
    write_json(tmp / "s.json", [server_doc(n) for n in NAMES])
    cfg = make_config([{"name": "s", "file": {"path": "s.json"}}], f"sqlite+aiosqlite:///{tmp / 'r.db'}")
    async with running(cfg, tmp) as h:
        await h.sync()
        yield h


# (query string, expected status, the parameter a 422 names)
CORPUS: list[tuple[str, int, str | None]] = [
    ("limit=", 200, None),
    ("include_deleted=", 200, None),
    ("search=", 200, None),
    ("cursor=&version=&updated_since=&search_fields=", 200, None),
    ("search=%20%20%20", 422, "query.search"),
    ("search=%20ab%20", 422, "query.search"),
    ("search=%20abc%20", 200, None),
    ("cursor=garbage", 200, None),
    ("cursor=%FF%FE", 200, None),
    ("cursor=" + "x" * 5000, 200, None),
    ("search=ab%00c", 400, None),
    ("cursor=%00", 400, None),
    ("x=%00", 400, None),
    ("limit=%2500", 422, "query.limit"),
    ("limit=0", 422, "query.limit"),
]


@pytest.mark.parametrize(("query", "status", "location"), CORPUS)
async def test_query_corpus(reg: Harness, query: str, status: int, location: str | None) -> None:
    r = await reg.get(f"/v0.1/servers?{query}")
    assert r.status_code == status, (query, r.text)
    if status != 200:
        assert r.headers["content-type"] == "application/problem+json"
        body = r.json()
        assert body["status"] == status and body["detail"]
        if location is not None:
            assert [e["location"] for e in body["errors"]] == [location]


async def test_empty_values_are_the_defaults(reg: Harness) -> None:
    plain = (await reg.get("/v0.1/servers")).json()
    empty = (await reg.get("/v0.1/servers?limit=&include_deleted=&search=&cursor=&version=")).json()
    assert empty == plain and plain["metadata"]["count"] == len(NAMES)


async def test_a_foreign_cursor_continues_after_the_name_it_spells(reg: Harness) -> None:
    doc = (await reg.get("/v0.1/servers", params={"cursor": "com.example/q05"})).json()
    assert [s["server"]["name"] for s in doc["servers"]] == NAMES[5:]


async def _raw_get(h: Harness, route: str, query: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    """A GET with `query` as raw bytes on the wire (httpx refuses control characters in URLs)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": route,
        "raw_path": route.encode(),
        "query_string": query,
        "headers": [(b"host", b"registry.test")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await h.app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body


_QUERY_TEXT = st.text(st.characters(min_codepoint=0, max_codepoint=0x2FF), max_size=30)
_QUERIES = st.lists(
    st.tuples(
        st.sampled_from(
            ["limit", "cursor", "search", "include_deleted", "updated_since", "version", "search_fields", "x"]
        ),
        st.one_of(_QUERY_TEXT, st.sampled_from(["", " ", "%00", "%", "%zz", "0", "100", "true", "latest"])),
    ),
    max_size=4,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=_QUERIES, route=st.sampled_from(["/v0.1/servers", "/v0/servers/com.example%2Fq01/versions"]))
def test_any_query_is_a_200_or_a_4xx_problem(
    tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]], route: str
) -> None:
    query = "&".join(f"{k}={v}" for k, v in pairs)

    async def run() -> None:
        tmp = tmp_path_factory.mktemp("q")
        write_json(Path(tmp) / "s.json", [server_doc(NAMES[1])])
        cfg = make_config([{"name": "s", "file": {"path": "s.json"}}], f"sqlite+aiosqlite:///{tmp / 'r.db'}")
        async with running(cfg, tmp) as h:
            await h.sync()
            status, headers, body = await _raw_get(h, route, query.encode())
            assert status in (200, 400, 404, 422), (query, status, body)
            if status != 200:
                assert headers[b"content-type"] == b"application/problem+json" and json.loads(body)["detail"]

    asyncio.run(run())
