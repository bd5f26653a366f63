"""Streamable HTTP for protocol 2026-07-28: one self-contained POST per request, no session.

HTTP-level rules (Origin/Host checks, Accept negotiation, routing-header validation, the
`Mcp-Param-*` checks, JSON-RPC error -> HTTP status mapping) are enforced here with the SDK's
own validators, because the child behind the pipe never sees HTTP headers. The JSON-RPC request
itself is relayed verbatim to an envelope-era child (`--modern-era separate`), or translated onto
the handshake-era child by `bridge.py` (the default: one process per server). The response is plain JSON when the child
answers without emitting anything first, otherwise an SSE stream that carries the request's
notifications (progress, logs) and ends with the response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    InboundLadderRejection,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    unsupported_protocol_version_rejection,
    validate_mcp_param_headers,
)
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from mcpfleet import jsonrpc
from mcpfleet.proxy.bridge import BridgedPeer, EraBridge, ListenPeer
from mcpfleet.proxy.mux import JSON, Multiplexer, RequestId

log = logging.getLogger(__name__)

HEADER_MISMATCH = -32020
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
PARSE_ERROR = -32700
SSE_PING_INTERVAL = 15.0
# How long to wait for the first message before committing to SSE (keeps plain JSON for fast calls).
JSON_WINDOW = SSE_PING_INTERVAL

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
_PARAM_PREFIX = MCP_PARAM_HEADER_PREFIX.lower()


class ExchangePeer:
    """The peer for one in-flight stateless request: messages are queued for its HTTP response."""

    def __init__(self, broadcast: bool) -> None:
        self.queue: asyncio.Queue[JSON] = asyncio.Queue()
        self._broadcast = broadcast

    @property
    def broadcast(self) -> bool:
        return self._broadcast

    async def deliver(self, message: JSON, related_request_id: RequestId | None) -> None:
        self.queue.put_nowait(message)


class ToolSchemaCache:
    """inputSchema per tool name, from the child's tools/list; dropped on list_changed or restart."""

    def __init__(self) -> None:
        self._schemas: dict[str, Any] | None = None

    def invalidate(self) -> None:
        self._schemas = None

    async def schema(
        self, mux: Multiplexer, verdict: InboundModernRoute, name: str, *, envelope: bool = True
    ) -> Any | None:
        """`envelope=False`: the child is a handshake-era connection (`proxy/bridge.py`), already
        initialised, that refuses the 2026-07-28 envelope."""
        if self._schemas is None:
            self._schemas = await self._load(mux, verdict, envelope)
        return self._schemas.get(name)

    async def _load(self, mux: Multiplexer, verdict: InboundModernRoute, envelope: bool) -> dict[str, Any]:
        meta: JSON = {}
        if envelope:
            meta[PROTOCOL_VERSION_META_KEY] = verdict.protocol_version
            meta[CLIENT_CAPABILITIES_META_KEY] = verdict.client_capabilities
            if verdict.client_info is not None:
                meta[CLIENT_INFO_META_KEY] = verdict.client_info
        schemas: dict[str, Any] = {}
        params: JSON = {"_meta": meta} if meta else {}
        for _ in range(100):  # page cap: a broken paginator must not hang the call path
            try:
                reply = await mux.call("tools/list", params)
            except (RuntimeError, TimeoutError) as exc:
                log.warning("Mcp-Param header validation skipped: tools/list failed: %s", exc)
                return schemas
            result = reply.get("result")
            if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
                return schemas  # an error, or a server's malformed list: no schemas
            tools: list[Any] = result["tools"]
            for tool in tools:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    schemas[tool["name"]] = tool.get("inputSchema")
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str):
                break
            params = {"_meta": meta, "cursor": cursor} if meta else {"cursor": cursor}
        return schemas


def _json_response(message: JSON, status: int | None = None) -> Response:
    if status is None:
        status = 200
        error = message.get("error")
        if isinstance(error, dict):
            status = ERROR_CODE_HTTP_STATUS.get(error.get("code", 0), 200)
    return Response(orjson.dumps(message), status_code=status, media_type="application/json")


