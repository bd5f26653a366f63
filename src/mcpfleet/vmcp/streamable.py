"""A streamable-HTTP backend in both protocol eras: `Upstream`, which picks the era per request.

It connects by probing both eras (`server/discover` for 2026-07-28, `initialize` for the handshake
era; at least one must answer), keeps the union of the capabilities they advertise, runs each
era's notification stream, and sends a call in the era the client speaks when the backend speaks
it too (else in the one it has). The eras' wires are `upstream_legacy.LegacySession` and
`upstream_modern.ModernChannel`, over one `upstream_http.Exchange`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcpfleet.vmcp import httpclient, wire
from mcpfleet.vmcp.upstream import (
    BackendUnavailable,
    BaseUpstream,
    CallOptions,
    HeaderProvider,
    NoAuth,
    NotificationCallback,
    SessionExpired,
)
from mcpfleet.vmcp.upstream_http import Exchange
from mcpfleet.vmcp.upstream_legacy import LegacySession
from mcpfleet.vmcp.upstream_modern import ModernChannel
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    from mcpfleet.vmcp.upstream import Session

log = logging.getLogger(__name__)


class Upstream(BaseUpstream):
    """A streamable-HTTP backend, both eras, one shared legacy session."""

    def __init__(
        self,
        name: str,
        url: str,
        http: Session,
        *,
        auth: HeaderProvider | None = None,
        time_limit: float = 30.0,
        on_notification: NotificationCallback | None = None,
        client_info: Mapping[str, Any] | None = None,
        fast: httpclient.Client | None = None,
    ) -> None:
        super().__init__(
            name, url, time_limit=time_limit, on_notification=on_notification, client_info=client_info
        )
        info = self._client_info
        self._x = Exchange(name, url, http, fast, auth or NoAuth(), self._session_headers)
        self._legacy = LegacySession(self._x, time_limit, info, self._took_handshake)
        self._modern = ModernChannel(self._x, time_limit, info)
        self._listener: asyncio.Task[None] | None = None
        self._modern_listener: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def sse_responses(self) -> bool:
        return self._x.sse_responses

    def _session_headers(self) -> dict[str, str]:
        return self._legacy.headers()

    def _took_handshake(self, res: dict[str, Any]) -> None:
        """The 2025-era handshake's answer: the backend's description, unless the 2026 era gave it."""
        self.negotiated_version = self._legacy.version
        if not self.modern:
            self.capabilities = dict(res.get("capabilities") or {})
            self.server_info = dict(res.get("serverInfo") or {})
            self.instructions = res.get("instructions")
        else:
            # Union: a server may advertise more on one era than the other.
            for k, v in (res.get("capabilities") or {}).items():
                self.capabilities.setdefault(k, v)

    # ---- connection setup -------------------------------------------------------------

    async def connect(self, defer_modern: bool = False) -> None:
        """Probe both eras; at least one must answer. Starts the notification listeners.

        `defer_modern`: return as soon as the 2025-era handshake answered, without the 2026-era
        probe (`connect_modern` runs it later). Until then every call takes the 2025-era session,
        as for a backend that speaks only that era. Worth it behind a stdio proxy, whose first
        2026-era request starts a second server process (seconds). A backend without the 2025-era
        handshake gets the full probe.
        """
        if defer_modern:
            try:
                await self._legacy.initialize()
            except BackendUnavailable:
                raise
            except RPCError:
                pass  # no 2025-era handshake (a 2026-only server): the full probe below
            else:
                self.legacy = True
                self._listen_for_changes()
                return
        errors: list[str] = []
        try:
            res = await self._modern.discover()
            if any(v in wire.MODERN_VERSIONS for v in res.get("supportedVersions", [])):
                self.modern = True
                self.capabilities = dict(res.get("capabilities") or {})
                self.instructions = res.get("instructions")
                meta = res.get("_meta") or {}
                self.server_info = dict(meta.get(wire.META_SERVER_INFO) or {})
        except BackendUnavailable:
            raise
        except RPCError as exc:
            errors.append(f"server/discover: {exc.message}")
        try:
            await self._legacy.initialize()
            self.legacy = True
        except BackendUnavailable:
            if not self.modern:
                raise
        except RPCError as exc:
            errors.append(f"initialize: {exc.message}")
        if not (self.legacy or self.modern):
            raise BackendUnavailable(self.name, "; ".join(errors) or "no protocol era answered")
        self._listen_for_changes()

    async def connect_modern(self) -> bool:
        try:
            res = await self._modern.discover()
        except RPCError as exc:
            log.debug("backend %s: no 2026 era: %s", self.name, exc.message)
            return False
        if self._closed or not any(v in wire.MODERN_VERSIONS for v in res.get("supportedVersions", [])):
            return False
        # Union: a server may advertise more on one era than the other.
        for k, v in (res.get("capabilities") or {}).items():
            self.capabilities.setdefault(k, v)
        self.modern = True
        self._listen_for_changes()
        return True

    def _listen_for_changes(self) -> None:
        """The notification listeners of the eras connected so far (each started once)."""
        if self._on_notification is None:
            return
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen(), name=f"vmcp-listen-{self.name}")
        if self.modern and self._modern_listener is None:
            self._modern_listener = asyncio.create_task(
                self._modern.listen(self.capabilities, self._notify), name=f"vmcp-listen2026-{self.name}"
            )

    async def _listen(self) -> None:
        if self.legacy:
            await self._legacy.listen(self._notify)

    async def _notify(self, msg: dict[str, Any]) -> None:
        if self._on_notification is not None:
            await self._on_notification(self, msg)

    # ---- requests ----------------------------------------------------------------------

    async def _call(self, method: str, params: dict[str, Any] | None, opts: CallOptions) -> dict[str, Any]:
        t = self.timeout if opts.time_limit is None else opts.time_limit
        if (opts.era == "modern" and self.modern) or not self.legacy:
            return await self._modern.post(method, self._modern.with_envelope(params), opts, t)
        return await self._legacy.post(method, params, opts, t)

    async def send_message(self, msg: dict[str, Any], subject_token: str | None = None) -> None:
        if not self.legacy:
            return  # the 2026 wire has no client-to-server notifications or responses
        with contextlib.suppress(SessionExpired):
            await self._legacy.post_notification(msg, subject_token)

    async def ping(self, time_limit: float) -> None:
        if self.legacy:
            await self.call("ping", None, era="legacy", time_limit=time_limit)
        else:
            await self.call("server/discover", {}, era="modern", time_limit=time_limit)

    async def close(self) -> None:
        self._closed = self._legacy.closed = self._modern.closed = True
        for task in (self._listener, self._modern_listener):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._listener = self._modern_listener = None
        await self._legacy.end()
