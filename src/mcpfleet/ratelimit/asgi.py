"""The proxy's rate-limit hook: an ASGI wrapper between incoming auth and the proxy app.

It reads a client's POST (`/mcp`, and `/messages` of the SSE transport), takes tokens for a
JSON-RPC request and, when a bucket is empty, answers HTTP 429 with `Retry-After` and the
JSON-RPC error (`mcpfleet.ratelimit.error`) - the SDK clients surface that error for the request.
Everything else (responses, notifications, GET streams, DELETE) passes untouched. The caller is the
subject of the `Identity` `AuthGuard` put in the scope (`IDENTITY_SCOPE_KEY`); anonymous callers
share one bucket. A refusal is reported to `on_refused` (the proxy's audit: outcome `rate_limited`),
since the request never reaches the policy middleware inside.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpfleet.auth.asgi import scope_subject
from mcpfleet.httplimits import is_jsonrpc_post, read_body, replay_messages
from mcpfleet.ratelimit import refuse
from mcpfleet.ratelimit.buckets import Limiter

Headers = list[tuple[bytes, bytes]]
OnRefused = Callable[[Scope, dict[str, Any], str, float], None]
"""Called with the scope, the refused JSON-RPC request, the reason and when it arrived
(`time.perf_counter()`)."""


class RateLimitGuard:
    """Wraps the proxy app: refuses JSON-RPC requests over `limiter`'s buckets."""

    def __init__(self, app: ASGIApp, limiter: Limiter, on_refused: OnRefused | None = None) -> None:
        self.app = app
        self.limiter = limiter
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if not is_jsonrpc_post(scope):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        body, messages = await read_body(receive)
        refused = await self._check(scope, body) if body is not None else None
        if refused is not None:
            status, headers, payload, msg = refused
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": payload})
            if self.on_refused is not None:
                error = orjson.loads(payload).get("error") or {}
                self.on_refused(scope, msg, str(error.get("message", "rate limited")), started)
            return
        await self.app(scope, replay_messages(messages, receive), send)

    async def _check(self, scope: Scope, body: bytes) -> tuple[int, Headers, bytes, dict[str, Any]] | None:
        try:
            msg = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None  # the app answers malformed bodies with its own error
        if not isinstance(msg, dict):
            return None
        refused = await refuse(self.limiter, scope_subject(scope), msg)
        return None if refused is None else (*refused, msg)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def closing(message: Message) -> None:
            if message["type"] == "lifespan.shutdown.complete":
                await self.limiter.aclose()
            await send(message)

        await self.app(scope, receive, closing)
