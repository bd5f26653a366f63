"""Issue 17 §1: a client written against the official registry cannot tell this one apart.

Each behaviour below was read from the official registry (its OpenAPI and its Go code: huma's problem
documents, the handlers' parameter checks, `internal/service/versioning.go`) and is asserted here;
every GET operation of the upstream OpenAPI is also exercised and its answer validated against the
documented response schema.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from mcpfleet.registry.versions import compare_versions, is_semantic_version, latest_version
from tests.reference import OPENAPI_FILE
from tests.registry.conftest import (
    Harness,
    make_config,
    running,
    server_doc,
    write_json,
)
from tests.registry.schemas import check_server_list, check_server_response, component

OFFICIAL = "io.modelcontextprotocol.registry/official"
PROBLEM = "application/problem+json"
T1, T2, T3 = "2025-01-01T00:00:00.000000Z", "2025-02-01T00:00:00.000000Z", "2025-03-01T00:00:00.000000Z"

NAMES = [f"com.example/parity-{i:02d}" for i in range(12)]


def _docs() -> list[dict[str, Any]]:
    docs = [server_doc(n, "1.0.0", f"Parity server {n[-2:]}", title=f"Title {n[-2:]}") for n in NAMES]
    docs[0]["description"] = "Talks to the weather service"
    docs += [
        server_doc("com.example/versions", v, "Several versions") for v in ("1.0.0", "2.0.0-beta", "snapshot")
    ]
    return docs


@pytest.fixture(scope="module")
async def reg(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Harness]:
    tmp_path = tmp_path_factory.mktemp("parity")
    write_json(tmp_path / "servers.json", _docs())
    cfg = make_config(
        [{"name": "file", "file": {"path": "servers.json"}}],
        f"sqlite+aiosqlite:///{tmp_path / 'registry.db'}",
    )
    async with running(cfg, tmp_path) as h:
        await h.sync()
        yield h


def _problem(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM
    doc: dict[str, Any] = r.json()
    assert doc["status"] == status and isinstance(doc["title"], str) and isinstance(doc["detail"], str)
    return doc


# -- the latest-version rules -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "semantic"),
    [
        # Go's module semver rules, a "v" added when missing (issue 32 item 3).
        ("1.0.0", True),
        ("1.0.0-rc.1", True),
        ("v1.0.0", True),
        ("1.0", True),  # Go's short form of 1.0.0
        ("1.0.0+build.7", True),
        ("1.0.0-rc-1", True),
        ("01.2.3", False),  # no leading zeros
        ("1.0.0-alpha.01", False),  # ... in numeric pre-release identifiers either
        ("+1.2.3", False),
        ("1.2-pre", False),  # a short form takes no suffix
        ("1.0.0-", False),
        ("1.0.0-rc_1", False),
        ("V1.0.0", False),
        ("snapshot", False),
        ("1.0.99999999999999999999", True),  # no size limit
    ],
)
def test_semantic_version_detection(version: str, semantic: bool) -> None:
    assert is_semantic_version(version) is semantic


@pytest.mark.parametrize(
    ("versions", "latest"),
    [
        ([("1.0.0", T1), ("1.10.0", T1), ("1.2.0", T1)], "1.10.0"),
        ([("1.0.0", T2), ("1.0.0-alpha", T3)], "1.0.0"),
        ([("1.0.0-rc.9", T1), ("1.0.0-rc.10", T2)], "1.0.0-rc.10"),  # numeric identifiers as numbers
        ([("1.0.0", T1), ("v2.0.0", T2)], "v2.0.0"),
        ([("0.9.0", T1), ("1.0.0+build.7", T2)], "1.0.0+build.7"),
        ([("2024-12", T2), ("2025-01", T1)], "2024-12"),  # non-semantic: the newest published
        ([("1.0.0", T1), ("v1.0.0", T2)], "1.0.0"),  # equal: the first published stays
        ([("v1.0.0", T1), ("1.0.0+b", T2)], "v1.0.0"),
        ([("1.0.0", T1), ("01.0.0", T3)], "1.0.0"),  # semantic beats non-semantic, whatever the time
        ([("b", T1), ("a", T1)], "a"),  # same instant: folded in version-string order
    ],
)
def test_latest_version_matches_the_official_rules(versions: list[tuple[str, str]], latest: str) -> None:
    assert latest_version(versions) == latest
    assert latest_version(list(reversed(versions))) == latest


def test_compare_versions_is_antisymmetric() -> None:
    samples = ["1.0.0", "1.0.0-a", "1.0.0-b", "2.0.0", "v1", "x"]
    for a in samples:
        for b in samples:
            assert compare_versions(a, b, T1, T2) == -compare_versions(b, a, T2, T1)


async def test_latest_served_by_the_api(reg: Harness) -> None:
    name = quote("com.example/versions", safe="")
    r = await reg.get(f"/v0.1/servers/{name}/versions/latest")
    assert r.json()["server"]["version"] == "2.0.0-beta"
    flags = {
        s["server"]["version"]: s["_meta"][OFFICIAL]["isLatest"]
        for s in (await reg.get(f"/v0.1/servers/{name}/versions")).json()["servers"]
    }
    assert flags == {"1.0.0": False, "2.0.0-beta": True, "snapshot": False}


# -- pagination, search, metadata ---------------------------------------------------------------


async def test_next_cursor_on_every_full_page(reg: Harness) -> None:
    pages: list[int] = []
    cursor: str | None = None
    while True:
        params = {"limit": "5", "version": "latest"} | ({"cursor": cursor} if cursor else {})
        doc = (await reg.get("/v0.1/servers", params=params)).json()
        check_server_list(doc)
        pages.append(doc["metadata"]["count"])
        cursor = doc["metadata"].get("nextCursor")
        assert (cursor is not None) == (doc["metadata"]["count"] == 5)
        if cursor is None:
            break
    assert pages == [5, 5, 3]
    # An exact multiple: the walk ends on an empty page, as on the official registry.
    pages = []
    cursor = None
    while True:
        params = {"limit": "3", "search": "parity-0"} | ({"cursor": cursor} if cursor else {})
        doc = (await reg.get("/v0.1/servers", params=params)).json()
        pages.append(doc["metadata"]["count"])
        cursor = doc["metadata"].get("nextCursor")
        if cursor is None:
            break
    assert pages == [3, 3, 3, 1]
    doc = (await reg.get("/v0.1/servers", params={"limit": "10", "search": "parity-0"})).json()
    assert doc["metadata"]["count"] == 10 and doc["metadata"]["nextCursor"]
    after = await reg.get(
        "/v0.1/servers", params={"search": "parity-0", "cursor": doc["metadata"]["nextCursor"]}
    )
    assert after.json() == {"servers": [], "metadata": {"count": 0}}


async def test_search_matches_names_only_by_default(reg: Harness) -> None:
    doc = (await reg.get("/v0.1/servers", params={"search": "PARITY-1"})).json()
    assert [s["server"]["name"] for s in doc["servers"]] == ["com.example/parity-10", "com.example/parity-11"]
    assert (await reg.get("/v0.1/servers", params={"search": "weather"})).json()["servers"] == []
    assert (await reg.get("/v0.1/servers", params={"search": "title 03"})).json()["servers"] == []
    for fields, found in (
        ("name,description", ["com.example/parity-00"]),
        ("name,title,description", ["com.example/parity-00"]),
    ):
        doc = (await reg.get("/v0.1/servers", params={"search": "weather", "search_fields": fields})).json()
        assert [s["server"]["name"] for s in doc["servers"]] == found
    params = {"search": "title 03", "search_fields": "name,title"}
    doc = (await reg.get("/v0.1/servers", params=params)).json()
    assert [s["server"]["name"] for s in doc["servers"]] == ["com.example/parity-03"]
    for bad in ("title", "name,nope"):
        r = await reg.get("/v0.1/servers", params={"search": "abc", "search_fields": bad})
        assert _problem(r, 422)["errors"][0]["location"] == "query.search_fields"


async def test_meta_always_has_status_changed_at_and_per_version_published_at(reg: Harness) -> None:
    doc = (await reg.get("/v0.1/servers", params={"limit": "100"})).json()
    for item in doc["servers"]:
        meta = item["_meta"][OFFICIAL]
        assert meta["statusChangedAt"] and meta["publishedAt"] and meta["status"] == "active"


async def test_published_at_is_per_version(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    write_json(path, [server_doc("com.example/grow", "1.0.0")])
    cfg = make_config([{"name": "file", "file": {"path": str(path)}}], f"sqlite+aiosqlite:///{tmp_path}/r.db")
    async with running(cfg, tmp_path) as h:
        await h.sync()
        name = quote("com.example/grow", safe="")
        first = (await h.get(f"/v0.1/servers/{name}/versions/1.0.0")).json()["_meta"][OFFICIAL]
        write_json(path, [server_doc("com.example/grow", v) for v in ("1.0.0", "1.1.0")])
        await h.sync()
        doc = (await h.get(f"/v0.1/servers/{name}/versions")).json()
        check_server_list(doc)
        metas = {s["server"]["version"]: s["_meta"][OFFICIAL] for s in doc["servers"]}
        assert metas["1.0.0"]["publishedAt"] == first["publishedAt"]
        assert metas["1.1.0"]["publishedAt"] > first["publishedAt"]
        # Newest published first, as the OpenAPI documents.
        assert [s["server"]["version"] for s in doc["servers"]] == ["1.1.0", "1.0.0"]
        assert metas["1.1.0"]["isLatest"] and not metas["1.0.0"]["isLatest"]
        # A deleted version: statusChangedAt moves to the deletion.
        write_json(path, [server_doc("com.example/grow", "1.1.0")])
        await h.sync()
        r = await h.get(f"/v0.1/servers/{name}/versions/1.0.0", params={"include_deleted": "true"})
        meta = r.json()["_meta"][OFFICIAL]
        assert meta["status"] == "deleted" and meta["statusChangedAt"] > first["statusChangedAt"]


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "location"),
    [
        ("limit=0", "query.limit"),
        ("limit=101", "query.limit"),
        ("limit=abc", "query.limit"),
        ("limit=1.5", "query.limit"),
        ("include_deleted=maybe", "query.include_deleted"),
        ("search=ab", "query.search"),
    ],
)
async def test_bad_parameters_are_422_problems(reg: Harness, query: str, location: str) -> None:
    doc = _problem(await reg.get(f"/v0.1/servers?{query}"), 422)
    assert doc["title"] == "Unprocessable Entity" and doc["detail"] == "validation failed"
    assert [e["location"] for e in doc["errors"]] == [location]
    assert isinstance(doc["errors"][0]["message"], str) and "value" in doc["errors"][0]


async def test_every_bad_parameter_is_listed(reg: Harness) -> None:
    doc = _problem(await reg.get("/v0.1/servers?limit=0&search=a&include_deleted=x"), 422)
    assert {e["location"] for e in doc["errors"]} == {"query.limit", "query.search", "query.include_deleted"}
    name = quote("com.example/versions", safe="")
    doc = _problem(await reg.get(f"/v0.1/servers/{name}/versions?include_deleted=x"), 422)
    assert doc["errors"][0]["location"] == "query.include_deleted"


async def test_booleans_parse_as_the_official_registry_does(reg: Harness) -> None:
    for value in ("1", "t", "TRUE", "True", "0", "f", "False"):
        assert (await reg.get(f"/v0.1/servers?include_deleted={value}")).status_code == 200, value


async def test_updated_since_rules(reg: Harness) -> None:
    since = "2000-01-01T00:00:00Z"
    doc = _problem(
        await reg.get("/v0.1/servers", params={"updated_since": since, "include_deleted": "false"}), 400
    )
    assert doc["title"] == "Bad Request" and "include_deleted" in doc["detail"]
    for include in ("true", None):
        params = {"updated_since": since} | ({"include_deleted": include} if include else {})
        assert (await reg.get("/v0.1/servers", params=params)).status_code == 200
    doc = _problem(await reg.get("/v0.1/servers", params={"updated_since": "yesterday"}), 400)
    assert "updated_since" in doc["detail"]


async def test_not_found_is_a_problem(reg: Harness) -> None:
    for path in (
        f"/v0.1/servers/{quote('com.example/nope', safe='')}/versions",
        f"/v0.1/servers/{quote('com.example/versions', safe='')}/versions/9.9.9",
        "/v0.1/servers/x/y/z/versions/1",
        "/nope",
    ):
        doc = _problem(await reg.get(path), 404)
        assert doc["title"] == "Not Found"


async def test_health_version_and_trailing_slash(reg: Harness) -> None:
    for prefix in ("/v0.1", "/v0"):
        assert (await reg.get(f"{prefix}/health")).json() == {"status": "ok"}
        assert set((await reg.get(f"{prefix}/version")).json()) == {"version", "git_commit", "build_time"}
    r = await reg.get("/v0.1/servers/?limit=2")
    assert r.status_code == 308 and r.headers["location"] == "/v0.1/servers?limit=2"
    name = quote("com.example/versions", safe="")
    r = await reg.get(f"/v0.1/servers/{name}/versions/")
    assert r.status_code == 308 and r.headers["location"] == f"/v0.1/servers/{name}/versions"
    followed = await reg.client.get("/v0.1/servers/?limit=2", follow_redirects=True)
    assert followed.status_code == 200 and followed.json()["metadata"]["count"] == 2


# -- every GET of the upstream OpenAPI ----------------------------------------------------------


async def test_every_upstream_get_operation_answers_its_documented_schema(reg: Harness) -> None:
    spec = yaml.safe_load(OPENAPI_FILE.read_text())
    name = quote("com.example/versions", safe="")
    checked = 0
    for template, item in spec["paths"].items():
        get = item.get("get")
        if get is None:
            continue
        path = template.replace("{serverName}", name).replace("{version}", "latest")
        r = await reg.get(path)
        assert r.status_code == 200, (template, r.text)
        schema = get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        errors = list(component(schema).iter_errors(r.json()))
        assert not errors, (template, errors[:3])
        (check_server_list if schema == "ServerList" else check_server_response)(r.json())
        # Every documented query parameter is accepted with a valid value.
        for param in get.get("parameters", []):
            if param["in"] != "query":
                continue
            value = {"boolean": "true", "integer": "5"}.get(param["schema"].get("type"), "latest")
            if param["name"] == "updated_since":
                value = "2025-08-07T13:15:04.280Z"
            elif param["name"] == "search":
                value = "parity"
            elif param["name"] == "cursor":
                continue
            assert (await reg.get(path, params={param["name"]: value})).status_code == 200, param["name"]
        checked += 1
    assert checked == 3


# -- the search index ---------------------------------------------------------------------------


def test_indexed_search_equals_a_linear_scan() -> None:
    """Every page of every search, walked with its cursors, equals filtering the sorted catalogue."""
    import random

    import orjson

    from mcpfleet.registry.catalogue import SEARCH_NAME, SEARCH_TEXT, Catalogue
    from mcpfleet.registry.store import CatalogueRow

    rng = random.Random(17)
    alphabet = "abcxyz-./01"
    rows = []
    for i in range(400):
        name = "com.ex" + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) + f"/s{i}"
        title = "".join(rng.choice(alphabet) for _ in range(8))
        doc = {"name": name, "version": "1.0.0", "description": f"D {title.upper()}", "title": title}
        status = "deleted" if i % 9 == 0 else "active"
        rows.append(CatalogueRow(name, "1.0.0", status, True, T1, T1, T1, orjson.dumps(doc)))
    catalogue = Catalogue(1, rows)
    for needle in ["abc", "ABC", "x-.", "com.ex", "/s1", "zzzz", "c.e", "1.0", "d a", "s39"]:
        for fields in (SEARCH_NAME, SEARCH_TEXT):
            for include_deleted in (False, True):
                expected = [
                    (i.name, i.version)
                    for i in catalogue.items
                    if (include_deleted or i.status != "deleted")
                    and needle.lower()
                    in (
                        i.name.lower()
                        if fields == SEARCH_NAME
                        else "\n".join(
                            [
                                i.name,
                                orjson.loads(i.body)["server"]["title"],
                                orjson.loads(i.body)["server"]["description"],
                            ]
                        ).lower()
                    )
                ]
                got: list[tuple[str, str]] = []
                cursor = None
                while True:
                    page = catalogue.list_page(cursor, 7, needle, None, None, include_deleted, fields)
                    doc = orjson.loads(page.body)
                    got += [(s["server"]["name"], s["server"]["version"]) for s in doc["servers"]]
                    cursor = doc["metadata"].get("nextCursor")
                    if cursor is None:
                        break
                assert got == expected, (needle, fields, include_deleted)
