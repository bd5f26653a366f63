"""What both protocol eras' HTTP fronts of the gateway share (`legacy.py`, `modern.py`, `app.py`).

The ASGI types, answers (JSON, pinned lists, a POST answer that turns into an SSE stream when a
message besides the result comes), Accept negotiation, and `EraFront`: the base of each era's front
with the per-request pieces they share (the rate-limit hook, passthrough headers, SERVER spans, the
traced dispatch, standing notification streams).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
from opentelemetry.trace import SpanKind

from mcpfleet import ratelimit, telemetry
from mcpfleet.vmcp import pinned, wire
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from mcpfleet.ratelimit import Limiter
    from mcpfleet.vmcp.context import CallContext
    from mcpfleet.vmcp.gateway import Gateway
    from mcpfleet.vmcp.pinned import Pinned

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
# Requests the gateway forwards to a backend (their answer's form follows the backend's stream).
FORWARDED = frozenset(
    {
        "tools/call",
        "resources/read",
        "prompts/get",
        "completion/complete",
        "resources/subscribe",
        "resources/unsubscribe",
    }
)
_SUBSCRIPTION_ID_META = "io.modelcontextprotocol/subscriptionId"
KEEPALIVE = 15.0


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        m = await receive()
        chunks.append(m.get("body", b""))
        if not m.get("more_body"):
            break
    return b"".join(chunks)


async def respond(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": headers if headers is not None else JSON_HEADERS,
        }
    )
    await send({"type": "http.response.body", "body": body})


async def respond_pinned(
    send: Send, pin: Pinned, req_id: Any, sse: bool, extra: list[tuple[bytes, bytes]]
) -> None:
    """A cached large list as JSON or as one SSE frame, with a Content-Length: the request's own
    head, then the pinned rest of the answer as it is (no copy of the list; see `pinned`)."""
    rid = wire.dumps(req_id)
    head = pinned.sse_head(rid) if sse else pinned.json_head(rid)
    rest = pin.sse if sse else pin.json
    length = str(len(head) + len(rest)).encode()
    headers = [*(SSE_HEADERS if sse else JSON_HEADERS), *extra, (b"content-length", length)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": head, "more_body": True})
    await send({"type": "http.response.body", "body": rest})


def headers_of(scope: Scope) -> dict[str, str]:
    # Optional whitespace around a field value is not part of it (RFC 9110 5.5).
    return {k.decode("latin-1"): v.decode("latin-1").strip(" \t") for k, v in scope["headers"]}


def accepts(headers: dict[str, str]) -> tuple[bool, bool]:
    acc = headers.get("accept", "")
    parts = [p.split(";")[0].strip() for p in acc.split(",")]
    return ("application/json" in parts or "*/*" in parts or "application/*" in parts), (
        "text/event-stream" in parts or "*/*" in parts or "text/*" in parts
    )


def response_body(req_id: Any, result: dict[str, Any] | bytes) -> bytes:
    if isinstance(result, bytes):
        return b'{"jsonrpc":"2.0","id":' + wire.dumps(req_id) + b',"result":' + result + b"}"
    return wire.dumps({"jsonrpc": "2.0", "id": req_id, "result": result})


class ResponseStream:
    """Lazily upgrades a POST response to SSE when the first intermediate message arrives."""

    __slots__ = ("extra", "send", "started")

    def __init__(self, send: Send, extra: list[tuple[bytes, bytes]]) -> None:
        self.send = send
        self.started = False
        self.extra = extra

    async def emit(self, msg: dict[str, Any]) -> None:
        if not self.started:
            self.started = True
            await self.send(
                {"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + self.extra}
            )
        if not msg:
            return
        await self.send({"type": "http.response.body", "body": wire.sse_frame(msg), "more_body": True})

    async def finish(self, status: int, body: bytes) -> None:
        if self.started:
            frame = b"event: message\ndata: " + body + b"\n\n"
            await self.send({"type": "http.response.body", "body": frame, "more_body": False})
        else:
            await respond(self.send, status, body, JSON_HEADERS + self.extra)


UNSUPPORTED_MEDIA_TYPE = wire.dumps(
    wire.error_message(
        None, wire.INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json"
    )
)


async def wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def server_version() -> str:
    from mcpfleet import __version__

    return str(__version__)


class EraFront:
    """The base of an era's front: the gateway, tracing, rate limits and the request size bounds."""

    def __init__(
        self,
        gateway: Gateway,
        *,
        tracer: Tracer | None,
        limiter: Limiter | None,
        max_json_depth: int,
    ) -> None:
        self.gateway = gateway
        self.tracer = tracer
        self.limiter = limiter
        self.max_json_depth = max_json_depth

    def _passthrough(self, h: dict[str, str]) -> dict[str, str] | None:
        """The request's headers named by `passthroughHeaders` (captured per request, in both eras)."""
        names = self.gateway.config.passthrough_headers
        if not names:
            return None
        found = {name.lower(): h[name.lower()] for name in names if name.lower() in h}
        return found or None

    async def _limited(
        self, send: Send, subject: str | None, msg: dict[str, Any], headers: list[tuple[bytes, bytes]]
    ) -> bool:
        """The rate-limit hook: True when `msg` was refused (answered 429 + Retry-After here)."""
        if self.limiter is None:
            return False
        started = time.perf_counter()
        refused = await ratelimit.refuse(self.limiter, subject, msg)
        if refused is None:
            return False
        await respond(send, refused[0], refused[2], [*refused[1], *headers])
        # Audited here: the request never reaches `Gateway.dispatch`, which audits the others.
        error = orjson.loads(refused[2]).get("error") or {}
        session = dict(headers).get(wire.H_SESSION.encode())
        self.gateway.audit_refusal(
            msg,
            "rate_limited",
            str(error.get("message", "rate limited")),
            started,
            session.decode("latin-1") if session else None,
        )
        return True

    async def _pump(
        self,
        receive: Receive,
        send: Send,
        q: asyncio.Queue[dict[str, Any]],
        extra: list[tuple[bytes, bytes]],
        first: dict[str, Any] | None,
    ) -> None:
        """Serve a standing SSE stream from a queue until the client disconnects (or `{}` arrives)."""
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + extra})
        await send(
            {
                "type": "http.response.body",
                "body": wire.sse_frame(first) if first else b": open\n\n",
                "more_body": True,
            }
        )
        disconnected = asyncio.ensure_future(wait_disconnect(receive))
        try:
            while True:
                getter = asyncio.ensure_future(q.get())
                done, _ = await asyncio.wait(
                    {getter, disconnected}, timeout=KEEPALIVE, return_when=asyncio.FIRST_COMPLETED
                )
                if disconnected in done:
                    getter.cancel()
                    return
                if getter not in done:
                    getter.cancel()
                    await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})
                    continue
                msg = getter.result()
                if not msg:
                    break
                await send({"type": "http.response.body", "body": wire.sse_frame(msg), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            return
        finally:
            disconnected.cancel()

    def _server_span(
        self,
        tracer: Tracer,
        method: str,
        params: Any,
        h: dict[str, str],
        era: str,
        version: str | None,
        session_id: str | None,
        req_id: Any,
    ) -> telemetry.current_span:
        p = params if isinstance(params, dict) else {}
        attrs: dict[str, Any] = {
            telemetry.MCP_METHOD: method,
            telemetry.VMCP_ERA: era,
            telemetry.JSONRPC_REQUEST_ID: str(req_id),
        }
        if version:
            attrs[telemetry.MCP_PROTOCOL_VERSION] = str(version)
        if session_id:
            attrs[telemetry.MCP_SESSION_ID] = session_id
        target = p.get("name") if method in ("tools/call", "prompts/get") else None
        if isinstance(target, str):
            attrs[telemetry.TOOL_NAME if method == "tools/call" else telemetry.PROMPT_NAME] = target
        uri = p.get("uri")
        if isinstance(uri, str):
            attrs[telemetry.MCP_RESOURCE_URI] = uri
        parent = None
        if "traceparent" in h:
            parent = telemetry.extract(h)
        else:
            meta = p.get("_meta")
            if isinstance(meta, dict) and "traceparent" in meta:
                parent = telemetry.extract(meta)  # the MCP semantic conventions' carrier
        name = f"{method} {target}" if isinstance(target, str) else method
        return telemetry.current_span(tracer, name, SpanKind.SERVER, attrs, parent)

    async def _traced_dispatch(
        self,
        tracer: Tracer,
        method: str,
        params: Any,
        ctx: CallContext,
        h: dict[str, str],
        version: str | None,
        session_id: str | None,
        req_id: Any,
    ) -> dict[str, Any] | bytes:
        with self._server_span(tracer, method, params, h, ctx.era, version, session_id, req_id) as span:
            try:
                result = await self.gateway.dispatch(method, params, ctx)
            except RPCError as exc:
                span.set_attribute(telemetry.RPC_STATUS_CODE, str(exc.code))
                telemetry.record_error(span, str(exc.code), exc.message)
                raise
            except BaseException as exc:
                telemetry.record_error(span, type(exc).__qualname__)
                raise
            if method == "tools/call" and isinstance(result, dict) and result.get("isError") is True:
                telemetry.record_error(span, "tool_error")
            return result
