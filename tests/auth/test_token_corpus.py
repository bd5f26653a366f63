"""The token corpus (tests/auth/corpus.py) against the real incoming-auth layer of both services.

The proxy (`mcpfleet.auth.asgi.AuthGuard` in front of a remote-mode proxy) and the vMCP gateway
(`VMCPApp` built by `build_app`) are served by uvicorn in-process, with the local issuer of
tests/oidc.py. Every hostile token gets 401 with a `Bearer` challenge and the JSON-RPC error body,
never a 5xx, no traceback is logged, nothing reaches the upstream, and a good token still works after
the whole corpus. Key rotation is followed: a new key is accepted at once, a retired key is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import jwt
import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from mcpfleet.auth.oidc import IncomingAuthSettings
from mcpfleet.proxy.remote import RemoteProxyApp
from mcpfleet.proxy.serve import with_auth
from mcpfleet.vmcp.config import parse_config
from mcpfleet.vmcp.server import ServeOptions, build_app
from tests.auth.corpus import hostile_tokens
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.oidc import Issuer
from tests.proxy.conftest import serve_app
from tests.vmcp.servers import JsonRpcBackend, free_port

AUDIENCE = "mcp-corpus"
Target = Callable[[Issuer], contextlib.AbstractAsyncContextManager[tuple[str, list[int]]]]


def oidc(issuer: Issuer) -> dict[str, Any]:
    return {"issuer": issuer.base, "audience": AUDIENCE, "insecureAllowHTTP": True}


@contextlib.asynccontextmanager
async def proxy_target(issuer: Issuer) -> AsyncIterator[tuple[str, list[int]]]:
    """A remote-mode proxy behind `--auth-config`; yields its /mcp URL and the upstream's hit list."""
    hits: list[int] = []

    async def upstream(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        hits.append(1)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"x/y")]})
        await send({"type": "http.response.body", "body": b"ok"})

    auth = IncomingAuthSettings.model_validate({"type": "oidc", "oidc": oidc(issuer)})
    async with serve_app(upstream) as remote:
        async with serve_app(with_auth(RemoteProxyApp(remote + "/mcp"), auth)) as base:
            yield f"{base}/mcp", hits


@contextlib.asynccontextmanager
async def vmcp_target(issuer: Issuer) -> AsyncIterator[tuple[str, list[int]]]:
    """The vMCP gateway with OIDC incoming auth over one backend; yields /mcp and backend hits."""
    backend = JsonRpcBackend("be")
    hits: list[int] = []
    async with serve_app(backend) as backend_base:
        port = free_port()
        config = parse_config(
            {
                "backends": [{"name": "be", "url": backend_base + "/mcp"}],
                "incomingAuth": {"type": "oidc", "oidc": oidc(issuer)},
            }
        )
        app = build_app(config, ServeOptions(host="127.0.0.1", port=port))
        try:
            async with serve_app(app) as base:
                before = sum(backend.calls.values())

                async def count() -> None:
                    hits[:] = [1] * (sum(backend.calls.values()) - before)

                yield f"{base}/mcp", hits
                await count()
        finally:
            await app.aclose()


@contextlib.asynccontextmanager
async def local_issuer() -> AsyncIterator[Issuer]:
    issuer = Issuer()
    async with serve_app(issuer) as base:
        issuer.base = base
        issuer.add_rsa("r1")
        issuer.add_ec("e1")
        yield issuer


async def attempt(http: aiohttp.ClientSession, url: str, authorization: str | None) -> tuple[int, str, Any]:
    headers = dict(STREAMABLE_HTTP_HEADERS)
    if authorization is not None:
        headers["authorization"] = authorization
    async with http.post(url, data=orjson.dumps(initialize_request()), headers=headers) as r:
        raw = await r.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = raw
        return r.status, r.headers.get("WWW-Authenticate", ""), body


def refused(status: int, challenge: str, body: Any, sent: bool) -> str | None:
    """Why an answer is not a proper 401 (None when it is)."""
    if status != 401:
        return f"HTTP {status}: {str(body)[:200]}"
    if not challenge.startswith("Bearer"):
        return f"challenge {challenge!r}"
    if sent and 'error="invalid_token"' not in challenge:
        return f"no error in challenge {challenge!r}"
    if not isinstance(body, dict) or body.get("error", {}).get("code") != -32011:
        return f"body {str(body)[:200]}"
    return None


async def run_corpus(target: Target, caplog: pytest.LogCaptureFixture) -> int:
    caplog.set_level(logging.WARNING)
    async with local_issuer() as issuer, target(issuer) as (url, hits):
        corpus = hostile_tokens(issuer, AUDIENCE)
        failures: dict[str, str] = {}
        async with aiohttp.ClientSession() as http:
            for why, authorization in corpus.items():
                status, challenge, body = await attempt(http, url, authorization)
                problem = refused(status, challenge, body, bool(authorization and " " in authorization))
                if problem is not None:
                    failures[why] = problem
            assert failures == {}, failures
            assert hits == [], "a refused request reached the upstream"
            # Still serving: a good token of each key type works after the corpus.
            for kid in ("r1", "e1"):
                status, _, body = await attempt(http, url, "Bearer " + issuer.token(kid, aud=AUDIENCE))
                assert status == 200, (kid, body)
            await check_rotation(http, url, issuer)
    tracebacks = [r for r in caplog.records if r.exc_info and r.exc_info[0] is not None]
    assert tracebacks == [], [r.getMessage() for r in tracebacks]
    return len(corpus)


async def check_rotation(http: aiohttp.ClientSession, url: str, issuer: Issuer) -> None:
    """JWKS rotation: a key published later is accepted at once; a retired or replaced key is not."""
    await asyncio.sleep(1.1)  # unknown-kid refetches are limited to one a second
    issuer.add_rsa("r2")
    status, _, _ = await attempt(http, url, "Bearer " + issuer.token("r2", aud=AUDIENCE))
    assert status == 200
    retired = issuer.token("r1", aud=AUDIENCE)
    del issuer.keys["r1"]
    issuer.add_ec("e2")
    await asyncio.sleep(1.1)
    status, _, _ = await attempt(http, url, "Bearer " + issuer.token("e2", aud=AUDIENCE))
    assert status == 200  # the refetch that found e2 dropped r1
    status, challenge, body = await attempt(http, url, "Bearer " + retired)
    assert refused(status, challenge, body, True) is None
    # The same kid now names another key: tokens of the old key are refused.
    old = jwt.encode(
        {"iss": issuer.base, "aud": AUDIENCE, "exp": int(time.time()) + 60},
        rsa.generate_private_key(public_exponent=65537, key_size=2048),
        algorithm="RS256",
        headers={"kid": "r2"},
    )
    status, challenge, body = await attempt(http, url, "Bearer " + old)
    assert refused(status, challenge, body, True) is None


async def test_proxy_refuses_every_hostile_token(caplog: pytest.LogCaptureFixture) -> None:
    count = await run_corpus(proxy_target, caplog)
    assert count >= 75


async def test_vmcp_refuses_every_hostile_token(caplog: pytest.LogCaptureFixture) -> None:
    count = await run_corpus(vmcp_target, caplog)
    assert count >= 75
