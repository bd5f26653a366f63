"""The proxy's webhook middleware: mutating, then validating webhooks on each JSON-RPC request.

Where it sits (`proxy.serve.with_auth`): `AuthGuard -> RateLimitGuard -> WebhookMiddleware ->
PolicyMiddleware -> app`, ToolHive's order. After authentication, so the payload carries the
caller's validated principal; after the rate limits, so a flood is refused before it costs a
webhook call each; before authorization, so the Cedar policies judge the request as the server
will receive it (a mutating webhook could otherwise rewrite an authorized call into one no policy
allowed). A request a webhook refuses never reaches the policy layer: with audit on, this
middleware records it (outcome `denied` for a denial, `error` for a failing webhook, the webhook
named in `reason`), and the proxy logs the refusal (webhook name and reason, never the payload).

What it does, per POSTed JSON-RPC request (`/mcp` in both eras, the SSE transport's `/messages/`;
notifications, responses and other methods pass untouched, as in ToolHive):

1. each mutating webhook in order gets the current request and may answer a JSON Patch on it
   (`protocol.parse_mutating`, `apply_patch`); the next one sees the result;
2. each validating webhook gets the final request and answers allowed or not;
3. the (possibly rewritten) request goes on.

A denial (`allowed: false`, or HTTP 422 from the webhook) always refuses: JSON-RPC error
`FORBIDDEN` (-32012) naming the webhook and its reason. A webhook that cannot answer usably
(unreachable, timeout, 5xx or other non-200, not JSON, wrong shape, too large, a patch out of
scope or breaking the request) follows its `failurePolicy`: `ignore` goes on as if it had not
been called, `fail` refuses with `WEBHOOK_FAILED` (-32013) naming the webhook and why. Refusals
are HTTP 200 carrying the JSON-RPC error on `/mcp` (what MCP clients read) and HTTP 403 on the SSE
transport's `/messages/` (whose answers otherwise travel on the GET stream), never a 5xx.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from mcpfleet import jsonrpc
from mcpfleet.auth.asgi import scope_claims, scope_subject
from mcpfleet.httplimits import is_jsonrpc_post, read_body, replay_body, replay_messages
from mcpfleet.policy.asgi import audit_request
from mcpfleet.policy.audit import AuditLog
from mcpfleet.policy.guard import FORBIDDEN
from mcpfleet.webhook.client import CallFailed, WebhookClient
from mcpfleet.webhook.config import Endpoint, WebhookDocument
from mcpfleet.webhook.protocol import (
    MAX_REQUEST_BYTES,
    InvalidResponse,
    Verdict,
    apply_patch,
    parse_mutating,
    parse_validating,
    principal_of,
    request_payload,
)

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]

WEBHOOK_FAILED = -32013
"""JSON-RPC error code of a request refused because a `failurePolicy: fail` webhook gave no usable answer."""
ALWAYS_DENY_STATUS = 422
"""A webhook answering HTTP 422 denies whatever its failure policy (ToolHive's rule)."""


class Refused(Exception):
    """The request is refused: `error` is the JSON-RPC error object (without id); `outcome` is what
    the audit records (`denied` by a webhook, `error`: a failing webhook)."""

    def __init__(self, error: dict[str, Any], outcome: str) -> None:
        super().__init__(error["message"])
        self.error = error
        self.outcome = outcome


def _denied(kind: str, hook: Endpoint, verdict: Verdict | None) -> Refused:
    message = f"Request denied by {kind} webhook {hook.name}"
    data: dict[str, Any] = {"reason": "webhook", "webhook": hook.name}
    if verdict is not None:
        if verdict.message:
            message += f": {verdict.message}"
        if verdict.reason:
            data["webhookReason"] = verdict.reason
        if verdict.details:
            data["details"] = verdict.details
    return Refused({"code": FORBIDDEN, "message": message, "data": data}, "denied")


def _failed(kind: str, hook: Endpoint, why: str) -> Refused:
    return Refused(
        {
            "code": WEBHOOK_FAILED,
            "message": f"{kind.capitalize()} webhook {hook.name} failed: {why} (failurePolicy: fail)",
            "data": {"reason": "webhook-failed", "webhook": hook.name},
        },
        "error",
    )


class WebhookMiddleware:
    """Wraps the proxy app (or the policy middleware): calls the webhooks of `document`."""

    def __init__(
        self, app: ASGIApp, document: WebhookDocument, *, max_json_depth: int, audit: AuditLog | None = None
    ) -> None:
        self.app = app
        self.audit = audit
        self.document = document
        self.max_json_depth = max_json_depth
        self.mutating = [WebhookClient(e) for e in document.mutating]
        self.validating = [WebhookClient(e) for e in document.validating]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if not is_jsonrpc_post(scope):
            await self.app(scope, receive, send)
            return
        body, messages = await read_body(receive)
        message: Any = None
        if body is not None:
            try:
                message = orjson.loads(body)
            except orjson.JSONDecodeError:
                message = None  # the app answers malformed bodies with its own error
        sse = str(scope["path"]).startswith("/messages")
        if isinstance(message, list):
            # A JSON-RPC batch (2025-03-26): its requests are not sent to webhooks one by one.
            await _answer(send, 400, None, {"code": jsonrpc.INVALID_REQUEST, "message": _BATCH})
            return
        if not (isinstance(message, dict) and isinstance(message.get("method"), str) and "id" in message):
            await self.app(scope, replay_messages(messages, receive), send)
            return
        assert body is not None
        request_id = message.get("id")
        if len(body) > MAX_REQUEST_BYTES:
            error = {"code": jsonrpc.INVALID_REQUEST, "message": _TOO_LARGE}
            await _answer(send, 413, request_id, error)
            return
        started = time.perf_counter()
        try:
            final = await self._run(scope, body)
        except Refused as refused:
            await _answer(send, 403 if sse else 200, request_id, refused.error)
            if self.audit is not None:
                reason = f"webhook {refused.error['data']['webhook']}: {refused.error['message']}"
                audit_request(self.audit, scope, message, refused.outcome, started, reason)
            return
        if final is body:
            await self.app(scope, replay_messages(messages, receive), send)
        else:
            await self.app(scope, replay_body(final, receive), send)

    async def _run(self, scope: Scope, body: bytes) -> bytes:
        claims = scope_claims(scope)
        principal = principal_of(scope_subject(scope), claims)
        client = scope.get("client")
        source_ip = f"{client[0]}:{client[1]}" if client else ""

        def payload(current: bytes) -> bytes:
            return request_payload(
                current,
                principal=principal,
                server_name=self.document.server_name,
                namespace=self.document.namespace,
                source_ip=source_ip,
                transport=self.document.transport,
            )

        current = body
        for hook in self.mutating:
            current = await self._mutate(hook, payload(current), current)
        for hook in self.validating:
            await self._validate(hook, payload(current))
        return current

    async def _mutate(self, hook: WebhookClient, payload: bytes, current: bytes) -> bytes:
        endpoint = hook.endpoint
        try:
            answer = await hook.call(payload)
            if answer.status == ALWAYS_DENY_STATUS:
                raise _denied("mutating", endpoint, None)
            if answer.status != 200:
                raise InvalidResponse(f"HTTP {answer.status}")
            mutation = parse_mutating(answer.body)
            if not mutation.verdict.allowed:
                _log_refusal("mutating", endpoint, mutation.verdict)
                raise _denied("mutating", endpoint, mutation.verdict)
            if not mutation.patch:
                return current
            return apply_patch(current, mutation.patch, self.max_json_depth)
        except (CallFailed, InvalidResponse) as exc:
            return self._on_failure("mutating", endpoint, str(exc), current)

    async def _validate(self, hook: WebhookClient, payload: bytes) -> None:
        endpoint = hook.endpoint
        try:
            answer = await hook.call(payload)
            if answer.status == ALWAYS_DENY_STATUS:
                raise _denied("validating", endpoint, None)
            if answer.status != 200:
                raise InvalidResponse(f"HTTP {answer.status}")
            verdict = parse_validating(answer.body)
        except (CallFailed, InvalidResponse) as exc:
            self._on_failure("validating", endpoint, str(exc), b"")
            return
        if not verdict.allowed:
            _log_refusal("validating", endpoint, verdict)
            raise _denied("validating", endpoint, verdict)

    def _on_failure(self, kind: str, endpoint: Endpoint, why: str, current: bytes) -> bytes:
        if endpoint.failure_policy == "ignore":
            log.warning("%s webhook %s failed, ignored (failurePolicy: ignore): %s", kind, endpoint.name, why)
            return current
        log.warning("%s webhook %s failed, request refused: %s", kind, endpoint.name, why)
        raise _failed(kind, endpoint, why)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def closing(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                for hook in (*self.mutating, *self.validating):
                    await hook.aclose()
            await send(message)

        await self.app(scope, receive, closing)


_BATCH = "JSON-RPC batches are not accepted by a server with webhooks; send one request per POST"
_TOO_LARGE = f"Request larger than {MAX_REQUEST_BYTES} bytes, the limit with webhooks"


def _log_refusal(kind: str, endpoint: Endpoint, verdict: Verdict) -> None:
    log.info(
        "%s webhook %s denied a request: %s", kind, endpoint.name, verdict.reason or verdict.message or "-"
    )


async def _answer(send: Send, status: int, request_id: Any, error: dict[str, Any]) -> None:
    body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
