"""The read API on both backends: envelope, pagination, filters, versions, ETags, errors — every
response validated against the upstream OpenAPI components and the server.json schema."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from urllib.parse import quote

import pytest

from tests.reference import TOOLHIVE_FILE
from tests.registry.conftest import (
    Harness,
    Postgres,
    make_config,
    running,
    server_doc,
    write_json,
)
from tests.registry.schemas import check_server_list, check_server_response

OFFICIAL = "io.modelcontextprotocol.registry/official"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
async def reg(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Harness]:
    """One synced registry per backend, shared by this module's read-only tests."""
    tmp_path = tmp_path_factory.mktemp(f"api-{request.param}")
    if request.param == "sqlite":
        db_url = f"sqlite+aiosqlite:///{tmp_path / 'registry.db'}"
    else:
        pg: Postgres = request.getfixturevalue("postgres")
        name = "api_" + uuid.uuid4().hex[:12]
        pg.admin(f"CREATE DATABASE {name}")
        db_url = pg.url(name)
    versions = [
        server_doc("com.example/multi", "1.0.0", "Multi version server"),
        server_doc("com.example/multi", "1.10.0", "Multi version server"),
        server_doc("com.example/multi", "1.2.0", "Multi version server"),
        server_doc("com.example/with-build", "1.0.0+build.7", "Build metadata version"),
    ]
    write_json(tmp_path / "extra.json", versions)
    cfg = make_config(
        [
            {"name": "toolhive", "format": "toolhive", "file": {"path": str(TOOLHIVE_FILE)}},
            {"name": "extra", "file": {"path": "extra.json"}},
        ],
        db_url,
    )
    async with running(cfg, tmp_path) as h:
        await h.sync()
        assert h.service.ready
        yield h


async def walk(h: Harness, prefix: str = "/v0.1", **params: str) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    cursor = None
    for _ in range(1000):
        q = dict(params)
        if cursor:
            q["cursor"] = cursor
        r = await h.get(f"{prefix}/servers", params=q)
        assert r.status_code == 200, r.text
        doc = r.json()
        check_server_list(doc)
        assert doc["metadata"]["count"] == len(doc["servers"])
        seen += [(s["server"]["name"], s["server"]["version"]) for s in doc["servers"]]
        cursor = doc["metadata"].get("nextCursor")
        if not cursor:
            return seen
    raise AssertionError("cursor walk did not end")


async def test_list_envelope_and_every_toolhive_server_is_served(reg: Harness) -> None:
    r = await reg.get("/v0.1/servers")
    doc = r.json()
    check_server_list(doc)
    assert len(doc["servers"]) == 30 and doc["metadata"]["count"] == 30 and doc["metadata"]["nextCursor"]
    meta = doc["servers"][0]["_meta"][OFFICIAL]
    assert set(meta) >= {"status", "publishedAt", "updatedAt", "isLatest", "statusChangedAt"}
    names = await walk(reg, limit="100")
    assert len(names) == len(set(names)) == 106
    assert sum(1 for n, _ in names if n.startswith("io.github.stacklok/")) == 102
    assert names == sorted(names)


async def test_served_toolhive_entries_round_trip(reg: Harness) -> None:
    import json

    from mcpfleet.registry.formats.toolhive import upstream_to_toolhive

    original = json.loads(TOOLHIVE_FILE.read_text())
    back: dict[str, dict[str, object]] = {"servers": {}, "remote_servers": {}}
    cursor = None
    while True:
        params = {"limit": "100", "search": "io.github.stacklok/"} | ({"cursor": cursor} if cursor else {})
        doc = (await reg.get("/v0.1/servers", params=params)).json()
        for item in doc["servers"]:
            key, entry, remote = upstream_to_toolhive(item["server"])
            back["remote_servers" if remote else "servers"][key] = entry
        cursor = doc["metadata"].get("nextCursor")
        if not cursor:
            break
    assert back == {"servers": original["servers"], "remote_servers": original["remote_servers"]}


async def test_limit_bounds(reg: Harness) -> None:
    assert len((await reg.get("/v0.1/servers?limit=100")).json()["servers"]) == 100
    assert len((await reg.get("/v0.1/servers?limit=1")).json()["servers"]) == 1
    # Issue 17: schema failures are 422 problem documents, as on the official registry.
    for bad in ("0", "101", "-1", "abc", "1.5"):
        r = await reg.get(f"/v0.1/servers?limit={bad}")
        assert r.status_code == 422 and r.json()["errors"][0]["location"] == "query.limit", bad
    # Issue 32: an empty value is no value (the default), as on the official registry.
    assert (await reg.get("/v0.1/servers?limit=")).status_code == 200


