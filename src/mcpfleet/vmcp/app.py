"""The gateway's ASGI application: `/mcp` for clients of both protocol eras, plus operations endpoints.

A thin JSON-RPC front of our own rather than the SDK's server machinery: the SDK server alone
costs ~1.3 ms and caps at ~700 calls/s on this machine, far above the gateway's budget, and a
pass-through front keeps completion, subscriptions, progress, logging and server-to-client
requests transparent (see docs/vmcp.md for the measurements).

Era routing follows the SDK: a `MCP-Protocol-Version` header naming a non-handshake version
selects the 2026-07-28 single-exchange path (per-request `_meta` envelope, `Mcp-Method` /
`Mcp-Name` header checks, `server/discover`, `subscriptions/listen`); everything else is the
2025 session path (`initialize`, `Mcp-Session-Id`, GET notification stream, DELETE).

Each era has its own front (`legacy.py`: 2025-11-25 and earlier, `modern.py`: 2026-07-28; their
shared pieces in `front.py`); this module owns what comes before the era is known (Host / Origin
checks, incoming auth, the caller) and the other endpoints.

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
import fnmatch
import logging
from typing import TYPE_CHECKING, Any

from mcpfleet import jsonrpc
from mcpfleet.auth.asgi import IDENTITY_SCOPE_KEY, Identity, unauthorized
from mcpfleet.auth.binding import subject_of
from mcpfleet.auth.oidc import AnonymousAuthenticator, Authenticator, AuthError
from mcpfleet.policy.audit import Client
from mcpfleet.vmcp import wire
from mcpfleet.vmcp.context import CALLER, Caller
from mcpfleet.vmcp.front import Receive, Scope, Send, headers_of, respond
from mcpfleet.vmcp.gateway import Gateway
from mcpfleet.vmcp.legacy import LegacyFront
from mcpfleet.vmcp.modern import ModernFront
from mcpfleet.vmcp.status import status_summary

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from mcpfleet.ratelimit import Limiter

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = ["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"]
LOOPBACK_ORIGINS = [
    "http://127.0.0.1:*",
    "http://localhost:*",
    "http://[::1]:*",
    "http://127.0.0.1",
    "http://localhost",
]


class VMCPApp:
    """The ASGI app: `/mcp` routed to the era's front, the operations endpoints, the lifespan."""

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
        fronts: dict[str, Any] = {"tracer": tracer, "limiter": limiter, "max_json_depth": max_json_depth}
        self._legacy = LegacyFront(gateway, **fronts)
        self._modern = ModernFront(gateway, **fronts)

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
                await respond(send, 200, b'{"status":"ok"}')
            elif path == "/readyz":
                ok = self.gateway.ready()
                await respond(send, 200 if ok else 503, wire.dumps({"ready": ok}))
            elif path == "/status":
                await self._status(scope, send)
            elif path == "/metrics":
                await respond(
                    send,
                    200,
                    self.gateway.metrics.render(),
                    [(b"content-type", self.gateway.metrics.content_type.encode())],
                )
            elif path == "/.well-known/oauth-protected-resource" and self.resource_metadata is not None:
                await respond(send, 200, wire.dumps(self.resource_metadata))
            else:
                await respond(send, 404, b'{"error":"not found"}')
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
        h = headers_of(scope)
        bad = self._dns_rebinding(h)
        if bad is not None:
            await respond(send, bad[0], bad[1], [(b"content-type", b"text/plain")])
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
                    await respond(send, 401, body, headers)
                    return
        await respond(send, 200, wire.dumps(doc))

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

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        h = headers_of(scope)
        bad = self._dns_rebinding(h)
        if bad is not None:
            await respond(send, bad[0], bad[1], [(b"content-type", b"text/plain")])
            return
        token: str | None = None
        subject: str | None = None
        claims: dict[str, Any] | None = None
        if not self.anonymous:
            try:
                claims = await self.auth.authenticate(h.get("authorization"))
            except AuthError as exc:
                headers, body = unauthorized(self.auth, exc)
                await respond(send, 401, body, headers)
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
            await self._modern.handle(scope, receive, send, h, token)
        else:
            await self._legacy.handle(scope, receive, send, h, token, subject)
