"""Incoming OIDC (local issuer, keys made here) and outgoing header injection / RFC 8693 token exchange."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import orjson
import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa

from mcpfleet.vmcp.config import ConfigError, load_config
from mcpfleet.vmcp.server import ServeOptions, build_app
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.oidc import Issuer, read_form
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend, Served, free_port

HDR = dict(STREAMABLE_HTTP_HEADERS)
INIT = initialize_request()


class TokenEndpoint:
    """A local RFC 8693 token-exchange endpoint."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        self.auth: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        form = await read_form(receive)
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
    # JWKS found via discovery; a loopback http:// issuer needs the development-only opt-in.
    auth = {"type": "oidc", "oidc": {"issuer": issuer.base, "audience": "vmcp", "insecureAllowHTTP": True}}
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


async def test_oidc_settings_from_a_mounted_file(issuer: Issuer, served: Any, tmp_path: Path) -> None:
    """`incomingAuth.oidcFile` (an oidcConfigRef / configMap key mounted by the operator) is read at
    start; the audience given beside it overrides the file's."""
    be = JsonRpcBackend("be")
    s = await served(be)
    issuer.add_rsa("r1")
    settings = {"issuer": issuer.base, "audience": "shared", "insecureAllowHTTP": True}
    (tmp_path / "oidc.json").write_text(json.dumps(settings))
    config = {
        "backends": [{"name": "be", "url": s.url}],
        "incomingAuth": {"type": "oidc", "oidcFile": "oidc.json", "oidc": {"audience": "vmcp"}},
    }
    (tmp_path / "vmcp.yaml").write_text(yaml.safe_dump(config))
    cfg = load_config(tmp_path / "vmcp.yaml")
    port = free_port()
    app = build_app(cfg, ServeOptions(host="127.0.0.1", port=port))
    try:
        gw = await served(app, port)
        async with aiohttp.ClientSession() as h:
            shared = {**HDR, "authorization": "Bearer " + issuer.token("r1", aud="shared")}
            status, headers, _ = await post(h, gw.url, INIT, shared)
            assert status == 401 and "Audience" in headers["WWW-Authenticate"]
            status, _, _ = await post(
                h, gw.url, INIT, {**HDR, "authorization": "Bearer " + issuer.token("r1")}
            )
            assert status == 200
    finally:
        await app.aclose()
    (tmp_path / "oidc.json").unlink()
    with pytest.raises(ConfigError, match=r"incomingAuth\.oidcFile: cannot read"):
        load_config(tmp_path / "vmcp.yaml")


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


async def test_outgoing_bearer_token_from_env(
    gateway: GatewayFactory, served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Secret mounted as env often ends with a newline: the header must not carry it.
    monkeypatch.setenv("VMCP_TEST_BEARER", "tok-123\n")
    locked = JsonRpcBackend("locked", require_header=("authorization", "Bearer tok-123"))
    open_ = JsonRpcBackend("open")
    s_locked, s_open = await served(locked), await served(open_)
    outgoing = {
        "backends": {"locked": {"type": "bearer_token", "bearerToken": {"tokenEnv": "VMCP_TEST_BEARER"}}}
    }
    gw = await gateway(
        {
            "backends": [{"name": "locked", "url": s_locked.url}, {"name": "open", "url": s_open.url}],
            "outgoingAuth": outgoing,
        }
    )
    async with aiohttp.ClientSession() as h:
        _, headers, _ = await post(h, gw.url, INIT, HDR)
        hdr = {**HDR, "mcp-session-id": headers["mcp-session-id"]}
        listed = await post(h, gw.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, hdr)
        call = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "locked_echo", "arguments": {}},
        }
        _status, _, body = await post(h, gw.url, call, hdr)
        async with h.get(gw.base + "/status") as r:
            backends = {b["name"]: b for b in (await r.json())["backends"]}
    assert {t["name"] for t in listed[2]["result"]["tools"]} == {"locked_echo", "open_echo"}
    assert body["result"]["isError"] is False
    # Every request to the locked backend (handshake included) carried the token; the other got none.
    assert locked.headers_by_method["initialize"]["authorization"] == "Bearer tok-123"
    assert locked.headers_by_method["tools/call"]["authorization"] == "Bearer tok-123"
    assert "authorization" not in open_.headers_by_method["initialize"]
    assert backends["locked"]["state"] == "ready", backends


async def test_outgoing_bearer_token_missing_env_is_named() -> None:
    from mcpfleet.vmcp.auth.outgoing import OutgoingAuthError, OutgoingAuthFactory
    from mcpfleet.vmcp.config import OutgoingAuthSettings

    cfg = OutgoingAuthSettings.model_validate(
        {"backends": {"b": {"type": "bearer_token", "bearerToken": {"tokenEnv": "VMCP_TEST_UNSET_TOKEN"}}}}
    )
    async with aiohttp.ClientSession() as http:
        with pytest.raises(OutgoingAuthError, match=r"outgoingAuth.backends\[b\].bearerToken.tokenEnv"):
            OutgoingAuthFactory(cfg).for_backend("b", http)
        inline = OutgoingAuthSettings.model_validate(
            {"default": {"type": "bearer_token", "bearerToken": {"token": "t"}}}
        )
        headers = await OutgoingAuthFactory(inline).for_backend("x", http).headers(None)
    assert headers == {"authorization": "Bearer t"}


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
                "oidc": {
                    "issuer": issuer.base,
                    "audience": "vmcp",
                    "jwksUrl": issuer.base + "/jwks",
                    "insecureAllowHTTP": True,
                },
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
