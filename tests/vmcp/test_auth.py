"""Incoming OIDC (local issuer, keys made here) and outgoing header injection / RFC 8693 token exchange."""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from typing import Any

import aiohttp
import jwt
import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend, Served

HDR = dict(STREAMABLE_HTTP_HEADERS)
INIT = initialize_request()


class Issuer:
    """A local OIDC issuer: discovery document + JWKS whose keys the test rotates."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.base = ""
        self.jwks_hits = 0

    def add_rsa(self, kid: str) -> Any:
        k = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.keys[kid] = ("RS256", k)
        return k

    def add_ec(self, kid: str) -> Any:
        k = ec.generate_private_key(ec.SECP256R1())
        self.keys[kid] = ("ES256", k)
        return k

    def token(self, kid: str, *, aud: str = "vmcp", exp: float | None = None, iss: str | None = None) -> str:
        alg, key = self.keys[kid]
        claims = {
            "iss": iss or self.base,
            "aud": aud,
            "sub": "user-1",
            "exp": int(exp or time.time() + 300),
            "iat": int(time.time()),
        }
        return jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/.well-known/openid-configuration":
            body = orjson.dumps({"issuer": self.base, "jwks_uri": self.base + "/jwks"})
        else:
            self.jwks_hits += 1
            jwks = []
            for kid, (alg, key) in self.keys.items():
                algo = RSAAlgorithm if alg == "RS256" else ECAlgorithm
                jwk = algo.to_jwk(key.public_key(), as_dict=True)
                jwks.append({**jwk, "kid": kid, "alg": alg, "use": "sig"})
            body = orjson.dumps({"keys": jwks})
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


class TokenEndpoint:
    """A local RFC 8693 token-exchange endpoint."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        self.auth: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        form = dict(urllib.parse.parse_qsl(body.decode()))
        self.requests.append(form)
        self.auth.append(dict((k.decode(), v.decode()) for k, v in scope["headers"]).get("authorization", ""))
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" or not form.get(
            "subject_token"
        ):
            out, status = {"error": "invalid_request"}, 400
        else:
            out, status = (
                {
                    "access_token": f"exchanged-{len(self.requests)}",
                    "token_type": "Bearer",
                    "expires_in": 300,
                    "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                },
                200,
            )
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": orjson.dumps(out)})


@pytest.fixture
async def issuer(served: Any) -> Issuer:
    iss = Issuer()
    s: Served = await served(iss)
    iss.base = s.base
    return iss


async def post(
    h: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str]
) -> tuple[int, dict[str, str], Any]:
    async with h.post(url, json=body, headers=headers) as r:
        raw = await r.read()
        return r.status, dict(r.headers), orjson.loads(raw) if raw else None


async def test_oidc_incoming(issuer: Issuer, gateway: GatewayFactory, served: Any) -> None:
    be = JsonRpcBackend("be")
    s = await served(be)
    issuer.add_rsa("r1")
    issuer.add_ec("e1")
    auth = {"type": "oidc", "oidc": {"issuer": issuer.base, "audience": "vmcp"}}  # JWKS found via discovery
    gw = await gateway({"backends": [{"name": "be", "url": s.url}], "incomingAuth": auth})
    calls_before = dict(be.calls)
    async with aiohttp.ClientSession() as h:
        # Missing, malformed, wrong-audience, expired and foreign-issuer tokens: 401, no backend call.
        bad = {
            "missing": None,
            "garbage": "Bearer not-a-jwt",
            "audience": "Bearer " + issuer.token("r1", aud="someone-else"),
            "expired": "Bearer " + issuer.token("r1", exp=time.time() - 3600),
            "issuer": "Bearer " + issuer.token("r1", iss="https://evil.example"),
        }
        for why, value in bad.items():
            hdr = dict(HDR) if value is None else {**HDR, "authorization": value}
            status, headers, _ = await post(h, gw.url, INIT, hdr)
            assert status == 401, why
            assert headers["WWW-Authenticate"].startswith("Bearer"), why
            assert "resource_metadata=" in headers["WWW-Authenticate"]
        assert be.calls == calls_before  # no backend was called for any rejected request
        # RS256 and ES256 tokens are accepted.
        for kid in ("r1", "e1"):
            hdr = {**HDR, "authorization": "Bearer " + issuer.token(kid)}
            status, headers, body = await post(h, gw.url, INIT, hdr)
            assert status == 200 and body["result"]["serverInfo"]["name"]
            hdr["mcp-session-id"] = headers["mcp-session-id"]
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "be_echo", "arguments": {}},
            }
            status, _, body = await post(h, gw.url, call, hdr)
            assert status == 200 and body["result"]["content"][0]["text"].startswith("be:echo")
        # Key rotation: a token signed by a key published after start-up is accepted at once.
        await asyncio.sleep(1.1)  # unknown-kid refetches are limited to one a second
        issuer.add_rsa("r2")
        hits = issuer.jwks_hits
        status, _, _ = await post(h, gw.url, INIT, {**HDR, "authorization": "Bearer " + issuer.token("r2")})
        assert status == 200 and issuer.jwks_hits == hits + 1
        # ...and a removed key stops working after the next refresh.
        del issuer.keys["r1"]
        issuer.add_rsa("r3")
        await asyncio.sleep(1.1)
        status, _, _ = await post(h, gw.url, INIT, {**HDR, "authorization": "Bearer " + issuer.token("r3")})
        assert status == 200
        old = jwt.encode(
            {"iss": issuer.base, "aud": "vmcp", "exp": int(time.time()) + 60},
            rsa.generate_private_key(public_exponent=65537, key_size=2048),
            algorithm="RS256",
            headers={"kid": "r1"},
        )
        status, _, _ = await post(h, gw.url, INIT, {**HDR, "authorization": "Bearer " + old})
        assert status == 401
        async with h.get(gw.base + "/.well-known/oauth-protected-resource") as r:
            meta = await r.json()
        assert meta["authorization_servers"] == [issuer.base]


