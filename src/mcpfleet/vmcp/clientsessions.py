"""The gateway's 2025-era client sessions: open, find (or adopt from another replica), cap, expire, end.

Owns the session table, the caps (`max_sessions` in all, `max_sessions_per_subject` per caller),
idle expiry, and the optional shared `SessionStore` (Redis, `vmcp/sessions.py`) through which a
session opened on one replica is adopted by another. What an adopted session had set up at the
backends (subscriptions, log level) is set up again by the injected `reestablish` callback; ending a
session ends its notification streams (`Notifier.end_session`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcpfleet.vmcp import wire
from mcpfleet.vmcp.context import ClientSession
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    from mcpfleet.vmcp.notify import Notifier
    from mcpfleet.vmcp.sessions import SessionStore

log = logging.getLogger(__name__)

# A 2025-era client session with no open stream and no request for this long is forgotten.
SESSION_IDLE_SECONDS = 3600.0
# At most this many 2025-era client sessions at once; `initialize` beyond it gets HTTP 503.
MAX_SESSIONS = 10_000
# At most this many of them opened by one caller (a token's subject; anonymous: a client address),
# so that one caller cannot take every session; `initialize` beyond it gets HTTP 429.
MAX_SESSIONS_PER_SUBJECT = 100


class SessionLimitError(RPCError):
    """Too many client sessions: `initialize` is refused (HTTP 503) until some end or expire."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            wire.INTERNAL_ERROR,
            f"too many open sessions (limit {limit}); retry later, or end unused sessions with DELETE",
        )


class SubjectSessionLimitError(SessionLimitError):
    """Too many client sessions opened by one caller: its `initialize` is refused (HTTP 429)."""

    def __init__(self, limit: int) -> None:
        RPCError.__init__(
            self,
            wire.INTERNAL_ERROR,
            f"too many open sessions for this caller (limit {limit} per caller); "
            "end unused sessions with DELETE, or retry when idle ones expire",
        )


def session_owner(subject: str | None, address: str | None) -> str | None:
    """Who a session counts against for the per-caller cap: the token's subject, else the client's
    address (an anonymous caller); None when neither is known (no per-caller cap)."""
    if subject is not None:
        return "subject:" + subject
    return None if address is None else "address:" + address


