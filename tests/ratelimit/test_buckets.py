"""Token buckets (mcpfleet.ratelimit.buckets): per server, per user, per tool, refill, retry-after;
the same semantics in memory and in a real Redis (atomic Lua script), shared by two limiters."""

from __future__ import annotations

import asyncio
import os

import pytest

from mcpfleet.api.ratelimit import RateLimiting, SessionStorage
from mcpfleet.ratelimit import build
from mcpfleet.ratelimit.buckets import Limiter, MemoryStore, RedisStore
from mcpfleet.redisconn import redis_client
from tests.redis_server import RedisServer

LIMITS = RateLimiting.model_validate(
    {
        "shared": {"maxTokens": 100, "refillPeriod": "1m"},
        "perUser": {"maxTokens": 3, "refillPeriod": "30s"},
        "tools": [{"name": "expensive", "shared": {"maxTokens": 2, "refillPeriod": "10s"}}],
    }
)


def test_per_user_buckets_are_independent_and_refill_evenly() -> None:
    limiter = Limiter(LIMITS, MemoryStore(), "ns/gw")
    store = limiter.store
    assert isinstance(store, MemoryStore)
    alice = limiter.buckets_for("alice", "tools/list", None)
    bob = limiter.buckets_for("bob", "tools/list", None)
    for _ in range(3):
        assert store.take_now(alice, 0.0) == (0.0, -1)
    wait, worst = store.take_now(alice, 0.0)
    assert alice[worst].label == "perUser"
    assert wait == pytest.approx(10.0)  # 3 tokens per 30 s: one every 10 s
    assert store.take_now(bob, 0.0) == (0.0, -1)  # bob has his own bucket
    # Refill: 5 s gives half a token (still refused, 5 s to go), 10 s a whole one.
    assert store.take_now(alice, 5.0)[0] == pytest.approx(5.0)
    assert store.take_now(alice, 10.0) == (0.0, -1)
    assert store.take_now(alice, 10.0)[0] == pytest.approx(10.0)


def test_tool_limit_adds_to_server_limits_and_charges_all_or_nothing() -> None:
    limiter = Limiter(LIMITS, MemoryStore(), "ns/gw")
    store = limiter.store
    assert isinstance(store, MemoryStore)
    call = limiter.buckets_for("alice", "tools/call", "expensive")
    assert [b.label for b in call] == ["shared", "perUser", "tool 'expensive' shared"]
    assert store.take_now(call, 0.0)[1] == -1
    assert store.take_now(call, 0.0)[1] == -1
    wait, worst = store.take_now(call, 0.0)
    assert call[worst].label == "tool 'expensive' shared" and wait == pytest.approx(5.0)
    # The refused call charged nothing: alice still has one perUser token for another tool.
    assert store.take_now(limiter.buckets_for("alice", "tools/call", "cheap"), 0.0)[1] == -1
    # initialize and ping are free.
    assert limiter.buckets_for("alice", "initialize", None) == []
    assert limiter.buckets_for("alice", "ping", None) == []


def test_memory_store_is_bounded() -> None:
    limiter = Limiter(LIMITS, MemoryStore(max_buckets=50), "ns/gw")
    store = limiter.store
    assert isinstance(store, MemoryStore)
    for i in range(1000):
        store.take_now(limiter.buckets_for(f"user-{i}", "tools/list", None), 0.0)
    assert len(store._state) <= 50


async def test_redis_buckets_are_shared_between_limiters_and_atomic(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCPFLEET_REDIS_PASSWORD", redis_server.password)
    storage = SessionStorage(provider="redis", address=redis_server.address, keyPrefix="t1:")
    limits = RateLimiting.model_validate({"shared": {"maxTokens": 10, "refillPeriod": "1h"}})
    one, two = build(limits, storage, "ns/gw"), build(limits, storage, "ns/gw")
    assert one is not None and two is not None and isinstance(one.store, RedisStore)
    try:
        # 40 concurrent requests over two limiters (two replicas): exactly 10 pass.
        results = await asyncio.gather(*(lim.check("u", "tools/call", "x") for lim in [one, two] * 20))
        refused = [r for r in results if r is not None]
        assert len(refused) == 30
        assert all(r.limit == "shared" and 300 < r.retry_after <= 360 for r in refused)
        assert refused[0].retry_after_header.isdigit()
        keys = sorted(k.decode() for k in redis_server.client().keys("*"))
        assert keys == ["t1:ratelimit:ns/gw:shared"]
        # Idle buckets expire after twice their refill period.
        assert 7100 < redis_server.client().ttl(keys[0]) <= 7200
    finally:
        await one.aclose()
        await two.aclose()


async def test_redis_bucket_refills(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPFLEET_REDIS_PASSWORD", redis_server.password)
    storage = SessionStorage(provider="redis", address=redis_server.address)
    limits = RateLimiting.model_validate({"perUser": {"maxTokens": 2, "refillPeriod": "400ms"}})
    limiter = build(limits, storage, "ns/gw")
    assert limiter is not None
    try:
        assert await limiter.check("alice", "tools/list", None) is None
        assert await limiter.check("alice", "tools/list", None) is None
        refused = await limiter.check("alice", "tools/list", None)
        assert refused is not None and refused.limit == "perUser" and 0 < refused.retry_after <= 0.2
        assert await limiter.check("bob", "tools/list", None) is None
        await asyncio.sleep(refused.retry_after + 0.05)
        assert await limiter.check("alice", "tools/list", None) is None
    finally:
        await limiter.aclose()


async def test_redis_password_comes_from_the_environment_only(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCPFLEET_REDIS_PASSWORD", raising=False)
    storage = SessionStorage(provider="redis", address=redis_server.address)
    client = redis_client(storage)
    try:
        with pytest.raises(Exception, match=r"(?i)auth"):
            await client.ping()
    finally:
        await client.aclose()
    # Without Redis (or without the password) requests are let through (fail open), not failed.
    limiter = build(
        RateLimiting.model_validate({"shared": {"maxTokens": 1, "refillPeriod": "1h"}}), storage, "x"
    )
    assert limiter is not None
    try:
        assert await limiter.check("u", "tools/call", "t") is None
        assert await limiter.check("u", "tools/call", "t") is None
    finally:
        await limiter.aclose()
    assert "MCPFLEET_REDIS_PASSWORD" not in os.environ
