"""The gateway's ASGI application: `/mcp` for clients of both protocol eras, plus operations endpoints.

A thin JSON-RPC front of our own rather than the SDK's server machinery: the SDK server alone
costs ~1.3 ms and caps at ~700 calls/s on this machine, far above the gateway's budget, and a
pass-through front keeps completion, subscriptions, progress, logging and server-to-client
requests transparent (see docs/vmcp.md for the measurements).

Era routing follows the SDK: a `MCP-Protocol-Version` header naming a non-handshake version
selects the 2026-07-28 single-exchange path (per-request `_meta` envelope, `Mcp-Method` /
`Mcp-Name` header checks, `server/discover`, `subscriptions/listen`); everything else is the
2025 session path (`initialize`, `Mcp-Session-Id`, GET notification stream, DELETE).

Endpoints: `/mcp`, `/health` (process alive), `/readyz` (backends usable per
partialFailureMode), `/status` (JSON), `/metrics` (Prometheus), and
`/.well-known/oauth-protected-resource` when incoming auth is OIDC.

With a tracer, every JSON-RPC request (`initialize`, `server/discover` and everything dispatched to
the gateway) is a SERVER span `<method> [<tool or prompt>]` whose parent is the caller's
`traceparent` header (or `params._meta.traceparent`); notifications, client responses and the
standing notification streams are not traced. Without one, the only cost is an `is None` test.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
from opentelemetry.trace import SpanKind

from mcpfleet import jsonrpc, ratelimit, telemetry
from mcpfleet.auth.asgi import IDENTITY_SCOPE_KEY, Identity, scope_subject, unauthorized
from mcpfleet.auth.binding import subject_of
from mcpfleet.auth.oidc import AnonymousAuthenticator, Authenticator, AuthError
from mcpfleet.policy.audit import Client
from mcpfleet.vmcp import pinned, wire
from mcpfleet.vmcp.clientsessions import SessionLimitError, SubjectSessionLimitError, session_owner
from mcpfleet.vmcp.context import CALLER, CallContext, Caller, ClientSession, Listener
from mcpfleet.vmcp.gateway import Gateway
from mcpfleet.vmcp.pinned import Pinned
from mcpfleet.vmcp.status import status_summary
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from mcpfleet.ratelimit import Limiter

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_JSON = [(b"content-type", b"application/json")]
_SSE = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
# Requests the gateway forwards to a backend (their answer's form follows the backend's stream).
_FORWARDED = frozenset(
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
_KEEPALIVE = 15.0
LOOPBACK_HOSTS = ["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"]
LOOPBACK_ORIGINS = [
    "http://127.0.0.1:*",
    "http://localhost:*",
    "http://[::1]:*",
    "http://127.0.0.1",
    "http://localhost",
]


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        m = await receive()
        chunks.append(m.get("body", b""))
        if not m.get("more_body"):
            break
    return b"".join(chunks)


async def _respond(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": headers if headers is not None else _JSON,
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _respond_pinned(
    send: Send, pin: Pinned, req_id: Any, sse: bool, extra: list[tuple[bytes, bytes]]
) -> None:
    """A cached large list as JSON or as one SSE frame, with a Content-Length: the request's own
    head, then the pinned rest of the answer as it is (no copy of the list; see `pinned`)."""
    rid = wire.dumps(req_id)
    head = pinned.sse_head(rid) if sse else pinned.json_head(rid)
    rest = pin.sse if sse else pin.json
    length = str(len(head) + len(rest)).encode()
    headers = [*(_SSE if sse else _JSON), *extra, (b"content-length", length)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": head, "more_body": True})
    await send({"type": "http.response.body", "body": rest})


def _headers(scope: Scope) -> dict[str, str]:
    # Optional whitespace around a field value is not part of it (RFC 9110 5.5).
    return {k.decode("latin-1"): v.decode("latin-1").strip(" \t") for k, v in scope["headers"]}


def _accepts(headers: dict[str, str]) -> tuple[bool, bool]:
    acc = headers.get("accept", "")
    parts = [p.split(";")[0].strip() for p in acc.split(",")]
    return ("application/json" in parts or "*/*" in parts or "application/*" in parts), (
        "text/event-stream" in parts or "*/*" in parts or "text/*" in parts
    )


def _response(req_id: Any, result: dict[str, Any] | bytes) -> bytes:
    if isinstance(result, bytes):
        return b'{"jsonrpc":"2.0","id":' + wire.dumps(req_id) + b',"result":' + result + b"}"
    return wire.dumps({"jsonrpc": "2.0", "id": req_id, "result": result})


class _Stream:
    """Lazily upgrades a POST response to SSE when the first intermediate message arrives."""

    __slots__ = ("extra", "send", "started")

    def __init__(self, send: Send, extra: list[tuple[bytes, bytes]]) -> None:
        self.send = send
        self.started = False
        self.extra = extra

    async def emit(self, msg: dict[str, Any]) -> None:
        if not self.started:
            self.started = True
            await self.send({"type": "http.response.start", "status": 200, "headers": _SSE + self.extra})
        if not msg:
            return
        await self.send({"type": "http.response.body", "body": wire.sse_frame(msg), "more_body": True})

    async def finish(self, status: int, body: bytes) -> None:
        if self.started:
            frame = b"event: message\ndata: " + body + b"\n\n"
            await self.send({"type": "http.response.body", "body": frame, "more_body": False})
        else:
            await _respond(self.send, status, body, _JSON + self.extra)


class VMCPApp:
    def __init__(
        self,
        gateway: Gateway,
        authenticator: Authenticator | None = None,
        *,
        allowed_hosts: list[str] | None = None,
        allowed_origins: list[str] | None = None,
        manage_gateway: bool = True,
        resource_metadata: dict[str, Any] | None = None,
        tracer: Tracer | None = None,
        max_json_depth: int = jsonrpc.DEFAULT_MAX_DEPTH,
        limiter: Limiter | None = None,
    ) -> None:
        self.gateway = gateway
        # rateLimiting (mcpfleet.ratelimit): None when off, and the request path pays an `is None` test.
        self.limiter = limiter
        # Calls made through call_tool and by scripts are charged inside the gateway (vmcp/nested.py).
        gateway.limiter = limiter
        self.max_json_depth = max_json_depth
        self.tracer = tracer
        self.auth = authenticator or AnonymousAuthenticator()
        self.anonymous = isinstance(self.auth, AnonymousAuthenticator)
        self.allowed_hosts = allowed_hosts
        self.allowed_origins = allowed_origins
        self.manage_gateway = manage_gateway
        self.resource_metadata = resource_metadata
        self._preload = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        typ = scope["type"]
        if typ == "http":
            if self._preload:
                # The first request (a probe, usually) starts loading the validators of MCP requests:
                # after this answer goes out, so they load while the gateway already serves.
                self._preload = False
                asyncio.get_running_loop().call_soon(jsonrpc.preload_validators)
            path = scope["path"]
            if path == "/mcp" or path == "/mcp/":
                await self._mcp(scope, receive, send)
            elif path == "/health" or path == "/healthz":
                await _respond(send, 200, b'{"status":"ok"}')
            elif path == "/readyz":
                ok = self.gateway.ready()
                await _respond(send, 200 if ok else 503, wire.dumps({"ready": ok}))
            elif path == "/status":
                await self._status(scope, send)
            elif path == "/metrics":
                await _respond(
                    send,
                    200,
                    self.gateway.metrics.render(),
                    [(b"content-type", self.gateway.metrics.content_type.encode())],
                )
            elif path == "/.well-known/oauth-protected-resource" and self.resource_metadata is not None:
                await _respond(send, 200, wire.dumps(self.resource_metadata))
            else:
                await _respond(send, 404, b'{"error":"not found"}')
        elif typ == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            m = await receive()
            if m["type"] == "lifespan.startup":
                if self.manage_gateway:
                    try:
                        await self.gateway.start()
                    except Exception as exc:
                        await send({"type": "lifespan.startup.failed", "message": str(exc)})
                        return
                await send({"type": "lifespan.startup.complete"})
            elif m["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def aclose(self) -> None:
        """What the lifespan shutdown does: stop the gateway (if managed) and close the authenticator's
        HTTP session. Call it when the server stops without a lifespan shutdown (e.g. a forced exit)."""
        if self.manage_gateway:
            await self.gateway.stop()
        if self.limiter is not None:
            await self.limiter.aclose()
        if self.gateway.session_store is not None:
            await self.gateway.session_store.aclose()
        closer = getattr(self.auth, "close", None)
        if closer is not None:
            await closer()

    async def _status(self, scope: Scope, send: Send) -> None:
        """`/status`: the Host / Origin policy of `/mcp`; with incoming auth, a caller without a
        token sees only `status_summary` (no backend, URL or error), a bad token is a 401 as on
        `/mcp`, a valid one sees the whole (redacted) document."""
        h = _headers(scope)
        bad = self._dns_rebinding(h)
        if bad is not None:
            await _respond(send, bad[0], bad[1], [(b"content-type", b"text/plain")])
            return
        doc = self.gateway.status()
        if not self.anonymous:
            if "authorization" not in h:
                doc = status_summary(doc)
            else:
                try:
                    await self.auth.authenticate(h["authorization"])
                except AuthError as exc:
                    headers, body = unauthorized(self.auth, exc)
                    await _respond(send, 401, body, headers)
                    return
        await _respond(send, 200, wire.dumps(doc))

    # ---- /mcp --------------------------------------------------------------------------

    def _dns_rebinding(self, h: dict[str, str]) -> tuple[int, bytes] | None:
        if self.allowed_hosts is not None:
            host = h.get("host", "")
            if not any(fnmatch.fnmatchcase(host, pat) for pat in self.allowed_hosts):
                return 421, b"Invalid Host header"
        origin = h.get("origin")
        if origin and self.allowed_origins is not None:
            if not any(fnmatch.fnmatchcase(origin, pat) for pat in self.allowed_origins):
                return 403, b"Invalid Origin header"
        return None

    def _passthrough(self, h: dict[str, str]) -> dict[str, str] | None:
        """The request's headers named by `passthroughHeaders` (captured per request, in both eras)."""
        names = self.gateway.config.passthrough_headers
        if not names:
            return None
        found = {name.lower(): h[name.lower()] for name in names if name.lower() in h}
        return found or None

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        h = _headers(scope)
        bad = self._dns_rebinding(h)
        if bad is not None:
            await _respond(send, bad[0], bad[1], [(b"content-type", b"text/plain")])
            return
        token: str | None = None
        subject: str | None = None
        claims: dict[str, Any] | None = None
        if not self.anonymous:
            try:
                claims = await self.auth.authenticate(h.get("authorization"))
            except AuthError as exc:
                headers, body = unauthorized(self.auth, exc)
                await _respond(send, 401, body, headers)
                return
            token = h["authorization"].partition(" ")[2].strip()
            subject = subject_of(claims, token)
            scope[IDENTITY_SCOPE_KEY] = Identity(subject=subject, claims=claims)
        if self.gateway.policy.active or self.limiter is not None:
            # Who is calling, for authorization, audit and the rate limits of whatever this request
            # dispatches (calls made for it inside the gateway are charged to `subject`).
            address = scope.get("client")
            CALLER.set(
                Caller(
                    claims=claims,
                    client=Client(
                        address=f"{address[0]}:{address[1]}" if address else None,
                        user_agent=h.get("user-agent"),
                    ),
                    traceparent=h.get("traceparent"),
                    subject=subject,
                )
            )
        version = h.get(wire.H_VERSION)
        if version is not None and version not in wire.HANDSHAKE_VERSIONS:
            await self._modern(scope, receive, send, h, token)
        else:
            await self._legacy(scope, receive, send, h, token, subject)

    # ---- 2025 era ------------------------------------------------------------------------

    async def _legacy(
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
                await _respond(
                    send,
                    400,
                    wire.dumps(wire.error_message(None, wire.INVALID_REQUEST, "Missing Mcp-Session-Id")),
                )
            elif await self.gateway.find_session(
                sid, subject
            ) is not None and await self.gateway.close_session(sid):
                await _respond(send, 200, b"")
            else:
                await _respond(
                    send, 404, wire.dumps(wire.error_message(None, wire.INVALID_REQUEST, "Session not found"))
                )
        else:
            await _respond(send, 405, b"", [(b"allow", b"GET, POST, DELETE")])

    async def _answered_before_dispatch(
        self, send: Send, kind: str, msg: dict[str, Any], session: ClientSession, subject: str | None
    ) -> bool:
        """A client response / notification (relayed, 202), or a request over the rate limits (429)."""
        if kind != "request":
            # A response to a server-to-client request, or a notification.
            await self.gateway.client_message(session, msg)
            await _respond(send, 202, b"", [])
            return True
        return await self._limited(send, subject, msg, _sid(session))

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
        await _respond(send, refused[0], refused[2], [*refused[1], *headers])
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
            await _respond(send, *refusal)
            return
        try:
            msg = jsonrpc.decode(await _body(receive), self.max_json_depth)
            kind = jsonrpc.check_message(msg)
            if kind == "request" and msg["method"] == "initialize":
                _check_initialize(msg)
        except jsonrpc.MessageError as exc:
            await _respond(send, 400, exc.body())
            return
        method = msg.get("method")
        req_id = msg.get("id")
        if method == "initialize" and kind == "request":
            await self._traced_initialize(send, msg, h, token, subject, owner)
            return
        session, problem = await self._session(h, token, subject)
        if problem is not None:
            await _respond(send, problem[0], problem[1])
            return
        assert session is not None
        if kind != "response":
            try:
                jsonrpc.check_params(kind, method, msg.get("params"), session.version, req_id)
            except jsonrpc.MessageError as exc:
                # A request's bad params are a JSON-RPC error on an accepted POST (like any other
                # error of the request); a notification has no answer but the HTTP status.
                await _respond(send, 200 if kind == "request" else 400, exc.body(), [*_JSON, *_sid(session)])
                return
        if await self._answered_before_dispatch(send, kind, msg, session, subject):
            return
        assert isinstance(method, str)
        self.gateway.metrics.client_request(method)
        stream = _Stream(send, _sid(session))
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
            sse = self.gateway.legacy_sse and method not in _FORWARDED
            await _respond_pinned(send, pin, req_id, sse, _sid(session))
            return
        await self._finish(stream, method, _response(req_id, result))

    async def _finish(self, stream: _Stream, method: str, body: bytes) -> None:
        if not stream.started and self.gateway.legacy_sse and method not in _FORWARDED:
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
            await _respond(send, status, body, [*_JSON, (b"retry-after", b"5")])
            return
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self.gateway.capabilities(),
            "serverInfo": {"name": self.gateway.config.name, "title": "mcpfleet vMCP", "version": _version()},
        }
        instr = self.gateway.instructions()
        if instr:
            result["instructions"] = instr
        await _respond(
            send,
            200,
            wire.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": result}),
            [*_JSON, (b"mcp-session-id", session.id.encode())],
        )

    async def _legacy_get(
        self, receive: Receive, send: Send, h: dict[str, str], token: str | None, subject: str | None
    ) -> None:
        _, has_sse = _accepts(h)
        if not has_sse:
            await _respond(
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
            await _respond(send, err[0], err[1])
            return
        assert session is not None
        if session.stream is not None:
            await _respond(
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

    async def _pump(
        self,
        receive: Receive,
        send: Send,
        q: asyncio.Queue[dict[str, Any]],
        extra: list[tuple[bytes, bytes]],
        first: dict[str, Any] | None,
    ) -> None:
        """Serve a standing SSE stream from a queue until the client disconnects (or `{}` arrives)."""
        await send({"type": "http.response.start", "status": 200, "headers": _SSE + extra})
        await send(
            {
                "type": "http.response.body",
                "body": wire.sse_frame(first) if first else b": open\n\n",
                "more_body": True,
            }
        )
        disconnected = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            while True:
                getter = asyncio.ensure_future(q.get())
                done, _ = await asyncio.wait(
                    {getter, disconnected}, timeout=_KEEPALIVE, return_when=asyncio.FIRST_COMPLETED
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

    # ---- 2026-07-28 era -------------------------------------------------------------------

    async def _modern(
        self, scope: Scope, receive: Receive, send: Send, h: dict[str, str], token: str | None
    ) -> None:
        if scope["method"] != "POST":
            await _respond(send, 405, b"", [(b"allow", b"POST")])
            return
        has_json, has_sse = _accepts(h)
        if not (has_json and has_sse):
            await _respond(send, 406, b"")
            return
        if not jsonrpc.is_json_media_type(h.get("content-type")):
            await _respond(send, 415, _UNSUPPORTED_MEDIA_TYPE)
            return
        try:
            msg = jsonrpc.decode(await _body(receive), self.max_json_depth)
            kind = jsonrpc.check_message(msg)
        except jsonrpc.MessageError as exc:
            await _respond(send, 400, exc.body())
            return
        version = h.get(wire.H_VERSION, "")
        if kind == "response":
            invalid = "Body must be a single JSON-RPC request or notification object"
            await _respond(send, 400, wire.dumps(wire.error_message(None, wire.INVALID_REQUEST, invalid)))
            return
        if kind == "notification":
            if version not in wire.MODERN_VERSIONS:
                await self._modern_error(send, None, _unsupported(version))
            else:
                await _respond(send, 202, b"", [])
            return
        req_id = msg["id"]
        dup = _duplicated_routing_header(scope)
        if dup is not None:
            await self._modern_error(
                send, req_id, RPCError(wire.HEADER_MISMATCH, f"{dup} header appears more than once")
            )
            return
        from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request

        verdict = classify_inbound_request(msg, headers=h)
        if isinstance(verdict, InboundLadderRejection):
            await self._modern_error(send, req_id, RPCError(verdict.code, verdict.message, verdict.data))
            return
        if await self._limited(send, scope_subject(scope), msg, []):
            return
        await self._modern_request(receive, send, h, token, msg, version)

    async def _modern_request(
        self,
        receive: Receive,
        send: Send,
        h: dict[str, str],
        token: str | None,
        msg: dict[str, Any],
        version: str,
    ) -> None:
        """A 2026-07-28 request that passed the envelope checks: discover, listen, or a gateway method."""
        req_id, method = msg["id"], msg["method"]
        params = msg.get("params")
        if method in wire.MODERN_METHODS:
            try:
                jsonrpc.check_params("request", method, params, wire.LATEST_MODERN, req_id)
            except jsonrpc.MessageError as exc:
                await self._modern_error(send, req_id, RPCError(exc.code, exc.message))
                return
        self.gateway.metrics.client_request(method)
        if method == "server/discover":
            if self.tracer is None:
                await _respond(send, 200, _response(req_id, self._discover()))
            else:
                with self._server_span(self.tracer, method, params, h, "modern", version, None, req_id):
                    await _respond(send, 200, _response(req_id, self._discover()))
            return
        if method == "subscriptions/listen":
            await self._listen(receive, send, req_id, params or {})
            return
        if method not in wire.MODERN_METHODS:
            await self._modern_error(
                send, req_id, RPCError(wire.METHOD_NOT_FOUND, f"Method not found: {method}")
            )
            return
        fwd = None
        if method == "tools/call":
            fwd = {k: v for k, v in h.items() if k.startswith(wire.H_PARAM_PREFIX)} or None
        stream = _Stream(send, [])
        ctx = CallContext(
            era="modern",
            emit=stream.emit,
            token=token,
            forward_headers=fwd,
            client_id=req_id,
            passthrough=self._passthrough(h),
        )
        try:
            if self.tracer is None:
                result = await self.gateway.dispatch(method, params, ctx)
            else:
                result = await self._traced_dispatch(
                    self.tracer, method, params, ctx, h, version, None, req_id
                )
        except RPCError as exc:
            body = wire.dumps(wire.error_message(req_id, exc.code, exc.message, exc.data))
            await stream.finish(wire.ERROR_HTTP_STATUS.get(exc.code, 200), body)
            return
        if isinstance(result, dict) and "resultType" not in result:
            result["resultType"] = "complete"
        pin = self.gateway.pinned(result) if isinstance(result, bytes) and not stream.started else None
        if pin is not None:
            await _respond_pinned(send, pin, req_id, False, [])
            return
        await stream.finish(200, _response(req_id, result))

    # ---- tracing ---------------------------------------------------------------------------

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

    async def _modern_error(self, send: Send, req_id: Any, exc: RPCError) -> None:
        body = wire.dumps(wire.error_message(req_id, exc.code, exc.message, exc.data))
        await _respond(send, wire.ERROR_HTTP_STATUS.get(exc.code, 200), body)

    def _discover(self) -> dict[str, Any]:
        res: dict[str, Any] = {
            "supportedVersions": list(wire.MODERN_VERSIONS),
            "capabilities": self.gateway.capabilities(),
            "resultType": "complete",
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {wire.META_SERVER_INFO: {"name": self.gateway.config.name, "version": _version()}},
        }
        instr = self.gateway.instructions()
        if instr:
            res["instructions"] = instr
        return res

    async def _listen(self, receive: Receive, send: Send, req_id: Any, params: dict[str, Any]) -> None:
        wanted = params.get("notifications") or {}
        caps = self.gateway.capabilities()
        honored: dict[str, Any] = {}
        for key, cap in (
            ("toolsListChanged", "tools"),
            ("promptsListChanged", "prompts"),
            ("resourcesListChanged", "resources"),
        ):
            if wanted.get(key) is True and cap in caps:
                honored[key] = True
        uris = [u for u in wanted.get("resourceSubscriptions") or [] if isinstance(u, str)]
        if uris and (caps.get("resources") or {}).get("subscribe"):
            honored["resourceSubscriptions"] = uris
            for uri in uris:
                with contextlib.suppress(RPCError):
                    await self.gateway.dispatch(
                        "resources/subscribe", {"uri": uri}, CallContext(era="legacy")
                    )
        meta = {_SUBSCRIPTION_ID_META: req_id}
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1000)
        ls = Listener(
            queue=q,
            tools=bool(honored.get("toolsListChanged")),
            prompts=bool(honored.get("promptsListChanged")),
            resources=bool(honored.get("resourcesListChanged")),
            uris=frozenset(honored.get("resourceSubscriptions") or ()),
            meta=meta,
        )
        ack = {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": honored, "_meta": meta},
        }
        self.gateway.listeners.add(ls)
        try:
            await self._pump(receive, send, q, [], ack)
        finally:
            self.gateway.listeners.discard(ls)


_UNSUPPORTED_MEDIA_TYPE = wire.dumps(
    wire.error_message(
        None, wire.INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json"
    )
)


def _sid(session: ClientSession) -> list[tuple[bytes, bytes]]:
    return [(b"mcp-session-id", session.id.encode())]


def _unsupported(version: str) -> RPCError:
    return RPCError(
        wire.UNSUPPORTED_VERSION,
        "Unsupported protocol version",
        {"supported": list(wire.MODERN_VERSIONS), "requested": version},
    )


def _duplicated_routing_header(scope: Scope) -> str | None:
    seen: set[bytes] = set()
    for k, _ in scope["headers"]:
        if k in (b"mcp-protocol-version", b"mcp-method", b"mcp-name"):
            if k in seen:
                return str(k.decode())
            seen.add(k)
    return None


async def _wait_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _version() -> str:
    from mcpfleet import __version__

    return str(__version__)


def _check_initialize(msg: dict[str, Any]) -> None:
    """`initialize` params, against the schema of the version the client asks for (else the latest)."""
    params = msg.get("params")
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    schema = requested if requested in wire.HANDSHAKE_VERSIONS else wire.LATEST_HANDSHAKE
    jsonrpc.check_params("request", "initialize", params, schema, msg["id"])


def _legacy_refusal(h: dict[str, str]) -> tuple[int, bytes] | None:
    """(406, error) unless JSON and SSE are both acceptable, (415, error) for a body that is not
    JSON; None when the POST may be read."""
    has_json, has_sse = _accepts(h)
    if not (has_json and has_sse):
        err = wire.error_message(
            None,
            wire.INVALID_REQUEST,
            "Not Acceptable: Client must accept both application/json and text/event-stream",
        )
        return 406, wire.dumps(err)
    if not jsonrpc.is_json_media_type(h.get("content-type")):
        return 415, _UNSUPPORTED_MEDIA_TYPE
    return None
