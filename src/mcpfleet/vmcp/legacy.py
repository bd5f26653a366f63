"""The gateway's front for the handshake era (protocol 2025-11-25 and earlier) on `/mcp`.

`initialize` opens a client session (`Mcp-Session-Id`, capped per caller and in all), POSTs carry
requests, responses and notifications of that session, GET opens its one standing notification
stream, DELETE ends it. Answers made here (cached lists, ping) follow the backends' transport form
(SSE when they answer as SSE) so a client sees the same behaviour through the gateway as directly.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mcpfleet import jsonrpc
from mcpfleet.vmcp import wire
from mcpfleet.vmcp.clientsessions import SessionLimitError, SubjectSessionLimitError, session_owner
from mcpfleet.vmcp.context import CallContext, ClientSession, Listener
from mcpfleet.vmcp.front import (
    FORWARDED,
    JSON_HEADERS,
    UNSUPPORTED_MEDIA_TYPE,
    EraFront,
    Receive,
    ResponseStream,
    Scope,
    Send,
    accepts,
    read_body,
    respond,
    respond_pinned,
    response_body,
    server_version,
)
from mcpfleet.vmcp.wire import RPCError


class LegacyFront(EraFront):
    """`/mcp` for 2025-era clients (see the module docstring)."""

    async def handle(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        h: dict[str, str],
        token: str | None,
        subject: str | None = None,
    ) -> None:
        method = scope["method"]
        if method == "POST":
            address = scope.get("client")
            owner = session_owner(subject, str(address[0]) if address else None)
            await self._legacy_post(receive, send, h, token, subject, owner)
        elif method == "GET":
            await self._legacy_get(receive, send, h, token, subject)
        elif method == "DELETE":
            sid = h.get(wire.H_SESSION)
            if not sid:
                await respond(
                    send,
                    400,
                    wire.dumps(wire.error_message(None, wire.INVALID_REQUEST, "Missing Mcp-Session-Id")),
                )
            elif await self.gateway.find_session(
                sid, subject
            ) is not None and await self.gateway.close_session(sid):
                await respond(send, 200, b"")
            else:
                await respond(
                    send, 404, wire.dumps(wire.error_message(None, wire.INVALID_REQUEST, "Session not found"))
                )
        else:
            await respond(send, 405, b"", [(b"allow", b"GET, POST, DELETE")])

    async def _answered_before_dispatch(
        self, send: Send, kind: str, msg: dict[str, Any], session: ClientSession, subject: str | None
    ) -> bool:
        """A client response / notification (relayed, 202), or a request over the rate limits (429)."""
        if kind != "request":
            # A response to a server-to-client request, or a notification.
            await self.gateway.client_message(session, msg)
            await respond(send, 202, b"", [])
            return True
        return await self._limited(send, subject, msg, _sid(session))

    async def _session(
        self, h: dict[str, str], token: str | None, subject: str | None
    ) -> tuple[ClientSession | None, tuple[int, bytes] | None]:
        sid = h.get(wire.H_SESSION)
        if not sid:
            return None, (
                400,
                wire.dumps(wire.error_message(None, wire.INVALID_REQUEST, "Bad Request: Missing session ID")),
            )
        # Another subject's session answers exactly like an unknown one (nothing is revealed).
        s = await self.gateway.find_session(sid, subject)
        if s is None:
            return None, (
                404,
                wire.dumps(wire.error_message(None, wire.INVALID_REQUEST, "Session not found")),
            )
        s.last_seen = time.monotonic()
        if token is not None:
            s.token = token  # the same subject's refreshed token; used for its later client messages
        return s, None

    async def _traced_initialize(
        self,
        send: Send,
        msg: dict[str, Any],
        h: dict[str, str],
        token: str | None,
        subject: str | None,
        owner: str | None = None,
    ) -> None:
        """`initialize`, inside a SERVER span when tracing."""
        if self.tracer is None:
            await self._initialize(send, msg, token, subject, owner)
            return
        params = msg.get("params")
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        with self._server_span(self.tracer, "initialize", params, h, "legacy", version, None, msg.get("id")):
            await self._initialize(send, msg, token, subject, owner)

    async def _legacy_post(
        self,
        receive: Receive,
        send: Send,
        h: dict[str, str],
        token: str | None,
        subject: str | None,
        owner: str | None = None,
    ) -> None:
        refusal = _legacy_refusal(h)
        if refusal is not None:
            await respond(send, *refusal)
            return
        try:
            msg = jsonrpc.decode(await read_body(receive), self.max_json_depth)
            kind = jsonrpc.check_message(msg)
            if kind == "request" and msg["method"] == "initialize":
                _check_initialize(msg)
        except jsonrpc.MessageError as exc:
            await respond(send, 400, exc.body())
            return
        method = msg.get("method")
        req_id = msg.get("id")
        if method == "initialize" and kind == "request":
            await self._traced_initialize(send, msg, h, token, subject, owner)
            return
        session, problem = await self._session(h, token, subject)
        if problem is not None:
            await respond(send, problem[0], problem[1])
            return
        assert session is not None
        if kind != "response":
            try:
                jsonrpc.check_params(kind, method, msg.get("params"), session.version, req_id)
            except jsonrpc.MessageError as exc:
                # A request's bad params are a JSON-RPC error on an accepted POST (like any other
                # error of the request); a notification has no answer but the HTTP status.
                await respond(
                    send, 200 if kind == "request" else 400, exc.body(), [*JSON_HEADERS, *_sid(session)]
                )
                return
        if await self._answered_before_dispatch(send, kind, msg, session, subject):
            return
        assert isinstance(method, str)
        self.gateway.metrics.client_request(method)
        stream = ResponseStream(send, _sid(session))
        ctx = CallContext(
            era="legacy",
            session=session,
            emit=stream.emit,
            token=token,
            client_id=req_id,
            passthrough=self._passthrough(h),
        )
        try:
            if self.tracer is None:
                result = await self.gateway.dispatch(method, msg.get("params"), ctx)
            else:
                result = await self._traced_dispatch(
                    self.tracer, method, msg.get("params"), ctx, h, session.version, session.id, req_id
                )
        except RPCError as exc:
            await self._finish(
                stream, method, wire.dumps(wire.error_message(req_id, exc.code, exc.message, exc.data))
            )
            return
        pin = self.gateway.pinned(result) if isinstance(result, bytes) and not stream.started else None
        if pin is not None:
            sse = self.gateway.legacy_sse and method not in FORWARDED
            await respond_pinned(send, pin, req_id, sse, _sid(session))
            return
        await self._finish(stream, method, response_body(req_id, result))

    async def _finish(self, stream: ResponseStream, method: str, body: bytes) -> None:
        if not stream.started and self.gateway.legacy_sse and method not in FORWARDED:
            # Answers made here (cached lists, ping) take the form the backends use (SSE), so a
            # client sees the same transport behaviour through the gateway as directly.
            await stream.emit({})
        await stream.finish(200, body)

    async def _initialize(
        self,
        send: Send,
        msg: dict[str, Any],
        token: str | None,
        subject: str | None = None,
        owner: str | None = None,
    ) -> None:
        params = msg.get("params") or {}
        requested = params.get("protocolVersion")
        version = requested if requested in wire.HANDSHAKE_VERSIONS else wire.LATEST_HANDSHAKE
        try:
            session = await self.gateway.open_session(version, token, subject, owner)
        except SessionLimitError as exc:
            # One caller's cap: 429 (that caller is over its share); the global cap: 503.
            status = 429 if isinstance(exc, SubjectSessionLimitError) else 503
            body = wire.dumps(wire.error_message(msg.get("id"), exc.code, exc.message))
            await respond(send, status, body, [*JSON_HEADERS, (b"retry-after", b"5")])
            return
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self.gateway.capabilities(),
            "serverInfo": {
                "name": self.gateway.config.name,
                "title": "mcpfleet vMCP",
                "version": server_version(),
            },
        }
        instr = self.gateway.instructions()
        if instr:
            result["instructions"] = instr
        await respond(
            send,
            200,
            wire.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": result}),
            [*JSON_HEADERS, (b"mcp-session-id", session.id.encode())],
        )

    async def _legacy_get(
        self, receive: Receive, send: Send, h: dict[str, str], token: str | None, subject: str | None
    ) -> None:
        _, has_sse = accepts(h)
        if not has_sse:
            await respond(
                send,
                406,
                wire.dumps(
                    wire.error_message(
                        None, wire.INVALID_REQUEST, "Not Acceptable: must accept text/event-stream"
                    )
                ),
            )
            return
        session, err = await self._session(h, token, subject)
        if err is not None:
            await respond(send, err[0], err[1])
            return
        assert session is not None
        if session.stream is not None:
            await respond(
                send,
                409,
                wire.dumps(
                    wire.error_message(
                        None, wire.INVALID_REQUEST, "Conflict: Only one SSE stream is allowed per session"
                    )
                ),
            )
            return
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1000)
        session.stream = q
        ls = Listener(queue=q, session=session)
        self.gateway.listeners.add(ls)
        try:
            await self._pump(receive, send, q, [(b"mcp-session-id", session.id.encode())], None)
        finally:
            self.gateway.listeners.discard(ls)
            session.stream = None


def _sid(session: ClientSession) -> list[tuple[bytes, bytes]]:
    return [(b"mcp-session-id", session.id.encode())]


def _check_initialize(msg: dict[str, Any]) -> None:
    """`initialize` params, against the schema of the version the client asks for (else the latest)."""
    params = msg.get("params")
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    schema = requested if requested in wire.HANDSHAKE_VERSIONS else wire.LATEST_HANDSHAKE
    jsonrpc.check_params("request", "initialize", params, schema, msg["id"])


def _legacy_refusal(h: dict[str, str]) -> tuple[int, bytes] | None:
    """(406, error) unless JSON and SSE are both acceptable, (415, error) for a body that is not
    JSON; None when the POST may be read."""
    has_json, has_sse = accepts(h)
    if not (has_json and has_sse):
        err = wire.error_message(
            None,
            wire.INVALID_REQUEST,
            "Not Acceptable: Client must accept both application/json and text/event-stream",
        )
        return 406, wire.dumps(err)
    if not jsonrpc.is_json_media_type(h.get("content-type")):
        return 415, UNSUPPORTED_MEDIA_TYPE
    return None