def _error(request_id: Any, code: int, message: str, data: Any = None) -> JSON:
    error: JSON = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _rejection(request_id: Any, rejection: InboundLadderRejection) -> Response:
    return _json_response(_error(request_id, rejection.code, rejection.message, rejection.data))


def _sse_event(message: JSON) -> bytes:
    return b"event: message\r\ndata: " + orjson.dumps(message) + b"\r\n\r\n"


def _http_refusal(request: Request) -> Response | None:
    """405 for anything but POST, 406 unless both JSON and SSE are acceptable; None when fine."""
    if request.method != "POST":
        return Response(status_code=405, headers={"Allow": "POST"})
    has_json, has_sse = check_accept_headers(request)
    if not has_json or not has_sse:
        return Response(status_code=406)
    return None


def _notification_answer(request: Request) -> Response:
    """202 for a notification, unless its protocol version is refused."""
    rejection = unsupported_protocol_version_rejection(request.headers.get("mcp-protocol-version", ""))
    if rejection is not None:
        return _rejection(None, rejection)
    return Response(status_code=202)


async def handle_modern(
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    get_mux: Callable[[], Awaitable[Multiplexer]],
    schemas: ToolSchemaCache,
    security: TransportSecuritySettings | None,
    max_json_depth: int = jsonrpc.DEFAULT_MAX_DEPTH,
    get_bridge: Callable[[Multiplexer], EraBridge | None] = lambda _mux: None,
) -> None:
    """Serve one 2026-07-28 POST: relayed to an envelope-era child, or translated onto the
    handshake-era one when `get_bridge` gives a bridge for the multiplexer (`proxy/bridge.py`)."""
    request = Request(scope, receive)
    if request.method == "POST" and not jsonrpc.is_json_media_type(request.headers.get("content-type")):
        # Before the SDK's Host / Origin check, which answers a wrong media type with a plain 400.
        message = "Unsupported Media Type: Content-Type must be application/json"
        await _json_response(_error(None, INVALID_REQUEST, message), 415)(scope, receive, send)
        return
    err = await TransportSecurityMiddleware(security).validate_request(
        request, is_post=request.method == "POST"
    )
    if err is not None:
        await err(scope, receive, send)
        return
    refusal = _http_refusal(request)
    if refusal is not None:
        await refusal(scope, receive, send)
        return
    body = await request.body()
    try:
        decoded = jsonrpc.decode(body, max_json_depth)
        kind = jsonrpc.check_message(decoded)
    except jsonrpc.MessageError as exc:
        await _json_response(exc.response(), 400)(scope, receive, send)
        return
    if kind == "response":
        message = "Body must be a single JSON-RPC request or notification object"
        await _json_response(_error(None, INVALID_REQUEST, message), 400)(scope, receive, send)
        return
    if kind == "notification":
        # Notifications have nothing to act on in a sessionless exchange (cancellation is
        # closing the response stream); acknowledge like the handshake-era transport does.
        await _notification_answer(request)(scope, receive, send)
        return
    request_id = decoded["id"]
    method: str = decoded["method"]
    if method == "initialize":
        # Removed at 2026-07-28; over HTTP that is a plain 404 / Method not found (the stdio
        # child would answer -32022, which is the stdio form of the same refusal).
        message = "Method not found: initialize is not part of protocol 2026-07-28"
        await _json_response(_error(request_id, METHOD_NOT_FOUND, message), 404)(scope, receive, send)
        return
    duplicated = find_duplicated_routing_header(request.headers.items())
    if duplicated is not None:
        message = f"{duplicated} header appears more than once"
        await _json_response(_error(request_id, HEADER_MISMATCH, message))(scope, receive, send)
        return
    # RFC 9110 5.5: optional whitespace around a field value is not part of it.
    headers = {key: value.strip() for key, value in request.headers.items()}
    verdict = classify_inbound_request(decoded, headers=headers)
    if isinstance(verdict, InboundLadderRejection):
        await _rejection(request_id, verdict)(scope, receive, send)
        return
    mux = await get_mux()
    bridge = await _translation(get_bridge(mux))
    param_rejection = await _mcp_param_rejection(decoded, headers, verdict, mux, schemas, bridge is None)
    if param_rejection is not None:
        await _rejection(request_id, param_rejection)(scope, receive, send)
        return
    await _relay(scope, receive, send, mux, decoded, method, bridge)


