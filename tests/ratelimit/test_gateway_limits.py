"""Rate limits on the vMCP gateway (`config.rateLimiting`): per user, per tool, HTTP 429 with
Retry-After and a JSON-RPC error naming the limit, refused calls never reach a backend, buckets
refill; both protocol eras through the MCP SDK client; Redis-shared buckets across two gateway
processes."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from mcpfleet.ratelimit import RATE_LIMITED
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.oidc import Issuer
from tests.redis_server import RedisServer
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend, Served, free_port, sdk_backend
from tests.vmcp.test_auth import post

HDR = dict(STREAMABLE_HTTP_HEADERS)
REPO = Path(__file__).resolve().parents[2]
MODES = ["legacy", "2026-07-28"]


def _call(i: int, tool: str = "be_echo") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": tool, "arguments": {}}}


async def _session(h: aiohttp.ClientSession, url: str, token: str) -> dict[str, str]:
    headers = {**HDR, "authorization": f"Bearer {token}"}
    status, got, _ = await post(h, url, initialize_request(), headers)
    assert status == 200
    return {**headers, "mcp-session-id": got["mcp-session-id"]}


async def test_per_user_limit_answers_429_with_retry_after_and_never_reaches_the_backend(
    issuer: Issuer, gateway: GatewayFactory, served: Any
) -> None:
    be = JsonRpcBackend("be")
    s = await served(be)
    issuer.add_rsa("k")
    auth = {"type": "oidc", "oidc": {"issuer": issuer.base, "audience": "vmcp", "insecureAllowHTTP": True}}
    # One token every 5 s: far more than the requests between take even on a loaded machine.
    limits = {"perUser": {"maxTokens": 2, "refillPeriod": "10s"}}
    gw = await gateway(
        {"backends": [{"name": "be", "url": s.url}], "incomingAuth": auth, "rateLimiting": limits}
    )
    async with aiohttp.ClientSession() as h:
        alice = await _session(h, gw.url, issuer.token("k", sub="alice"))
        bob = await _session(h, gw.url, issuer.token("k", sub="bob"))
        for i in range(2):
            status, _, body = await post(h, gw.url, _call(i), alice)
            assert status == 200 and "result" in body
        before = be.calls.get("tools/call", 0)
        status, headers, body = await post(h, gw.url, _call(7), alice)
        assert status == 429
        wait = body["error"]["data"]["retryAfter"]
        assert 0 < wait <= 5
        assert headers["Retry-After"] == str(math.ceil(wait))  # whole seconds, rounded up
        assert headers["mcp-session-id"] == alice["mcp-session-id"]
        assert body["id"] == 7 and body["error"]["code"] == RATE_LIMITED
        assert body["error"]["message"] == f"rate limit exceeded (perUser); retry after {math.ceil(wait)}s"
        assert body["error"]["data"]["limit"] == "perUser"
        assert be.calls.get("tools/call", 0) == before  # the refused call never reached the backend
        # Bob has his own bucket; ping stays free for Alice.
        status, _, body = await post(h, gw.url, _call(8), bob)
        assert status == 200 and "result" in body
        status, _, body = await post(h, gw.url, {"jsonrpc": "2.0", "id": 9, "method": "ping"}, alice)
        assert status == 200 and body["result"] == {}
        # The bucket refills: after the retry-after, Alice may call again.
        await asyncio.sleep(wait + 0.1)
        status, _, body = await post(h, gw.url, _call(10), alice)
        assert status == 200 and "result" in body


@pytest.mark.parametrize("mode", MODES)
async def test_per_tool_limit_through_the_sdk_client(gateway: GatewayFactory, served: Any, mode: str) -> None:
    a = await served(sdk_backend("alpha").streamable_http_app())
    limits = {"tools": [{"name": "alpha_upper", "shared": {"maxTokens": 2, "refillPeriod": "1h"}}]}
    gw = await gateway({"name": "t", "backends": [{"name": "alpha", "url": a.url}], "rateLimiting": limits})
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        for _ in range(2):
            await c.call_tool("alpha_upper", {"text": "x"})
        with pytest.raises(MCPError) as err:
            await c.call_tool("alpha_upper", {"text": "x"})
        assert err.value.error.code == RATE_LIMITED
        # 2 tokens per hour: the next one 30 min after the first call, less the time since.
        found = re.fullmatch(
            r"rate limit exceeded \(tool 'alpha_upper' shared\); retry after (\d+)s", err.value.error.message
        )
        assert found is not None and 1700 < int(found[1]) <= 1800
        # Other tools and lists are not limited by the tool's bucket.
        for _ in range(5):
            await c.call_tool("alpha_echo", {"text": "y"})
        assert {t.name for t in (await c.list_tools()).tools} >= {"alpha_upper", "alpha_echo"}


async def _gateway_process(
    config: dict[str, Any], tmp: Path, env: dict[str, str]
) -> tuple[asyncio.subprocess.Process, str]:
    """`mcpfleet vmcp serve` as its own process (a replica); returns it and its /mcp URL once ready."""
    port = free_port()
    cfg = tmp / f"vmcp-{port}.json"
    cfg.write_text(json.dumps(config))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "mcpfleet.cli.main", "vmcp", "serve", "-c", str(cfg), "--port", str(port)),
        env={**os.environ, **env},
        cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    async with aiohttp.ClientSession() as h:
        for _ in range(1200):
            try:
                async with h.get(f"http://127.0.0.1:{port}/readyz") as r:
                    if r.status == 200:
                        return proc, f"http://127.0.0.1:{port}/mcp"
            except aiohttp.ClientError:
                pass
            assert proc.returncode is None, "the gateway process exited"
            await asyncio.sleep(0.1)
    proc.kill()
    raise AssertionError("the gateway process did not get ready in 120 s")


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def test_redis_buckets_are_shared_by_two_gateway_processes(
    served: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    be = JsonRpcBackend("be")
    s: Served = await served(be)
    config = {
        "name": "shared",
        "backends": [{"name": "be", "url": s.url}],
        "rateLimiting": {"shared": {"maxTokens": 4, "refillPeriod": "1h"}},
        "sessionStorage": {"provider": "redis", "address": redis_server.address},
    }
    env = {"MCPFLEET_REDIS_PASSWORD": redis_server.password}
    procs = await asyncio.gather(*(_gateway_process(config, tmp_path, env) for _ in range(2)))
    try:
        (_, url1), (_, url2) = procs
        async with aiohttp.ClientSession() as h:
            sessions = []
            for url in (url1, url2):
                _, headers, _ = await post(h, url, initialize_request(), HDR)
                sessions.append((url, {**HDR, "mcp-session-id": headers["mcp-session-id"]}))
            statuses = []
            for i in range(8):  # alternate replicas: 4 tokens in all, not 4 per replica
                url, headers = sessions[i % 2]
                statuses.append((await post(h, url, _call(i), headers))[0])
            assert statuses == [200, 200, 200, 200, 429, 429, 429, 429]
        assert be.calls.get("tools/call", 0) == 4
        assert redis_server.client().exists("ratelimit:local/shared:shared")
    finally:
        await asyncio.gather(*(_stop(p) for p, _ in procs))


async def test_a_rate_limited_request_is_audited(
    gateway: GatewayFactory, served: Any, tmp_path: Path
) -> None:
    """Refused before dispatch (which audits the others), the request still leaves one audit event:
    outcome rate_limited, the limit as the reason, the caller's session."""
    be = JsonRpcBackend("be")
    s = await served(be)
    audit_file = tmp_path / "audit.jsonl"
    gw = await gateway(
        {
            "backends": [{"name": "be", "url": s.url}],
            "rateLimiting": {"shared": {"maxTokens": 1, "refillPeriod": "1h"}},
            "audit": {"enabled": True, "logFile": str(audit_file)},
        }
    )
    async with aiohttp.ClientSession() as h:
        status, got, _ = await post(h, gw.url, initialize_request(), HDR)
        assert status == 200
        headers = {**HDR, "mcp-session-id": got["mcp-session-id"]}
        status, _, body = await post(h, gw.url, _call(1), headers)
        assert status == 200 and "result" in body
        status, _, body = await post(h, gw.url, _call(2), headers)
        assert status == 429 and body["error"]["code"] == RATE_LIMITED
    events = [json.loads(line) for line in audit_file.read_text().splitlines()]
    calls = {e["requestId"]: e for e in events if e["method"] == "tools/call"}
    assert calls[1]["outcome"] == "success"
    refused = calls[2]
    assert refused["outcome"] == "rate_limited"
    assert refused["reason"].startswith("rate limit exceeded (shared)")
    assert refused["target"] == {"type": "tool", "name": "be_echo"}
    assert refused["sessionId"] == headers["mcp-session-id"]