async def test_search_version_and_updated_since(reg: Harness) -> None:
    doc = (await reg.get("/v0.1/servers", params={"search": "FETCH", "limit": "100"})).json()
    check_server_list(doc)
    assert doc["servers"] and all("fetch" in s["server"]["name"].lower() for s in doc["servers"])
    # description-only match: only with the opt-in search_fields (issue 17: names only by default)
    doc = (await reg.get("/v0.1/servers", params={"search": "build metadata"})).json()
    assert doc["servers"] == []
    params = {"search": "build metadata", "search_fields": "name,title,description"}
    doc = (await reg.get("/v0.1/servers", params=params)).json()
    assert [s["server"]["name"] for s in doc["servers"]] == ["com.example/with-build"]
    latest = await walk(reg, version="latest", limit="100")
    assert ("com.example/multi", "1.10.0") in latest and ("com.example/multi", "1.2.0") not in latest
    assert len(latest) == 104
    exact = await walk(reg, version="1.2.0")
    assert exact == [("com.example/multi", "1.2.0")]
    assert len(await walk(reg, updated_since="2000-01-01T00:00:00Z", limit="100")) == 106
    assert await walk(reg, updated_since="2999-01-01T00:00:00+02:00") == []
    for bad in ("yesterday", "2025-01-01", "2025-13-01T00:00:00Z", "2025-01-01T00:00:00"):
        r = await reg.get("/v0.1/servers", params={"updated_since": bad})
        assert r.status_code == 400 and "updated_since" in r.json()["detail"], bad
    assert (await reg.get("/v0.1/servers?include_deleted=maybe")).status_code == 422
    # A cursor that is not ours is a position (the official answers 200), a NUL a 400.
    assert (await reg.get("/v0.1/servers?cursor=!!notacursor")).status_code == 200
    assert (await reg.get("/v0.1/servers?search=ab%00c")).status_code == 400


async def test_versions_and_get(reg: Harness) -> None:
    name = quote("com.example/multi", safe="")
    r = await reg.get(f"/v0.1/servers/{name}/versions")
    doc = r.json()
    check_server_list(doc)
    assert sorted(s["server"]["version"] for s in doc["servers"]) == ["1.0.0", "1.10.0", "1.2.0"]
    assert [s["_meta"][OFFICIAL]["isLatest"] for s in doc["servers"]].count(True) == 1
    r = await reg.get(f"/v0.1/servers/{name}/versions/latest")
    check_server_response(r.json())
    assert r.json()["server"]["version"] == "1.10.0" and r.json()["_meta"][OFFICIAL]["isLatest"]
    r = await reg.get(f"/v0.1/servers/{name}/versions/1.2.0")
    assert r.json()["server"]["version"] == "1.2.0" and not r.json()["_meta"][OFFICIAL]["isLatest"]
    # URL-encoded version with build metadata, and the unencoded-slash form of the name
    plus = quote("com.example/with-build", safe="")
    r = await reg.get(f"/v0.1/servers/{plus}/versions/{quote('1.0.0+build.7', safe='')}")
    assert r.status_code == 200 and r.json()["server"]["version"] == "1.0.0+build.7"
    r = await reg.get("/v0.1/servers/io.github.stacklok/fetch/versions/latest")
    assert r.status_code == 200 and r.json()["server"]["name"] == "io.github.stacklok/fetch"
    for path in (
        f"/v0.1/servers/{quote('com.example/nope', safe='')}/versions",
        f"/v0.1/servers/{name}/versions/9.9.9",
        "/v0.1/servers/x/y/z/versions/1",
    ):
        r = await reg.get(path)
        assert r.status_code == 404 and isinstance(r.json()["detail"], str), path


async def test_v0_routes_and_methods(reg: Harness) -> None:
    assert await walk(reg, prefix="/v0", limit="100") == await walk(reg, limit="100")
    r = await reg.get(f"/v0/servers/{quote('io.github.stacklok/fetch', safe='')}/versions/latest")
    check_server_response(r.json())
    r = await reg.client.put("/v0.1/servers/a%2Fb/versions/1", json={})
    assert r.status_code == 405 and r.json()["detail"]
    r = await reg.client.head("/v0.1/servers")
    assert r.status_code == 200 and r.content == b"" and int(r.headers["content-length"]) > 0


async def test_etag_and_if_none_match(reg: Harness) -> None:
    for path in (
        "/v0.1/servers?limit=5",
        f"/v0.1/servers/{quote('io.github.stacklok/fetch', safe='')}/versions/latest",
    ):
        r = await reg.get(path)
        etag = r.headers["etag"]
        again = await reg.get(path, headers={"If-None-Match": etag})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
        assert (await reg.get(path, headers={"If-None-Match": f'W/{etag}, "other"'})).status_code == 304
        assert (await reg.get(path, headers={"If-None-Match": '"stale"'})).status_code == 200
    # An unchanged re-sync keeps the ETag; a change moves it.
    before = (await reg.get("/v0.1/servers?limit=5")).headers["etag"]
    await reg.sync()
    assert (await reg.get("/v0.1/servers?limit=5")).headers["etag"] == before


async def test_operational_endpoints(reg: Harness) -> None:
    assert (await reg.get("/health")).json() == {"status": "ok"}
    assert (await reg.get("/readiness")).status_code == 200
    assert (await reg.get("/version")).json()["version"]
    status = (await reg.get("/status")).json()
    assert status["ready"] and [s["name"] for s in status["sources"]] == ["toolhive", "extra"]
    assert status["sources"][0]["entries"] == 102 and status["sources"][0]["lastError"] is None
    metrics = (await reg.get("/metrics")).text
    assert 'mcpfleet_registry_source_up{source="toolhive"} 1.0' in metrics
    assert "mcpfleet_registry_catalogue_entries 106.0" in metrics
    spec = (await reg.get("/openapi.json")).json()
    assert "/v0.1/servers" in spec["paths"] and "/v0/servers/{serverName}/versions/{version}" in spec["paths"]
    assert (await reg.get("/nope")).status_code == 404