async def _translation(bridge: EraBridge | None) -> EraBridge | None:
    """The bridge to translate with, its child initialised before anything reaches it (the
    Mcp-Param-* check lists its tools; a failure is answered by the exchange); None when there is
    none or the child speaks only 2026-07-28 (relayed to as is)."""
    if bridge is None:
        return None
    await bridge.ensure_initialized()
    return None if bridge.native else bridge


async def _mcp_param_rejection(
    decoded: JSON,
    headers: Mapping[str, str],
    verdict: InboundModernRoute,
    mux: Multiplexer,
    schemas: ToolSchemaCache,
    envelope: bool,
) -> InboundLadderRejection | None:
    if decoded.get("method") != "tools/call":
        return None
    params = decoded.get("params") or {}
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None
    if not arguments and not any(key.startswith(_PARAM_PREFIX) for key in headers):
        return None
    schema = await schemas.schema(mux, verdict, name, envelope=envelope)
    if schema is None:
        return None
    return validate_mcp_param_headers(schema, arguments, headers)


async def _relay(
    scope: Scope,
    receive: Receive,
    send: Send,
    mux: Multiplexer,
    decoded: JSON,
    method: str,
    bridge: EraBridge | None,
) -> None:
    request_id = decoded["id"]
    peer: ExchangePeer | BridgedPeer | ListenPeer
    if bridge is not None:
        peer = await bridge.start(decoded)
    else:
        peer = ExchangePeer(broadcast=method == "subscriptions/listen")
    disconnected = asyncio.Event()

    async def watch_disconnect() -> None:
        while (await receive()).get("type") != "http.disconnect":
            pass
        disconnected.set()

    watcher = asyncio.create_task(watch_disconnect())
    try:
        if isinstance(peer, ExchangePeer):
            await _forward(mux, peer, decoded)
        first = await _next(peer, disconnected, JSON_WINDOW)
        if first is not None and _is_response(first, request_id):
            await _json_response(first)(scope, receive, send)
            return
        if disconnected.is_set():
            return
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        message = first
        while True:
            if message is None:
                if disconnected.is_set():
                    return
                await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
            elif _is_response(message, request_id):
                await send({"type": "http.response.body", "body": _sse_event(message), "more_body": False})
                return
            else:
                await send({"type": "http.response.body", "body": _sse_event(message), "more_body": True})
            message = await _next(peer, disconnected, SSE_PING_INTERVAL)
    finally:
        watcher.cancel()
        # Cancels the request on the child when the client left before the answer.
        await (
            mux.remove_peer(peer) if bridge is None or isinstance(peer, ExchangePeer) else bridge.finish(peer)
        )


async def _forward(mux: Multiplexer, peer: ExchangePeer, decoded: JSON) -> None:
    """Relay the request to an envelope-era child (a listen stream also gets broadcasts)."""
    if peer.broadcast:
        mux.add_peer(peer)
    await mux.request(peer, decoded)


def _is_response(message: JSON, request_id: Any) -> bool:
    return "method" not in message and message.get("id") == request_id


async def _next(
    peer: ExchangePeer | BridgedPeer | ListenPeer, disconnected: asyncio.Event, wait: float
) -> JSON | None:
    """The next message for this exchange, or None on timeout / client disconnect."""
    get = asyncio.ensure_future(peer.queue.get())
    gone = asyncio.ensure_future(disconnected.wait())
    try:
        done, _ = await asyncio.wait({get, gone}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if get in done:
        return get.result()
    get.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await get
    return None