class ClientSessions:
    """The session table of one gateway (and, with a store, its share of the replicas' sessions)."""

    def __init__(
        self,
        notifier: Notifier,
        reestablish: Callable[[ClientSession], Awaitable[None]],
        *,
        max_sessions: int = MAX_SESSIONS,
        max_sessions_per_subject: int = MAX_SESSIONS_PER_SUBJECT,
        session_idle: float = SESSION_IDLE_SECONDS,
    ) -> None:
        self._notifier = notifier
        self._reestablish = reestablish
        self.max_sessions = max_sessions
        self.max_sessions_per_subject = max_sessions_per_subject
        self.session_idle = session_idle
        self.sessions: dict[str, ClientSession] = {}
        # sessionStorage redis: sessions shared with the other replicas (vmcp/sessions.py).
        self.store: SessionStore | None = None
        self._owned: dict[str, int] = {}  # open sessions per owner (`session_owner`)
        self._cap_pruned = 0.0
        self._bg: set[asyncio.Task[Any]] = set()

    def new_session(
        self, version: str, token: str | None, subject: str | None = None, owner: str | None = None
    ) -> ClientSession:
        """Open a client session; raises SessionLimitError at `max_sessions`, or
        SubjectSessionLimitError at `max_sessions_per_subject` of `owner` (after expiring idle ones)."""
        if len(self.sessions) >= self.max_sessions or self._owner_full(owner):
            now = time.monotonic()
            if now - self._cap_pruned > 1.0:  # a scan at most once a second while at a limit
                self._cap_pruned = now
                self.prune_sessions()
            if len(self.sessions) >= self.max_sessions:
                raise SessionLimitError(self.max_sessions)
            if self._owner_full(owner):
                raise SubjectSessionLimitError(self.max_sessions_per_subject)
        s = ClientSession(id=uuid.uuid4().hex, version=version, token=token, subject=subject, owner=owner)
        self._add(s)
        return s

    def _owner_full(self, owner: str | None) -> bool:
        return owner is not None and self._owned.get(owner, 0) >= self.max_sessions_per_subject

    def _add(self, s: ClientSession) -> None:
        self.sessions[s.id] = s
        if s.owner is not None:
            self._owned[s.owner] = self._owned.get(s.owner, 0) + 1

    def session_for(self, sid: str, subject: str | None) -> ClientSession | None:
        """The session `sid` if `subject` opened it; None otherwise (unknown, or another subject's)."""
        s = self.sessions.get(sid)
        if s is None or s.subject != subject:
            return None
        return s

    async def open_session(
        self, version: str, token: str | None, subject: str | None = None, owner: str | None = None
    ) -> ClientSession:
        """`new_session`, recorded in the session store for the other replicas."""
        s = self.new_session(version, token, subject, owner)
        await self.save(s)
        return s

    async def save(self, s: ClientSession) -> None:
        """Record a session's state (subscriptions, log level) for the other replicas."""
        if self.store is not None:
            await self.store.save(s)

    async def find_session(self, sid: str, subject: str | None) -> ClientSession | None:
        """`session_for`, or a session another replica opened (adopted from the session store)."""
        s = self.session_for(sid, subject)
        store = self.store
        if store is None:
            return s
        if s is not None:
            self._background(store.touch(sid))
            return s
        record = await store.load(sid)
        if record is None or record.get("subject") != subject or sid in self.sessions:
            return self.session_for(sid, subject)
        if len(self.sessions) >= self.max_sessions:
            return None
        owner = session_owner(subject, None)
        if self._owner_full(owner):
            return None
        s = ClientSession(id=sid, version=record["version"], subject=subject, owner=owner)
        s.subscriptions = {u for u in record.get("subscriptions") or () if isinstance(u, str)}
        level = record.get("logLevel")
        s.log_level = level if isinstance(level, str) else None
        self._add(s)
        if s.subscriptions or s.log_level:
            self._background(self._reestablish(s))
        return s

    def _background(self, work: Any) -> None:
        if work is None:
            return
        task = work if isinstance(work, asyncio.Task) else asyncio.create_task(work)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    async def close_session(self, sid: str) -> bool:
        """DELETE: `end_session` here and in the session store (the session ends on every replica)."""
        ended = self.end_session(sid)
        if self.store is not None:
            await self.store.delete(sid)
        return ended

    def end_session(self, sid: str) -> bool:
        s = self.sessions.pop(sid, None)
        if s is None:
            return False
        if s.owner is not None:
            left = self._owned.get(s.owner, 1) - 1
            if left > 0:
                self._owned[s.owner] = left
            else:
                self._owned.pop(s.owner, None)
        self._notifier.end_session(s)
        return True

    def prune_sessions(self, idle: float | None = None) -> int:
        """Forget 2025-era client sessions idle for longer than `idle` (clients that never DELETE)."""
        if idle is None:
            idle = self.session_idle
        now = time.monotonic()
        stale = [sid for sid, s in self.sessions.items() if s.stream is None and now - s.last_seen > idle]
        if self.store is not None:
            for sid in stale:  # only forgotten here: the record expires in Redis on its own
                self.store.forget(sid)
        for sid in stale:
            self.end_session(sid)
        return len(stale)

    async def expire_loop(self) -> None:
        """Prune idle sessions, often enough that one outlives its idle limit by at most a quarter of
        it (<= 1 min)."""
        every = min(max(self.session_idle / 4, 0.05), 60.0)
        while True:
            await asyncio.sleep(every)
            if n := self.prune_sessions():
                log.debug("expired %d idle client sessions", n)
