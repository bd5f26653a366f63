"""Rate limiting of the data plane (proxy and vMCP gateway): ToolHive's `rateLimiting` token buckets.

`buckets.py` owns the buckets and their stores (memory for one replica, Redis for several);
`asgi.py` is the proxy's hook (an ASGI wrapper inside incoming auth); the gateway calls
`Limiter.check` from its own request path. `build` makes a limiter from the config models, and
`error` is the one JSON-RPC error every refusal carries.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import orjson

from mcpfleet.ratelimit.buckets import Limiter, MemoryStore, RateLimited, RedisStore, Store
from mcpfleet.redisconn import redis_client

if TYPE_CHECKING:
    from mcpfleet.api.ratelimit import RateLimiting, SessionStorage

RATE_LIMITED = -32029
"""JSON-RPC error code of a refused request (server-defined range; 429 as in HTTP)."""

__all__ = ["RATE_LIMITED", "Limiter", "RateLimited", "Refusal", "build", "error", "refuse"]


def build(config: RateLimiting | None, storage: SessionStorage | None, scope: str) -> Limiter | None:
    """The limiter for `config` (None when rate limiting is off): Redis-backed when `storage` is redis."""
    if config is None:
        return None
    store: Store
    prefix = ""
    if storage is not None and storage.provider == "redis":
        store = RedisStore(redis_client(storage))
        prefix = storage.key_prefix or ""
    else:
        store = MemoryStore()
    return Limiter(config, store, scope, prefix)


Refusal = tuple[int, list[tuple[bytes, bytes]], bytes]
"""An HTTP answer: status, headers, body."""


async def refuse(limiter: Limiter, subject: str | None, msg: dict[str, Any]) -> Refusal | None:
    """The hook of the request paths: None when JSON-RPC request `msg` may go on, else the answer
    (HTTP 429, Retry-After, the JSON-RPC error). Responses and notifications always go on."""
    method = msg.get("method")
    if "id" not in msg or not isinstance(method, str):
        return None
    params = msg.get("params")
    tool = params.get("name") if isinstance(params, dict) and method == "tools/call" else None
    refused = await limiter.check(subject, method, tool if isinstance(tool, str) else None)
    if refused is None:
        return None
    headers = [(b"content-type", b"application/json"), (b"retry-after", refused.retry_after_header)]
    return 429, headers, orjson.dumps(error(msg.get("id"), refused))


def error(request_id: Any, refused: RateLimited) -> dict[str, Any]:
    """The JSON-RPC error answering a refused request: names the limit and says when to retry."""
    seconds = max(1, math.ceil(refused.retry_after))
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": RATE_LIMITED,
            "message": f"rate limit exceeded ({refused.limit}); retry after {seconds}s",
            "data": {"limit": refused.limit, "retryAfter": round(refused.retry_after, 3)},
        },
    }
