"""Incoming auth on the proxy (`--auth-config`): every transport it serves rejects missing, malformed,
expired, foreign and wrong-audience tokens with a 401 challenge, and a good token reaches a real MCP
server end to end. The issuer is a local one (tests/oidc.py) with keys made here."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from mcp.client.client import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import TextContent

from mcpfleet.auth.oidc import AuthConfigError, IncomingAuthSettings, load_auth_config
from mcpfleet.proxy.remote import RemoteProxyApp
from mcpfleet.proxy.serve import build_stdio_app, with_auth
from tests.conformance import harness
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.oidc import Issuer
from tests.proxy.attach_endpoint import AttachEndpoint
from tests.proxy.conftest import serve_app, wait_healthy
from tests.proxy.test_attach import _factory

AUDIENCE = "mcp-time"


@contextlib.asynccontextmanager
async def local_issuer(require_token: str | None = None) -> AsyncIterator[Issuer]:
    issuer = Issuer(require_token)
    async with serve_app(issuer) as base:
        issuer.base = base
        issuer.add_rsa("r1")
        issuer.add_ec("e1")
        yield issuer


def oidc_auth(issuer: Issuer, **extra: Any) -> IncomingAuthSettings:
    oidc = {"issuer": issuer.base, "audience": AUDIENCE, "insecureAllowHTTP": True, **extra}
    return IncomingAuthSettings.model_validate({"type": "oidc", "oidc": oidc})


def bad_tokens(issuer: Issuer) -> dict[str, str | None]:
    """What must be refused, by reason."""
    return {
        "missing": None,
        "not bearer": "Basic dXNlcjpwdw==",
        "garbage": "Bearer not-a-jwt",
        "expired": "Bearer " + issuer.token("r1", aud=AUDIENCE, exp=time.time() - 3600),
        "wrong audience": "Bearer " + issuer.token("r1", aud="someone-else"),
        "foreign issuer": "Bearer " + issuer.token("r1", aud=AUDIENCE, iss="https://evil.example"),
    }


async def assert_refused(
    http: aiohttp.ClientSession, method: str, url: str, authorization: str | None, why: str
) -> None:
    headers = dict(STREAMABLE_HTTP_HEADERS)
    if authorization is not None:
        headers["authorization"] = authorization
    body = orjson.dumps(initialize_request()) if method == "POST" else None
    async with http.request(method, url, data=body, headers=headers) as r:
        assert r.status == 401, (why, url, r.status)
        challenge = r.headers["WWW-Authenticate"]
        assert challenge.startswith('Bearer realm="mcp"'), why
        assert "resource_metadata=" in challenge and "/.well-known/oauth-protected-resource" in challenge
        if authorization is not None:
            assert 'error="invalid_token"' in challenge, why
        error = (await r.json())["error"]
        assert error["code"] == -32011 and error["message"], why


def client(url: str, token: str, mode: str = "legacy") -> Client:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), mode=mode)  # type: ignore[arg-type]


async def call_simple(c: Client) -> str:
    result = await c.call_tool("test_simple_text", {})
    text = result.content[0]
    assert isinstance(text, TextContent)
    return text.text


async def test_streamable_http_rejects_bad_tokens_and_serves_a_good_one() -> None:
    async with local_issuer() as issuer:
        app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1")
        async with serve_app(with_auth(app, oidc_auth(issuer))) as base, aiohttp.ClientSession() as http:
            for why, authorization in bad_tokens(issuer).items():
                await assert_refused(http, "POST", f"{base}/mcp", authorization, why)
                await assert_refused(http, "GET", f"{base}/mcp", authorization, why)
            # Nothing reached the server: no session was opened by any refused request.
            async with http.get(f"{base}/health") as r:  # /health stays open
                assert r.status == 200 and (await r.json())["sessions"] == 0
            async with http.get(f"{base}/.well-known/oauth-protected-resource") as r:
                meta = await r.json()
            assert meta["authorization_servers"] == [issuer.base]
            assert meta["resource"] == f"{base}/mcp" and meta["bearer_methods_supported"] == ["header"]
            async with http.get(f"{base}/.well-known/oauth-protected-resource/mcp") as r:
                assert r.status == 200
            # RS256 and ES256 tokens work end to end, in both protocol eras.
            for kid, mode in (("r1", "legacy"), ("e1", "2026-07-28")):
                async with client(f"{base}/mcp", issuer.token(kid, aud=AUDIENCE), mode) as c:
                    assert (await call_simple(c)).startswith("This is a simple text")


async def test_sse_transport_needs_a_token_on_the_stream_and_the_messages() -> None:
    async with local_issuer() as issuer:
        app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1", transport="sse")
        guarded = with_auth(app, oidc_auth(issuer), mcp_path="/sse")
        async with serve_app(guarded) as base, aiohttp.ClientSession() as http:
            for why, authorization in bad_tokens(issuer).items():
                await assert_refused(http, "GET", f"{base}/sse", authorization, why)
                await assert_refused(http, "POST", f"{base}/messages/?session_id=x", authorization, why)
            async with http.get(f"{base}/.well-known/oauth-protected-resource") as r:
                assert (await r.json())["resource"] == f"{base}/sse"
            headers = {"authorization": "Bearer " + issuer.token("r1", aud=AUDIENCE)}
            async with Client(sse_client(f"{base}/sse", headers=headers), mode="legacy") as c:
                assert (await call_simple(c)).startswith("This is a simple text")
            # The stream's own session id does not stand in for a token on its messages.
            async with http.get(f"{base}/sse", headers=headers) as stream:
                endpoint = ""
                async for raw in stream.content:
                    line = raw.decode().strip()
                    if line.startswith("data:"):
                        endpoint = line.removeprefix("data:").strip()
                        break
                assert endpoint.startswith("/messages/")
                await assert_refused(http, "POST", base + endpoint, None, "messages without a token")


async def test_remote_mode_checks_tokens_and_does_not_pass_them_upstream() -> None:
    seen: list[dict[str, str]] = []

    async def upstream(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"x/y")]})
        await send({"type": "http.response.body", "body": scope["path"].encode()})

    async with local_issuer() as issuer, serve_app(upstream) as remote:
        app = RemoteProxyApp(remote + "/mcp", {"X-Upstream-Key": "k"}, all_paths=True)
        async with serve_app(with_auth(app, oidc_auth(issuer))) as base, aiohttp.ClientSession() as http:
            for why, authorization in bad_tokens(issuer).items():
                await assert_refused(http, "POST", f"{base}/mcp", authorization, why)
            assert seen == []
            headers = {"authorization": "Bearer " + issuer.token("r1", aud=AUDIENCE)}
            for path in ("/mcp", "/sse", "/messages/"):
                async with http.get(base + path, headers=headers) as r:
                    assert r.status == 200 and await r.text() == path  # every path, same path upstream
        assert all("authorization" not in h and h["x-upstream-key"] == "k" for h in seen)

    # End to end with a real MCP server behind the remote proxy.
    async with local_issuer() as issuer:
        with harness.fixture_http() as remote_url:
            app = RemoteProxyApp(remote_url)
            async with serve_app(with_auth(app, oidc_auth(issuer))) as base:
                async with client(f"{base}/mcp", issuer.token("r1", aud=AUDIENCE)) as c:
                    assert (await call_simple(c)).startswith("This is a simple text")


async def test_attach_mode_is_guarded(tmp_path: Path) -> None:
    endpoint = AttachEndpoint()
    async with local_issuer() as issuer, endpoint.serving():
        app = build_stdio_app([], host="127.0.0.1", factory=_factory(endpoint, tmp_path))
        async with serve_app(with_auth(app, oidc_auth(issuer))) as base, aiohttp.ClientSession() as http:
            for why, authorization in bad_tokens(issuer).items():
                await assert_refused(http, "POST", f"{base}/mcp", authorization, why)
            async with client(f"{base}/mcp", issuer.token("e1", aud=AUDIENCE)) as c:
                assert (await call_simple(c)).startswith("This is a simple text")


async def test_service_account_tokens_with_an_authenticated_jwks_fetch(tmp_path: Path) -> None:
    """The `kubernetes` type: keys read with the pod's own token; namespace / account restricted."""
    token_file = tmp_path / "token"
    token_file.write_text("pod-token-1\n")
    async with local_issuer(require_token="pod-token-1") as issuer:
        auth = oidc_auth(
            issuer,
            jwksUrl=issuer.base + "/jwks",
            jwksTokenFile=str(token_file),
            serviceAccountNamespace="team-a",
        )
        app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1")
        async with serve_app(with_auth(app, auth)) as base, aiohttp.ClientSession() as http:
            other_ns = issuer.token("r1", aud=AUDIENCE, sub="system:serviceaccount:team-b:client")
            user = issuer.token("r1", aud=AUDIENCE, sub="user-1")
            await assert_refused(http, "POST", f"{base}/mcp", f"Bearer {other_ns}", "other namespace")
            await assert_refused(http, "POST", f"{base}/mcp", f"Bearer {user}", "not a service account")
            good = issuer.token("r1", aud=AUDIENCE, sub="system:serviceaccount:team-a:client")
            async with client(f"{base}/mcp", good) as c:
                assert (await call_simple(c)).startswith("This is a simple text")
        assert issuer.jwks_hits >= 1 and set(issuer.fetch_authorization) == {"Bearer pod-token-1"}


