"""Authorization and audit in front of the proxy's MCP endpoint (an ASGI middleware).

The proxy relays JSON-RPC without understanding it, so policy sits in front of it, on the POSTed
messages (streamable HTTP `/mcp` in both protocol eras, the SSE transport's `/messages/`):

* a guarded request (`policy.guard.target_of`) the policies refuse is answered here with a
  JSON-RPC error (`FORBIDDEN`) and never reaches the server;
* a list request's response (JSON, or the SSE stream of that POST) is rewritten to keep only the
  items the caller may use. With the SSE transport the response travels on the GET stream, which
  this layer does not rewrite: lists there are filtered only through the gateway (docs/policy.md);
* each request gets one audit event, its outcome read from the response it got.

The caller's claims are the ones `auth.asgi.AuthGuard` validated (its `Identity` under
`IDENTITY_SCOPE_KEY` in the scope).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from mcpfleet.auth.asgi import scope_claims
from mcpfleet.httplimits import Message as ReadMessage
from mcpfleet.httplimits import read_body, replay_messages
from mcpfleet.policy.audit import AuditLog, Client, trace_id_of
from mcpfleet.policy.guard import LISTS, Policy, forbidden_error, target_of

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]

PEEK_BYTES = 65_536
"""How much of a response the audit reads for its outcome (a list response is read whole)."""


class PolicyMiddleware:
    """Wraps the proxy app: authorizes, filters lists, audits (see the module docstring)."""

    def __init__(self, app: ASGIApp, policy: Policy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or not _is_mcp(scope["path"]):
            await self.app(scope, receive, send)
            return
        body, chunks = await read_body(receive)
        try:
            message = orjson.loads(body) if body is not None else None
        except orjson.JSONDecodeError:
            message = None
        if not isinstance(message, dict) or not isinstance(message.get("method"), str) or "id" not in message:
            if isinstance(message, list) and self.policy.engine is not None:
                # A JSON-RPC batch (2025-03-26): refused whole rather than authorized piecemeal.
                await _json(send, 400, _batch_refusal())
                return
            await self.app(scope, replay_messages(chunks, receive), send)
            return
        await self._request(scope, receive, send, message, chunks)

    async def _request(
        self, scope: Scope, receive: Receive, send: Send, message: Message, chunks: list[ReadMessage]
    ) -> None:
        method: str = message["method"]
        params = message.get("params")
        request_id = message.get("id")
        claims = scope_claims(scope)
        started = time.perf_counter()
        target = target_of(method, params)
        if target is not None:
            decision = self.policy.check(claims, target)
            if decision is not None and not decision.allowed:
                sse_transport = scope["path"].startswith("/messages")
                # The SSE transport answers POSTs with 202 and the response on the GET stream:
                # a refusal there is an HTTP 403 carrying the same JSON-RPC error.
                await _json(send, 403 if sse_transport else 200, forbidden_error(request_id, method, target))
                self._audit(scope, message, "denied", started, decision.reason)
                return
        watcher = _ResponseWatcher(send, request_id, method, self.policy, claims)
        try:
            await self.app(scope, replay_messages(chunks, receive), watcher.send)
        finally:
            if self.policy.audit is not None:
                self._audit(scope, message, watcher.outcome(), started, None)

    def _audit(
        self, scope: Scope, message: Message, outcome: str, started: float, reason: str | None
    ) -> None:
        if self.policy.audit is not None:
            audit_request(self.policy.audit, scope, message, outcome, started, reason)


def audit_request(
    audit: AuditLog, scope: Scope, message: Message, outcome: str, started: float, reason: str | None
) -> None:
    """One audit event for the JSON-RPC request `message` received on `scope` (the proxy's hooks:
    this middleware, and the rate limiter for what it refuses before the request gets here)."""
    headers = dict(scope.get("headers") or [])
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    traceparent = headers.get(b"traceparent", b"").decode("latin-1") or (
        meta.get("traceparent") if isinstance(meta, dict) else None
    )
    client_info = params.get("clientInfo") if isinstance(params, dict) else None
    address = scope.get("client")
    audit.record(
        method=message["method"],
        params=params,
        outcome=outcome,
        duration=time.perf_counter() - started,
        claims=scope_claims(scope),
        client=Client(
            address=f"{address[0]}:{address[1]}" if address else None,
            user_agent=headers.get(b"user-agent", b"").decode("latin-1") or None,
            name=client_info.get("name") if isinstance(client_info, dict) else None,
        ),
        request_id=message.get("id"),
        trace_id=trace_id_of(traceparent if isinstance(traceparent, str) else None),
        reason=reason,
        session_id=headers.get(b"mcp-session-id", b"").decode("latin-1") or None,
    )


class _ResponseWatcher:
    """Passes the response through; rewrites a list response; remembers enough for the outcome."""

    def __init__(self, send: Send, request_id: Any, method: str, policy: Policy, claims: Any) -> None:
        self._send = send
        self._id = request_id
        self._filter = policy.engine is not None and method in LISTS
        self._method = method
        self._policy = policy
        self._claims = claims
        self.status = 0
        self._start: Message | None = None
        self._sse = False
        self._seen = bytearray()
        self._pending = bytearray()  # SSE bytes not yet forming a whole event (list filtering)
        self._response: Any = None

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            content_type = next((v for k, v in message.get("headers", []) if k == b"content-type"), b"")
            self._sse = content_type.startswith(b"text/event-stream")
            if self._filter and not self._sse:
                self._start = message  # held until the whole body is known (its length changes)
                return
            if self._filter:
                message = {
                    **message,
                    "headers": [(k, v) for k, v in message["headers"] if k != b"content-length"],
                }
            await self._send(message)
            return
        if message["type"] != "http.response.body":
            await self._send(message)
            return
        body: bytes = message.get("body", b"")
        more = bool(message.get("more_body"))
        if not self._filter:
            if len(self._seen) < PEEK_BYTES:
                self._seen += body[: PEEK_BYTES - len(self._seen)]
            await self._send(message)
            return
        if not self._sse:
            self._seen += body
            if more:
                return
            out = self._rewrite(bytes(self._seen))
            assert self._start is not None
            headers = [(k, v) for k, v in self._start["headers"] if k != b"content-length"]
            headers.append((b"content-length", str(len(out)).encode()))
            await self._send({**self._start, "headers": headers})
            await self._send({"type": "http.response.body", "body": out})
            return
        self._pending += body
        stream = bytearray()
        while True:
            end = _event_end(self._pending)
            if end < 0:
                break
            event, self._pending = bytes(self._pending[:end]), self._pending[end:]
            stream += self._rewrite_event(event)
        if not more and self._pending:
            stream += self._pending
            self._pending = bytearray()
        await self._send({"type": "http.response.body", "body": bytes(stream), "more_body": more})

    def _rewrite(self, body: bytes) -> bytes:
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            return body
        if isinstance(message, dict) and message.get("id") == self._id and "result" in message:
            self._response = message
            result = self._policy.filter_result(self._claims, self._method, message["result"])
            return orjson.dumps({**message, "result": result})
        self._response = message
        return body

    def _rewrite_event(self, event: bytes) -> bytes:
        lines = event.split(b"\n")
        data = [line[5:].lstrip(b" ") for line in lines if line.startswith(b"data:")]
        if not data:
            self._seen += event[:PEEK_BYTES]
            return event
        payload = b"\n".join(data)
        rewritten = self._rewrite(payload)
        if rewritten is payload:
            return event
        others = [line for line in lines if not line.startswith(b"data:") and line.strip()]
        return b"\n".join([*others, b"data: " + rewritten]) + b"\n\n"

    def outcome(self) -> str:
        if self.status >= 400:
            return "error"
        if self._response is None:
            self._response = _find_response(bytes(self._seen), self._id)
        response = self._response
        if not isinstance(response, dict):
            return "success" if self.status < 300 else "error"
        if "error" in response:
            return "error"
        result = response.get("result")
        if isinstance(result, dict) and result.get("isError") is True:
            return "tool_error"
        return "success"


def _is_mcp(path: str) -> bool:
    return path in ("/mcp", "/mcp/") or path.startswith("/messages")


def _event_end(buffer: bytearray) -> int:
    """The end (exclusive, separator included) of the first whole SSE event, or -1."""
    candidates = [i + len(sep) for sep in (b"\n\n", b"\r\n\r\n") if (i := buffer.find(sep)) >= 0]
    return min(candidates) if candidates else -1


def _find_response(seen: bytes, request_id: Any) -> Any:
    """The JSON-RPC response to `request_id` in a (peeked) JSON or SSE body, if there."""
    stripped = seen.strip()
    if stripped.startswith(b"{"):
        try:
            return orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return None
    for line in seen.split(b"\n"):
        if line.startswith(b"data:"):
            try:
                message = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                continue
            if isinstance(message, dict) and message.get("id") == request_id and "method" not in message:
                return message
    return None


def _batch_refusal() -> Message:
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "JSON-RPC batches are not accepted while authorization is on"},
    }


async def _json(send: Send, status: int, message: Message) -> None:
    body = orjson.dumps(message)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
