"""The console's request guard: Host / Origin, cross-site POSTs, body and query bounds, response headers.

Everything here runs before a route: a request with a foreign Host (DNS rebinding) gets 421, a
foreign Origin 403 — the proxy's policy (`proxy.http_app.security_for`, checked by the MCP SDK's
`TransportSecurityMiddleware`, as the proxy checks its own requests). A POST must also name an
allowed Origin (browsers always send one on POST; a request without one is not a browser's form and
is refused) and carry the console's CSRF token, so another site cannot make a visitor's browser add
a server or call a tool. Bodies are capped by size and every query value by length. Every answer
carries a strict Content-Security-Policy (scripts from the console itself only, no inline script, no
eval), `nosniff`, `no-referrer` and `frame-ancestors 'none'`.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl

from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpfleet.proxy.http_app import security_for

MAX_BODY_BYTES = 256 * 1024
"""A form (tool arguments, add-to-fleet values) larger than this is refused with 413."""
MAX_QUERY_BYTES = 4096
"""A query string longer than this is refused with 414."""
MAX_QUERY_VALUE = 512
"""A single query value (a search term, a filter) longer than this is refused with 400."""
CSRF_FIELD = "csrf_token"

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        # Images a tool returns are rendered from data: URLs the console builds (base64 it checked).
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


class CsrfToken:
    """One random token per console process: pages embed it, every POST must send it back.

    A foreign page cannot read the console's pages (no CORS, and the Origin / Host checks), so it
    cannot learn the token."""

    def __init__(self, value: str | None = None) -> None:
        self.value = value or secrets.token_urlsafe(32)

    def matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.value.encode())


class Guard:
    """ASGI middleware in front of the console app (see the module docstring)."""

    def __init__(self, app: ASGIApp, csrf: CsrfToken, extra_hosts: list[str] | None = None) -> None:
        self.app = app
        self.csrf = csrf
        settings = security_for("127.0.0.1", extra_hosts)
        self.transport_security = TransportSecurityMiddleware(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_headers(send)
        refusal = await self._refusal(scope, receive)
        if isinstance(refusal, Response):
            await refusal(scope, receive, send)
            return
        await self.app(scope, refusal or receive, send)

    async def _refusal(self, scope: Scope, receive: Receive) -> Response | Receive | None:
        """An error response, or (for a POST) a `receive` replaying the checked body, or None."""
        request = Request(scope, receive)
        refused = await self.transport_security.validate_request(request, is_post=False)
        if refused is not None:
            return refused
        query = scope.get("query_string", b"")
        if len(query) > MAX_QUERY_BYTES:
            return PlainTextResponse(f"query string longer than {MAX_QUERY_BYTES} bytes", 414)
        for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if len(value) > MAX_QUERY_VALUE or len(key) > MAX_QUERY_VALUE:
                return PlainTextResponse(f"query value {key[:40]!r} longer than {MAX_QUERY_VALUE}", 400)
        if scope["method"] in ("GET", "HEAD"):
            return None
        if scope["method"] != "POST":
            return PlainTextResponse("method not allowed", 405, headers={"Allow": "GET, HEAD, POST"})
        return await self._post(scope, receive)

    async def _post(self, scope: Scope, receive: Receive) -> Response | Receive:
        headers = Headers(scope=scope)
        if not headers.get("origin"):
            return PlainTextResponse("a POST must carry an Origin header (cross-site request refused)", 403)
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/x-www-form-urlencoded":
            return PlainTextResponse("Content-Type must be application/x-www-form-urlencoded", 415)
        body = await _read_body(receive, MAX_BODY_BYTES)
        if body is None:
            return PlainTextResponse(f"request body larger than {MAX_BODY_BYTES} bytes", 413)
        try:
            fields = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            return PlainTextResponse("form body is not UTF-8", 400)
        tokens = [v for k, v in fields if k == CSRF_FIELD]
        if len(tokens) != 1 or not self.csrf.matches(tokens[0]):
            return PlainTextResponse(f"missing or wrong {CSRF_FIELD} (cross-site request refused)", 403)
        return _replay(body)


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


def _with_headers(send: Send) -> Callable[[Message], Awaitable[None]]:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            names = {name for name, _ in SECURITY_HEADERS}
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
            message = {**message, "headers": [*headers, *SECURITY_HEADERS]}
        await send(message)

    return wrapped