async def test_outgoing_header_injection_from_env(
    gateway: GatewayFactory, served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VMCP_TEST_BACKEND_KEY", "s3cret-value")
    be = JsonRpcBackend("locked", require_header=("x-api-key", "s3cret-value"))
    s = await served(be)
    outgoing = {
        "default": {
            "type": "header_injection",
            "headerInjection": {"headerName": "X-Api-Key", "headerValueEnv": "VMCP_TEST_BACKEND_KEY"},
        }
    }
    gw = await gateway({"backends": [{"name": "locked", "url": s.url}], "outgoingAuth": outgoing})
    async with aiohttp.ClientSession() as h:
        _, headers, _ = await post(h, gw.url, INIT, HDR)
        hdr = {**HDR, "mcp-session-id": headers["mcp-session-id"]}
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "locked_echo", "arguments": {}},
        }
        _status, _, body = await post(h, gw.url, call, hdr)
    assert body["result"]["isError"] is False
    assert be.headers_by_method["tools/call"]["x-api-key"] == "s3cret-value"


async def test_outgoing_token_exchange_cached(issuer: Issuer, gateway: GatewayFactory, served: Any) -> None:
    te = TokenEndpoint()
    te_srv = await served(te)
    be = JsonRpcBackend("api")
    s = await served(be)
    issuer.add_rsa("k")
    outgoing = {
        "backends": {
            "api": {
                "type": "token_exchange",
                "tokenExchange": {
                    "tokenUrl": te_srv.base + "/token",
                    "audience": "api",
                    "clientId": "vmcp",
                    "clientSecret": "pw",
                    "scopes": ["read", "write"],
                },
            }
        }
    }
    gw = await gateway(
        {
            "backends": [{"name": "api", "url": s.url}],
            "incomingAuth": {
                "type": "oidc",
                "oidc": {"issuer": issuer.base, "audience": "vmcp", "jwksUrl": issuer.base + "/jwks"},
            },
            "outgoingAuth": outgoing,
        }
    )
    user_token = issuer.token("k")
    async with aiohttp.ClientSession() as h:
        hdr = {**HDR, "authorization": "Bearer " + user_token}
        _, headers, _ = await post(h, gw.url, INIT, hdr)
        hdr["mcp-session-id"] = headers["mcp-session-id"]
        for i in range(3):
            call = {
                "jsonrpc": "2.0",
                "id": 10 + i,
                "method": "tools/call",
                "params": {"name": "api_echo", "arguments": {}},
            }
            _status, _, body = await post(h, gw.url, call, hdr)
            assert body["result"]["isError"] is False
    assert len(te.requests) == 1  # cached until expiry
    form = te.requests[0]
    assert form["subject_token"] == user_token and form["audience"] == "api" and form["scope"] == "read write"
    assert te.auth[0].startswith("Basic ")
    assert be.headers_by_method["tools/call"]["authorization"] == "Bearer exchanged-1"
