"""Who a request is served for and through what: the request-scoped types of the gateway.

`Caller` (claims, client, trace parent; set per request by the ASGI front through `CALLER`),
`CallContext` (one request's era, session, back channel, headers and audit facts), the 2025-era
`ClientSession` and the `Listener` of a notification stream. Every part of the gateway passes
these; none of them owns behaviour.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpfleet.policy.audit import Client
    from mcpfleet.vmcp import nested
    from mcpfleet.vmcp.upstream import BaseUpstream, Era

Emit = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(eq=False)
class ClientSession:
    """A 2025-era client session on the front (Mcp-Session-Id)."""

    id: str
    version: str
    token: str | None = None
    # Who opened it (issuer + subject of the bearer token; None when anonymous): only the same
    # subject may use the session (MCP security best practices: bind sessions to the user).
    subject: str | None = None
    stream: asyncio.Queue[dict[str, Any]] | None = None
    pending: dict[str, tuple[BaseUpstream, Any] | asyncio.Future[dict[str, Any]]] = field(
        default_factory=dict
    )
    """Requests sent to the client, by gateway id: a backend's (relayed back to it) or the gateway's
    own (a composite tool's elicitation step, answered into the future)."""
    inflight: dict[Any, tuple[BaseUpstream, int]] = field(default_factory=dict)
    subscriptions: set[str] = field(default_factory=set)
    log_level: str | None = None
    last_seen: float = field(default_factory=time.monotonic)
    owner: str | None = None
    """What the per-caller session cap counts it against (`clientsessions.session_owner`)."""


@dataclass(eq=False)
class Listener:
    """A standing notification stream: a legacy GET stream or a 2026 subscriptions/listen."""

    queue: asyncio.Queue[dict[str, Any]]
    tools: bool = True
    prompts: bool = True
    resources: bool = True
    uris: frozenset[str] | None = None  # None: the session's subscriptions decide (legacy)
    session: ClientSession | None = None
    meta: dict[str, Any] | None = None


@dataclass(frozen=True)
class Caller:
    """Who sent the request being served: the validated claims (None: anonymous) and where from."""

    claims: Mapping[str, Any] | None = None
    client: Client | None = None
    traceparent: str | None = None
    subject: str | None = None
    """The rate limits' key of the caller (None: anonymous); calls made for it are charged to it."""


CALLER: ContextVar[Caller | None] = ContextVar("mcpfleet_vmcp_caller", default=None)
"""Set by the ASGI front for the request it serves; a `CallContext` made for it takes it."""
NOBODY = Caller()


def current_caller() -> Caller:
    """The caller of the request being served (an anonymous one outside a request)."""
    return CALLER.get() or NOBODY


@dataclass
class CallContext:
    era: Era
    session: ClientSession | None = None
    emit: Emit | None = None
    token: str | None = None
    forward_headers: Mapping[str, str] | None = None
    passthrough: Mapping[str, str] | None = None
    """The client's `passthroughHeaders` on this request, sent to whichever backend serves it."""
    client_id: Any = None
    caller: Caller = field(default_factory=current_caller)
    backend: str | None = None
    """The backend the request went to (set when it is forwarded; for the audit)."""
    via: nested.Via | None = None
    """Set on a call made through call_tool or by a script: for the audit, limits and recursion rule."""