async def test_opaque_tokens_are_introspected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROXY_TEST_CLIENT_SECRET", "pw")
    async with local_issuer() as issuer:
        issuer.opaque["good-opaque"] = {"active": True, "iss": issuer.base, "aud": AUDIENCE, "sub": "u"}
        issuer.opaque["other-aud"] = {"active": True, "aud": "else"}
        issuer.opaque["expired"] = {"active": True, "exp": int(time.time()) - 3600}
        auth = oidc_auth(
            issuer,
            introspectionUrl=issuer.base + "/introspect",
            clientId="proxy",
            clientSecretEnv="PROXY_TEST_CLIENT_SECRET",
        )
        app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1")
        async with serve_app(with_auth(app, auth)) as base, aiohttp.ClientSession() as http:
            for token in ("unknown", "other-aud", "expired"):
                await assert_refused(http, "POST", f"{base}/mcp", f"Bearer {token}", token)
            async with client(f"{base}/mcp", "good-opaque") as c:
                assert (await call_simple(c)).startswith("This is a simple text")
        assert issuer.introspection_auth[-1] == "Basic cHJveHk6cHc="  # proxy:pw


def test_auth_config_file_with_oidc_file_and_overrides(tmp_path: Path) -> None:
    (tmp_path / "oidc.json").write_text(
        json.dumps({"issuer": "https://issuer.example", "audience": "shared", "scopes": ["a"]})
    )
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"type": "oidc", "oidcFile": "oidc.json", "oidc": {"audience": "mine"}}))
    cfg = load_auth_config(path)
    assert cfg.oidc is not None and cfg.oidc_file is None
    assert (cfg.oidc.issuer, cfg.oidc.audience, cfg.oidc.scopes) == ("https://issuer.example", "mine", ["a"])
    # Errors name the file and the field.
    path.write_text(json.dumps({"type": "oidc", "oidcFile": "missing.json"}))
    with pytest.raises(AuthConfigError, match=r"oidcFile: cannot read .*missing\.json"):
        load_auth_config(path)
    (tmp_path / "oidc.json").write_text(json.dumps({"issuer": "http://plain.example", "clientSecret": "x"}))
    path.write_text(json.dumps({"type": "oidc", "oidcFile": "oidc.json"}))
    with pytest.raises(AuthConfigError, match="clientSecret"):
        load_auth_config(path)
    (tmp_path / "oidc.json").write_text(json.dumps({"issuer": "http://plain.example"}))
    with pytest.raises(AuthConfigError, match=r"issuer: http:// needs insecureAllowHTTP"):
        load_auth_config(path)
    path.write_text(json.dumps({"type": "oidc"}))
    with pytest.raises(AuthConfigError, match=r"oidc: required when type is 'oidc'"):
        load_auth_config(path)


