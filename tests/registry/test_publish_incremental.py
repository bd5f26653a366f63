"""A publish, a status change or a delete updates the served catalogue for one name only
(`RegistryService.refresh` → `Catalogue.replaced`): after any sequence of them the served answers —
list pages with and without search, versions, gets, their ETags — are those of a catalogue loaded
afresh from the database, even with page caches and search indexes warmed before each change; and
concurrent publishes are all kept."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.registry.catalogue import SEARCH_NAME, SEARCH_TEXT, Catalogue, Page, items_of
from tests.registry.conftest import server_doc
from tests.registry.test_publish import SYNCED, bearer, path, registry, token

NAMES = (SYNCED, "com.acme/a", "com.acme/b", "com.acme.x/c")
VERSIONS = ("1.0.0", "1.2.0", "1.10.0", "2.0.0-rc1")
STATUSES = ("active", "deprecated", "deleted")

_OPS = st.one_of(
    st.tuples(st.just("publish"), st.sampled_from(NAMES), st.sampled_from(VERSIONS), st.just("")),
    st.tuples(
        st.just("status"), st.sampled_from(NAMES), st.sampled_from(VERSIONS), st.sampled_from(STATUSES)
    ),
    st.tuples(st.just("status-all"), st.sampled_from(NAMES), st.just(""), st.sampled_from(STATUSES)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.sampled_from(VERSIONS), st.just("")),
)


def _page(page: Page | None) -> tuple[bytes, str] | None:
    return None if page is None else (page.body, page.etag)


def answers(catalogue: Catalogue) -> dict[Any, Any]:
    """Everything a reader can ask, with the page bodies and ETags: list walks (small pages, so
    cursors land inside and between names), searches of both field sets, versions and gets."""
    out: dict[Any, Any] = {}
    for deleted in (False, True):
        for search, fields in ((None, SEARCH_NAME), ("acme", SEARCH_NAME), ("test", SEARCH_TEXT)):
            for version in (None, "latest"):
                cursor: str | None = None
                for step in range(50):
                    page = catalogue.list_page(cursor, 2, search, None, version, deleted, fields)
                    out[("list", deleted, search, version, step)] = _page(page)
                    cursor = orjson_cursor(page.body)
                    if cursor is None:
                        break
        for name in (*NAMES, "io.other/x"):
            out[("versions", name, deleted)] = _page(catalogue.versions_page(name, deleted))
            for v in (*VERSIONS, "latest"):
                out[("get", name, v, deleted)] = _page(catalogue.get(name, v, deleted))
    out["active"] = catalogue.active_count
    return out


def orjson_cursor(body: bytes) -> str | None:
    import orjson

    cursor: str | None = orjson.loads(body)["metadata"].get("nextCursor")
    return cursor


async def _apply(h: Any, auth: dict[str, str], op: tuple[str, str, str, str]) -> int:
    kind, name, version, status = op
    if kind == "publish":
        r = await h.client.post("/v0.1/publish", json=server_doc(name, version), headers=auth)
    elif kind == "delete":
        r = await h.client.delete(path(name, "versions", version), headers=auth)
    elif kind == "status":
        r = await h.client.patch(
            path(name, "versions", version, "status"), json={"status": status}, headers=auth
        )
    else:
        r = await h.client.patch(path(name, "status"), json={"status": status}, headers=auth)
    assert r.status_code < 500, r.text
    return int(r.status_code)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(_OPS, min_size=6, max_size=14))
def test_served_state_equals_a_full_reload(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str, str, str]]
) -> None:
    async def run() -> None:
        tmp = tmp_path_factory.mktemp("incremental")
        db = f"sqlite+aiosqlite:///{tmp / 'r.db'}"
        async with registry(db, tmp) as (issuer, h):
            auth = bearer(token(issuer, sub="moderator"))
            service = h.service
            for op in ops:
                answers(service.current())  # warm the page cache and both search indexes
                before = service.current().generation
                await _apply(h, auth, op)
                served = service.current()
                generation, items = await service.store.catalogue_items(items_of)
                fresh = Catalogue(generation, [], items)
                assert served.generation == generation >= before
                assert served.keys == fresh.keys
                assert answers(served) == answers(fresh), op

    asyncio.run(run())


async def test_concurrent_publishes_are_all_kept(db_url: str, tmp_path: Any) -> None:
    async with registry(db_url, tmp_path) as (issuer, h):
        auth = bearer(token(issuer))
        docs = [server_doc(f"com.acme/c{i % 4}", f"1.{i}.0") for i in range(12)]
        codes = await asyncio.gather(*(h.client.post("/v0.1/publish", json=d, headers=auth) for d in docs))
        assert [r.status_code for r in codes] == [200] * len(docs)
        served = {(i.name, i.version) for i in h.service.current().items}
        assert {(d["name"], d["version"]) for d in docs} <= served
        # The same version twice at once: one wins, the other is the duplicate-version answer.
        dup = server_doc("com.acme/c0", "9.0.0")
        twice = await asyncio.gather(
            *(h.client.post("/v0.1/publish", json=dup, headers=auth) for _ in range(2))
        )
        assert sorted(r.status_code for r in twice) == [200, 400]
        generation, items = await h.service.store.catalogue_items(items_of)
        assert answers(h.service.current()) == answers(Catalogue(generation, [], items))
