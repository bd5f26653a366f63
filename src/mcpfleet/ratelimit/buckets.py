"""Token buckets for the data plane: which buckets a request takes from, in memory or in Redis.

A request takes one token from every bucket that applies to it (server-wide `shared`, the caller's
`perUser`, and the tool's own `shared` / `perUser` for a `tools/call`), all or nothing: when one
bucket is empty none is charged, and the answer is how long until every empty one holds a token
again (the retry-after). Buckets refill continuously at maxTokens / refillPeriod per second.

Memory: one process (one replica). Redis: every replica shares the buckets; one Lua script reads,
refills and charges all buckets of a request atomically, on Redis' own clock (`TIME`), so replicas
with skewed clocks agree. Idle buckets expire after twice their refill period (a full bucket and a
missing one are the same), which bounds both stores.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mcpfleet.api.duration import parse_duration

if TYPE_CHECKING:
    import redis.asyncio

    from mcpfleet.api.ratelimit import RateLimiting, TokenBucket

log = logging.getLogger(__name__)

# Methods that never take a token: the handshake and liveness checks (a client that is limited
# must still be able to open a session and ping).
FREE_METHODS = frozenset({"initialize", "ping"})
# The memory store keeps at most this many buckets (least recently used go first), so a flood of
# distinct users cannot grow it without bound; an evicted bucket comes back full.
MAX_MEMORY_BUCKETS = 100_000


@dataclass(frozen=True, slots=True)
class Bucket:
    """One bucket a request takes a token from."""

    key: str
    capacity: float
    rate: float  # tokens per second
    label: str  # what the error names: "shared", "perUser", "tool echo shared", ...


class StoreError(Exception):
    """The shared bucket store failed (a Redis error): the limiter fails open."""


class Store(Protocol):
    async def take(self, buckets: list[Bucket]) -> tuple[float, int]:
        """Charge one token from each bucket (all or none): (0.0, -1) when allowed, else the seconds
        to wait and the index of the bucket that needs the longest."""
        ...

    async def aclose(self) -> None: ...


class MemoryStore:
    """Buckets of one process."""

    def __init__(self, max_buckets: int = MAX_MEMORY_BUCKETS) -> None:
        self._state: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, at)
        self._max = max_buckets

    async def take(self, buckets: list[Bucket]) -> tuple[float, int]:
        return self.take_now(buckets, time.monotonic())

    def take_now(self, buckets: list[Bucket], now: float) -> tuple[float, int]:
        state = self._state
        levels: list[float] = []
        wait, worst = 0.0, -1
        for i, b in enumerate(buckets):
            tokens, at = state.get(b.key, (b.capacity, now))
            tokens = min(b.capacity, tokens + (now - at) * b.rate)
            levels.append(tokens)
            if tokens < 1.0 and (1.0 - tokens) / b.rate > wait:
                wait, worst = (1.0 - tokens) / b.rate, i
        if worst >= 0:
            return wait, worst
        for b, tokens in zip(buckets, levels, strict=True):
            state[b.key] = (tokens - 1.0, now)
            state.move_to_end(b.key)
        while len(state) > self._max:
            state.popitem(last=False)
        return 0.0, -1

    async def aclose(self) -> None:
        self._state.clear()


# KEYS: the buckets; ARGV: capacity, rate (tokens/s) per bucket. Returns "0 0" when every bucket had
# a token (and charges them all), else "<seconds to wait> <1-based bucket>" as a string (Lua numbers
# would be truncated to integers on the way back).
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local levels = {}
local wait = 0
local worst = 0
for i, key in ipairs(KEYS) do
  local cap = tonumber(ARGV[2 * i - 1])
  local rate = tonumber(ARGV[2 * i])
  local s = redis.call('HMGET', key, 'tokens', 'at')
  local tokens = cap
  if s[1] then
    tokens = math.min(cap, tonumber(s[1]) + math.max(0, now - tonumber(s[2])) * rate)
  end
  levels[i] = tokens
  if tokens < 1 and (1 - tokens) / rate > wait then
    wait = (1 - tokens) / rate
    worst = i
  end
end
if worst > 0 then
  return tostring(wait) .. ' ' .. tostring(worst)
end
for i, key in ipairs(KEYS) do
  local cap = tonumber(ARGV[2 * i - 1])
  local rate = tonumber(ARGV[2 * i])
  redis.call('HSET', key, 'tokens', tostring(levels[i] - 1), 'at', tostring(now))
  redis.call('PEXPIRE', key, math.ceil(2000 * cap / rate))
end
return "0 0"
"""


