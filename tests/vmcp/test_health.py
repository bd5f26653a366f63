"""Health, failure handling and the operations endpoints, with real backends killed under load."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from mcp.client.client import Client

from mcpfleet.vmcp.health import RECONNECT_MAX, RECONNECT_WINDOW, reconnect_delay
from mcpfleet.vmcp.status import to_resource_status
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend, Served, sdk_backend
from tests.waiting import wait_until

FAST = {
    "failureHandling": {
        "healthCheckInterval": "200ms",
        "healthCheckTimeout": "1s",
        "unhealthyThreshold": 2,
        "partialFailureMode": "best_effort",
    }
}


async def status(gw: Served) -> dict[str, Any]:
    async with aiohttp.ClientSession() as h, h.get(gw.base + "/status") as r:
        return await r.json()  # type: ignore[no-any-return]


async def backend_state(gw: Served, name: str) -> str:
    return next(b["state"] for b in (await status(gw))["backends"] if b["name"] == name)


async def wait_state(gw: Served, name: str, state: str, time_limit: float = 10.0) -> None:
    async def reached() -> bool:
        return await backend_state(gw, name) == state

    async def context() -> str:
        return f"status: {await status(gw)}"

    await wait_until(reached, f"{name} to become {state}", within=time_limit, context=context)


async def test_kill_backend_under_load(gateway: GatewayFactory, served: Any) -> None:
    stable = await served(sdk_backend("stable").streamable_http_app())
    victim_app = sdk_backend("victim").streamable_http_app()
    victim = await served(victim_app)
    gw = await gateway(
        {
            "backends": [{"name": "stable", "url": stable.url}, {"name": "victim", "url": victim.url}],
            "operational": FAST,
        }
    )

    stable_ok = 0
    stable_err: list[str] = []
    stop = asyncio.Event()

    async def load(c: Client) -> None:
        nonlocal stable_ok
        while not stop.is_set():
            try:
                r = await c.call_tool("stable_echo", {"text": "x"})
            except Exception as exc:  # recorded, and asserted on below with the reason
                stable_err.append(repr(exc))
                continue
            if r.is_error:
                stable_err.append(str(r.content))
            else:
                stable_ok += 1

    async with Client(gw.url, mode="legacy") as c1, Client(gw.url, mode="2026-07-28") as c2:
        workers = [asyncio.create_task(load(c)) for c in (c1, c2, c1, c2)]
        await asyncio.sleep(0.3)
        await victim.stop()  # the backend dies while clients are calling the other one
        try:
            await c1.call_tool("victim_echo", {"text": "x"})
            raise AssertionError("a call to the dead backend must fail")
        except Exception as exc:
            assert "victim" in str(exc) and "unavailable" in str(exc)
        await wait_state(gw, "victim", "unavailable")
        st = await status(gw)
        v = next(b for b in st["backends"] if b["name"] == "victim")
        assert v["error"] and v["consecutiveFailures"] >= 2 and v["lastCheck"]
        assert st["phase"] == "Degraded"
        # best_effort: the dead backend's tools are withdrawn, the others stay listed.
        names = {t.name for t in (await c1.list_tools()).tools}
        assert "stable_echo" in names and "victim_echo" not in names
        before = stable_ok
        await asyncio.sleep(0.5)
        assert stable_ok > before  # the others keep answering
        # It comes back on the same port: the health loop reconnects and re-lists it.
        await served(sdk_backend("victim").streamable_http_app(), victim.port)
        await wait_state(gw, "victim", "ready")
        for _ in range(50):
            if "victim_echo" in {t.name for t in (await c1.list_tools()).tools}:
                break
            await asyncio.sleep(0.1)
        r = await c2.call_tool("victim_echo", {"text": "back"})
        assert not r.is_error and r.content[0].text == "victim:back"  # type: ignore[union-attr]
        stop.set()
        await asyncio.gather(*workers)
    assert stable_err == [], f"calls to the healthy backend failed: {stable_err[:5]}"
    assert stable_ok > 20


async def test_fail_mode_readiness_and_metrics(gateway: GatewayFactory, served: Any) -> None:
    good = await served(JsonRpcBackend("good"))
    bad_port = Served(None).port  # nothing listens there
    ops = {
        "failureHandling": {
            "healthCheckInterval": "100ms",
            "unhealthyThreshold": 1,
            "partialFailureMode": "fail",
        }
    }
    gw = await gateway(
        {
            "backends": [
                {"name": "good", "url": good.url},
                {"name": "gone", "url": f"http://127.0.0.1:{bad_port}/mcp"},
            ],
            "operational": ops,
        }
    )
    async with aiohttp.ClientSession() as h:
        async with h.get(gw.base + "/health") as r:
            assert r.status == 200
        await wait_state(gw, "gone", "unavailable")
        async with h.get(gw.base + "/readyz") as r:
            assert r.status == 503  # fail mode: one backend down means not ready
    hdr = dict(STREAMABLE_HTTP_HEADERS)
    init = initialize_request()
    async with aiohttp.ClientSession() as h:
        async with h.post(gw.url, json=init, headers=hdr) as r:
            hdr["mcp-session-id"] = r.headers["mcp-session-id"]
        # Calls to the healthy backend still work; aggregated lists refuse in `fail` mode.
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "good_echo", "arguments": {"a": 1}},
        }
        async with h.post(gw.url, json=call, headers=hdr) as r:
            assert (await r.json())["result"]["isError"] is False
        async with h.post(gw.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=hdr) as r:
            err = (await r.json())["error"]
        assert "gone" in err["message"] and "fail" in err["message"]
    async with aiohttp.ClientSession() as h, h.get(gw.base + "/metrics") as r:
        body = await r.text()
    assert 'vmcp_backend_requests_total{backend="good",method="tools/call"} 1.0' in body
    assert "vmcp_backend_request_duration_seconds_bucket" in body


async def test_circuit_breaker_fails_fast(gateway: GatewayFactory, served: Any) -> None:
    be = JsonRpcBackend("cb")
    s = await served(be)
    ops = {
        "failureHandling": {
            "healthCheckInterval": "1h",
            "unhealthyThreshold": 5,
            "circuitBreaker": {"enabled": True, "failureThreshold": 2, "timeout": "300ms"},
        }
    }
    gw = await gateway({"backends": [{"name": "cb", "url": s.url}], "operational": ops})
    async with Client(gw.url, mode="legacy") as c:
        assert not (await c.call_tool("cb_echo", {})).is_error
        await s.stop()
        for _ in range(2):
            try:
                await c.call_tool("cb_echo", {})
            except Exception:
                pass
        st = await status(gw)
        assert st["backends"][0]["circuitBreaker"] == "open"
        t0 = asyncio.get_running_loop().time()
        try:
            await c.call_tool("cb_echo", {})
        except Exception as exc:
            assert "circuit breaker open" in str(exc)
        assert asyncio.get_running_loop().time() - t0 < 0.2
        await served(be, s.port)
        await asyncio.sleep(0.35)  # half-open after the time_limit: one trial call goes through
        assert not (await c.call_tool("cb_echo", {})).is_error
        closed = (await status(gw))["backends"][0]
        assert closed["circuitBreaker"] == "closed"
        # The time of the last change (open -> half-open -> closed): reported as circuitLastChanged.
        changed = time.strptime(closed["circuitLastChanged"], "%Y-%m-%dT%H:%M:%SZ")
        assert abs(time.mktime(changed) - time.mktime(time.gmtime())) < 10
        assert to_resource_status(await status(gw))["discoveredBackends"][0]["circuitLastChanged"]


async def test_status_file_writer(gateway: GatewayFactory, served: Any, tmp_path: Any) -> None:
    be = await served(JsonRpcBackend("filed", tools=["a", "b"]))
    path = tmp_path / "status.json"
    ops = {"failureHandling": {"statusReportingInterval": "200ms"}}
    await gateway(
        {"name": "filegw", "backends": [{"name": "filed", "url": be.url}], "operational": ops},
        status_file=str(path),
    )
    for _ in range(50):
        if path.exists():
            break
        await asyncio.sleep(0.1)
    doc = json.loads(path.read_text())
    assert doc["name"] == "filegw" and doc["phase"] == "Ready"
    # ToolHive's discoveredBackends fields: the negotiated revision and the outgoing auth.
    filed = to_resource_status(doc)["discoveredBackends"][0]
    assert filed["mcpRevision"] == doc["backends"][0]["mcpRevision"] and filed["mcpRevision"]
    assert filed["authType"] == "unauthenticated" and "authConfigRef" not in filed
    assert "circuitLastChanged" not in filed  # no circuit breaker configured
    assert doc["backends"][0]["name"] == "filed" and doc["backends"][0]["counts"]["tools"] == 2
    assert doc["counts"]["tools"] == 2


def test_reconnect_schedule_is_quick_and_bounded() -> None:
    """Extra connect tries: 0.1 s doubling to 1 s (a backend that became reachable serves within
    about a second), only in the window after it joined, never as often as the health checks."""
    delays: list[float] = []
    since = 0.0
    while (delay := reconnect_delay(len(delays), since, check_interval=30.0)) is not None:
        delays.append(delay)
        since += delay
    assert delays[:5] == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert max(delays) == RECONNECT_MAX == 1.0
    assert sum(delays) <= RECONNECT_WINDOW
    assert len(delays) <= 125  # a backend that stays down: ~1 try a second for two minutes, then none
    # Health checks at least as often as the extra tries would be: no extra tries at all.
    assert reconnect_delay(0, 0.0, check_interval=0.1) is None
    assert reconnect_delay(3, 0.0, check_interval=0.5) is None  # 0.8 s would come after the check


@dataclass
class Starting:
    """A backend whose server is still starting: its first `refusals` requests get 503, then it
    answers as `backend`. `attempts` has the time of each request seen while refusing."""

    backend: JsonRpcBackend
    refusals: int
    attempts: list[float] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and len(self.attempts) < self.refusals:
            self.attempts.append(time.monotonic())
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b"starting"})
            return
        await self.backend(scope, receive, send)


async def test_backend_connects_between_health_checks(gateway: GatewayFactory, served: Any) -> None:
    """A backend that was not reachable when the gateway started is connected by the extra tries
    (the health check comes once an hour here), and those tries count no failures."""
    starting = Starting(JsonRpcBackend("late", tools=["echo"]), refusals=4)
    be = await served(starting)
    ops = {"failureHandling": {"healthCheckInterval": "1h", "unhealthyThreshold": 3}}
    gw = await gateway({"backends": [{"name": "late", "url": be.url}], "operational": ops})
    await wait_state(gw, "late", "ready")
    # Refused: the connect at start-up, then extra tries after 0.1, 0.2 and 0.4 s; the 5th answered.
    assert len(starting.attempts) == 4
    gaps = [b - a for a, b in itertools.pairwise(starting.attempts)]
    assert all(gap >= want - 0.02 for gap, want in zip(gaps, [0.1, 0.2, 0.4], strict=True)), gaps
    assert starting.backend.calls.get("initialize") == 1
    st = await status(gw)
    late = st["backends"][0]
    assert late["connected"] and late["consecutiveFailures"] == 0 and late["counts"]["tools"] == 1
    assert st["phase"] == "Ready"


async def test_extra_tries_are_not_counted_as_failures(gateway: GatewayFactory, served: Any) -> None:
    """While a backend keeps refusing, only the counted connects (start-up, health checks) move
    its failure count and state: the extra tries do not make it `unavailable` sooner."""
    starting = Starting(JsonRpcBackend("slow"), refusals=1_000)
    be = await served(starting)
    ops = {"failureHandling": {"healthCheckInterval": "1h", "unhealthyThreshold": 2}}
    gw = await gateway({"backends": [{"name": "slow", "url": be.url}], "operational": ops})

    async def tried_often() -> bool:
        return len(starting.attempts) >= 5

    await wait_until(tried_often, "five connect tries", within=30.0)
    slow = (await status(gw))["backends"][0]
    assert slow["consecutiveFailures"] == 1 and slow["state"] == "unknown" and not slow["connected"]
