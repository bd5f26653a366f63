"""The handshake era (protocol 2025-11-25 and earlier) of a streamable-HTTP backend: one session.

`LegacySession` owns the backend session shared by every client request: the `initialize`
handshake, `Mcp-Session-Id` on every POST, and its recovery. A 404 means the session expired (the
backend restarted), so it re-initializes once and retries. Re-initialisation is single-flight: the
old session id stays until the new one is known, calls that arrive meanwhile wait for it (within
their time limit), calls that saw the same expiry reuse the new session, and a failed
re-initialisation is a gateway error naming the backend - never a request sent without its
session (whose "Missing session ID" answer used to reach the client). A standing GET stream
carries backend notifications (list_changed, resources/updated); DELETE ends the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcpfleet.vmcp import lazyhttp, wire
from mcpfleet.vmcp.upstream import (
    GATEWAY_CLIENT_CAPS,
    STREAM_RETRY,
    BackendUnavailable,
    CallOptions,
    SessionExpired,
    relay_notifications,
    request_ids,
)
from mcpfleet.vmcp.upstream_http import Exchange
from mcpfleet.vmcp.wire import RPCError

log = logging.getLogger(__name__)

_ENVELOPE_KEYS = (wire.META_VERSION, wire.META_CLIENT_INFO, wire.META_CLIENT_CAPS)


class LegacySession:
    """The 2025-era session of one backend (see the module docstring)."""

    def __init__(
        self,
        exchange: Exchange,
        time_limit: float,
        client_info: Mapping[str, Any],
        on_initialized: Callable[[dict[str, Any]], None],
    ) -> None:
        self._x = exchange
        self.name = exchange.name
        self.timeout = time_limit
        self._client_info = client_info
        # Takes the handshake's answer (capabilities, server info, instructions).
        self._on_initialized = on_initialized
        self.session_id: str | None = None
        # The session is usable; False after a failed (re-)initialisation: the next call
        # initializes first instead of sending a request the backend would refuse.
        self._session_ok = False
        self.version = wire.LATEST_HANDSHAKE
        self.init_lock = asyncio.Lock()
        self.closed = False

    async def initialize(self) -> None:
        """The handshake (single-flight with a re-initialisation)."""
        async with self.init_lock:
            await self._initialize_locked()

    async def ensure_session(self, stale: str | None, time_limit: float) -> None:
        """(Re-)initialize the shared session once for all callers, bounded by `time_limit`.

        `stale`: the session id a 404 was answered for (None: just make sure a session exists).
        If another caller has already replaced it, this returns at once.
        """
        try:
            async with asyncio.timeout(time_limit):
                async with self.init_lock:
                    if self._session_ok and (stale is None or self.session_id != stale):
                        return
                    log.info("backend %s: (re-)initializing the session", self.name)
                    try:
                        await self._initialize_locked()
                    except BackendUnavailable as exc:
                        raise BackendUnavailable(
                            self.name, f"re-initializing its session: {exc.reason}"
                        ) from None
                    except RPCError as exc:
                        raise BackendUnavailable(
                            self.name, f"re-initializing its session: {exc.message}"
                        ) from None
        except TimeoutError:
            raise BackendUnavailable(
                self.name, f"its session was still being re-initialized after {time_limit:g}s"
            ) from None

    async def _initialize_locked(self) -> None:
        """The initialize handshake; the caller holds `init_lock`. The old session id stays in
        place until the new one is known, so no request goes out without a session meanwhile."""
        self._session_ok = False
        params = {
            "protocolVersion": wire.LATEST_HANDSHAKE,
            "capabilities": GATEWAY_CLIENT_CAPS,
            "clientInfo": self._client_info,
        }
        hdrs = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        hdrs.update(await self._x.auth.headers(None))
        body = {"jsonrpc": "2.0", "id": next(request_ids), "method": "initialize", "params": params}
        resp_headers, res = await self._x.exchange(body, hdrs, None, self.timeout, None)
        self.session_id = resp_headers.get(wire.H_SESSION)
        self._session_ok = True
        self.version = str(res.get("protocolVersion") or wire.LATEST_HANDSHAKE)
        self._on_initialized(res)
        await self.post_notification({"jsonrpc": "2.0", "method": "notifications/initialized"}, None)

    def headers(self) -> dict[str, str]:
        """The headers of a request on the session."""
        h = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            wire.H_VERSION: self.version,
        }
        if self.session_id:
            h[wire.H_SESSION] = self.session_id
        return h

    async def post(
        self, method: str, params: dict[str, Any] | None, opts: CallOptions, time_limit: float
    ) -> dict[str, Any]:
        """One request on the session (re-initialized once if it expired meanwhile)."""
        # The 2025 wire: drop the 2026 envelope keys a modern client put in _meta.
        if params and "_meta" in params:
            meta = {k: v for k, v in params["_meta"].items() if k not in _ENVELOPE_KEYS}
            params = dict(params)
            if meta:
                params["_meta"] = meta
            else:
                del params["_meta"]
        if not self._session_ok or self.init_lock.locked():
            await self.ensure_session(None, time_limit)  # wait for (or do) the initialisation
        for attempt in (0, 1):
            rid = next(request_ids)
            if opts.request_id_sink is not None:
                opts.request_id_sink(rid)
            body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
            if params is not None:
                body["params"] = params
            hdrs = self.headers()
            if opts.trace_headers:
                hdrs.update(opts.trace_headers)
            hdrs.update(await self._x.auth.headers(opts.subject_token))
            try:
                return (await self._x.exchange(body, hdrs, opts.on_message, time_limit, opts.subject_token))[
                    1
                ]
            except SessionExpired:
                if attempt:
                    raise BackendUnavailable(self.name, "session expired twice in a row") from None
                log.info("backend %s: session expired", self.name)
                await self.ensure_session(hdrs.get(wire.H_SESSION), time_limit)
        raise AssertionError("unreachable")

    async def post_notification(self, msg: dict[str, Any], subject_token: str | None) -> None:
        """A client notification or response, on the session (SessionExpired: a 404)."""
        hdrs = self.headers()
        hdrs.update(await self._x.auth.headers(subject_token))
        x = self._x
        try:
            async with asyncio.timeout(self.timeout):
                if x.fast is not None:
                    resp = await x.fast.request("POST", x.url, hdrs, wire.dumps(msg))
                    try:
                        await resp.read()
                    finally:
                        resp.release()
                    status = resp.status
                else:
                    async with x.http.post(x.url, data=wire.dumps(msg), headers=hdrs) as ar:
                        await ar.read()
                        status = ar.status
                if status == 404:
                    raise SessionExpired
        except lazyhttp.errors(TimeoutError) as exc:
            raise BackendUnavailable(self.name, f"{type(exc).__name__}: {exc}") from None

    async def listen(self, notify: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        """Hold the standing GET stream open; reconnect with backoff; stop if unsupported (405)."""
        failures = 0
        x = self._x
        while not self.closed:
            try:
                hdrs = self.headers()
                hdrs["accept"] = "text/event-stream"
                hdrs.update(await x.auth.headers(None))
                if x.fast is not None:
                    resp = await x.fast.request("GET", x.url, hdrs)
                    try:
                        status = resp.status
                        if status == 200:
                            failures = 0
                            await relay_notifications(self.name, resp.iter_chunks(), notify)
                    finally:
                        resp.abort()  # a stream is never reused, and may be cut short here
                else:
                    no_limit = await lazyhttp.no_timeout()
                    async with x.http.get(x.url, headers=hdrs, timeout=no_limit) as r:
                        status = r.status
                        if status == 200:
                            failures = 0
                            await relay_notifications(self.name, r.content.iter_any(), notify)
                if status == 405:
                    return
                if status == 404:
                    await self.ensure_session(hdrs.get(wire.H_SESSION), self.timeout)
                    continue
                if status != 200:
                    raise BackendUnavailable(self.name, f"GET stream HTTP {status}")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("backend %s: notification stream: %s", self.name, exc)
            failures += 1
            await asyncio.sleep(STREAM_RETRY.delay(failures))

    async def end(self) -> None:
        """DELETE the session (best effort, 2 s at most)."""
        if not self.session_id:
            return
        x = self._x
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                if x.fast is not None:
                    resp = await x.fast.request("DELETE", x.url, self.headers())
                    try:
                        await resp.read()
                    finally:
                        resp.release()
                else:
                    async with x.http.delete(x.url, headers=self.headers()) as r:
                        await r.read()
        self.session_id = None
