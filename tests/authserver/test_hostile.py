"""Hostile input to every endpoint of the embedded authorization server, in process (ASGI): a corpus
of malformed requests and hypothesis-generated ones. Every answer is an RFC 6749 JSON error with a
4xx status, or a redirect to the client's registered URI — never a 5xx, never a redirect elsewhere."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.auth.authserver.config import AuthServerSettings, Upstream
from mcpfleet.auth.authserver.server import AuthServer
from tests.authserver.flow import ISSUER, REDIRECT, pkce, unreachable_upstream_settings


def _server(tmp_path: Path) -> AuthServer:
    return AuthServer(unreachable_upstream_settings(), resource=ISSUER + "/mcp")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> AuthServer:
    return _server(tmp_path_factory.mktemp("as"))


def _client(server: AuthServer) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=server)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url=ISSUER)


async def _registered(server: AuthServer) -> str:
    async with _client(server) as http:
        answer = await http.post("/oauth/register", json={"redirect_uris": [REDIRECT]})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["client_id"])


def _is_oauth_error(answer: httpx.Response) -> None:
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    body = answer.json()
    assert isinstance(body["error"], str) and isinstance(body["error_description"], str), body


CORPUS_REGISTER: list[tuple[str, bytes, str]] = [
    ("not json", b"{", "application/json"),
    ("array", b"[]", "application/json"),
    ("no redirect_uris", b"{}", "application/json"),
    ("javascript uri", b'{"redirect_uris":["javascript:alert(1)"]}', "application/json"),
    ("data uri", b'{"redirect_uris":["data:text/html,x"]}', "application/json"),
    ("http non-loopback", b'{"redirect_uris":["http://evil.example/cb"]}', "application/json"),
    ("fragment", b'{"redirect_uris":["https://a.example/cb#x"]}', "application/json"),
    (
        "too many",
        b'{"redirect_uris":[' + b",".join([b'"https://a.example/%d"' % i for i in range(11)]) + b"]}",
        "application/json",
    ),
    ("huge uri", b'{"redirect_uris":["https://a.example/' + b"a" * 5000 + b'"]}', "application/json"),
    (
        "implicit",
        b'{"redirect_uris":["https://a.example/cb"],"response_types":["token"]}',
        "application/json",
    ),
    (
        "client_credentials",
        b'{"redirect_uris":["https://a.example/cb"],"grant_types":["client_credentials"]}',
        "application/json",
    ),
    (
        "confidential",
        b'{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"client_secret_post"}',
        "application/json",
    ),
    ("unknown scope", b'{"redirect_uris":["https://a.example/cb"],"scope":"admin"}', "application/json"),
    ("form body", b"redirect_uris=x", "application/x-www-form-urlencoded"),
    ("body too large", b'{"x":"' + b"a" * 70000 + b'"}', "application/json"),
]


@pytest.mark.parametrize(
    ("label", "body", "content_type"), CORPUS_REGISTER, ids=[c[0] for c in CORPUS_REGISTER]
)
async def test_register_corpus(server: AuthServer, label: str, body: bytes, content_type: str) -> None:
    async with _client(server) as http:
        answer = await http.post("/oauth/register", content=body, headers={"content-type": content_type})
    _is_oauth_error(answer)


async def test_authorize_corpus(server: AuthServer) -> None:
    client_id = await _registered(server)
    _, challenge = pkce()
    good = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    direct = [  # answered with a JSON error: the redirect URI is not (yet) trusted
        {**good, "client_id": "nobody"},
        {**good, "redirect_uri": "http://127.0.0.1:9/elsewhere"},
        {**good, "redirect_uri": REDIRECT + "/"},
        {**good, "state": "s" * 2000},
        {k: v for k, v in good.items() if k != "client_id"},
    ]
    redirected = [  # the client's own URI gets the error
        {**good, "code_challenge_method": "plain"},
        {k: v for k, v in good.items() if k != "code_challenge"},
        {**good, "code_challenge": "short"},
        {**good, "response_type": "token"},
        {**good, "scope": "admin"},
        {**good, "resource": "no-scheme"},
    ]
    async with _client(server) as http:
        for params in direct:
            _is_oauth_error(await http.get("/oauth/authorize", params=params))
        for params in redirected:
            answer = await http.get("/oauth/authorize", params=params)
            assert answer.status_code == 302, answer.text
            assert answer.headers["location"].startswith(REDIRECT + "?error="), answer.headers["location"]
        repeated = "/oauth/authorize?" + urlencode(good) + "&client_id=other"
        _is_oauth_error(await http.get(repeated))
        _is_oauth_error(await http.get("/oauth/callback", params={"state": "unknown", "code": "x"}))
        _is_oauth_error(await http.get("/oauth/callback"))
        _is_oauth_error(await http.post("/oauth/authorize"))


async def test_token_corpus(server: AuthServer) -> None:
    client_id = await _registered(server)
    verifier, _ = pkce()
    forms: list[dict[str, str]] = [
        {},
        {"grant_type": "authorization_code", "client_id": client_id},
        {"grant_type": "authorization_code", "client_id": client_id, "code": "x", "code_verifier": verifier},
        {"grant_type": "authorization_code", "client_id": client_id, "code": "x", "code_verifier": "short"},
        {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": "nope"},
        {"grant_type": "password", "client_id": client_id, "username": "a", "password": "b"},
        {"grant_type": "client_credentials", "client_id": client_id},
        {"grant_type": "authorization_code", "client_id": "unknown", "code": "x", "code_verifier": verifier},
        {"grant_type": "authorization_code", "client_id": client_id, "client_secret": "guess", "code": "x"},
        {"grant_type": "refresh_token", "client_id": client_id, "refresh_token": "r" * 5000},
    ]
    async with _client(server) as http:
        for form in forms:
            _is_oauth_error(await http.post("/oauth/token", data=form))
        _is_oauth_error(await http.post("/oauth/token", json={"grant_type": "authorization_code"}))
        _is_oauth_error(
            await http.post(
                "/oauth/token",
                content=b"a=" + b"b" * 70000,
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
        )
        _is_oauth_error(
            await http.post(
                "/oauth/token", data={"grant_type": "refresh_token"}, headers={"authorization": "Basic !!!"}
            )
        )
        _is_oauth_error(await http.get("/oauth/token"))


async def test_expired_code_is_refused(tmp_path: Path) -> None:
    server = _server(tmp_path)
    client_id = await _registered(server)
    verifier, challenge = pkce()
    key = server.keys.token_keys("expired-code-" + "x" * 30)[0]
    grant: dict[str, Any] = {
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "scope": [],
        "resource": None,
        "sid": "s",
    }
    await server.storage.put("code", key, grant, 0.05)
    await asyncio.sleep(0.1)
    form = {
        "grant_type": "authorization_code",
        "client_id": client_id,
        "code": "expired-code-" + "x" * 30,
        "code_verifier": verifier,
    }
    async with _client(server) as http:
        answer = await http.post("/oauth/token", data=form)
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant"


TEXT = st.text(max_size=300)
PARAMS = st.dictionaries(
    st.sampled_from(
        [
            "client_id",
            "redirect_uri",
            "state",
            "code_challenge",
            "code_challenge_method",
            "response_type",
            "scope",
            "resource",
            "code",
            "grant_type",
            "code_verifier",
            "refresh_token",
            "client_secret",
        ]
    ),
    TEXT,
    max_size=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from(["/oauth/authorize", "/oauth/callback", "/oauth/token", "/oauth/register"]),
    params=PARAMS,
    body=st.binary(max_size=400),
)
def test_any_request_is_answered_without_5xx(
    server: AuthServer, path: str, params: dict[str, str], body: bytes
) -> None:
    async def run() -> httpx.Response:
        async with _client(server) as http:
            if path in {"/oauth/authorize", "/oauth/callback"}:
                return await http.get(path, params=params)
            if path == "/oauth/token":
                return await http.post(path, data=params)
            return await http.post(path, content=body, headers={"content-type": "application/json"})

    answer = asyncio.run(run())
    assert answer.status_code < 500, (answer.status_code, answer.text)
    if answer.status_code == 302:
        assert answer.headers["location"].startswith((REDIRECT, "http://127.0.0.1:2/authorize")), (
            answer.headers["location"]
        )
    elif answer.status_code >= 400:
        assert "error" in answer.json()


async def test_confidential_clients_when_allowed() -> None:
    settings = AuthServerSettings(
        issuer="https://as.example.com",
        upstream=Upstream(
            name="idp",
            type="oauth2",
            authorization_endpoint="https://idp.example.com/authorize",
            token_endpoint="https://idp.example.com/token",
            client_id="c",
        ),
        allow_confidential_client_registration=True,
        force_confidential_redirect_uris=["https://forced.example.com/cb"],
    )
    server = AuthServer(settings, resource="https://as.example.com/mcp")
    transport = httpx.ASGITransport(app=server)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="https://as.example.com") as http:
        metadata = (await http.get("/.well-known/openid-configuration")).json()
        assert metadata["token_endpoint_auth_methods_supported"] == [
            "none",
            "client_secret_basic",
            "client_secret_post",
        ]
        loopback = await http.post(
            "/oauth/register",
            json={
                "redirect_uris": ["https://localhost/cb"],
                "token_endpoint_auth_method": "client_secret_basic",
            },
        )
        assert loopback.status_code == 400 and loopback.json()["error"] == "invalid_redirect_uri"
        made = await http.post(
            "/oauth/register",
            json={
                "redirect_uris": ["https://app.example.com/cb"],
                "token_endpoint_auth_method": "client_secret_basic",
            },
        )
        assert made.status_code == 201, made.text
        client = made.json()
        forced = (
            await http.post("/oauth/register", json={"redirect_uris": ["https://forced.example.com/cb"]})
        ).json()
        assert forced["token_endpoint_auth_method"] == "client_secret_post" and forced["client_secret"]
        form = {"grant_type": "authorization_code", "code": "c" * 43, "code_verifier": "v" * 43}
        wrong = await http.post("/oauth/token", data=form, auth=(client["client_id"], "wrong"))
        assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
        public_style = await http.post("/oauth/token", data={**form, "client_id": client["client_id"]})
        assert public_style.status_code == 401
        right = await http.post(
            "/oauth/token", data=form, auth=(client["client_id"], client["client_secret"])
        )
        assert right.status_code == 400 and right.json()["error"] == "invalid_grant"
    await server.aclose()
