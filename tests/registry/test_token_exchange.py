"""The official registry's token exchange (issue 32 item 7): `POST /v0.1/auth/oidc` and `/auth/none`
answer registry tokens (Ed25519, five minutes, the official claims) that the publishing API accepts,
with the permissions of the login; the real `mcp-publisher` CLI, built from its Go module, logs in
and publishes to a served registry. Every hostile request — bad JSON, huge bodies, forged, expired,
wrong-audience or wrong-issuer tokens — gets a clear 4xx problem document naming the field."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.devcluster.build import BuildError, BuildLayout, default_cache_root, ensure_mcp_publisher
from mcpfleet.registry.config import ConfigError, parse_config
from mcpfleet.registry.tokens import ANONYMOUS_PATTERN, LIFETIME_SECONDS, RegistryTokens
from tests.auth.corpus import hostile_tokens
from tests.auth.test_token_corpus import local_issuer
from tests.conftest import run_async
from tests.oidc import Issuer
from tests.proxy.conftest import serve_app
from tests.registry.conftest import Harness, running, server_doc, write_json
from tests.registry.test_publish import AUDIENCE, assert_problem, bearer, path
from tests.registry.test_publish import config as publish_config

ANONYMOUS_NAME = "io.modelcontextprotocol.anonymous/demo"


def id_token(issuer: Issuer, **claims: Any) -> str:
    """An ID token as an identity provider issues one: no scope, the person's groups."""
    extra = {"groups": ["acme-publishers"], **claims}
    sub = extra.pop("sub", "alice")
    aud = extra.pop("aud", AUDIENCE)
    return issuer.token("r1", aud=aud, sub=sub, extra=extra)


@contextlib.asynccontextmanager
async def registry(db_url: str, tmp_path: Path, **publish: Any) -> AsyncIterator[tuple[Issuer, Harness]]:
    async with (
        local_issuer() as issuer,
        running(publish_config(issuer, db_url, tmp_path, **publish), tmp_path) as h,
    ):
        await h.sync()
        yield issuer, h


async def exchange(h: Harness, token: str, prefix: str = "/v0.1") -> httpx.Response:
    return await h.client.post(f"{prefix}/auth/oidc", json={"oidc_token": token})


