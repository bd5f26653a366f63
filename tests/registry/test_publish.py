"""The publishing API (`POST /v0.1/publish`, status, delete) on SQLite and PostgreSQL, with tokens of a
real local OIDC issuer (tests/oidc.py, served by uvicorn): what a publisher may do, what readers see at
once, and a clear 4xx problem document naming the field for every hostile request."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.registry.config import parse_config
from tests.auth.corpus import hostile_tokens
from tests.auth.test_token_corpus import local_issuer
from tests.oidc import Issuer
from tests.proxy.conftest import serve_app
from tests.registry.conftest import Harness, running, server_doc, write_json

AUDIENCE = "registry-publish"
SCOPE = "mcp-registry:publish"
SYNCED = "com.acme/shared"


def config(issuer: Issuer, db_url: str, tmp_path: Path, precedence: str = "first", **publish: Any) -> Any:
    source = write_json(tmp_path / "synced.json", [server_doc(SYNCED, "1.0.0"), server_doc("io.other/x")])
    return parse_config(
        {
            "registryName": "private",
            "sources": [{"name": "synced", "file": {"path": str(source)}}],
            "database": {"url": db_url},
            "publish": {
                "auth": {
                    "type": "oidc",
                    "oidc": {"issuer": issuer.base, "audience": AUDIENCE, "insecureAllowHTTP": True},
                },
                "precedence": precedence,
                "maxBodyBytes": 64 * 1024,
                "grants": [
                    {"claims": {"groups": "acme-publishers"}, "publish": ["com.acme/*", "com.acme.*"]},
                    {"claims": {"sub": "moderator"}, "edit": ["*"]},
                ],
                **publish,
            },
        }
    )


def token(issuer: Issuer, scope: str = SCOPE, **claims: Any) -> str:
    extra = {"scope": scope, "groups": ["acme-publishers"], **claims}
    sub = extra.pop("sub", "alice")
    return issuer.token("r1", aud=AUDIENCE, sub=sub, extra=extra)


def bearer(value: str) -> dict[str, str]:
    return {"authorization": f"Bearer {value}"}


@contextlib.asynccontextmanager
async def registry(db_url: str, tmp_path: Path, **kw: Any) -> AsyncIterator[tuple[Issuer, Harness]]:
    async with local_issuer() as issuer, running(config(issuer, db_url, tmp_path, **kw), tmp_path) as h:
        await h.sync()
        yield issuer, h


def assert_problem(r: httpx.Response, status: int, location: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    if location is not None:
        assert [e["location"] for e in body["errors"]] == [location], body
    return body


def path(name: str, *rest: str) -> str:
    return "/v0.1/servers/" + "/".join([quote(name, safe=""), *(quote(r, safe="") for r in rest)])


async def test_published_version_is_served_at_once_and_immutable(db_url: str, tmp_path: Path) -> None:
    async with registry(db_url, tmp_path) as (issuer, h):
        before = await h.get("/v0.1/servers")
        doc = server_doc("com.acme/payments", "1.2.0")
        r = await h.client.post("/v0.1/publish", json=doc, headers=bearer(token(issuer)))
        assert r.status_code == 200, r.text
        official = r.json()["_meta"]["io.modelcontextprotocol.registry/official"]
        assert r.json()["server"] == doc
        assert official["status"] == "active" and official["isLatest"] is True
        after = await h.get("/v0.1/servers")
        assert after.headers["etag"] != before.headers["etag"]
        assert "com.acme/payments" in [s["server"]["name"] for s in after.json()["servers"]]
        got = await h.get(path("com.acme/payments", "versions", "latest"))
        assert got.status_code == 200 and got.json()["server"]["version"] == "1.2.0"
        # Cached pages of the old generation are not served: a conditional GET with the old ETag is a 200.
        again = await h.get("/v0.1/servers", headers={"if-none-match": before.headers["etag"]})
        assert again.status_code == 200

        changed = {**doc, "description": "something else"}
        dup = await h.client.post("/v0.1/publish", json=changed, headers=bearer(token(issuer)))
        body = assert_problem(dup, 400, "body.version")
        assert "duplicate version" in body["detail"]
        # A newer version becomes the latest; both stay.
        r2 = await h.client.post(
            "/v0.1/publish", json=server_doc("com.acme/payments", "1.10.0"), headers=bearer(token(issuer))
        )
        assert r2.status_code == 200
        versions = (await h.get(path("com.acme/payments", "versions"))).json()["servers"]
        latest = {
            s["server"]["version"]: s["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"]
            for s in versions
        }
        assert latest == {"1.2.0": False, "1.10.0": True}
    # Stored: a restart on the same database serves it without any sync.
    async with local_issuer() as issuer2, running(config(issuer2, db_url, tmp_path), tmp_path) as h2:
        got = await h2.get(path("com.acme/payments", "versions", "1.2.0"))
        assert got.status_code == 200 and got.json()["server"] == doc


async def test_namespace_ownership(db_url: str, tmp_path: Path) -> None:
    async with registry(db_url, tmp_path, emailDomainNamespaces=True) as (issuer, h):
        post = h.client.post
        other = await post(
            "/v0.1/publish", json=server_doc("io.github.bob/tool"), headers=bearer(token(issuer))
        )
        body = assert_problem(other, 403, "body.name")
        assert "com.acme/*" in body["detail"] and "io.github.bob/tool" in body["detail"]
        # Outside the group: no grant at all.
        stranger = token(issuer, groups=["guests"])
        r = await post("/v0.1/publish", json=server_doc("com.acme/tool"), headers=bearer(stranger))
        assert "You do not have permission" in assert_problem(r, 403, "body.name")["detail"]
        # The official domain rule for a verified email: the domain's namespace and its subdomains'.
        mail = token(issuer, groups=[], email="carol@example.org", email_verified=True)
        assert (
            await post("/v0.1/publish", json=server_doc("org.example/a"), headers=bearer(mail))
        ).status_code == 200
        assert (
            await post("/v0.1/publish", json=server_doc("org.example.team/b"), headers=bearer(mail))
        ).status_code == 200
        assert_problem(
            await post("/v0.1/publish", json=server_doc("org.examplex/c"), headers=bearer(mail)), 403
        )
        unverified = token(issuer, groups=[], email="carol@example.org", email_verified=False)
        assert_problem(
            await post("/v0.1/publish", json=server_doc("org.example/d"), headers=bearer(unverified)), 403
        )
        # A subdomain grant from a pattern ending in * (com.acme.*).
        ok = await post("/v0.1/publish", json=server_doc("com.acme.eu/tool"), headers=bearer(token(issuer)))
        assert ok.status_code == 200


async def test_tokens_are_checked(db_url: str, tmp_path: Path) -> None:
    async with registry(db_url, tmp_path) as (issuer, h):
        doc = server_doc("com.acme/tool")
        missing = await h.client.post("/v0.1/publish", json=doc)
        assert_problem(missing, 401, "header.Authorization")
        assert missing.headers["www-authenticate"].startswith("Bearer")
        wrong_aud = issuer.token(
            "r1", aud="someone-else", extra={"scope": SCOPE, "groups": ["acme-publishers"]}
        )
        assert_problem(await h.client.post("/v0.1/publish", json=doc, headers=bearer(wrong_aud)), 401)
        expired = issuer.token("r1", aud=AUDIENCE, exp=time.time() - 3600, extra={"scope": SCOPE})
        assert_problem(await h.client.post("/v0.1/publish", json=doc, headers=bearer(expired)), 401)
        no_scope = await h.client.post(
            "/v0.1/publish", json=doc, headers=bearer(token(issuer, scope="openid"))
        )
        assert_problem(no_scope, 403, "header.Authorization")
        assert 'error="insufficient_scope"' in no_scope.headers["www-authenticate"]
        scp_list = token(issuer, scope="openid", scp=[SCOPE])
        assert (await h.client.post("/v0.1/publish", json=doc, headers=bearer(scp_list))).status_code == 200
        # The whole hostile-token corpus: 401 problem documents, never a 5xx, nothing published.
        for what, header in hostile_tokens(issuer, AUDIENCE).items():
            headers = {} if header is None else {"authorization": header.encode("utf-8", "surrogateescape")}
            r = await h.client.post("/v0.1/publish", json=server_doc("com.acme/corpus"), headers=headers)
            assert r.status_code in (401, 403), (what, r.status_code, r.text)
            assert r.headers["content-type"] == "application/problem+json", what
        assert (await h.get(path("com.acme/corpus", "versions"))).status_code == 404


async def test_hostile_bodies_get_a_problem_naming_the_field(db_url: str, tmp_path: Path) -> None:
    async with registry(db_url, tmp_path) as (issuer, h):
        auth = bearer(token(issuer))
        post = h.client.post
        big = server_doc("com.acme/big", description="x" * 70_000)
        assert_problem(await post("/v0.1/publish", json=big, headers=auth), 413, "body")

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit applies while reading
            for _ in range(100):
                yield b" " * 1024

        assert_problem(await post("/v0.1/publish", content=chunks(), headers=auth), 413, "body")
        assert_problem(await post("/v0.1/publish", content=b"{not json", headers=auth), 400, "body")
        assert_problem(await post("/v0.1/publish", content=b"", headers=auth), 400, "body")
        assert_problem(await post("/v0.1/publish", json=[1, 2], headers=auth), 422, "body")
        bad_name = server_doc("com.acme/tool") | {"name": "no-slash"}
        body = assert_problem(await post("/v0.1/publish", json=bad_name, headers=auth), 422, "body.name")
        assert body["errors"][0]["value"] == "no-slash"
        no_version = {k: v for k, v in server_doc("com.acme/tool").items() if k != "version"}
        assert_problem(await post("/v0.1/publish", json=no_version, headers=auth), 422)
        ranged = server_doc("com.acme/tool", "^1.0.0")
        assert_problem(await post("/v0.1/publish", json=ranged, headers=auth), 422, "body.version")
        deep: Any = "x"
        for _ in range(200):
            deep = {"a": deep}
        nested = server_doc("com.acme/tool") | {"_meta": deep}
        assert_problem(await post("/v0.1/publish", json=nested, headers=auth), 422, "body")
        text = await post("/v0.1/publish", content=b"{}", headers={**auth, "content-type": "text/plain"})
        assert_problem(text, 415, "header.Content-Type")
        assert_problem(await h.client.get("/v0.1/publish"), 404)
        assert_problem(
            await h.client.put(path("com.acme/tool", "versions", "1.0.0"), json={}, headers=auth), 403
        )
        assert (await h.get(path("com.acme/tool", "versions"))).status_code == 404


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
_BODIES = st.one_of(
    st.binary(max_size=300),
    _JSON.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"name": st.text(max_size=30), "version": st.text(max_size=12), "description": st.text(max_size=30)},
        optional={"status": st.sampled_from(["active", "deprecated", "deleted", "x"]), "remotes": _JSON},
    ).map(lambda v: json.dumps(v).encode()),
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(_BODIES, min_size=10, max_size=20))
def test_any_body_gets_an_answer_never_a_5xx(
    tmp_path_factory: pytest.TempPathFactory, bodies: list[bytes]
) -> None:
    async def run() -> None:
        tmp = tmp_path_factory.mktemp("fuzz")
        db = f"sqlite+aiosqlite:///{tmp / 'r.db'}"
        async with registry(db, tmp) as (issuer, h):
            auth = bearer(token(issuer))
            routes = (
                "/v0.1/publish",
                path(SYNCED, "versions", "1.0.0", "status"),
                path("com.acme/x", "status"),
            )
            for body in bodies:
                for route in routes:
                    method = "POST" if route.endswith("publish") else "PATCH"
                    r = await h.client.request(method, route, content=body, headers=auth)
                    assert r.status_code < 500, (route, r.status_code, r.text)
                    if r.status_code != 200:
                        assert r.headers["content-type"] == "application/problem+json"
                        assert r.json()["detail"]

    asyncio.run(run())


async def test_status_and_delete(db_url: str, tmp_path: Path) -> None:
    async with registry(db_url, tmp_path) as (issuer, h):
        auth = bearer(token(issuer))
        for v in ("1.0.0", "2.0.0"):
            assert (
                await h.client.post("/v0.1/publish", json=server_doc("com.acme/tool", v), headers=auth)
            ).status_code == 200
        before = await h.get("/v0.1/servers?search=com.acme/tool")
        r = await h.client.patch(
            path("com.acme/tool", "versions", "1.0.0", "status"),
            json={"status": "deprecated", "statusMessage": "use 2.0.0"},
            headers=auth,
        )
        assert r.status_code == 200, r.text
        official = r.json()["_meta"]["io.modelcontextprotocol.registry/official"]
        assert official["status"] == "deprecated" and official["statusMessage"] == "use 2.0.0"
        read = await h.get(path("com.acme/tool", "versions", "1.0.0"))
        assert (
            read.json()["_meta"]["io.modelcontextprotocol.registry/official"]["statusMessage"] == "use 2.0.0"
        )
        assert official["statusChangedAt"] > official["publishedAt"]
        assert (await h.get("/v0.1/servers?search=com.acme/tool")).headers["etag"] != before.headers["etag"]
        same = await h.client.patch(
            path("com.acme/tool", "versions", "1.0.0", "status"),
            json={"status": "deprecated", "statusMessage": "use 2.0.0"},
            headers=auth,
        )
        assert_problem(same, 400, "body.status")
        assert_problem(
            await h.client.patch(
                path("com.acme/tool", "versions", "1.0.0", "status"), json={"status": "gone"}, headers=auth
            ),
            422,
            "body.status",
        )
        assert_problem(
            await h.client.patch(
                path("com.acme/tool", "versions", "1.0.0", "status"),
                json={"status": "active", "statusMessage": "x" * 501},
                headers=auth,
            ),
            422,
            "body.statusMessage",
        )
        # DELETE: status deleted, hidden from readers unless include_deleted, never publishable again.
        gone = await h.client.delete(path("com.acme/tool", "versions", "2.0.0"), headers=auth)
        assert gone.status_code == 200
        assert gone.json()["_meta"]["io.modelcontextprotocol.registry/official"]["status"] == "deleted"
        assert (await h.get(path("com.acme/tool", "versions", "2.0.0"))).status_code == 404
        shown = await h.get(path("com.acme/tool", "versions", "2.0.0") + "?include_deleted=true")
        assert shown.status_code == 200
        again = await h.client.post("/v0.1/publish", json=server_doc("com.acme/tool", "2.0.0"), headers=auth)
        assert_problem(again, 400, "body.version")
        # Every version at once.
        bulk = await h.client.patch(path("com.acme/tool", "status"), json={"status": "active"}, headers=auth)
        assert bulk.status_code == 200 and bulk.json()["updatedCount"] == 2
        assert {s["server"]["version"] for s in bulk.json()["servers"]} == {"1.0.0", "2.0.0"}
        # Unknown names and versions, synced names, other namespaces.
        assert_problem(await h.client.delete(path("com.acme/tool", "versions", "9.9.9"), headers=auth), 404)
        assert_problem(
            await h.client.patch(path("com.acme/none", "status"), json={"status": "active"}, headers=auth),
            404,
        )
        synced = await h.client.patch(
            path(SYNCED, "versions", "1.0.0", "status"), json={"status": "deprecated"}, headers=auth
        )
        assert "synced source 'synced'" in assert_problem(synced, 409, "path.serverName")["detail"]
        assert_problem(
            await h.client.delete(path("io.other/x", "versions", "1.0.0"), headers=auth),
            403,
            "path.serverName",
        )
        # An edit grant (moderation) may change the status of any name, but not publish.
        moderator = bearer(token(issuer, sub="moderator", groups=[]))
        mod = await h.client.patch(
            path("com.acme/tool", "versions", "1.0.0", "status"),
            json={"status": "deprecated"},
            headers=moderator,
        )
        assert mod.status_code == 200
        assert_problem(
            await h.client.post("/v0.1/publish", json=server_doc("com.acme/mod"), headers=moderator), 403
        )


async def test_precedence_with_synced_sources(db_url: str, tmp_path: Path) -> None:
    async with registry(db_url, tmp_path) as (issuer, h):
        auth = bearer(token(issuer))
        # The served version of a synced name is immutable too.
        dup = await h.client.post("/v0.1/publish", json=server_doc(SYNCED, "1.0.0"), headers=auth)
        assert_problem(dup, 400, "body.version")
        # precedence first: publishing takes the name over; the synced versions leave (as tombstones).
        r = await h.client.post("/v0.1/publish", json=server_doc(SYNCED, "2.0.0"), headers=auth)
        assert r.status_code == 200
        versions = (await h.get(path(SYNCED, "versions"))).json()["servers"]
        assert [s["server"]["version"] for s in versions] == ["2.0.0"]
        # A later sync keeps it that way.
        await h.sync()
        assert [
            s["server"]["version"] for s in (await h.get(path(SYNCED, "versions"))).json()["servers"]
        ] == ["2.0.0"]


async def test_precedence_last_refuses_names_of_synced_sources(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'last.db'}"
    async with registry(db, tmp_path, precedence="last") as (issuer, h):
        auth = bearer(token(issuer))
        r = await h.client.post("/v0.1/publish", json=server_doc(SYNCED, "2.0.0"), headers=auth)
        assert "synced source 'synced'" in assert_problem(r, 409, "body.name")["detail"]
        assert (
            await h.client.post("/v0.1/publish", json=server_doc("com.acme/own"), headers=auth)
        ).status_code == 200


async def test_a_read_only_registry_says_so(tmp_path: Path) -> None:
    source = write_json(tmp_path / "s.json", [server_doc("io.other/x")])
    cfg = parse_config(
        {
            "registryName": "ro",
            "sources": [{"name": "s", "file": {"path": str(source)}}],
            "database": {"url": f"sqlite+aiosqlite:///{tmp_path / 'ro.db'}"},
        }
    )
    async with running(cfg, tmp_path) as h:
        r = await h.client.post("/v0.1/publish", json=server_doc("io.other/y"))
        assert "read-only" in assert_problem(r, 405)["detail"]
        assert_problem(await h.client.delete(path("io.other/x", "versions", "1.0.0")), 405)
        # ... as its /openapi.json documents.
        import schemathesis

        schema = schemathesis.openapi.from_dict((await h.get("/openapi.json")).json())
        schema["/v0.1/publish"]["POST"].validate_response(r)


def test_publish_config_is_checked() -> None:
    with pytest.raises(Exception, match=r"auth\.type must be 'oidc'"):
        parse_config(
            {
                "registryName": "x",
                "sources": [{"name": "s", "file": {"path": "f"}}],
                "publish": {"auth": {"type": "anonymous"}},
            }
        )
    with pytest.raises(Exception, match="audience"):
        parse_config(
            {
                "registryName": "x",
                "sources": [{"name": "s", "file": {"path": "f"}}],
                "publish": {"auth": {"type": "oidc", "oidc": {"issuer": "https://id.example.com"}}},
            }
        )
    with pytest.raises(Exception, match="expected \\*, a server name"):
        parse_config(
            {
                "registryName": "x",
                "sources": [{"name": "s", "file": {"path": "f"}}],
                "publish": {
                    "auth": {"type": "oidc", "oidc": {"issuer": "https://id.example.com", "audience": "r"}},
                    "grants": [{"publish": ["com.acme/*/x y"]}],
                },
            }
        )


async def test_cli_publish(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    async with registry(db, tmp_path) as (issuer, h), serve_app(h.app) as base:
        doc = write_json(tmp_path / "server.json", server_doc("com.acme/cli", "0.1.0"))
        cli = str(Path(sys.executable).parent / "mcpfleet")

        async def run(*args: str, token_value: str) -> tuple[int, str, str]:
            env = {**os.environ, "MCPFLEET_REGISTRY_TOKEN": token_value}
            proc = await asyncio.create_subprocess_exec(
                cli,
                "registry",
                "publish",
                *args,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(proc.communicate(), 120)
            return proc.returncode or 0, out.decode(), err.decode()

        code, out, err = await run(str(doc), "--registry", base, token_value=token(issuer))
        assert code == 0, err
        assert "published com.acme/cli 0.1.0" in out
        code, out, err = await run(str(doc), "--registry", base, token_value=token(issuer))
        assert code == 1 and "HTTP 400" in err and "duplicate version" in err and "body.version" in err
        code, _, err = await run(str(doc), "--registry", base, token_value="")
        assert code == 2 and "MCPFLEET_REGISTRY_TOKEN" in err
        async with httpx.AsyncClient() as client:
            listed = await client.get(base + path("com.acme/cli", "versions"))
        assert listed.status_code == 200


async def test_published_entries_survive_switching_publishing_off_and_on(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'toggle.db'}"
    async with registry(db, tmp_path) as (issuer, h):
        r = await h.client.post(
            "/v0.1/publish", json=server_doc("com.acme/kept"), headers=bearer(token(issuer))
        )
        assert r.status_code == 200
    async with local_issuer() as issuer:
        on = config(issuer, db, tmp_path)
    off = on.model_copy(update={"publish": None})
    # Off: not served (a tombstone, as for a source that left), but kept in the database.
    async with running(off, tmp_path) as h:
        assert (await h.get(path("com.acme/kept", "versions", "1.0.0"))).status_code == 404
        gone = await h.get(path("com.acme/kept", "versions", "1.0.0") + "?include_deleted=true")
        assert gone.json()["_meta"]["io.modelcontextprotocol.registry/official"]["status"] == "deleted"
    # On again: served as published, and the version is still taken.
    async with registry(db, tmp_path) as (issuer, h):
        assert (await h.get(path("com.acme/kept", "versions", "1.0.0"))).status_code == 200
        again = await h.client.post(
            "/v0.1/publish", json=server_doc("com.acme/kept"), headers=bearer(token(issuer))
        )
        assert_problem(again, 400, "body.version")


async def test_write_operations_answer_as_the_served_openapi_says(tmp_path: Path) -> None:
    """/openapi.json documents publish, both status updates, delete and (refused) update as the
    upstream API defines them; every answer of a real publishing registry — successes and each kind
    of refusal — has a documented status and content type, and its body conforms to the schema."""
    import schemathesis
    import yaml

    from tests.reference import OPENAPI_FILE

    upstream = yaml.safe_load(OPENAPI_FILE.read_text())
    db = f"sqlite+aiosqlite:///{tmp_path / 'openapi.db'}"
    async with registry(db, tmp_path) as (issuer, h):
        spec = (await h.get("/openapi.json")).json()
        for upath, methods in {
            "/v0.1/publish": ["post"],
            "/v0.1/servers/{serverName}/status": ["patch"],
            "/v0.1/servers/{serverName}/versions/{version}/status": ["patch"],
            "/v0.1/servers/{serverName}/versions/{version}": ["delete", "put"],
        }.items():
            for method in methods:
                for prefix in ("/v0.1", "/v0"):
                    own = spec["paths"][prefix + upath.removeprefix("/v0.1")][method]
                    theirs = upstream["paths"][upath][method]
                    assert own.get("requestBody") == theirs.get("requestBody"), (prefix, upath, method)
                    assert own["responses"]["200"] == theirs["responses"]["200"]
        schema = schemathesis.openapi.from_dict(spec)
        auth = bearer(token(issuer))
        moderator = bearer(token(issuer, sub="moderator", groups=[]))
        calls: list[tuple[str, str, httpx.Response]] = []

        async def call(method: str, template: str, url: str, **kw: Any) -> None:
            calls.append((method, template, await h.client.request(method, url, **kw)))

        pub, ver = "/v0.1/publish", "/v0.1/servers/{serverName}/versions/{version}"
        status = "/v0.1/servers/{serverName}/versions/{version}/status"
        every = "/v0.1/servers/{serverName}/status"
        deprecated = {"status": "deprecated", "statusMessage": "old"}
        doc = "com.acme/doc"
        plain = {**auth, "content-type": "text/plain"}
        # (method, operation, url, body, headers); body None: none sent, bytes: sent as they are
        plan: list[tuple[str, str, str, Any, dict[str, str]]] = [
            ("POST", pub, pub, server_doc(doc, "1.0.0"), auth),  # 200
            ("POST", "/v0/publish", "/v0/publish", server_doc(doc, "1.1.0"), auth),  # 200 under /v0
            ("POST", pub, pub, server_doc(doc, "1.0.0"), auth),  # 400: versions are immutable
            ("POST", pub, pub, server_doc(doc, "2.0.0"), {}),  # 401
            ("POST", pub, pub, server_doc("org.other/x", "1.0.0"), auth),  # 403
            ("POST", pub, pub, {"name": doc}, auth),  # 422
            ("POST", pub, pub, b"x", plain),  # 415
            ("POST", pub, pub, server_doc(SYNCED, "9.0.0"), auth),
            ("PATCH", status, path(doc, "versions", "1.0.0", "status"), deprecated, auth),  # 200
            ("PATCH", status, path(doc, "versions", "1.0.0", "status"), deprecated, auth),  # 400
            ("PATCH", status, path(doc, "versions", "7.0.0", "status"), deprecated, auth),  # 404
            ("PATCH", status, path(doc, "versions", "1.0.0", "status"), {"status": "x"}, auth),  # 422
            ("PATCH", every, path(doc, "status"), {"status": "active"}, auth),
            ("PATCH", every, path("com.acme/none", "status"), {"status": "active"}, auth),
            ("DELETE", ver, path(doc, "versions", "1.1.0"), None, auth),  # 200
            ("DELETE", ver, path(doc, "versions", "5.0.0"), None, auth),  # 404
            ("PUT", ver, path(doc, "versions", "1.0.0"), server_doc(doc), auth),  # 403: a publisher
            ("PUT", ver, path(doc, "versions", "1.0.0"), server_doc(doc, title="Edited"), moderator),  # 200
            ("PUT", ver, path(doc, "versions", "9.0.0"), server_doc(doc, "9.0.0"), moderator),  # 404
        ]
        for method, template, url, body, headers in plan:
            if isinstance(body, bytes):
                await call(method, template, url, content=body, headers=headers)
            elif body is None:
                await call(method, template, url, headers=headers)
            else:
                await call(method, template, url, json=body, headers=headers)
        seen = set()
        for method, template, response in calls:
            operation = schema[template][method]
            documented = operation.definition.raw["responses"]
            assert str(response.status_code) in documented, (
                method,
                template,
                response.status_code,
                response.text,
            )
            content_type = response.headers["content-type"].split(";")[0]
            assert content_type in documented[str(response.status_code)].get("content", {}), (
                method,
                template,
            )
            operation.validate_response(response)
            seen.add((method, response.status_code))
        assert {
            ("POST", 200),
            ("POST", 400),
            ("POST", 401),
            ("POST", 403),
            ("POST", 415),
            ("POST", 422),
        } <= seen
        assert {("PATCH", 200), ("PATCH", 400), ("PATCH", 404), ("PATCH", 422), ("DELETE", 200)} <= seen
        assert {("DELETE", 404), ("PUT", 200), ("PUT", 403), ("PUT", 404)} <= seen
