"""Client sessions shared by gateway replicas (`sessionStorage` provider redis).

A 2025-era session (`Mcp-Session-Id`) is created on one replica and may continue on any other
behind the same Service. What a session is, beyond its id, is small: the protocol version, the
subject that opened it, its resource subscriptions and its log level. That record lives in Redis
(`<keyPrefix>vmcp:<gateway>:session:<id>`, JSON, expiring after the idle timeout); a replica that
meets an unknown id loads it and adopts the session. The gateway's backend connections are its
own (one per backend per replica, not per client), so nothing has to move: the adopting replica
re-sends the session's subscriptions and log level to the owning backends on its connections
(backend sessions re-established transparently).

What stays on the replica that holds it: an open GET notification stream (a client reconnects it,
landing anywhere) and server-to-client requests in flight (their answer must reach the same
replica). 2026-07-28 clients are sessionless and need none of this.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

import orjson
from redis.exceptions import RedisError

if TYPE_CHECKING:
    import redis.asyncio

    from mcpfleet.vmcp.context import ClientSession

log = logging.getLogger(__name__)

# A session's record is refreshed (its expiry pushed back) at most this often per replica.
TOUCH_EVERY_SECONDS = 30.0
_ERRORS = (RedisError, OSError, TimeoutError)


class SessionStore:
    """The Redis side of client sessions."""

    def __init__(
        self, client: redis.asyncio.Redis, scope: str, idle_seconds: float, key_prefix: str = ""
    ) -> None:
        self._client = client
        self._base = f"{key_prefix}vmcp:{scope}:session:"
        self._ttl_ms = max(1000, int(idle_seconds * 1000))
        self._touched: dict[str, float] = {}

    def _key(self, sid: str) -> str:
        return self._base + sid

    async def save(self, s: ClientSession) -> None:
        """Write (or rewrite) the session's record; a Redis failure is logged, not raised (the
        session still works on this replica)."""
        record = {
            "version": s.version,
            "subject": s.subject,
            "subscriptions": sorted(s.subscriptions),
            "logLevel": s.log_level,
        }
        try:
            await self._client.set(self._key(s.id), orjson.dumps(record), px=self._ttl_ms)
            self._touched[s.id] = time.monotonic()
        except _ERRORS as exc:
            log.warning("session %s not stored in Redis: %s", s.id[:8], exc)

    async def load(self, sid: str) -> dict[str, Any] | None:
        """The record of session `sid`, or None (unknown, expired, malformed, or Redis down)."""
        if len(sid) > 128:
            return None
        try:
            raw = await self._client.get(self._key(sid))
        except _ERRORS as exc:
            log.warning("session lookup in Redis failed: %s", exc)
            return None
        if raw is None:
            return None
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        return record if isinstance(record, dict) and isinstance(record.get("version"), str) else None

    def touch(self, sid: str) -> asyncio.Task[None] | None:
        """Push the record's expiry back, at most every TOUCH_EVERY_SECONDS (in the background)."""
        now = time.monotonic()
        if now - self._touched.get(sid, 0.0) < TOUCH_EVERY_SECONDS:
            return None
        self._touched[sid] = now
        return asyncio.create_task(self._expire(sid))

    async def _expire(self, sid: str) -> None:
        with contextlib.suppress(*_ERRORS):
            await self._client.pexpire(self._key(sid), self._ttl_ms)

    async def delete(self, sid: str) -> None:
        self._touched.pop(sid, None)
        with contextlib.suppress(*_ERRORS):
            await self._client.delete(self._key(sid))

    def forget(self, sid: str) -> None:
        """This replica dropped the session (idle): keep no touch time for it."""
        self._touched.pop(sid, None)

    async def aclose(self) -> None:
        await self._client.aclose()
