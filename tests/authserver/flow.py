"""Drives the embedded authorization server's flow with httpx, as an MCP client's OAuth support does:
protected-resource metadata -> server metadata -> RFC 7591 registration -> authorize (PKCE S256) ->
the upstream IdP -> callback -> code -> token."""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from mcpfleet.auth.authserver.config import AuthServerSettings, Upstream

REDIRECT = "http://127.0.0.1:9/callback"
ISSUER = "http://127.0.0.1:1"
UPSTREAM_AUTHORIZE = "http://127.0.0.1:2/authorize"


def unreachable_upstream_settings(**extra: Any) -> AuthServerSettings:
    """Settings for in-process tests that never reach the IdP (an oauth2 upstream needs no discovery)."""
    upstream = Upstream(
        name="idp",
        type="oauth2",
        authorization_endpoint=UPSTREAM_AUTHORIZE,
        token_endpoint="http://127.0.0.1:2/token",
        client_id="c",
    )
    return AuthServerSettings(**{"issuer": ISSUER, "upstream": upstream, **extra})


@dataclass
class Login:
    client_id: str
    code: str
    verifier: str
    tokens: dict[str, Any]
    metadata: dict[str, Any]


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


async def discover(http: httpx.AsyncClient, mcp_url: str) -> dict[str, Any]:
    """The authorization server's metadata, found from the MCP endpoint's 401 as a client finds it."""
    refused = await http.post(mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.status_code == 401, refused.text
    challenge = refused.headers["www-authenticate"]
    prm_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    prm = (await http.get(prm_url)).json()
    issuer = prm["authorization_servers"][0]
    metadata: dict[str, Any] = (await http.get(issuer + "/.well-known/oauth-authorization-server")).json()
    assert metadata["issuer"] == issuer
    return metadata


async def register(http: httpx.AsyncClient, metadata: dict[str, Any], redirect: str = REDIRECT) -> str:
    answer = await http.post(
        metadata["registration_endpoint"], json={"redirect_uris": [redirect], "client_name": "t"}
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["client_id"])


async def authorize(
    http: httpx.AsyncClient, metadata: dict[str, Any], client_id: str, redirect: str = REDIRECT
) -> tuple[str, str]:
    """(code, verifier): follows the redirects through the upstream IdP back to the client's URI."""
    verifier, challenge = pkce()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect,
        "state": "client-state-1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    answer = await http.get(metadata["authorization_endpoint"], params=params)
    for _ in range(4):
        assert answer.status_code == 302, answer.text
        location = answer.headers["location"]
        if location.startswith(redirect):
            query = parse_qs(urlsplit(location).query)
            assert query["state"] == ["client-state-1"] and query["iss"] == [metadata["issuer"]], query
            return query["code"][0], verifier
        answer = await http.get(location)
    raise AssertionError("the flow did not come back to the client's redirect URI")


async def token(http: httpx.AsyncClient, metadata: dict[str, Any], form: dict[str, str]) -> httpx.Response:
    return await http.post(metadata["token_endpoint"], data=form)


async def login(http: httpx.AsyncClient, mcp_url: str) -> Login:
    metadata = await discover(http, mcp_url)
    client_id = await register(http, metadata)
    code, verifier = await authorize(http, metadata, client_id)
    answer = await token(
        http,
        metadata,
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": verifier,
        },
    )
    assert answer.status_code == 200, answer.text
    return Login(client_id, code, verifier, answer.json(), metadata)
