"""Rate limits on the stdio proxy (`rateLimiting` from the run config): per user behind incoming
OIDC, per tool, HTTP 429 with Retry-After and the JSON-RPC error (the SDK client's error in both
eras), and the refill."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import aiohttp
import orjson
import pytest
from mcp.shared.exceptions import MCPError

from mcpfleet.api.policy import AuditConfig
from mcpfleet.api.ratelimit import RateLimiting
from mcpfleet.policy.audit import AuditLog
from mcpfleet.policy.guard import Policy
from mcpfleet.proxy.serve import build_stdio_app, with_auth
from mcpfleet.ratelimit import RATE_LIMITED, build
from tests.conformance import harness
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.proxy.conftest import serve_app
from tests.proxy.test_auth import AUDIENCE, call_simple, client, local_issuer, oidc_auth

LIMITS = RateLimiting.model_validate(
    {
        "perUser": {"maxTokens": 4, "refillPeriod": "1h"},
        "tools": [{"name": "test_simple_text", "shared": {"maxTokens": 2, "refillPeriod": "1h"}}],
    }
)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_proxy_limits_per_tool_and_per_user(mode: str) -> None:
    limiter = build(LIMITS, None, "test/proxy")
    assert limiter is not None
    async with local_issuer() as issuer:
        app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1")
        async with serve_app(with_auth(app, oidc_auth(issuer), limiter=limiter)) as base:
            url = f"{base}/mcp"
            alice = issuer.token("r1", aud=AUDIENCE, sub="alice")
            async with client(url, alice, mode) as c:
                # The tool's shared bucket (2) runs out first...
                await call_simple(c)
                await call_simple(c)
                with pytest.raises(MCPError) as err:
                    await call_simple(c)
                assert err.value.error.code == RATE_LIMITED
                assert "tool 'test_simple_text' shared" in err.value.error.message
                # ...the refused call took no perUser token; the user's bucket (4, with whatever the
                # SDK's own requests took) refuses within a few more requests.
                refused = None
                for _ in range(6):
                    try:
                        await c.list_tools()
                    except MCPError as exc:
                        refused = exc
                        break
                assert refused is not None and "(perUser)" in refused.error.message
            # Another user has a bucket of their own (but the same exhausted tool bucket).
            async with client(url, issuer.token("r1", aud=AUDIENCE, sub="bob"), mode) as c:
                await c.list_tools()
                with pytest.raises(MCPError, match="tool 'test_simple_text' shared"):
                    await call_simple(c)


async def test_proxy_answers_429_with_retry_after_and_refills() -> None:
    # One token every 10 s: far more than the three requests take even on a loaded machine.
    limits = RateLimiting.model_validate({"shared": {"maxTokens": 2, "refillPeriod": "20s"}})
    limiter = build(limits, None, "test/proxy")
    assert limiter is not None
    app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1")
    async with serve_app(with_auth(app, None, limiter=limiter)) as base, aiohttp.ClientSession() as http:
        url = f"{base}/mcp"
        hdr = dict(STREAMABLE_HTTP_HEADERS)
        async with http.post(url, json=initialize_request(), headers=hdr) as r:  # free
            assert r.status == 200
            hdr["mcp-session-id"] = r.headers["mcp-session-id"]
        # ping is free and answered by the child: once it answers, the child is up, so the timed
        # requests below do not wait for its start (seconds on a loaded machine).
        async with http.post(url, json={"jsonrpc": "2.0", "id": "p", "method": "ping"}, headers=hdr) as r:
            assert r.status == 200 and b'"result"' in await r.read()
        call = {"jsonrpc": "2.0", "method": "tools/list"}
        statuses = []
        for i in range(3):
            async with http.post(url, json={**call, "id": i}, headers=hdr) as r:
                statuses.append(r.status)
                last = (r.headers.get("retry-after"), await r.read())
        assert statuses == [200, 200, 429]
        error = orjson.loads(last[1])
        assert error["id"] == 2 and error["error"]["code"] == RATE_LIMITED
        wait = error["error"]["data"]["retryAfter"]
        assert 0 < wait <= 10 and last[0] == str(math.ceil(wait))
        await asyncio.sleep(wait + 0.1)
        async with http.post(url, json={**call, "id": 3}, headers=hdr) as r:
            assert r.status == 200


async def test_proxy_audits_a_rate_limited_request(tmp_path: Path) -> None:
    """The limiter answers before the policy middleware; the refusal still leaves one audit event
    (outcome rate_limited, the limit as the reason), and the passed requests theirs."""
    limiter = build(
        RateLimiting.model_validate({"shared": {"maxTokens": 1, "refillPeriod": "1h"}}), None, "t"
    )
    assert limiter is not None
    audit_file = tmp_path / "audit.jsonl"
    policy = Policy(audit=AuditLog(AuditConfig(enabled=True, log_file=str(audit_file)), "proxy"))
    app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1")
    served = with_auth(app, None, policy=policy, limiter=limiter)
    async with serve_app(served) as base, aiohttp.ClientSession() as http:
        url = f"{base}/mcp"
        hdr = dict(STREAMABLE_HTTP_HEADERS)
        async with http.post(url, json=initialize_request(), headers=hdr) as r:  # free
            hdr["mcp-session-id"] = r.headers["mcp-session-id"]
        call = {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"name": "test_simple_text", "arguments": {}},
        }
        statuses = []
        for i in (11, 12):
            async with http.post(url, json={**call, "id": i}, headers=hdr) as r:
                statuses.append(r.status)
                await r.read()
    assert statuses == [200, 429]
    events = [orjson.loads(line) for line in audit_file.read_text().splitlines()]
    calls = {e["requestId"]: e for e in events if e["method"] == "tools/call"}
    assert calls[11]["outcome"] == "success"
    refused = calls[12]
    assert refused["outcome"] == "rate_limited"
    assert "rate limit exceeded (shared)" in refused["reason"]
    assert refused["target"] == {"type": "tool", "name": "test_simple_text"}
    assert refused["sessionId"] == hdr["mcp-session-id"]