def claims_of(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return jwt.get_unverified_header(token), jwt.decode(token, options={"verify_signature": False})


def sqlite(tmp_path: Path, name: str = "r") -> str:
    return f"sqlite+aiosqlite:///{tmp_path / (name + '.db')}"


async def test_oidc_login_gives_a_registry_token_with_the_grants(db_url: str, tmp_path: Path) -> None:
    async with registry(db_url, tmp_path) as (issuer, h):
        before = time.time()
        r = await exchange(h, id_token(issuer))
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
        answer = r.json()
        assert set(answer) == {"registry_token", "expires_at"}
        header, claims = claims_of(answer["registry_token"])
        # The official registry's token: EdDSA, issuer mcp-registry, five minutes, its claim names.
        assert header["alg"] == "EdDSA"
        assert claims["iss"] == "mcp-registry" and claims["auth_method"] == "oidc"
        assert claims["auth_method_sub"] == "alice"
        assert claims["exp"] == answer["expires_at"]
        assert before + LIFETIME_SECONDS - 2 <= answer["expires_at"] <= time.time() + LIFETIME_SECONDS + 1
        assert claims["permissions"] == [
            {"action": "publish", "resource": "com.acme/*"},
            {"action": "publish", "resource": "com.acme.*"},
        ]
        registry_token = answer["registry_token"]
        doc = server_doc("com.acme/exchanged", "1.0.0")
        published = await h.client.post("/v0/publish", json=doc, headers=bearer(registry_token))
        assert published.status_code == 200, published.text
        got = await h.get(path("com.acme/exchanged", "versions", "latest"))
        assert got.status_code == 200 and got.json()["server"] == doc
        # The token carries the login's namespaces and nothing else.
        other = await h.client.post(
            "/v0.1/publish", json=server_doc("io.other/x", "9.0.0"), headers=bearer(registry_token)
        )
        body = assert_problem(other, 403, "body.name")
        assert "com.acme/*" in body["detail"]
        # A status change needs publish or edit on the name: the registry token's publish grant does.
        status = await h.client.patch(
            path("com.acme/exchanged", "versions", "1.0.0", "status"),
            json={"status": "deprecated", "statusMessage": "use 2.0"},
            headers=bearer(registry_token),
        )
        assert status.status_code == 200, status.text
        # The same endpoint under /v0 (where mcp-publisher calls it), and a moderator's grants.
        spec = (await h.get("/openapi.json")).json()
        documented = spec["paths"]["/v0.1/auth/oidc"]["post"]["responses"]
        import jsonschema

        jsonschema.validate(answer, documented["200"]["content"]["application/json"]["schema"])
        assert {"400", "401", "403", "413", "415", "422"} <= set(documented)
        moderator = await exchange(h, id_token(issuer, sub="moderator", groups=[]), prefix="/v0")
        assert moderator.status_code == 200, moderator.text
        assert claims_of(moderator.json()["registry_token"])[1]["permissions"] == [
            {"action": "edit", "resource": "*"}
        ]


async def test_an_id_token_that_grants_nothing_is_refused(tmp_path: Path) -> None:
    async with registry(sqlite(tmp_path), tmp_path) as (issuer, h):
        r = await exchange(h, id_token(issuer, groups=["strangers"]))
        body = assert_problem(r, 403, "body.oidc_token")
        assert "publish.grants" in body["detail"]


async def test_email_domain_namespaces_apply_to_the_exchange(tmp_path: Path) -> None:
    async with registry(sqlite(tmp_path), tmp_path, emailDomainNamespaces=True) as (issuer, h):
        r = await exchange(h, id_token(issuer, groups=[], email="bob@beta.example", email_verified=True))
        assert r.status_code == 200, r.text
        perms = claims_of(r.json()["registry_token"])[1]["permissions"]
        assert perms == [
            {"action": "publish", "resource": "example.beta/*"},
            {"action": "publish", "resource": "example.beta.*"},
        ]


async def test_anonymous_login_is_off_unless_asked_for(tmp_path: Path) -> None:
    async with registry(sqlite(tmp_path), tmp_path) as (_issuer, h):
        r = await h.client.post("/v0/auth/none")
        body = assert_problem(r, 404, "path.method")
        assert "publish.anonymousLogin" in body["detail"]
    async with registry(sqlite(tmp_path, "anon"), tmp_path, anonymousLogin=True) as (_issuer, h):
        r = await h.client.post("/v0/auth/none")
        assert r.status_code == 200, r.text
        token = r.json()["registry_token"]
        claims = claims_of(token)[1]
        assert claims["auth_method"] == "none" and claims["auth_method_sub"] == "anonymous"
        assert claims["permissions"] == [
            {"action": "publish", "resource": ANONYMOUS_PATTERN},
            {"action": "edit", "resource": ANONYMOUS_PATTERN},
        ]
        ok = await h.client.post("/v0.1/publish", json=server_doc(ANONYMOUS_NAME), headers=bearer(token))
        assert ok.status_code == 200, ok.text
        refused = await h.client.post("/v0.1/publish", json=server_doc("com.acme/y"), headers=bearer(token))
        assert_problem(refused, 403, "body.name")


def test_publish_config_without_an_issuer_needs_anonymous_login() -> None:
    base = {"registryName": "x", "sources": [{"name": "s", "file": {"path": "f"}}]}
    with pytest.raises(ConfigError, match="anonymousLogin"):
        parse_config({**base, "publish": {}})
    config = parse_config({**base, "publish": {"anonymousLogin": True}})
    assert config.publish is not None and config.publish.auth is None


async def test_a_read_only_registry_issues_no_tokens(tmp_path: Path) -> None:
    source = write_json(tmp_path / "empty.json", [])
    config = parse_config(
        {
            "registryName": "ro",
            "sources": [{"name": "s", "file": {"path": str(source)}}],
            "database": {"url": sqlite(tmp_path)},
        }
    )
    async with running(config, tmp_path) as h:
        for login in ("none", "oidc"):
            r = await h.client.post(f"/v0.1/auth/{login}", json={"oidc_token": "x"})
            assert 400 <= r.status_code < 500 and r.status_code != 200, r.text
            assert r.headers["content-type"] == "application/problem+json"


async def test_a_registry_without_an_issuer_takes_only_its_own_tokens(tmp_path: Path) -> None:
    source = write_json(tmp_path / "empty.json", [])
    config = parse_config(
        {
            "registryName": "dev",
            "sources": [{"name": "s", "file": {"path": str(source)}}],
            "database": {"url": sqlite(tmp_path)},
            "publish": {"anonymousLogin": True},
        }
    )
    async with running(config, tmp_path) as h:
        r = await exchange(h, "anything")
        assert_problem(r, 404, "path.method")
        no_token = await h.client.post("/v0.1/publish", json=server_doc(ANONYMOUS_NAME))
        body = assert_problem(no_token, 401, "header.Authorization")
        assert "login" in body["detail"] and no_token.headers["www-authenticate"].startswith("Bearer")
        token = (await h.client.post("/v0.1/auth/none")).json()["registry_token"]
        ok = await h.client.post("/v0.1/publish", json=server_doc(ANONYMOUS_NAME), headers=bearer(token))
        assert ok.status_code == 200, ok.text


async def test_a_registry_that_authenticates_readers_lets_publishers_log_in(tmp_path: Path) -> None:
    """Reader auth (`auth`) guards reads; the writes (logins included) are the publisher's to check:
    a login has no token yet, and a registry token is no token of the readers' issuer."""
    async with local_issuer() as issuer:
        config = publish_config(issuer, sqlite(tmp_path), tmp_path, anonymousLogin=True)
        reader_auth = {
            "type": "oidc",
            "oidc": {"issuer": issuer.base, "audience": "readers", "insecureAllowHTTP": True},
        }
        config = parse_config({**config.model_dump(by_alias=True, exclude_none=True), "auth": reader_auth})
        async with running(config, tmp_path) as h:
            assert (await h.get("/v0.1/servers")).status_code == 401
            token = (await h.client.post("/v0.1/auth/none")).json()["registry_token"]
            r = await h.client.post("/v0.1/publish", json=server_doc(ANONYMOUS_NAME), headers=bearer(token))
            assert r.status_code == 200, r.text
            exchanged = await exchange(h, id_token(issuer))
            assert exchanged.status_code == 200, exchanged.text
            # Still guarded: reads, and the dry run (a POST that is no write).
            assert (await h.get(path(ANONYMOUS_NAME, "versions"), headers=bearer(token))).status_code == 401
            assert (await h.client.post("/v0.1/validate", json=server_doc("com.acme/v"))).status_code == 401
            reader = bearer(issuer.token("r1", aud="readers"))
            assert (await h.get(path(ANONYMOUS_NAME, "versions"), headers=reader)).status_code == 200


# -- hostile input


async def test_hostile_id_tokens_are_refused_with_401(tmp_path: Path) -> None:
    """The auth corpus (forged, `alg: none`, HS256 with the public key, wrong key, malformed ...) as
    `oidc_token`, plus the exchange's own cases: wrong audience, wrong issuer, expired, a registry
    token presented as an ID token."""
    async with registry(sqlite(tmp_path), tmp_path, anonymousLogin=True) as (issuer, h):
        cases: dict[str, str] = {}
        for what, header in hostile_tokens(issuer, AUDIENCE).items():
            if header is None or not header.lower().startswith("bearer "):
                continue
            cases[what] = header[7:]
        cases["wrong audience"] = id_token(issuer, aud="another-service")
        cases["wrong issuer"] = issuer.token("r1", aud=AUDIENCE, iss="https://evil.example", extra={})
        cases["expired"] = issuer.token("r1", aud=AUDIENCE, exp=time.time() - 3600)
        cases["a registry token"] = (await h.client.post("/v0/auth/none")).json()["registry_token"]
        cases["huge"] = "a." * 20000
        assert len(cases) > 20
        for what, token in cases.items():
            if not token.strip():
                continue
            r = await exchange(h, token)
            assert r.status_code in (401, 413), (what, r.status_code, r.text)
            body = r.json()
            assert r.headers["content-type"] == "application/problem+json" and body["detail"], what
            if r.status_code == 401:
                assert [e["location"] for e in body["errors"]] == ["body.oidc_token"], (what, body)


async def test_hostile_exchange_requests_get_a_problem_naming_the_field(tmp_path: Path) -> None:
    async with registry(sqlite(tmp_path), tmp_path) as (issuer, h):
        url = "/v0.1/auth/oidc"
        json_headers = {"content-type": "application/json"}
        assert_problem(await h.client.post(url, content=b"{not json", headers=json_headers), 400, "body")
        assert_problem(await h.client.post(url, content=b"", headers=json_headers), 400, "body")
        huge = b'{"oidc_token": "' + b"a" * (1024 * 1024) + b'"}'
        assert_problem(await h.client.post(url, content=huge, headers=json_headers), 413, "body")

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit still holds
            for _ in range(200):
                yield b"a" * 4096

        assert_problem(await h.client.post(url, content=chunks(), headers=json_headers), 413, "body")
        wrong_type = await h.client.post(url, content=b"oidc_token=x", headers={"content-type": "text/plain"})
        assert_problem(wrong_type, 415, "header.Content-Type")
        assert_problem(await h.client.post(url, json=["x"]), 422, "body")
        assert_problem(await h.client.post(url, json={}), 422, "body.oidc_token")
        assert_problem(await h.client.post(url, json={"oidc_token": 42}), 422, "body.oidc_token")
        assert_problem(await h.client.post(url, json={"oidc_token": "  "}), 422, "body.oidc_token")
        extra = {"oidc_token": id_token(issuer), "permissions": [{"action": "edit", "resource": "*"}]}
        assert_problem(await h.client.post(url, json=extra), 422, "body.permissions")
        deep = b'{"oidc_token": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        r = await h.client.post(url, content=deep, headers=json_headers)
        assert 400 <= r.status_code < 500 and r.headers["content-type"] == "application/problem+json"
        # Other methods, unknown and public-identity logins.
        get = await h.client.get(url)
        assert get.status_code in (404, 405)
        put = await h.client.put(url, json={})
        assert_problem(put, 405)
        for login in ("github-at", "github-oidc", "dns", "http"):
            body = assert_problem(await h.client.post(f"/v0.1/auth/{login}", json={}), 404, "path.method")
            assert "auth/oidc" in body["detail"], login
        assert_problem(await h.client.post("/v0.1/auth/nonsense", json={}), 404)


async def test_forged_and_expired_registry_tokens_are_refused(tmp_path: Path) -> None:
    async with registry(sqlite(tmp_path), tmp_path) as (_issuer, h):
        assert h.service.publisher is not None
        tokens = h.service.publisher.tokens
        grants = [("publish", "*")]
        good, _ = tokens.issue("oidc", "alice", grants)
        head, payload, signature = good.split(".")

        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        claims = claims_of(good)[1]
        widened = b64(orjson.dumps({**claims, "permissions": [{"action": "edit", "resource": "*"}]}))
        stranger = RegistryTokens()
        own_key = tokens._private  # signed by the registry's own key, but with a claim wrong
        now = int(time.time())
        base = {"iss": "mcp-registry", "iat": now, "nbf": now, "exp": now + 60}
        base |= {"auth_method": "oidc", "auth_method_sub": "alice", "permissions": []}
        forged = {
            "another registry's key": stranger.issue("oidc", "alice", grants)[0],
            "expired": tokens.issue("oidc", "alice", grants, now=time.time() - 3600)[0],
            "not yet valid": tokens.issue("oidc", "alice", grants, now=time.time() + 3600)[0],
            "tampered permissions": f"{head}.{widened}.{signature}",
            "no signature": f"{head}.{payload}.",
            "garbage signature": f"{head}.{payload}.{b64(b'x' * 64)}",
            "alg none named EdDSA": b64(b'{"alg":"EdDSA","typ":"JWT"}') + f".{payload}.",
            "wrong issuer": jwt.encode({**base, "iss": "someone-else"}, own_key, algorithm="EdDSA"),
            "no exp": jwt.encode({k: v for k, v in base.items() if k != "exp"}, own_key, algorithm="EdDSA"),
            "permissions not a list": jwt.encode({**base, "permissions": "*"}, own_key, algorithm="EdDSA"),
            "unknown action": jwt.encode(
                {**base, "permissions": [{"action": "own", "resource": "*"}]}, own_key, algorithm="EdDSA"
            ),
            "subject not a string": jwt.encode({**base, "auth_method_sub": 7}, own_key, algorithm="EdDSA"),
            "huge": f"{head}.{'A' * 20000}.{signature}",
            "another Ed25519 key": jwt.encode(base, Ed25519PrivateKey.generate(), algorithm="EdDSA"),
        }
        for what, token in forged.items():
            r = await h.client.post(
                "/v0.1/publish", json=server_doc("com.acme/forged"), headers=bearer(token)
            )
            body = assert_problem(r, 401, "header.Authorization")
            assert "registry token" in body["detail"], (what, body)
            assert r.headers["www-authenticate"].startswith("Bearer"), what
        ok = await h.client.post("/v0.1/publish", json=server_doc("com.acme/forged"), headers=bearer(good))
        assert ok.status_code == 200, ok.text


async def test_replicas_sharing_a_signing_key_accept_each_others_tokens(tmp_path: Path) -> None:
    key = tmp_path / "registry-token.key"
    key.write_text(os.urandom(32).hex() + "\n")
    db = sqlite(tmp_path)
    async with local_issuer() as issuer:
        shared = publish_config(issuer, db, tmp_path, tokenSigningKeyFile=key.name)
        async with running(shared, tmp_path) as a:
            token = (await exchange(a, id_token(issuer))).json()["registry_token"]
        async with running(shared, tmp_path) as b:  # another process, the same key file
            r = await b.client.post("/v0.1/publish", json=server_doc("com.acme/one"), headers=bearer(token))
            assert r.status_code == 200, r.text
        async with running(publish_config(issuer, db, tmp_path), tmp_path) as c:  # a key of its own
            r = await c.client.post("/v0.1/publish", json=server_doc("com.acme/two"), headers=bearer(token))
            assert_problem(r, 401, "header.Authorization")
        bad = tmp_path / "bad.key"
        for content in ("", "zz" * 32, "ab" * 16):
            bad.write_text(content)
            with pytest.raises(Exception, match="tokenSigningKeyFile"):
                async with running(
                    publish_config(issuer, db, tmp_path, tokenSigningKeyFile=str(bad)), tmp_path
                ):
                    pass


_BODIES = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=30),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
        max_leaves=20,
    ).map(lambda v: json.dumps(v).encode()),
    st.text(max_size=200).map(lambda t: json.dumps({"oidc_token": t}).encode()),
)
_TOKENS = st.one_of(
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.", max_size=400),
    st.binary(max_size=200).map(lambda b: "eyJhbGciOiJFZERTQSJ9." + base64.urlsafe_b64encode(b).decode()),
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(_BODIES, min_size=10, max_size=20), tokens=st.lists(_TOKENS, min_size=5, max_size=10))
def test_any_exchange_body_or_bearer_gets_a_4xx_never_a_5xx(
    tmp_path_factory: pytest.TempPathFactory, bodies: list[bytes], tokens: list[str]
) -> None:
    async def run() -> None:
        tmp = tmp_path_factory.mktemp("exchange-fuzz")
        async with registry(sqlite(tmp), tmp, anonymousLogin=True) as (_issuer, h):
            for body in bodies:
                for login in ("oidc", "none"):
                    r = await h.client.post(
                        f"/v0.1/auth/{login}", content=body, headers={"content-type": "application/json"}
                    )
                    assert r.status_code < 500, (login, r.status_code, r.text)
                    if login == "oidc":
                        assert 400 <= r.status_code < 500, (body, r.text)
                        assert r.headers["content-type"] == "application/problem+json" and r.json()["detail"]
            for token in tokens:
                r = await h.client.post("/v0.1/publish", json=server_doc("com.acme/z"), headers=bearer(token))
                assert r.status_code == 401, (token, r.status_code, r.text)
                assert r.headers["content-type"] == "application/problem+json"

    asyncio.run(run())


