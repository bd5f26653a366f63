"""The proxy's ASGI application: `/mcp` (streamable HTTP, both protocol eras), `/sse` + `/messages/`
(the deprecated HTTP+SSE transport) and `/health`.

Design: the proxy is a JSON-RPC relay, not an MCP server. HTTP framing is done by the SDK's
server transports (handshake era) or by `modern.py` (2026-07-28); everything inside the JSON-RPC
messages (capabilities, completion, subscriptions, sampling...) is relayed untouched to the child
through the multiplexer, except where one child serves both eras: `bridge.py` translates the
2026-07-28 exchanges onto its handshake-era connection. See docs/proxy.md for the reasoning.

Era routing mirrors the SDK's session manager: a request whose `MCP-Protocol-Version` header
names a version outside the handshake versions is served sessionless; everything else goes
through a stateful `Mcp-Session-Id` session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from mcpfleet import jsonrpc
from mcpfleet.httplimits import replay_body
from mcpfleet.proxy.backend import SessionServerLimit, StdioBackend
from mcpfleet.proxy.bridge import EraBridge
from mcpfleet.proxy.events import BoundedEventStore
from mcpfleet.proxy.modern import ToolSchemaCache, handle_modern
from mcpfleet.proxy.mux import Multiplexer
from mcpfleet.proxy.relay import relay_session

if TYPE_CHECKING:
    from mcpfleet.proxy.sse import SseEndpoints

log = logging.getLogger(__name__)

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def security_for(host: str, extra_hosts: list[str] | None = None) -> TransportSecuritySettings | None:
    """DNS-rebinding protection like the SDK applies it: on for loopback binds, plus explicit hosts."""
    hosts = list(extra_hosts or [])
    if host not in LOOPBACK_HOSTS and not hosts:
        return None
    allowed = ["127.0.0.1:*", "localhost:*", "[::1]:*", *hosts]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    origins += [f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=allowed, allowed_origins=origins
    )


@dataclass
class _Session:
    transport: StreamableHTTPServerTransport
    task: asyncio.Task[None]


@dataclass
class SessionManager:
    """Handshake-era sessions: one SDK transport per `Mcp-Session-Id`, relayed to the shared child."""

    acquire: Callable[[], Awaitable[Multiplexer]]
    release: Callable[[Multiplexer], Awaitable[None]]
    security: TransportSecuritySettings | None
    idle_timeout: float | None = 30 * 60
    max_sessions: int = 10_000
    replay_events: int = 1000
    # Per-session children: a request that cannot open a session must not start a process.
    opening_needs_initialize: bool = False
    max_json_depth: int = jsonrpc.DEFAULT_MAX_DEPTH
    _sessions: dict[str, _Session] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._sessions)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        body: bytes | None = None
        if request.method == "POST":
            screened = await screen_post(request, send, self.security, self.max_json_depth)
            if screened is None:
                return
            body, receive = screened
        session_id = request.headers.get(MCP_SESSION_ID_HEADER)
        if session_id is not None:
            session = self._sessions.get(session_id)
            if session is None:
                await _error_response("Session not found", 404)(scope, receive, send)
                return
            await session.transport.handle_request(scope, receive, send)
            if session.transport.is_terminated:
                await self._discard(session_id)
            return
        if len(self._sessions) >= self.max_sessions:
            await _error_response("Too many open sessions", 503)(scope, receive, send)
            return
        if self.opening_needs_initialize and not _is_initialize(body or b""):
            await _error_response("Bad Request: Missing session ID", 400)(scope, receive, send)
            return
        await self._open(scope, receive, send)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = uuid.uuid4().hex
        transport = StreamableHTTPServerTransport(
            mcp_session_id=session_id,
            security_settings=self.security,
            idle_timeout=self.idle_timeout,
            # Per session, so replay state ends with the session.
            event_store=BoundedEventStore(self.replay_events) if self.replay_events else None,
        )
        try:
            mux = await self.acquire()
        except SessionServerLimit as exc:
            await _error_response(str(exc), 503, retry_after=True)(scope, receive, send)
            return
        started = asyncio.get_running_loop().create_future()

        async def run() -> None:
            try:
                async with transport.connect() as (read_stream, write_stream):
                    started.set_result(None)
                    scope_ = transport.idle_scope
                    if scope_ is None:
                        await relay_session(read_stream, write_stream, mux)
                    else:
                        with scope_:
                            await relay_session(read_stream, write_stream, mux)
            finally:
                if not started.done():
                    started.set_result(None)
                self._sessions.pop(session_id, None)
                await self.release(mux)

        task = asyncio.create_task(run(), name=f"session-{session_id[:8]}")
        self._sessions[session_id] = _Session(transport, task)
        await started
        status = await _send_and_report_status(transport.handle_request, scope, receive, send)
        if status is None or status >= 400:
            # Only an accepted initialize opens a session; anything else leaves nothing behind.
            await self._discard(session_id)

    async def _discard(self, session_id: str) -> None:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        if not session.transport.is_terminated:
            await session.transport.terminate()
        session.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await session.task

    async def close(self) -> None:
        for session_id in list(self._sessions):
            await self._discard(session_id)


class ProxyApp:
    """ASGI app serving a stdio child over streamable HTTP (and optionally SSE)."""

    def __init__(
        self,
        backend: StdioBackend,
        *,
        security: TransportSecuritySettings | None,
        enable_sse: bool = False,
        session_idle_timeout: float | None = 30 * 60,
        isolation: str = "shared",
        max_json_depth: int = jsonrpc.DEFAULT_MAX_DEPTH,
    ) -> None:
        if isolation not in ("shared", "session"):
            raise ValueError(f"--isolation: expected shared or session, got {isolation!r}")
        self.backend = backend
        self.security = security
        self.schemas = ToolSchemaCache()
        self.bridges: dict[int, EraBridge] = {}
        self.max_json_depth = max_json_depth
        acquire: Callable[[], Awaitable[Multiplexer]] = self._handshake_mux
        release: Callable[[Multiplexer], Awaitable[None]] = self._keep
        if isolation == "session":
            acquire, release = backend.dedicated, backend.release
        self.sessions = SessionManager(
            acquire,
            release,
            security,
            idle_timeout=session_idle_timeout,
            opening_needs_initialize=isolation == "session",
            max_json_depth=max_json_depth,
        )
        self.sse: SseEndpoints | None = None
        if enable_sse:
            # Only `--transport sse` loads the SDK's SSE transport (and the auth stack it imports).
            from mcpfleet.proxy.sse import SseEndpoints

            self.sse = SseEndpoints(acquire, release, security)

    async def _handshake_mux(self) -> Multiplexer:
        return (await self.backend.channel("handshake")).mux

    async def _keep(self, mux: Multiplexer) -> None:
        """Shared children outlive sessions."""

    async def _modern_mux(self) -> Multiplexer:
        channel = await self.backend.channel("modern")
        if channel.mux.on_tools_changed is None:
            channel.mux.on_tools_changed = self._tools_changed
        return channel.mux

    def _bridge(self, mux: Multiplexer) -> EraBridge | None:
        """The translation onto `mux`'s handshake-era child, when 2026-07-28 is translated."""
        if not self.backend.translates():
            return None
        bridge = self.bridges.get(id(mux))
        if bridge is None:
            bridge = self.bridges[id(mux)] = EraBridge(mux)
        return bridge

    async def _tools_changed(self) -> None:
        self.schemas.invalidate()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        # (No `jsonrpc.preload_validators` here, unlike the vMCP gateway: the proxy checks the
        # JSON-RPC envelope only, `check_message`, and relays params to the child untouched, so it
        # never needs the SDK's per-method wire types: ~0.25 s of CPU and tens of MB if loaded.)
        path: str = scope["path"]
        if path in ("/mcp", "/mcp/"):
            await self._mcp(scope, receive, send)
        elif path == "/health":
            healthy, body = self.backend.health()
            body["sessions"] = len(self.sessions)
            status = 200 if healthy else 503
            await Response(orjson.dumps(body), status, media_type="application/json")(scope, receive, send)
        elif self.sse is not None and path in ("/sse", "/sse/"):
            await self.sse.handle_sse(scope, receive, send)
        elif self.sse is not None and path.startswith("/messages"):
            if scope["method"] == "POST":
                screened = await screen_post(
                    Request(scope, receive), send, self.security, self.max_json_depth
                )
                if screened is None:
                    return
                receive = screened[1]
            await self.sse.handle_post(scope, receive, send)
        else:
            await Response("Not Found", 404)(scope, receive, send)

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        version = next(
            (v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-protocol-version"), None
        )
        if version is not None and version.strip() not in HANDSHAKE_PROTOCOL_VERSIONS:
            await handle_modern(
                scope,
                receive,
                send,
                get_mux=self._modern_mux,
                schemas=self.schemas,
                security=self.security,
                max_json_depth=self.max_json_depth,
                get_bridge=self._bridge,
            )
            return
        await self.sessions.handle(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.backend.start()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.sessions.close()
                for bridge in self.bridges.values():
                    bridge.close()
                if self.sse is not None:
                    await self.sse.close()
                await self.backend.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _is_initialize(body: bytes) -> bool:
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(message, dict) and message.get("method") == "initialize"


async def screen_post(
    request: Request, send: Send, security: TransportSecuritySettings | None, max_depth: int
) -> tuple[bytes, Receive] | None:
    """Check a POST before an SDK transport sees it; None when it was answered with an error,
    else the body and a `receive` that hands it on unchanged.

    The SDK transports would take some malformed messages for notifications (an object id, a
    float id) and relay what the child cannot take (nesting orjson cannot write), so the envelope
    is checked here, after the same Host / Origin check the transport makes.
    """
    scope, receive = request.scope, request.receive
    if not jsonrpc.is_json_media_type(request.headers.get("content-type")):
        # Before the SDK's Host / Origin check, which answers a wrong media type with a plain 400.
        await _error_response("Unsupported Media Type: Content-Type must be application/json", 415)(
            scope, receive, send
        )
        return None
    err = await TransportSecurityMiddleware(security).validate_request(request, is_post=True)
    if err is not None:
        await err(scope, receive, send)
        return None
    body = await request.body()
    problem = check_post(body, max_depth)
    if problem is not None:
        await problem(scope, receive, send)
        return None
    # Media types are case-insensitive (RFC 9110 8.3.1); the SDK transports compare exactly.
    scope["headers"] = [
        (key, b"application/json" if key == b"content-type" else value) for key, value in scope["headers"]
    ]
    return body, replay_body(body, receive)


def check_post(body: bytes, max_depth: int) -> Response | None:
    """The error response for a POST body the relay must not pass on (400 with a JSON-RPC error
    naming the field), or None when it is fine."""
    try:
        jsonrpc.check_message(jsonrpc.decode(body, max_depth))
    except jsonrpc.MessageError as exc:
        return Response(exc.body(), status_code=400, media_type="application/json")
    return None


def _error_response(message: str, status: int, *, retry_after: bool = False) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    headers = {"Retry-After": "5"} if retry_after else None
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


async def _send_and_report_status(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int | None:
    status: int | None = None

    async def watch(message: Any) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    await app(scope, receive, watch)
    return status
