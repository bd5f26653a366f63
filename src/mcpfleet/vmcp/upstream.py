"""Long-lived upstream connections to backends: a thin JSON-RPC client for both protocol eras.

One `Upstream` per backend, shared by every client request (no handshake per call). It speaks
both protocol eras of streamable HTTP and picks per request:

* 2025-era ("legacy"): one `initialize` handshake, then every POST carries `Mcp-Session-Id`;
  a 404 means the session expired (the backend restarted), so it re-initializes once and
  retries. Re-initialisation is single-flight: the old session id stays until the new one is
  known, calls that arrive meanwhile wait for it (within their time limit), calls that saw the
  same expiry reuse the new session, and a failed re-initialisation is a gateway error naming the
  backend - never a request sent without its session (whose "Missing session ID" answer used to
  reach the client). A standing GET stream carries backend notifications (list_changed,
  resources/updated) to a callback.
* 2026-07-28 ("modern"): sessionless; every request carries the `_meta` envelope and the
  `Mcp-Protocol-Version` / `Mcp-Method` / `Mcp-Name` headers. Probed with `server/discover`.

`trace_headers` (W3C `traceparent` / `tracestate` / `baggage` of the gateway's client span, see
`mcpfleet.telemetry`) go on the request of a call in either era and on SSE-transport POSTs.

Responses come back as JSON or as an SSE stream; intermediate messages of a call (progress,
logging, server-to-client requests) go to the caller's `on_message` so the front-end can stream
them through. `SSEUpstream` covers the older HTTP+SSE transport (`transport: sse`).

Not the SDK ClientSession (httpx): measured on this machine a pooled httpx hop adds ~1.3 ms,
aiohttp ~0.3 ms, and our `httpclient` less still; POSTs, notifications and the standing GET /
2026 listen streams go through `httpclient` for plain-http URLs, everything else (TLS, the SSE
transport, SSE resumption) through aiohttp (docs/vmcp.md, docs/bench-vmcp.md), which the
gateway hands over as a `lazyhttp.LazySession`: a gateway of plain-http backends never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urljoin

from mcpfleet import jsonrpc, sse
from mcpfleet.backoff import Backoff
from mcpfleet.vmcp import httpclient, lazyhttp, wire
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    import aiohttp

    Session = aiohttp.ClientSession | lazyhttp.LazySession

log = logging.getLogger(__name__)

Era = Literal["legacy", "modern"]
MessageCallback = Callable[[dict[str, Any]], Awaitable[None]]
NotificationCallback = Callable[["BaseUpstream", dict[str, Any]], Coroutine[Any, Any, None]]

# What the gateway advertises upstream: enough that backends will use sampling/elicitation/roots
# and the front can pass those requests through to the real client.
GATEWAY_CLIENT_CAPS: dict[str, Any] = {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}}
STREAM_RETRY = Backoff(initial=0.2, maximum=5.0)
"""A standing notification stream that ended is reopened after 0.2, 0.4 ... 5 s (reset once it connects)."""
_ENVELOPE_KEYS = (wire.META_VERSION, wire.META_CLIENT_INFO, wire.META_CLIENT_CAPS)
_ids = itertools.count(1)
# Passed to `on_message` when a backend answers a call with an SSE stream (mode mirroring).
SSE_OPENED: dict[str, Any] = {}
# JSON-RPC methods that only read: safe to send again if a connection drops after writing them
# (httpclient never re-sends anything else, e.g. a tools/call the backend may already have run).
_REPEATABLE = frozenset(
    {"ping", "server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list"}
)


class BackendUnavailable(RPCError):
    """Transport-level failure talking to a backend (connection refused, timeout, 5xx)."""

    def __init__(self, backend: str, reason: str) -> None:
        super().__init__(wire.BACKEND_UNAVAILABLE, f"backend {backend!r} unavailable: {reason}")
        self.backend = backend
        self.reason = reason


class HeaderProvider(Protocol):
    """Outgoing auth for one backend: the headers to add to each upstream request."""

    async def headers(self, subject_token: str | None) -> Mapping[str, str]: ...


class NoAuth:
    async def headers(self, subject_token: str | None) -> Mapping[str, str]:
        return {}


class BaseUpstream:
    """Interface shared by the streamable-HTTP and SSE upstreams."""

    name: str
    url: str
    legacy: bool = False
    modern: bool = False
    # The backend answers 2025-era POSTs with SSE streams (the front mirrors that choice).
    sse_responses: bool = False
    capabilities: dict[str, Any]
    server_info: dict[str, Any]
    instructions: str | None = None
    negotiated_version: str | None = None
    """The protocol version the backend's `initialize` answered (2025-era session)."""

    def revision(self) -> str | None:
        """The MCP revision the gateway speaks with this backend: the 2026 era's when it has it,
        else the version its initialize negotiated (None before either)."""
        if self.modern:
            return wire.MODERN_VERSIONS[-1]
        return self.negotiated_version if self.legacy else None

    async def connect(self, defer_modern: bool = False) -> None:
        raise NotImplementedError

    async def connect_modern(self) -> bool:
        """The 2026-era probe `connect(defer_modern=True)` left out: True when the backend speaks it."""
        return False

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        era: Era = "legacy",
        on_message: MessageCallback | None = None,
        headers: Mapping[str, str] | None = None,
        subject_token: str | None = None,
        time_limit: float | None = None,
        request_id_sink: Callable[[int], None] | None = None,
        trace_headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        raise NotImplementedError

    async def send_message(self, msg: dict[str, Any], subject_token: str | None = None) -> None:
        """Forward a client response or notification to the backend (legacy session)."""
        raise NotImplementedError

    async def ping(self, time_limit: float) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


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
        self.name = name
        self.url = url
        self._http = http
        # POSTs (the hot path) go through the lean client for plain-http URLs; aiohttp otherwise.
        self._fast = fast if fast is not None and fast.supports(url) else None
        self._auth = auth or NoAuth()
        self.timeout = time_limit
        self._on_notification = on_notification
        self._client_info = dict(client_info or {"name": "mcpfleet-vmcp", "version": "1"})
        self.capabilities = {}
        self.server_info = {}
        self._session_id: str | None = None
        # The legacy session is usable; False after a failed (re-)initialisation: the next call
        # initializes first instead of sending a request the backend would refuse.
        self._session_ok = False
        self._legacy_version = wire.LATEST_HANDSHAKE
        self._init_lock = asyncio.Lock()
        self._listener: asyncio.Task[None] | None = None
        self._modern_listener: asyncio.Task[None] | None = None
        self._closed = False
        self._modern_envelope = {
            wire.META_VERSION: wire.LATEST_MODERN,
            wire.META_CLIENT_INFO: self._client_info,
            wire.META_CLIENT_CAPS: {},
        }

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
                async with self._init_lock:
                    await self._initialize_locked()
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
            res = await self._post_modern(
                "server/discover", {"_meta": self._modern_envelope}, None, None, None
            )
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
            async with self._init_lock:
                await self._initialize_locked()
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
            res = await self._post_modern(
                "server/discover", {"_meta": self._modern_envelope}, None, None, None
            )
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
                self._listen_modern(), name=f"vmcp-listen2026-{self.name}"
            )

    async def _ensure_session(self, stale: str | None, time_limit: float) -> None:
        """(Re-)initialize the shared legacy session once for all callers, bounded by `time_limit`.

        `stale`: the session id a 404 was answered for (None: just make sure a session exists).
        If another caller has already replaced it, this returns at once.
        """
        try:
            async with asyncio.timeout(time_limit):
                async with self._init_lock:
                    if self._session_ok and (stale is None or self._session_id != stale):
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
        """The initialize handshake; the caller holds `_init_lock`. The old session id stays in
        place until the new one is known, so no request goes out without a session meanwhile."""
        self._session_ok = False
        params = {
            "protocolVersion": wire.LATEST_HANDSHAKE,
            "capabilities": GATEWAY_CLIENT_CAPS,
            "clientInfo": self._client_info,
        }
        hdrs = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        hdrs.update(await self._auth.headers(None))
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": "initialize", "params": params}
        resp_headers, res = await self._exchange(body, hdrs, None, self.timeout, None)
        sid = resp_headers.get(wire.H_SESSION)
        self._session_id = sid
        self._session_ok = True
        self._legacy_version = str(res.get("protocolVersion") or wire.LATEST_HANDSHAKE)
        self.negotiated_version = self._legacy_version
        if not self.modern:
            self.capabilities = dict(res.get("capabilities") or {})
            self.server_info = dict(res.get("serverInfo") or {})
            self.instructions = res.get("instructions")
        else:
            # Union: a server may advertise more on one era than the other.
            for k, v in (res.get("capabilities") or {}).items():
                self.capabilities.setdefault(k, v)
        await self._post_notification({"jsonrpc": "2.0", "method": "notifications/initialized"}, None)

    def _legacy_headers(self) -> dict[str, str]:
        h = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            wire.H_VERSION: self._legacy_version,
        }
        if self._session_id:
            h[wire.H_SESSION] = self._session_id
        return h

    # ---- requests ----------------------------------------------------------------------

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        era: Era = "legacy",
        on_message: MessageCallback | None = None,
        headers: Mapping[str, str] | None = None,
        subject_token: str | None = None,
        time_limit: float | None = None,
        request_id_sink: Callable[[int], None] | None = None,
        trace_headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        t = self.timeout if time_limit is None else time_limit
        if (era == "modern" and self.modern) or not self.legacy:
            p = dict(params) if params else {}
            meta = dict(p.get("_meta") or {})
            if wire.META_VERSION not in meta:
                meta.update(self._modern_envelope)
            p["_meta"] = meta
            return await self._post_modern(
                method, p, headers, on_message, subject_token, t, request_id_sink, trace_headers
            )
        # Legacy wire: drop the 2026 envelope keys a modern client put in _meta.
        if params and "_meta" in params:
            meta = {k: v for k, v in params["_meta"].items() if k not in _ENVELOPE_KEYS}
            params = dict(params)
            if meta:
                params["_meta"] = meta
            else:
                del params["_meta"]
        return await self._post_legacy(
            method, params, on_message, subject_token, t, request_id_sink, trace_headers
        )

    async def _post_legacy(
        self,
        method: str,
        params: dict[str, Any] | None,
        on_message: MessageCallback | None,
        subject_token: str | None,
        time_limit: float,
        request_id_sink: Callable[[int], None] | None,
        trace_headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        if not self._session_ok or self._init_lock.locked():
            await self._ensure_session(None, time_limit)  # wait for (or do) the initialisation
        for attempt in (0, 1):
            rid = next(_ids)
            if request_id_sink is not None:
                request_id_sink(rid)
            body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
            if params is not None:
                body["params"] = params
            hdrs = self._legacy_headers()
            if trace_headers:
                hdrs.update(trace_headers)
            hdrs.update(await self._auth.headers(subject_token))
            try:
                return (await self._exchange(body, hdrs, on_message, time_limit, subject_token))[1]
            except _SessionExpired:
                if attempt:
                    raise BackendUnavailable(self.name, "session expired twice in a row") from None
                log.info("backend %s: session expired", self.name)
                await self._ensure_session(hdrs.get(wire.H_SESSION), time_limit)
        raise AssertionError("unreachable")

    async def _post_modern(
        self,
        method: str,
        params: dict[str, Any],
        extra_headers: Mapping[str, str] | None,
        on_message: MessageCallback | None,
        subject_token: str | None,
        time_limit: float | None = None,
        request_id_sink: Callable[[int], None] | None = None,
        trace_headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        rid = next(_ids)
        if request_id_sink is not None:
            request_id_sink(rid)
        version = params.get("_meta", {}).get(wire.META_VERSION, wire.LATEST_MODERN)
        hdrs = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            wire.H_VERSION: version,
            wire.H_METHOD: method,
        }
        name_key = wire.NAME_PARAM.get(method)
        if name_key is not None and isinstance(params.get(name_key), str):
            hdrs[wire.H_NAME] = _encode_header(params[name_key])
        if extra_headers:
            hdrs.update(extra_headers)
        if trace_headers:
            hdrs.update(trace_headers)
        hdrs.update(await self._auth.headers(subject_token))
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        return (
            await self._exchange(
                body, hdrs, on_message, self.timeout if time_limit is None else time_limit, None
            )
        )[1]

    async def _exchange(
        self,
        body: dict[str, Any],
        hdrs: dict[str, str],
        on_message: MessageCallback | None,
        time_limit: float,
        subject_token: str | None,
    ) -> tuple[Mapping[str, str], dict[str, Any]]:
        rid = body["id"]
        try:
            async with asyncio.timeout(time_limit):
                if self._fast is not None:
                    resp = await self._fast.request(
                        "POST", self.url, hdrs, wire.dumps(body), idempotent=body["method"] in _REPEATABLE
                    )
                    try:
                        msg = await self._response_message(
                            resp.status,
                            resp.headers,
                            resp.read,
                            resp.iter_chunks,
                            hdrs,
                            rid,
                            on_message,
                            subject_token,
                        )
                    finally:
                        resp.release()
                    return resp.headers, _result_of(msg)
                async with self._http.post(self.url, data=wire.dumps(body), headers=hdrs) as ar:
                    msg = await self._response_message(
                        ar.status,
                        ar.headers,
                        ar.read,
                        ar.content.iter_any,
                        hdrs,
                        rid,
                        on_message,
                        subject_token,
                    )
                    return ar.headers, _result_of(msg)
        except lazyhttp.errors() as exc:
            raise BackendUnavailable(self.name, f"{type(exc).__name__}: {exc}") from None
        except TimeoutError:
            raise BackendUnavailable(self.name, f"timed out after {time_limit:g}s") from None
        except httpclient.InvalidRequest as exc:
            raise RPCError(wire.INVALID_PARAMS, f"cannot forward to backend {self.name!r}: {exc}") from None
        except ValueError as exc:  # a malformed or over-size SSE stream or JSON message
            raise RPCError(
                wire.INTERNAL_ERROR, f"backend {self.name!r} sent an invalid response: {exc}"
            ) from None

    async def _response_message(
        self,
        status: int,
        headers: Mapping[str, str],
        read: Callable[[], Awaitable[bytes]],
        chunks: Callable[[], AsyncIterator[bytes]],
        hdrs: Mapping[str, str],
        rid: Any,
        on_message: MessageCallback | None,
        subject_token: str | None,
    ) -> dict[str, Any]:
        if status == 404 and wire.H_SESSION in hdrs:
            raise _SessionExpired
        ctype = headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            if wire.H_SESSION in hdrs:
                self.sse_responses = True
            return await self._read_sse(chunks(), rid, on_message, subject_token)
        raw = await read()
        if not raw:
            if status >= 400:
                raise _http_error(self.name, status)
            raise BackendUnavailable(self.name, f"empty HTTP {status} response")
        try:
            msg = wire.loads(raw)
        except ValueError:
            raise _http_error(self.name, status) from None
        if not isinstance(msg, dict):
            raise _http_error(self.name, status)
        problem = jsonrpc.answer_problem(msg, raw)
        if problem is not None:
            raise ValueError(problem)  # `_exchange`: "backend ... sent an invalid response: ..."
        if status >= 400 and msg.get("id") != rid:
            # Not an answer to this request but the backend refusing the HTTP request itself (e.g.
            # "Missing session ID"): say which backend refused, not just what it said.
            err = msg.get("error")
            detail = err.get("message") if isinstance(err, dict) else None
            raise RPCError(
                wire.INTERNAL_ERROR,
                f"backend {self.name!r} refused the request: HTTP {status}"
                + (f": {detail}" if detail else ""),
            )
        return msg

    async def _read_sse(
        self,
        first: AsyncIterator[bytes],
        rid: Any,
        on_message: MessageCallback | None,
        subject_token: str | None,
    ) -> dict[str, Any]:
        """Read a response stream until our response; resume with Last-Event-ID if it closes early."""
        last_id: str | None = None
        retry_ms = 0
        if on_message is not None:
            await on_message(SSE_OPENED)  # lets the front answer in the same mode as the backend
        chunks = first
        resumed: aiohttp.ClientResponse | None = None
        try:
            for _ in range(100):
                async for ev in sse.iter_sse(chunks):
                    if ev.id is not None:
                        last_id = ev.id
                    if ev.retry is not None:
                        retry_ms = ev.retry
                    if not ev.data:
                        continue
                    msg = _event_message(ev.data)
                    if "method" not in msg and msg.get("id") == rid:
                        return msg
                    if on_message is not None:
                        await on_message(msg)
                if resumed is not None:
                    resumed.release()
                    resumed = None
                if last_id is None:
                    raise BackendUnavailable(self.name, "response stream ended without a response")
                # The server closed the stream early (SSE polling): resume it with GET + Last-Event-ID.
                await asyncio.sleep(min(retry_ms, 5000) / 1000)
                resumed = await self._resume(last_id, subject_token)
                chunks = resumed.content.iter_any()
            raise BackendUnavailable(self.name, "response stream resumed too many times")
        finally:
            if resumed is not None:
                resumed.release()

    async def _resume(self, last_id: str, subject_token: str | None) -> aiohttp.ClientResponse:
        """GET the response stream again from after event `last_id` (SSE resumption)."""
        hdrs = self._legacy_headers()
        hdrs["accept"] = "text/event-stream"
        hdrs["last-event-id"] = last_id
        hdrs.update(await self._auth.headers(subject_token))
        resumed = await self._http.get(self.url, headers=hdrs)
        if resumed.status != 200:
            resumed.release()
            raise BackendUnavailable(self.name, f"resuming the response stream: HTTP {resumed.status}")
        return resumed

    async def _post_notification(self, msg: dict[str, Any], subject_token: str | None) -> None:
        hdrs = self._legacy_headers()
        hdrs.update(await self._auth.headers(subject_token))
        try:
            async with asyncio.timeout(self.timeout):
                if self._fast is not None:
                    resp = await self._fast.request("POST", self.url, hdrs, wire.dumps(msg))
                    try:
                        await resp.read()
                    finally:
                        resp.release()
                    status = resp.status
                else:
                    async with self._http.post(self.url, data=wire.dumps(msg), headers=hdrs) as ar:
                        await ar.read()
                        status = ar.status
                if status == 404:
                    raise _SessionExpired
        except lazyhttp.errors(TimeoutError) as exc:
            raise BackendUnavailable(self.name, f"{type(exc).__name__}: {exc}") from None

    async def send_message(self, msg: dict[str, Any], subject_token: str | None = None) -> None:
        if not self.legacy:
            return  # the 2026 wire has no client-to-server notifications or responses
        with contextlib.suppress(_SessionExpired):
            await self._post_notification(msg, subject_token)

    async def ping(self, time_limit: float) -> None:
        if self.legacy:
            await self.call("ping", None, era="legacy", time_limit=time_limit)
        else:
            await self.call("server/discover", {}, era="modern", time_limit=time_limit)

    # ---- notifications -----------------------------------------------------------------

    async def _listen_modern(self) -> None:
        """Hold a 2026 `subscriptions/listen` stream open for the list_changed kinds advertised."""
        caps = self.capabilities
        wanted = {
            "toolsListChanged": bool((caps.get("tools") or {}).get("listChanged")),
            "promptsListChanged": bool((caps.get("prompts") or {}).get("listChanged")),
            "resourcesListChanged": bool((caps.get("resources") or {}).get("listChanged")),
        }
        wanted = {k: v for k, v in wanted.items() if v}
        if not wanted:
            return
        failures = 0
        while not self._closed:
            try:
                params = {"notifications": wanted, "_meta": self._modern_envelope}
                body = {
                    "jsonrpc": "2.0",
                    "id": next(_ids),
                    "method": "subscriptions/listen",
                    "params": params,
                }
                hdrs = {
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json",
                    wire.H_VERSION: wire.LATEST_MODERN,
                    wire.H_METHOD: "subscriptions/listen",
                }
                hdrs.update(await self._auth.headers(None))
                # A backend that does not offer listen streams answers something else: the 2025 GET
                # stream remains. Plain http goes through httpclient, as the GET stream does.
                if self._fast is not None:
                    resp = await self._fast.request("POST", self.url, hdrs, wire.dumps(body))
                    try:
                        if not _is_event_stream(resp.status, resp.headers):
                            return
                        failures = 0
                        await self._notifications(resp.iter_chunks(), list_changed_only=True)
                    finally:
                        resp.abort()  # a stream is never reused, and may be cut short here
                else:
                    no_limit = await lazyhttp.no_timeout()
                    async with self._http.post(
                        self.url, data=wire.dumps(body), headers=hdrs, timeout=no_limit
                    ) as r:
                        if not _is_event_stream(r.status, r.headers):
                            return
                        failures = 0
                        await self._notifications(r.content.iter_any(), list_changed_only=True)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("backend %s: listen stream: %s", self.name, exc)
            failures += 1
            await asyncio.sleep(STREAM_RETRY.delay(failures))

    async def _listen(self) -> None:
        """Hold the standing GET stream open; reconnect with backoff; stop if unsupported (405)."""
        if not self.legacy:
            return
        failures = 0
        while not self._closed:
            try:
                hdrs = self._legacy_headers()
                hdrs["accept"] = "text/event-stream"
                hdrs.update(await self._auth.headers(None))
                if self._fast is not None:
                    resp = await self._fast.request("GET", self.url, hdrs)
                    try:
                        status = resp.status
                        if status == 200:
                            failures = 0
                            await self._notifications(resp.iter_chunks())
                    finally:
                        resp.abort()  # a stream is never reused, and may be cut short here
                else:
                    no_limit = await lazyhttp.no_timeout()
                    async with self._http.get(self.url, headers=hdrs, timeout=no_limit) as r:
                        status = r.status
                        if status == 200:
                            failures = 0
                            await self._notifications(r.content.iter_any())
                if status == 405:
                    return
                if status == 404:
                    await self._ensure_session(hdrs.get(wire.H_SESSION), self.timeout)
                    continue
                if status != 200:
                    raise BackendUnavailable(self.name, f"GET stream HTTP {status}")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("backend %s: notification stream: %s", self.name, exc)
            failures += 1
            await asyncio.sleep(STREAM_RETRY.delay(failures))

    async def _notifications(self, chunks: AsyncIterator[bytes], list_changed_only: bool = False) -> None:
        """Pass the notifications of a standing stream to the callback until it ends (of a 2026
        listen stream: only the list_changed ones it subscribed to)."""
        async for ev in sse.iter_sse(chunks):
            if ev.data and self._on_notification is not None:
                try:
                    msg = _event_message(ev.data)
                except ValueError as exc:
                    log.warning("backend %s: notification dropped: %s", self.name, exc)
                    continue
                method = msg.get("method")
                if not isinstance(method, str) or "id" in msg:
                    continue
                if not list_changed_only or method.endswith("/list_changed"):
                    await self._on_notification(self, msg)

    async def close(self) -> None:
        self._closed = True
        for task in (self._listener, self._modern_listener):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._listener = self._modern_listener = None
        if self._session_id:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    if self._fast is not None:
                        resp = await self._fast.request("DELETE", self.url, self._legacy_headers())
                        try:
                            await resp.read()
                        finally:
                            resp.release()
                    else:
                        async with self._http.delete(self.url, headers=self._legacy_headers()) as r:
                            await r.read()
            self._session_id = None


class SSEUpstream(BaseUpstream):
    """A backend on the 2024-11-05 HTTP+SSE transport: GET stream, POSTs to the `endpoint` URL."""

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
    ) -> None:
        self.name = name
        self.url = url
        self._http = http
        self._auth = auth or NoAuth()
        self.timeout = time_limit
        self._on_notification = on_notification
        self._client_info = dict(client_info or {"name": "mcpfleet-vmcp", "version": "1"})
        self.capabilities = {}
        self.server_info = {}
        self._endpoint: asyncio.Future[str] | None = None
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._bg: set[asyncio.Task[None]] = set()
        self.legacy = True

    async def connect(self, defer_modern: bool = False) -> None:
        loop = asyncio.get_running_loop()
        self._endpoint = loop.create_future()
        self._reader = asyncio.create_task(self._read_stream(), name=f"vmcp-sse-{self.name}")
        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.shield(self._endpoint)
        except TimeoutError:
            await self.close()
            raise BackendUnavailable(self.name, "no endpoint event on the SSE stream") from None
        res = await self.call(
            "initialize",
            {
                "protocolVersion": "2024-11-05",
                "capabilities": GATEWAY_CLIENT_CAPS,
                "clientInfo": self._client_info,
            },
        )
        self.capabilities = dict(res.get("capabilities") or {})
        self.server_info = dict(res.get("serverInfo") or {})
        self.instructions = res.get("instructions")
        self.negotiated_version = str(res.get("protocolVersion") or "2024-11-05")
        await self.send_message({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _checked(self, data: str) -> dict[str, Any]:
        """The message of one event of the legacy SSE stream; one that cannot be relayed (too deep)
        becomes an error answer to its request, naming the backend, instead of ending the stream."""
        msg = wire.loads(data)
        if not isinstance(msg, dict):
            return {}  # not a JSON-RPC message: nothing to route
        problem = jsonrpc.answer_problem(msg, data)
        if problem is None:
            return msg
        log.warning("backend %s: invalid message dropped: %s", self.name, problem)
        if "method" in msg:
            return {}
        error = {
            "code": wire.INTERNAL_ERROR,
            "message": f"backend {self.name!r} sent an invalid response: {problem}",
        }
        return {"jsonrpc": "2.0", "id": msg.get("id"), "error": error}

    async def _stream_message(self, msg: dict[str, Any]) -> None:
        """One message of the legacy SSE stream: a response, a notification, or a request we refuse."""
        if not msg:
            return
        if "method" not in msg:
            fut = self._pending.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
        elif "id" not in msg:
            if self._on_notification is not None:
                # Not awaited here: the handler may call this backend, whose answers
                # arrive on this very stream.
                t = asyncio.create_task(self._on_notification(self, msg))
                self._bg.add(t)
                t.add_done_callback(self._bg.discard)
        else:
            # A server-to-client request outside any call context: refuse it politely.
            await self.send_message(wire.error_message(msg["id"], wire.METHOD_NOT_FOUND, "not supported"))

    async def _read_stream(self) -> None:
        assert self._endpoint is not None
        try:
            hdrs = {"accept": "text/event-stream"}
            hdrs.update(await self._auth.headers(None))
            no_limit = await lazyhttp.no_timeout()
            async with self._http.get(self.url, headers=hdrs, timeout=no_limit) as r:
                if r.status != 200:
                    raise BackendUnavailable(self.name, f"SSE stream HTTP {r.status}")
                async for ev in sse.iter_sse(r.content.iter_any()):
                    if ev.event == "endpoint":
                        if not self._endpoint.done():
                            self._endpoint.set_result(urljoin(self.url, ev.data.strip()))
                        continue
                    if not ev.data:
                        continue
                    await self._stream_message(self._checked(ev.data))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("backend %s: SSE stream ended: %s", self.name, exc)
        finally:
            err = BackendUnavailable(self.name, "SSE stream closed")
            if not self._endpoint.done():
                self._endpoint.set_exception(err)
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(err)
            self._pending.clear()

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        era: Era = "legacy",
        on_message: MessageCallback | None = None,
        headers: Mapping[str, str] | None = None,
        subject_token: str | None = None,
        time_limit: float | None = None,
        request_id_sink: Callable[[int], None] | None = None,
        trace_headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        if (
            self._endpoint is None
            or not self._endpoint.done()
            or self._endpoint.exception() is not None
            or self._reader is None
            or self._reader.done()
        ):
            raise BackendUnavailable(self.name, "not connected (SSE stream closed)")
        rid = next(_ids)
        if request_id_sink is not None:
            request_id_sink(rid)
        if params and "_meta" in params:
            params = {k: v for k, v in params.items() if k != "_meta"}
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            body["params"] = params
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            await self._post(body, subject_token, trace_headers)
            async with asyncio.timeout(self.timeout if time_limit is None else time_limit):
                return _result_of(await fut)
        except TimeoutError:
            raise BackendUnavailable(self.name, "timed out") from None
        except ValueError as exc:
            raise RPCError(
                wire.INTERNAL_ERROR, f"backend {self.name!r} sent an invalid response: {exc}"
            ) from None
        finally:
            self._pending.pop(rid, None)

    async def _post(
        self, msg: dict[str, Any], subject_token: str | None, trace_headers: Mapping[str, str] | None = None
    ) -> None:
        assert self._endpoint is not None
        hdrs = {"content-type": "application/json"}
        if trace_headers:
            hdrs.update(trace_headers)
        hdrs.update(await self._auth.headers(subject_token))
        try:
            async with self._http.post(self._endpoint.result(), data=wire.dumps(msg), headers=hdrs) as r:
                await r.read()
                if r.status >= 400:
                    raise _http_error(self.name, r.status)
        except lazyhttp.errors() as exc:
            raise BackendUnavailable(self.name, f"{type(exc).__name__}: {exc}") from None

    async def send_message(self, msg: dict[str, Any], subject_token: str | None = None) -> None:
        await self._post(msg, subject_token)

    async def ping(self, time_limit: float) -> None:
        await self.call("ping", None, time_limit=time_limit)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
            self._reader = None


class _SessionExpired(Exception):
    pass


def _is_event_stream(status: int, headers: Mapping[str, str]) -> bool:
    return status == 200 and headers.get("content-type", "").startswith("text/event-stream")


def _http_error(backend: str, status: int) -> RPCError:
    if status >= 500 or status in (401, 403, 407, 429):
        return BackendUnavailable(backend, f"HTTP {status}")
    return RPCError(wire.INTERNAL_ERROR, f"backend {backend!r} answered HTTP {status}")


def _result_of(msg: dict[str, Any]) -> dict[str, Any]:
    """The result of a backend's answer; its error as an RPCError (ValueError: a malformed error)."""
    if "error" in msg:
        err = msg["error"] or {}
        code = err.get("code", wire.INTERNAL_ERROR) if isinstance(err, dict) else None
        # An error code the gateway could not write back (not an integer, beyond 64 bits) is no error.
        if not isinstance(code, int) or isinstance(code, bool) or not -(2**63) <= code < 2**63:
            raise ValueError("its error is not an object with an integer code")
        raise RPCError(code, str(err.get("message", "")), err.get("data"))
    res = msg.get("result")
    if not isinstance(res, dict):  # every MCP result is an object: relaying another is no answer
        raise ValueError("its result is not an object")
    return res


def _encode_header(value: str) -> str:
    from mcp.shared.inbound import encode_header_value

    return encode_header_value(value)


def make_upstream(
    name: str,
    url: str,
    transport: str,
    http: Session,
    **kw: Any,
) -> BaseUpstream:
    if transport == "sse":
        kw.pop("fast", None)
        return SSEUpstream(name, url, http, **kw)
    return Upstream(name, url, http, **kw)


def _event_message(data: str) -> dict[str, Any]:
    """The JSON-RPC message an SSE event carries; ValueError when it carries something else or
    something that cannot be relayed (nested too deep)."""
    msg = wire.loads(data)
    if not isinstance(msg, dict):
        raise ValueError("an SSE event whose data is not a JSON-RPC message")
    problem = jsonrpc.answer_problem(msg, data)
    if problem is not None:
        raise ValueError(problem)
    return msg