# -- the real mcp-publisher CLI


@pytest.fixture(scope="session")
def mcp_publisher() -> Path:
    def progress(message: str) -> None:
        print(f"[mcp-publisher] {message}", file=sys.stderr, flush=True)

    try:
        return run_async(ensure_mcp_publisher(BuildLayout(default_cache_root()), progress))
    except (BuildError, OSError) as exc:
        pytest.fail(f"mcp-publisher could not be built from its Go module:\n{exc}", pytrace=False)


async def cli(binary: Path, home: Path, *args: str, cwd: Path) -> tuple[int, str]:
    """Run mcp-publisher with its own home (its token lives in ~/.config/mcp-publisher/token.json)."""
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    proc = await asyncio.create_subprocess_exec(
        str(binary), *args, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode()


async def test_mcp_publisher_logs_in_with_none_and_publishes(mcp_publisher: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    write_json(tmp_path / "server.json", server_doc(ANONYMOUS_NAME, "0.3.0"))
    async with (
        registry(sqlite(tmp_path), tmp_path, anonymousLogin=True) as (_issuer, h),
        serve_app(h.app) as base,
    ):
        code, out = await cli(mcp_publisher, home, "login", "none", "--registry", base, cwd=tmp_path)
        assert code == 0 and "Successfully logged in" in out, out
        saved = json.loads((home / ".config" / "mcp-publisher" / "token.json").read_text())
        assert saved["registry"] == base and saved["method"] == "none"
        assert claims_of(saved["token"])[1]["auth_method"] == "none"
        code, out = await cli(mcp_publisher, home, "publish", cwd=tmp_path)
        assert code == 0 and "Successfully published" in out, out
        async with httpx.AsyncClient() as client:
            got = await client.get(base + path(ANONYMOUS_NAME, "versions", "latest"))
        assert got.status_code == 200 and got.json()["server"]["version"] == "0.3.0"
        # Outside the anonymous namespace: refused, and the CLI says why.
        write_json(tmp_path / "other.json", server_doc("com.acme/not-anonymous"))
        code, out = await cli(mcp_publisher, home, "publish", "other.json", cwd=tmp_path)
        assert code != 0 and "403" in out and ANONYMOUS_PATTERN in out, out


async def test_mcp_publisher_publishes_with_a_token_from_the_oidc_exchange(
    mcp_publisher: Path, tmp_path: Path
) -> None:
    """mcp-publisher v1.8.9 has no `login oidc` (its logins: github, github-oidc, dns, http, none):
    the ID token is exchanged at /v0.1/auth/oidc and the answer saved where `login` saves its token,
    as the official registry's own admin scripts do; `mcp-publisher publish` then uses it unchanged."""
    home = tmp_path / "home"
    (home / ".config" / "mcp-publisher").mkdir(parents=True)
    write_json(tmp_path / "server.json", server_doc("com.acme/via-oidc", "1.4.0"))
    async with registry(sqlite(tmp_path), tmp_path) as (issuer, h), serve_app(h.app) as base:
        async with httpx.AsyncClient() as client:
            r = await client.post(base + "/v0/auth/oidc", json={"oidc_token": id_token(issuer)})
            assert r.status_code == 200, r.text
        token_file = home / ".config" / "mcp-publisher" / "token.json"
        token_file.write_text(
            json.dumps({"token": r.json()["registry_token"], "method": "oidc", "registry": base})
        )
        code, out = await cli(mcp_publisher, home, "publish", cwd=tmp_path)
        assert code == 0 and "Successfully published" in out, out
        async with httpx.AsyncClient() as client:
            got = await client.get(base + path("com.acme/via-oidc", "versions", "1.4.0"))
        assert got.status_code == 200 and got.json()["server"]["name"] == "com.acme/via-oidc"


async def test_the_warm_up_prepares_the_signing_key(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A start reads the seed file only; cryptography loads in the publishing API's warm-up thread."""
    key = tmp_path / "seed.key"
    key.write_text("ab" * 32)
    async with registry(sqlite(tmp_path), tmp_path, tokenSigningKeyFile=key.name) as (_issuer, h):
        publisher = h.service.publisher
        assert publisher is not None
        await publisher.warm()
        assert publisher.tokens._keys is not None
        assert "cannot preload" not in caplog.text
