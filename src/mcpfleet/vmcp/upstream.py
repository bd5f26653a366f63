"""Long-lived upstream connections to backends: the interface, one `call()`, and what both eras share.

One upstream per backend, shared by every client request (no handshake per call). `BaseUpstream`
is the interface the gateway uses; its `call()` is the one signature of a request to a backend,
turned into a `CallOptions` each transport serves (`_call`). The transports:

* `streamable.Upstream`: streamable HTTP, both protocol eras, picked per request: the handshake
  era (2025-11-25 and earlier: `upstream_legacy.LegacySession`, one shared `Mcp-Session-Id`
  session) and 2026-07-28 (`upstream_modern.ModernChannel`, sessionless, the `_meta` envelope),
  over one exchange (`upstream_http.Exchange`: a POST and its JSON or SSE answer);
* `sseupstream.SSEUpstream`: the older HTTP+SSE transport (`transport: sse`).

The backend pool (`pool.py`) makes the one its backend's transport needs.

`trace_headers` (W3C `traceparent` / `tracestate` / `baggage` of the gateway's client span, see
`mcpfleet.telemetry`) go on the request of a call in either era and on SSE-transport POSTs.
Intermediate messages of a call (progress, logging, server-to-client requests) go to the caller's
`on_message` so the front can stream them through.

Not the SDK ClientSession (httpx): measured on this machine a pooled httpx hop adds ~1.3 ms,
aiohttp ~0.3 ms, and our `httpclient` less still; POSTs, notifications and the standing GET /
2026 listen streams go through `httpclient` for plain-http URLs, everything else (TLS, the SSE
transport, SSE resumption) through aiohttp (docs/vmcp.md, docs/bench-vmcp.md), which the
gateway hands over as a `lazyhttp.LazySession`: a gateway of plain-http backends never loads it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from mcpfleet import jsonrpc, sse
from mcpfleet.backoff import Backoff
from mcpfleet.vmcp import lazyhttp, wire
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
request_ids = itertools.count(1)
"""JSON-RPC ids of the requests the gateway sends upstream (unique per process)."""
# Passed to `on_message` when a backend answers a call with an SSE stream (mode mirroring).
SSE_OPENED: dict[str, Any] = {}
DEFAULT_CLIENT_INFO = {"name": "mcpfleet-vmcp", "version": "1"}


class BackendUnavailable(RPCError):
    """Transport-level failure talking to a backend (connection refused, timeout, 5xx)."""

    def __init__(self, backend: str, reason: str) -> None:
        super().__init__(wire.BACKEND_UNAVAILABLE, f"backend {backend!r} unavailable: {reason}")
        self.backend = backend
        self.reason = reason


class SessionExpired(Exception):
    """A 2025-era backend answered 404 for the session id sent: it restarted (re-initialize)."""


class HeaderProvider(Protocol):
    """Outgoing auth for one backend: the headers to add to each upstream request."""

    async def headers(self, subject_token: str | None) -> Mapping[str, str]: ...


class NoAuth:
    async def headers(self, subject_token: str | None) -> Mapping[str, str]:
        return {}


@dataclass(frozen=True, slots=True)
class CallOptions:
    """How one call goes to a backend: the options of `BaseUpstream.call`, as the transports get them."""

    era: Era = "legacy"
    on_message: MessageCallback | None = None
    """Gets what the backend sends while answering (progress, logs, its requests to the client)."""
    headers: Mapping[str, str] | None = None
    """Extra request headers of the 2026 wire (the client's `Mcp-Param-*`)."""
    subject_token: str | None = None
    """The caller's token, for outgoing auth that exchanges it."""
    time_limit: float | None = None
    """Seconds for the whole call (None: the backend's own timeout)."""
    request_id_sink: Callable[[int], None] | None = None
    """Gets the upstream request id (to forward a client's cancellation)."""
    trace_headers: Mapping[str, str] | None = None
    """Per-request headers: the trace context and the client's passthrough headers."""


LIST_CALL = CallOptions()
"""The options of a call with no caller (list fetches, pings)."""


class BaseUpstream:
    """Interface shared by the streamable-HTTP and SSE upstreams."""

    name: str
    url: str
    legacy: bool = False
    modern: bool = False
    capabilities: dict[str, Any]
    server_info: dict[str, Any]
    instructions: str | None = None
    negotiated_version: str | None = None
    """The protocol version the backend's `initialize` answered (2025-era session)."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        time_limit: float,
        on_notification: NotificationCallback | None,
        client_info: Mapping[str, Any] | None,
    ) -> None:
        """What every transport keeps alike: the backend's name and URL, the per-request time limit,
        where notifications go, the clientInfo it introduces itself with, and the (empty until the
        handshake) capabilities and server info."""
        self.name = name
        self.url = url
        self.timeout = time_limit
        self._on_notification = on_notification
        self._client_info = dict(client_info or DEFAULT_CLIENT_INFO)
        self.capabilities = {}
        self.server_info = {}

    @property
    def sse_responses(self) -> bool:
        """The backend answers 2025-era POSTs with SSE streams (the front mirrors that choice)."""
        return False

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
        """One request to the backend; its result, or RPCError (BackendUnavailable: transport)."""
        opts = CallOptions(
            era, on_message, headers, subject_token, time_limit, request_id_sink, trace_headers
        )
        return await self._call(method, params, opts)

    async def _call(self, method: str, params: dict[str, Any] | None, opts: CallOptions) -> dict[str, Any]:
        raise NotImplementedError

    async def send_message(self, msg: dict[str, Any], subject_token: str | None = None) -> None:
        """Forward a client response or notification to the backend (legacy session)."""
        raise NotImplementedError

    async def ping(self, time_limit: float) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


# ---- what both eras' answers share ----------------------------------------------------------


def is_event_stream(status: int, headers: Mapping[str, str]) -> bool:
    return status == 200 and headers.get("content-type", "").startswith("text/event-stream")


def http_error(backend: str, status: int) -> RPCError:
    if status >= 500 or status in (401, 403, 407, 429):
        return BackendUnavailable(backend, f"HTTP {status}")
    return RPCError(wire.INTERNAL_ERROR, f"backend {backend!r} answered HTTP {status}")


def result_of(msg: dict[str, Any]) -> dict[str, Any]:
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


def event_message(data: str) -> dict[str, Any]:
    """The JSON-RPC message an SSE event carries; ValueError when it carries something else or
    something that cannot be relayed (nested too deep)."""
    msg = wire.loads(data)
    if not isinstance(msg, dict):
        raise ValueError("an SSE event whose data is not a JSON-RPC message")
    problem = jsonrpc.answer_problem(msg, data)
    if problem is not None:
        raise ValueError(problem)
    return msg


async def relay_notifications(
    name: str,
    chunks: AsyncIterator[bytes],
    notify: Callable[[dict[str, Any]], Awaitable[None]],
    list_changed_only: bool = False,
) -> None:
    """Pass the notifications of a standing stream to `notify` until it ends (of a 2026 listen
    stream: only the list_changed ones it subscribed to)."""
    async for ev in sse.iter_sse(chunks):
        if ev.data:
            try:
                msg = event_message(ev.data)
            except ValueError as exc:
                log.warning("backend %s: notification dropped: %s", name, exc)
                continue
            method = msg.get("method")
            if not isinstance(method, str) or "id" in msg:
                continue
            if not list_changed_only or method.endswith("/list_changed"):
                await notify(msg)
