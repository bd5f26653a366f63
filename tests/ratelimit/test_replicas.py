"""A 3-replica vMCP gateway with Redis session storage behind one round-robin front keeps a real MCP
SDK client's session: consecutive requests land on different replicas, and a replica killed
mid-session does not end it (both protocol eras)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client

from tests.ratelimit.roundrobin import RoundRobin
from tests.ratelimit.test_gateway_limits import _gateway_process, _stop
from tests.redis_server import RedisServer
from tests.vmcp.servers import Served, sdk_backend

MODES = ["legacy", "2026-07-28"]


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.mark.parametrize("mode", MODES)
async def test_three_replicas_keep_a_session_when_one_is_killed(
    served: Any, redis_server: RedisServer, tmp_path: Path, mode: str
) -> None:
    backend: Served = await served(sdk_backend("alpha").streamable_http_app())
    config = {
        "name": "scaled",
        "backends": [{"name": "alpha", "url": backend.url}],
        "sessionStorage": {"provider": "redis", "address": redis_server.address, "keyPrefix": "gw:"},
        # Generous limits: on, shared through Redis, never reached here.
        "rateLimiting": {"perUser": {"maxTokens": 1000, "refillPeriod": "1m"}},
    }
    env = {"MCPFLEET_REDIS_PASSWORD": redis_server.password}
    procs = await asyncio.gather(*(_gateway_process(config, tmp_path, env) for _ in range(3)))
    try:
        front = RoundRobin([url.removesuffix("/mcp") for _, url in procs])
        svc: Served = await served(front)
        async with Client(svc.url, mode=mode) as c:  # type: ignore[arg-type]
            for i in range(6):
                assert _text(await c.call_tool("alpha_echo", {"text": f"a{i}"})) == f"alpha:a{i}"
            replicas = {base for base, method in front.served if method == "POST"}
            assert len(replicas) == 3, front.served  # the session's requests went to every replica
            if mode == "legacy":
                keys = [k.decode() for k in redis_server.client().keys("gw:vmcp:local/scaled:session:*")]
                assert len(keys) == 1  # one client session, shared by the replicas
            # Kill one replica mid-session (SIGKILL: no goodbye), and go on.
            victim, _ = procs[1]
            victim.kill()
            await victim.wait()
            front.served.clear()
            for i in range(6):
                assert _text(await c.call_tool("alpha_upper", {"text": f"b{i}"})) == f"B{i}"
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"alpha_echo", "alpha_upper"} <= names
            survivors = {base for base, method in front.served if method == "POST"}
            assert len(survivors) == 2, front.served
    finally:
        await asyncio.gather(*(_stop(p) for p, _ in procs))
