"""The proxy's rate-limit hook: an ASGI wrapper between incoming auth and the proxy app.

It reads a client's POST (`/mcp`, and `/messages` of the SSE transport), takes tokens for a
JSON-RPC request and, when a bucket is empty, answers HTTP 429 with `Retry-After` and the
JSON-RPC error (`mcpfleet.ratelimit.error`) - the SDK clients surface that error for the request.
Everything else (responses, notifications, GET streams, DELETE) passes untouched. The caller is the
subject of the `Identity` `AuthGuard` put in the scope (`IDENTITY_SCOPE_KEY`); anonymous callers
share one bucket.
"""

from __future__ import annotations

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpfleet.auth.asgi import scope_subject
from mcpfleet.httplimits import is_jsonrpc_post, read_body, replay_messages
from mcpfleet.ratelimit import Refusal, refuse
from mcpfleet.ratelimit.buckets import Limiter


class RateLimitGuard:
    """Wraps the proxy app: refuses JSON-RPC requests over `limiter`'s buckets."""

    def __init__(self, app: ASGIApp, limiter: Limiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if not is_jsonrpc_post(scope):
            await self.app(scope, receive, send)
            return
        body, messages = await read_body(receive)
        refused = await self._check(scope, body) if body is not None else None
        if refused is not None:
            status, headers, payload = refused
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": payload})
            return
        await self.app(scope, replay_messages(messages, receive), send)

    async def _check(self, scope: Scope, body: bytes) -> Refusal | None:
        try:
            msg = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None  # the app answers malformed bodies with its own error
        if not isinstance(msg, dict):
            return None
        return await refuse(self.limiter, scope_subject(scope), msg)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def closing(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                await self.limiter.aclose()
            await send(message)

        await self.app(scope, receive, closing)