async def test_cli_enforces_the_auth_config_and_refuses_a_broken_one(tmp_path: Path) -> None:
    async with local_issuer() as issuer:
        # The settings come from a ConfigMap-like file; the auth config overrides the audience.
        (tmp_path / "oidc.json").write_text(
            json.dumps({"issuer": issuer.base, "audience": "shared", "insecureAllowHTTP": True})
        )
        auth = tmp_path / "auth.json"
        auth.write_text(json.dumps({"type": "oidc", "oidcFile": "oidc.json", "oidc": {"audience": AUDIENCE}}))
        port = harness.free_port()
        cli = [sys.executable, "-m", "mcpfleet.cli.main", "proxy", "--port", str(port)]
        cli += ["--auth-config", str(auth)]
        cmd = [*cli, "--", *harness.fixture_stdio_command()]
        proc = await asyncio.create_subprocess_exec(*cmd, stderr=subprocess.DEVNULL, env=dict(os.environ))
        try:
            base = f"http://127.0.0.1:{port}"
            await wait_healthy(base)
            async with aiohttp.ClientSession() as http:
                shared = "Bearer " + issuer.token("r1", aud="shared")
                await assert_refused(http, "POST", f"{base}/mcp", shared, "the ref's audience overrides")
                await assert_refused(http, "POST", f"{base}/mcp", None, "missing")
            async with client(f"{base}/mcp", issuer.token("r1", aud=AUDIENCE)) as c:
                assert (await call_simple(c)).startswith("This is a simple text")
        finally:
            proc.terminate()
            await proc.wait()
    auth.write_text(json.dumps({"type": "oidc", "oidcFile": "gone.json"}))
    broken = await asyncio.create_subprocess_exec(*cli, "--", "true", stderr=subprocess.PIPE)
    _, stderr = await asyncio.wait_for(broken.communicate(), 60)
    assert broken.returncode != 0 and "oidcFile: cannot read" in stderr.decode()


