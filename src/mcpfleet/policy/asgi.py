"""Authorization and audit in front of the proxy's MCP endpoint (an ASGI middleware).

The proxy relays JSON-RPC without understanding it, so policy sits in front of it, on the POSTed
messages (streamable HTTP `/mcp` in both protocol eras, the SSE transport's `/messages/`):

* a guarded request (`policy.guard.target_of`) the policies refuse is answered here with a
  JSON-RPC error (`FORBIDDEN`) and never reaches the server;
* a list request's response (JSON, or the SSE stream of that POST: `policy.sse`) is rewritten to
  keep only the items the caller may use, failing closed: a response too large to hold
  (`MAX_LIST_BYTES`) or not JSON is replaced by a JSON-RPC error. With the legacy SSE transport
  the response travels on the `GET /sse` stream: that stream is rewritten too, each list answer
  filtered for the caller who POSTed the request (`policy.legacy_sse`);
* each request gets one audit event, its outcome read from the response it got.

The caller's claims are the ones `auth.asgi.AuthGuard` validated (its `Identity` under
`IDENTITY_SCOPE_KEY` in the scope).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from mcpfleet import jsonrpc
from mcpfleet.auth.asgi import scope_claims
from mcpfleet.httplimits import Message as ReadMessage
from mcpfleet.httplimits import read_body, replay_messages
from mcpfleet.policy.audit import AuditLog, Client, trace_id_of
from mcpfleet.policy.guard import LISTS, Policy, forbidden_error, target_of
from mcpfleet.policy.legacy_sse import LegacyStreams
from mcpfleet.policy.sse import MAX_EVENT_BYTES, SseRewriter
from mcpfleet.sse import SSEError, SSEParser

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]

PEEK_BYTES = 65_536
"""How much of a response the audit reads for its outcome (a list response is read whole)."""
MAX_LIST_BYTES = MAX_EVENT_BYTES
"""The largest list response (JSON body, or one SSE event) the proxy holds to filter it."""
UNFILTERABLE = -32603


class PolicyMiddleware:
    """Wraps the proxy app: authorizes, filters lists, audits (see the module docstring)."""

    def __init__(self, app: ASGIApp, policy: Policy) -> None:
        self.app = app
        self.policy = policy
        self.legacy = LegacyStreams(policy, MAX_LIST_BYTES) if policy.engine is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.legacy is not None and scope.get("method") == "GET" and scope["path"] in ("/sse", "/sse/"):
            stream = self.legacy.open(send)
            try:
                await self.app(scope, receive, stream.send)
            finally:
                self.legacy.close(stream)
            return
        is_mcp = _is_mcp(scope["path"]) or (
            self.legacy is not None
            and (
                self.legacy.knows(scope.get("query_string", b""))
                or self.legacy.is_message_path(scope["path"])
            )
        )
        if scope.get("method") != "POST" or not is_mcp:
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
                await self._refuse(scope, send, forbidden_error(request_id, method, target))
                self._audit(scope, message, "denied", started, decision.reason)
                return
        legacy = self.legacy is not None and method in LISTS and not scope["path"].startswith("/mcp")
        if legacy:
            assert self.legacy is not None
            # The answer comes on the GET stream: recorded before the server can send it.
            refused = self.legacy.expect(scope.get("query_string", b""), request_id, method, claims)
            if refused is not None:
                error = {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {
                        "code": UNFILTERABLE,
                        "message": f"{method}: {refused} (it cannot be authorized)",
                    },
                }
                await self._refuse(scope, send, error)
                self._audit(scope, message, "error", started, refused)
                return
        # A legacy POST is answered 202 with no list in it: nothing to filter there.
        watcher = _ResponseWatcher(send, request_id, method, self.policy, claims, filter_lists=not legacy)
        try:
            await self.app(scope, replay_messages(chunks, receive), watcher.send)
        finally:
            audit = self.policy.audit
            if audit is not None:
                outcome = watcher.outcome()
                # An error read from inside a delivered (2xx / 3xx) answer: detectApplicationErrors.
                application = outcome in ("error", "tool_error") and watcher.status < 400
                outcome = audit.outcome(outcome, application=application)
                self._audit(scope, message, outcome, started, None, watcher.answer())

    async def _refuse(self, scope: Scope, send: Send, error: Message) -> None:
        """Answer a request here: on streamable HTTP in the POST's response; on the legacy SSE
        transport as the transport answers (202, the response on the session's GET stream), or a
        403 carrying the error when that stream is not one this layer relays."""
        if scope["path"].startswith("/mcp"):
            await _json(send, 200, error)
            return
        stream = self.legacy.stream(scope.get("query_string", b"")) if self.legacy is not None else None
        if stream is None:
            await _json(send, 403, error)
            return
        await stream.inject(error)
        await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"8")]})
        await send({"type": "http.response.body", "body": b"Accepted"})

    def _audit(
        self,
        scope: Scope,
        message: Message,
        outcome: str,
        started: float,
        reason: str | None,
        response: Any = None,
    ) -> None:
        if self.policy.audit is not None:
            audit_request(self.policy.audit, scope, message, outcome, started, reason, response)


def audit_request(
    audit: AuditLog,
    scope: Scope,
    message: Message,
    outcome: str,
    started: float,
    reason: str | None,
    response: Any = None,
) -> None:
    """One audit event for the JSON-RPC request `message` received on `scope` (the proxy's hooks:
    this middleware, the rate limiter for what it refuses before the request gets here, and the
    webhook middleware for a request a webhook refused)."""
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
        response=response,
    )


class _ResponseWatcher:
    """Passes the response through; rewrites a list response; remembers enough for the outcome."""

    def __init__(
        self,
        send: Send,
        request_id: Any,
        method: str,
        policy: Policy,
        claims: Any,
        max_list: int | None = None,
        *,
        filter_lists: bool = True,
    ) -> None:
        self._send = send
        self._id = request_id
        self._filter = filter_lists and policy.engine is not None and method in LISTS
        self._method = method
        self._policy = policy
        self._claims = claims
        self._max = MAX_LIST_BYTES if max_list is None else max_list  # read now: tests lower it
        self.status = 0
        self._start: Message | None = None
        self._sse: SseRewriter | None = None
        self._seen = bytearray()
        self._too_large = False
        self._response: Any = None

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            content_type = next((v for k, v in message.get("headers", []) if k == b"content-type"), b"")
            if self._filter and content_type.startswith(b"text/event-stream"):
                self._sse = SseRewriter(self._rewrite_message, self._overflow, self._max)
                # The body changes length: drop content-length, stream the rewritten events.
                headers = [(k, v) for k, v in message["headers"] if k != b"content-length"]
                await self._send({**message, "headers": headers})
                return
            if self._filter:
                self._start = message  # held until the whole body is known (its length changes)
                return
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
        if self._sse is not None:
            out = self._sse.feed(body)
            if not more:
                out += self._sse.end()
            await self._send({"type": "http.response.body", "body": out, "more_body": more})
            return
        if not self._too_large:
            self._seen += body
            if len(self._seen) > self._max:
                self._too_large = True  # the rest is skipped, never held
                self._seen = bytearray()
        if more:
            return
        out = self._rewrite(bytes(self._seen))
        assert self._start is not None
        headers = [(k, v) for k, v in self._start["headers"] if k != b"content-length"]
        headers.append((b"content-length", str(len(out)).encode()))
        await self._send({**self._start, "headers": headers})
        await self._send({"type": "http.response.body", "body": out})

    def _rewrite(self, body: bytes) -> bytes:
        """A whole JSON list response, filtered; fail closed when it cannot be read."""
        if self._too_large:
            return orjson.dumps(self._overflow())
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            if self.status >= 300:
                return body  # an HTTP error's own text: no list in it for a client to read
            message = self._unfilterable("the server's list response is not JSON")
            self._response = message
            return orjson.dumps(message)
        # Nested too deep to write back (a remote server's answer): an error in its place.
        message = jsonrpc.relayable(message, body, "the server")
        if message is jsonrpc.UNRELAYABLE:
            message = self._unfilterable("the server's list response is nested too deep")
            self._response = message
            return orjson.dumps(message)
        return orjson.dumps(self._rewrite_message(message))

    def _rewrite_message(self, message: Any) -> Any:
        """Any JSON-RPC response (or batch of them) on the list request's answer, filtered."""
        if isinstance(message, list):
            return [self._rewrite_message(m) for m in message]
        if not isinstance(message, dict) or "method" in message or "result" not in message:
            return message
        if message.get("id") == self._id:
            self._response = message
        # Any response here, not only the one with the awaited id: a client's parser may read ids
        # differently (duplicate keys), and a filtered stray response costs nothing.
        return {
            **message,
            "result": self._policy.filter_result(self._claims, self._method, message["result"]),
        }

    def _overflow(self) -> Message:
        message = self._unfilterable(f"the server's list response is larger than {self._max} bytes")
        self._response = message
        return message

    def _unfilterable(self, why: str) -> Message:
        return {
            "jsonrpc": "2.0",
            "id": self._id,
            "error": {"code": UNFILTERABLE, "message": f"{why}: not relayed (it cannot be authorized)"},
        }

    def answer(self) -> Any:
        """The answer's JSON-RPC `result` or `error`, when it was found in the first PEEK_BYTES."""
        if self._response is None:
            self._response = _find_response(bytes(self._seen), self._id)
        response = self._response
        if not isinstance(response, dict):
            return None
        return response.get("error", response.get("result"))

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


def _find_response(seen: bytes, request_id: Any) -> Any:
    """The JSON-RPC response to `request_id` in a (peeked) JSON or SSE body, if there."""
    stripped = seen.strip()
    if stripped.startswith(b"{"):
        try:
            return orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return None
    # The peeked bytes are bounded, so the parser's own bound is theirs; a cut-off event does not parse.
    parser = SSEParser(max(len(seen), 1))
    try:
        events = [*parser.feed(seen), *parser.close()]
    except SSEError:
        return None
    for event in events:
        try:
            message = orjson.loads(event.data)
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
