"""The publish rules beyond the schema (issue 32 item 6, issue 27's registry risks) and the dry run
`POST /v0.1/validate`: a corpus of hand-written hostile server.json documents, each with the 4xx and
the field it must name — the same answer from a publish and from the dry run, nothing stored — and
property tests: any document gets a 200 or a problem naming a field, never a 5xx, and whatever is
accepted is served exactly as published (no integer turned into a float, no registry metadata)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.registry.entry import OFFICIAL_META, PUBLISHER_META
from tests.registry.conftest import server_doc
from tests.registry.test_publish import assert_problem, bearer, path, registry, token

Doc = dict[str, Any]
NAME = "com.acme/rules"


def _doc(**changes: Any) -> Doc:
    doc = server_doc(NAME)
    for key, value in changes.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


def _package(**changes: Any) -> Doc:
    package = {"registryType": "npm", "identifier": "@acme/rules", "version": "1.0.0"}
    return {**package, "transport": {"type": "stdio"}, **changes}


def _remote(url: str, **extra: Any) -> list[Doc]:
    return [{"type": "streamable-http", "url": url, **extra}]


# (what, document, expected status, the field the problem names)
CORPUS: list[tuple[str, Doc | bytes, int, str]] = [
    (
        "integer beyond 64 bits",
        json.dumps(_doc(_meta={PUBLISHER_META: {"n": 2**70}})).encode(),
        422,
        f"body._meta.{PUBLISHER_META}.n",
    ),
    ("negative integer beyond 64 bits", json.dumps(_doc(x=-(2**64))).encode(), 422, "body.x"),
    ("a 5000-digit integer", b'{"name": 1' + b"0" * 5000 + b"}", 422, "body.name"),
    ("publisher-supplied official block", _doc(_meta={OFFICIAL_META: {"isLatest": True}}), 422, ""),
    ("unknown _meta key", _doc(_meta={"com.example/extra": {}}), 422, "body._meta.com.example/extra"),
    (
        "publisher-provided over 4 KB",
        _doc(_meta={PUBLISHER_META: {"pad": "x" * 4100}}),
        422,
        f"body._meta.{PUBLISHER_META}",
    ),
    ("http icon", _doc(icons=[{"src": "http://acme.com/i.png"}]), 422, "body.icons[0].src"),
    ("data: icon", _doc(icons=[{"src": "data:image/png;base64,AAAA"}]), 422, "body.icons[0].src"),
    ("missing $schema", _doc(**{"$schema": None}), 422, "body.$schema"),
    ("unknown $schema", _doc(**{"$schema": "https://example.com/s.json"}), 422, "body.$schema"),
    ("removed status field", _doc(status="active"), 422, "body.status"),
    ("unknown top-level field", _doc(extra={"a": 1}), 422, "body.extra"),
    ("name ending in a dot", _doc(name="com.acme/rules."), 422, "body.name"),
    ("namespace ending in a dot", _doc(name="com.acme./rules"), 422, "body.name"),
    ("http website", _doc(websiteUrl="http://acme.com"), 422, "body.websiteUrl"),
    ("http remote", _doc(remotes=_remote("http://acme.com/mcp")), 422, "body.remotes[0].url"),
    ("localhost remote", _doc(remotes=_remote("https://localhost/mcp")), 422, "body.remotes[0].url"),
    ("loopback remote", _doc(remotes=_remote("https://127.0.0.2:8443/mcp")), 422, "body.remotes[0].url"),
    ("IPv6 loopback remote", _doc(remotes=_remote("https://[::1]/mcp")), 422, "body.remotes[0].url"),
    ("unspecified remote", _doc(remotes=_remote("https://0.0.0.0/mcp")), 422, "body.remotes[0].url"),
    (
        "undefined remote variable",
        _doc(remotes=_remote("https://{tenant}.acme.com/mcp")),
        422,
        "body.remotes[0].url",
    ),
    (
        "repository host not its source",
        _doc(repository={"url": "https://gitlab.com/acme/rules", "source": "github"}),
        422,
        "body.repository.url",
    ),
    ("blank title", _doc(title="   "), 422, "body.title"),
    ("package version range", _doc(packages=[_package(version="^1.2.0")]), 422, "body.packages[0].version"),
    (
        "undefined package transport variable",
        _doc(
            packages=[_package(transport={"type": "streamable-http", "url": "http://localhost:{port}/mcp"})]
        ),
        422,
        "body.packages[0].transport.url",
    ),
    ("not JSON", b"{nope", 400, "body"),
]

VALID: list[tuple[str, Doc]] = [
    (
        "defined remote variable",
        _doc(remotes=_remote("https://{tenant}.acme.com/mcp", variables={"tenant": {}})),
    ),
    (
        "package transport variable from an environment variable",
        _doc(
            packages=[
                _package(
                    transport={"type": "streamable-http", "url": "http://localhost:{PORT}/mcp"},
                    environmentVariables=[{"name": "PORT"}],
                )
            ]
        ),
    ),
    (
        "https icon, 64-bit integers",
        _doc(
            icons=[{"src": "https://acme.com/i.png"}],
            _meta={PUBLISHER_META: {"n": 2**63 - 1, "m": -(2**63), "f": 1.5}},
        ),
    ),
    ("github repository", _doc(repository={"url": "https://github.com/acme/rules", "source": "github"})),
]


def _content(document: Doc | bytes) -> bytes:
    return document if isinstance(document, bytes) else json.dumps(document).encode()


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'r.db'}"


async def test_corpus_is_refused_by_publish_and_validate_alike(tmp_path: Path) -> None:
    async with registry(_sqlite(tmp_path), tmp_path) as (issuer, h):
        auth = {**bearer(token(issuer)), "content-type": "application/json"}
        for what, document, status, location in CORPUS:
            for route, headers in (
                ("/v0.1/validate", {"content-type": "application/json"}),
                ("/v0.1/publish", auth),
            ):
                r = await h.client.post(route, content=_content(document), headers=headers)
                body = assert_problem(r, status)
                found = [e["location"] for e in body["errors"]]
                assert found == [location or f"body._meta.{OFFICIAL_META}"], (what, route, body)
        assert (await h.get(path(NAME, "versions"))).status_code == 404  # nothing stored


async def test_valid_documents_pass_and_are_served_exactly(tmp_path: Path) -> None:
    async with registry(_sqlite(tmp_path), tmp_path) as (issuer, h):
        auth = bearer(token(issuer))
        for i, (what, document) in enumerate(VALID):
            document = {**document, "version": f"1.0.{i}"}
            r = await h.client.post("/v0.1/validate", json=document)
            assert r.status_code == 200 and r.json() == {
                "valid": True,
                "name": NAME,
                "version": f"1.0.{i}",
            }, what
            assert (await h.get(path(NAME, "versions", f"1.0.{i}"))).status_code == 404  # a dry run
            assert (await h.client.post("/v0.1/publish", json=document, headers=auth)).status_code == 200, (
                what
            )
            served = (await h.get(path(NAME, "versions", f"1.0.{i}"))).json()["server"]
            assert served == document, what
        assert_problem(await h.client.get("/v0.1/validate"), 405)


async def test_active_status_takes_no_message(tmp_path: Path) -> None:
    async with registry(_sqlite(tmp_path), tmp_path) as (issuer, h):
        auth = bearer(token(issuer))
        assert (await h.client.post("/v0.1/publish", json=_doc(), headers=auth)).status_code == 200
        target = path(NAME, "versions", "1.0.0", "status")
        wrong = {"status": "active", "statusMessage": "fine now"}
        assert_problem(await h.client.patch(target, json=wrong, headers=auth), 422, "body.statusMessage")
        gone = {"status": "deprecated", "statusMessage": "use 2"}
        assert (await h.client.patch(target, json=gone, headers=auth)).status_code == 200


def test_validate_serves_without_publishing(tmp_path: Path) -> None:
    from tests.registry.conftest import make_config, running, write_json

    async def run() -> None:
        source = write_json(tmp_path / "s.json", [server_doc("io.other/x")])
        cfg = make_config([{"name": "s", "file": {"path": str(source)}}], _sqlite(tmp_path))
        async with running(cfg, tmp_path) as h:
            assert (await h.client.post("/v0.1/validate", json=_doc())).status_code == 200
            assert_problem(await h.client.post("/v0.1/validate", json=_doc(title=" ")), 422, "body.title")

    asyncio.run(run())


# -- properties ---------------------------------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
_URLS = st.sampled_from(
    [
        "https://acme.com/mcp",
        "http://acme.com/mcp",
        "https://localhost/mcp",
        "https://{x}.acme.com/",
        "ftp://a",
        "",
    ]
)
_MUTATIONS: list[Callable[[Any], st.SearchStrategy[Doc]]] = [
    lambda v: st.just(_doc(_meta={PUBLISHER_META: {"v": v}})),
    lambda v: st.just(_doc(_meta={OFFICIAL_META: v})),
    lambda v: _URLS.map(lambda u: _doc(remotes=_remote(u))),
    lambda v: _URLS.map(lambda u: _doc(websiteUrl=u, icons=[{"src": u}])),
    lambda v: st.text(max_size=6).map(lambda t: _doc(title=t, name=NAME + t)),
    lambda v: st.just(_doc(extra=v)),
    lambda v: st.just(_doc(packages=[_package(version=str(v))])),
]


@st.composite
def documents(draw: st.DrawFn) -> Doc:
    value = draw(_JSON)
    return draw(draw(st.sampled_from(_MUTATIONS))(value))


def _has_huge(value: Any) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return not -(2**63) <= value <= 2**64 - 1
    if isinstance(value, dict):
        return any(_has_huge(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_huge(v) for v in value)
    return False


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(documents(), min_size=5, max_size=10))
def test_any_document_is_a_clear_answer_and_served_as_sent(
    tmp_path_factory: pytest.TempPathFactory, batch: list[Doc]
) -> None:
    async def run() -> None:
        tmp = tmp_path_factory.mktemp("rules")
        async with registry(_sqlite(tmp), tmp) as (issuer, h):
            auth = bearer(token(issuer))
            for i, document in enumerate(batch):
                document = {**document, "version": f"0.0.{i}"}
                checked = await h.client.post("/v0.1/validate", json=document)
                published = await h.client.post("/v0.1/publish", json=document, headers=auth)
                assert published.status_code == checked.status_code, (document, checked.text, published.text)
                if published.status_code != 200:
                    body = assert_problem(published, published.status_code)
                    assert published.status_code in (403, 422) and body["errors"][0]["location"].startswith(
                        "body"
                    )
                    continue
                assert not _has_huge(document) and OFFICIAL_META not in document.get("_meta", {})
                served = (await h.get(path(document["name"], "versions", document["version"]))).json()
                assert served["server"] == document

    asyncio.run(run())