async def test_a_session_is_bound_to_the_subject_that_opened_it() -> None:
    """Alice's session id used with Bob's valid token: 404, as for an unknown session; Alice (also with
    a refreshed token) keeps using it, and Bob cannot DELETE it."""
    async with local_issuer() as issuer:
        app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1")
        async with serve_app(with_auth(app, oidc_auth(issuer))) as base, aiohttp.ClientSession() as http:
            alice = {
                **STREAMABLE_HTTP_HEADERS,
                "authorization": "Bearer " + issuer.token("r1", aud=AUDIENCE, sub="alice"),
            }
            bob = {
                **STREAMABLE_HTTP_HEADERS,
                "authorization": "Bearer " + issuer.token("r1", aud=AUDIENCE, sub="bob"),
            }
            async with http.post(f"{base}/mcp", data=orjson.dumps(initialize_request()), headers=alice) as r:
                assert r.status == 200
                sid = r.headers["mcp-session-id"]
            alice = {**alice, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            bob = {**bob, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            ping = orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            async with http.post(f"{base}/mcp", data=ping, headers=bob) as r:
                assert r.status == 404
                assert (await r.json())["error"]["message"] == "Session not found"
            async with http.delete(f"{base}/mcp", headers=bob) as r:
                assert r.status == 404
            refreshed = issuer.token("r1", aud=AUDIENCE, sub="alice", exp=2e9)
            async with http.post(
                f"{base}/mcp", data=ping, headers={**alice, "authorization": f"Bearer {refreshed}"}
            ) as r:
                assert r.status == 200
            async with http.delete(f"{base}/mcp", headers=alice) as r:
                assert r.status == 200


async def test_a_legacy_sse_session_is_bound_to_the_subject_that_opened_it() -> None:
    """The HTTP+SSE transport names its session in `?session_id=`: Bob's valid token cannot post
    into Alice's stream (404, as for an unknown session); Alice can."""
    async with local_issuer() as issuer:
        app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1", transport="sse")
        guarded = with_auth(app, oidc_auth(issuer), mcp_path="/sse")
        alice = {"authorization": "Bearer " + issuer.token("r1", aud=AUDIENCE, sub="alice")}
        bob = {"authorization": "Bearer " + issuer.token("r1", aud=AUDIENCE, sub="bob")}
        async with serve_app(guarded) as base, aiohttp.ClientSession() as http:
            async with http.get(f"{base}/sse", headers=alice) as stream:
                endpoint = ""
                async for raw in stream.content:
                    line = raw.decode().strip()
                    if line.startswith("data:"):
                        endpoint = line.removeprefix("data:").strip()
                        break
                assert "session_id=" in endpoint
                body = orjson.dumps(initialize_request())
                json_headers = {"content-type": "application/json"}
                async with http.post(base + endpoint, data=body, headers={**bob, **json_headers}) as r:
                    assert r.status == 404
                    assert (await r.json())["error"]["message"] == "Session not found"
                async with http.post(base + endpoint, data=body, headers={**alice, **json_headers}) as r:
                    assert r.status == 202
