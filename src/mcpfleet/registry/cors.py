"""Cross-origin resource sharing for the registry API (issue 32 item 1), answered as the official
registry's CORS layer answers, so browser apps (registry UIs, the console) can read and publish.

- A preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered here, before routing and
  before any token check (browsers send preflights without credentials): 204 with `Vary: Origin,
  Access-Control-Request-Method, Access-Control-Request-Headers` and, when the origin and the method
  are allowed, `Access-Control-Allow-Origin` (`*` when every origin is), the method asked for, the
  request headers asked for (echoed when every header is allowed) and `Access-Control-Max-Age`.
- Every other answer gets `Vary: Origin` and, for an allowed `Origin`, `Access-Control-Allow-Origin`
  and `Access-Control-Expose-Headers`.

Standard library only: it is on the start path. Settings: the config's `cors` block (`config.Cors`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

Send = Callable[[dict[str, Any]], Awaitable[None]]

_PREFLIGHT_VARY = b"Origin, Access-Control-Request-Method, Access-Control-Request-Headers"


class CorsPolicy:
    """Allowed origins (`*`, exact, or one `*` wildcard such as `https://*.example.com`), methods,
    request headers (`*`: any) and exposed headers, and the preflight max-age in seconds."""

    def __init__(
        self,
        origins: Sequence[str],
        methods: Sequence[str],
        headers: Sequence[str],
        exposed: Sequence[str],
        max_age: int,
    ) -> None:
        self.any_origin = "*" in origins
        self.origins = frozenset(o.lower() for o in origins if "*" not in o)
        self.wildcards = [tuple(o.lower().split("*", 1)) for o in origins if "*" in o and o != "*"]
        self.methods = frozenset(m.upper() for m in methods)
        self.any_header = "*" in headers
        self.headers = frozenset(h.lower() for h in headers)
        self.exposed = ", ".join(exposed).encode()
        self.max_age = str(max_age).encode() if max_age > 0 else None

    def allows(self, origin: bytes) -> bool:
        if self.any_origin:
            return True
        text = origin.decode("latin-1").lower()
        if text in self.origins:
            return True
        return any(
            len(text) > len(a) + len(b) and text.startswith(a) and text.endswith(b) for a, b in self.wildcards
        )

    def _allow_origin(self, origin: bytes) -> bytes:
        return b"*" if self.any_origin else origin

    def preflight(self, headers: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """The headers of the 204 answering a preflight with these request headers."""
        origin = _get(headers, b"origin")
        method = (_get(headers, b"access-control-request-method") or b"").upper()
        asked = _get(headers, b"access-control-request-headers")
        out = [(b"vary", _PREFLIGHT_VARY)]
        if not origin or not self.allows(origin) or method.decode("latin-1") not in self.methods:
            return out
        if asked and not self.any_header:
            names = [h.strip().lower() for h in asked.decode("latin-1").split(",") if h.strip()]
            if any(name not in self.headers for name in names):
                return out
        out += [
            (b"access-control-allow-origin", self._allow_origin(origin)),
            (b"access-control-allow-methods", method),
        ]
        if asked:
            out.append((b"access-control-allow-headers", asked))
        if self.max_age is not None:
            out.append((b"access-control-max-age", self.max_age))
        return out

    def wrap(self, headers: Sequence[tuple[bytes, bytes]], send: Send) -> Send:
        """`send` with the CORS headers of an actual (non-preflight) request added to its answer."""
        origin = _get(headers, b"origin")
        extra = [(b"vary", b"Origin")]
        if origin and self.allows(origin):
            extra.append((b"access-control-allow-origin", self._allow_origin(origin)))
            if self.exposed:
                extra.append((b"access-control-expose-headers", self.exposed))

        async def cors_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        return cors_send


def is_preflight(scope: dict[str, Any]) -> bool:
    return (
        scope["method"] == "OPTIONS" and _get(scope["headers"], b"access-control-request-method") is not None
    )


async def answer_preflight(policy: CorsPolicy, scope: dict[str, Any], send: Send) -> None:
    headers = [*policy.preflight(scope["headers"]), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _get(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return bytes(value)
    return None