class RedisStore:
    """Buckets shared by every replica through one Redis."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        # Imported with the first Redis store: a service without one never loads redis (~0.2 s).
        from redis.exceptions import RedisError

        self._client = client
        self._script = client.register_script(_TAKE)
        self._redis_error = RedisError

    async def take(self, buckets: list[Bucket]) -> tuple[float, int]:
        args: list[float] = []
        for b in buckets:
            args += [b.capacity, b.rate]
        try:
            answer = await self._script(keys=[b.key for b in buckets], args=args)
        except self._redis_error as exc:
            raise StoreError(str(exc)) from exc
        wait, _, worst = (answer.decode() if isinstance(answer, bytes) else str(answer)).partition(" ")
        return float(wait), int(worst) - 1

    async def aclose(self) -> None:
        await self._client.aclose()


def _rate(bucket: TokenBucket) -> tuple[float, float]:
    period = parse_duration(bucket.refill_period)
    capacity = float(bucket.max_tokens)
    # A zero period would mean an infinite rate: treat it as refilling in a microsecond.
    return capacity, capacity / max(period, 1e-6)


@functools.lru_cache(maxsize=4096)
def user_key(subject: str | None) -> str:
    """A bounded, non-revealing key part for a caller (anonymous callers share one)."""
    if subject is None:
        return "anonymous"
    return hashlib.sha256(subject.encode()).hexdigest()[:32]


class Limiter:
    """The rate limits of one server or gateway (`rateLimiting`) over a store."""

    def __init__(self, config: RateLimiting, store: Store, scope: str, key_prefix: str = "") -> None:
        self.config = config
        self.store = store
        self._warned = -math.inf
        base = f"{key_prefix}ratelimit:{scope}:"
        self._shared = self._spec(base + "shared", config.shared, "shared")
        self._user = self._spec(base + "user:", config.per_user, "perUser")
        self._tools: dict[str, tuple[Bucket | None, Bucket | None]] = {
            t.name: (
                self._spec(f"{base}tool:{t.name}:shared", t.shared, f"tool {t.name!r} shared"),
                self._spec(f"{base}tool:{t.name}:user:", t.per_user, f"tool {t.name!r} perUser"),
            )
            for t in config.tools
        }

    @staticmethod
    def _spec(key: str, bucket: TokenBucket | None, label: str) -> Bucket | None:
        if bucket is None:
            return None
        capacity, rate = _rate(bucket)
        return Bucket(key, capacity, rate, label)

    def buckets_for(
        self, subject: str | None, method: str, tool: str | None, server: bool = True
    ) -> list[Bucket]:
        """The buckets a request takes from (empty for free methods); with `server` False, only the
        tool's own (a call made through `call_tool`, whose request took the server-level ones)."""
        if method in FREE_METHODS:
            return []
        out: list[Bucket] = []
        user: str | None = None
        if self._shared is not None and server:
            out.append(self._shared)
        if self._user is not None and server:
            user = user_key(subject)
            out.append(Bucket(self._user.key + user, self._user.capacity, self._user.rate, self._user.label))
        if method == "tools/call" and tool is not None:
            pair = self._tools.get(tool)
            if pair is not None:
                shared, per_user = pair
                if shared is not None:
                    out.append(shared)
                if per_user is not None:
                    user = user or user_key(subject)
                    out.append(Bucket(per_user.key + user, per_user.capacity, per_user.rate, per_user.label))
        return out

    async def check(
        self, subject: str | None, method: str, tool: str | None, server: bool = True
    ) -> RateLimited | None:
        """None when the request may go on; else what to tell the caller."""
        buckets = self.buckets_for(subject, method, tool, server)
        if not buckets:
            return None
        try:
            wait, worst = await self.store.take(buckets)
        except (OSError, TimeoutError, StoreError) as exc:
            # Fail open: a Redis outage must not take every server behind it down; it is logged
            # (at most once a minute) so the operator sees limits are not enforced.
            now = time.monotonic()
            if now - self._warned > 60.0:
                self._warned = now
                log.warning("rate limits not enforced: the bucket store failed: %s", exc)
            return None
        if worst < 0:
            return None
        return RateLimited(wait, buckets[worst].label)

    async def aclose(self) -> None:
        await self.store.aclose()


@dataclass(frozen=True, slots=True)
class RateLimited:
    """A refused request: seconds until it would pass, and the limit (bucket label) it hit."""

    retry_after: float
    limit: str

    @property
    def retry_after_header(self) -> bytes:
        """HTTP Retry-After: whole seconds, at least 1."""
        return str(max(1, math.ceil(self.retry_after))).encode()
