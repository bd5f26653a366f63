"""The gateway core: backends, cached capability lists, routing, health, fan-out of notifications.

Protocol-era independent: the ASGI front (`app.py`) parses and validates the wire, then calls
`Gateway.dispatch(method, params, ctx)`. Lists are served from a cache rebuilt only when a
backend's lists change (list_changed notification, connect, health transition), never per request
(with authorization on, the cached lists are filtered per caller).

Policy (`mcpfleet.policy`): every tool call, prompt get and resource read is authorized with the
caller's claims (`CallContext.claims`) before it is routed — `Gateway.authorize` is the one check,
used by `call_tool` (which code-mode / find-tool callers must go through: it is a normal
tools/call) and by each composite step — and `dispatch` writes one audit event per request. Calls
made for a client through call_tool or by a script are rate-limited and audited one by one, linked to
the client's request (`vmcp/nested.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry.trace import SpanKind, set_span_in_context

from mcpfleet import telemetry
from mcpfleet.api.duration import parse_duration
from mcpfleet.api.gatewayconfig import CompositeTool
from mcpfleet.policy.audit import AuditLog, Client, trace_id_of
from mcpfleet.policy.config import AuthzConfigError
from mcpfleet.policy.engine import PolicyEngine
from mcpfleet.policy.guard import FORBIDDEN, Policy, Target, audit_log, denial, target_of
from mcpfleet.redact import redact_text, redact_url
from mcpfleet.toolconfig import unknown_tool_result
from mcpfleet.vmcp import aggregate, httpclient, lazyhttp, nested, wire
from mcpfleet.vmcp.aggregate import Aggregate, BackendLists, ConflictError, Route
from mcpfleet.vmcp.auth.outgoing import OutgoingAuthFactory, WithHeaders, backend_headers
from mcpfleet.vmcp.backends import BackendSource, BackendSpec
from mcpfleet.vmcp.codemode import SCRIPT_TOOL, CodeRunner, tool_definition
from mcpfleet.vmcp.composite import CompositeRunner, output_schema
from mcpfleet.vmcp.config import VMCPConfig
from mcpfleet.vmcp.health import BackendHealth, reconnect_delay
from mcpfleet.vmcp.metrics import Metrics
from mcpfleet.vmcp.optimizer import CALL_TOOL, FIND_TOOL, META_TOOLS, ToolFinder, call_arguments, meta_tools
from mcpfleet.vmcp.pinned import MIN_BYTES, Pinned, PinnedCache
from mcpfleet.vmcp.reload import ConfigWatcher
from mcpfleet.vmcp.status import NoopStatusWriter, StatusWriter
from mcpfleet.vmcp.upstream import BackendUnavailable, BaseUpstream, Era, make_upstream
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    import aiohttp
    from opentelemetry.trace import Tracer

    from mcpfleet.ratelimit import Limiter
    from mcpfleet.vmcp.sessions import SessionStore

log = logging.getLogger(__name__)

Emit = Callable[[dict[str, Any]], Awaitable[None]]
# A 2025-era client session with no open stream and no request for this long is forgotten.
SESSION_IDLE_SECONDS = 3600.0
# At most this many 2025-era client sessions at once; `initialize` beyond it gets HTTP 503.
MAX_SESSIONS = 10_000
# At most this many of them opened by one caller (a token's subject; anonymous: a client address),
# so that one caller cannot take every session; `initialize` beyond it gets HTTP 429.
MAX_SESSIONS_PER_SUBJECT = 100
# The status report is written at most once per this many seconds, except right after a backend
# connected (see `_status_loop`).
STATUS_COALESCE = 0.5


class SessionLimitError(RPCError):
    """Too many client sessions: `initialize` is refused (HTTP 503) until some end or expire."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            wire.INTERNAL_ERROR,
            f"too many open sessions (limit {limit}); retry later, or end unused sessions with DELETE",
        )


class SubjectSessionLimitError(SessionLimitError):
    """Too many client sessions opened by one caller: its `initialize` is refused (HTTP 429)."""

    def __init__(self, limit: int) -> None:
        RPCError.__init__(
            self,
            wire.INTERNAL_ERROR,
            f"too many open sessions for this caller (limit {limit} per caller); "
            "end unused sessions with DELETE, or retry when idle ones expire",
        )


def session_owner(subject: str | None, address: str | None) -> str | None:
    """Who a session counts against for the per-caller cap: the token's subject, else the client's
    address (an anonymous caller); None when neither is known (no per-caller cap)."""
    if subject is not None:
        return "subject:" + subject
    return None if address is None else "address:" + address


# list method -> (capability, result key, BackendLists attribute)
LISTS: dict[str, tuple[str, str, str]] = {
    "tools/list": ("tools", "tools", "tools"),
    "resources/list": ("resources", "resources", "resources"),
    "resources/templates/list": ("resources", "resourceTemplates", "templates"),
    "prompts/list": ("prompts", "prompts", "prompts"),
}
_LIST_CHANGED = {
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
    "notifications/prompts/list_changed": ("prompts/list",),
}


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
    """What the per-caller session cap counts it against (`session_owner`)."""


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
_NOBODY = Caller()


def current_caller() -> Caller:
    """The caller of the request being served (an anonymous one outside a request)."""
    return CALLER.get() or _NOBODY


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


@dataclass
class Backend:
    spec: BackendSpec
    health: BackendHealth
    upstream: BaseUpstream | None = None
    # Per protocol era: a backend may advertise different lists to 2025 and 2026 clients.
    lists: dict[str, BackendLists] = field(default_factory=dict)
    list_errors: dict[str, str] = field(default_factory=dict)

    def lists_for(self, era: Era) -> BackendLists:
        other: Era = "modern" if era == "legacy" else "legacy"
        return self.lists.get(era) or self.lists.get(other) or BackendLists(self.spec.name)

    connecting: asyncio.Lock = field(default_factory=asyncio.Lock)
    joined: float = field(default_factory=time.monotonic)
    # Extra connect tries while it is not connected yet (`health.reconnect_delay`).
    tries: int = 0
    retry_at: float | None = None

    @property
    def connected(self) -> bool:
        return self.upstream is not None


class Gateway:
    def __init__(
        self,
        config: VMCPConfig,
        source: BackendSource,
        *,
        http: aiohttp.ClientSession | lazyhttp.LazySession | None = None,
        status_writer: StatusWriter | None = None,
        metrics: Metrics | None = None,
        tracer: Tracer | None = None,
        max_sessions: int = MAX_SESSIONS,
        session_idle: float = SESSION_IDLE_SECONDS,
        config_file: str | None = None,
        max_sessions_per_subject: int = MAX_SESSIONS_PER_SUBJECT,
    ) -> None:
        self.config = config
        # The file `config` was read from: followed while running, its aggregation settings re-applied.
        self._watcher = ConfigWatcher(config_file, self) if config_file else None
        self.max_sessions = max_sessions
        self.max_sessions_per_subject = max_sessions_per_subject
        self._owned: dict[str, int] = {}  # open sessions per owner (`session_owner`)
        self.session_idle = session_idle
        self._cap_pruned = 0.0
        # None: tracing off, and the call path pays one `is None` test for it.
        self.tracer = tracer
        self._span_attrs: dict[str, dict[str, Any]] = {}
        self.source = source
        self._http = http
        self._own_http = http is None
        self._fast: httpclient.Client | None = None
        self.status_writer = status_writer or NoopStatusWriter()
        self.metrics = metrics or Metrics()
        self.backends: dict[str, Backend] = {}
        self.aggs: dict[Era, Aggregate] = {"legacy": Aggregate(), "modern": Aggregate()}
        self.sessions: dict[str, ClientSession] = {}
        # sessionStorage redis: sessions shared with the other replicas (vmcp/sessions.py).
        self.session_store: SessionStore | None = None
        self.listeners: set[Listener] = set()
        self.composites = {c.name: c for c in config.composite_tools}
        self._runner = CompositeRunner(self._call_step, tracer=tracer, elicit=self._elicit)
        self._config_dir = Path(config_file).parent if config_file else None
        self.policy = Policy(
            engine=PolicyEngine(config.authz, base_dir=self._config_dir) if config.authz else None,
            audit=audit_log(config.audit, config.name, self._config_dir)
            if config.audit and config.audit.enabled
            else None,
        )
        self._outgoing = OutgoingAuthFactory(config.outgoing_auth)
        self.finder: ToolFinder | None = ToolFinder(config.optimizer) if config.optimizer else None
        self.code: CodeRunner | None = CodeRunner(config.code_mode) if config.code_mode.enabled else None
        # rateLimiting, set by the HTTP front that owns it: calls made through call_tool and by
        # scripts are charged here (vmcp/nested.py), the client's own requests there.
        self.limiter: Limiter | None = None
        fh = config.operational.failure_handling
        self._check_interval = parse_duration(fh.health_check_interval)
        self._check_timeout = parse_duration(fh.health_check_timeout)
        self._status_interval = parse_duration(fh.status_reporting_interval)
        self.best_effort = fh.partial_failure_mode == "best_effort"
        self._cache: dict[tuple[str, Era], bytes] = {}
        self._pinned = PinnedCache()
        self._tasks: list[asyncio.Task[Any]] = []
        self._bg: set[asyncio.Task[Any]] = set()
        self._first_set = asyncio.Event()
        self._ids = itertools.count(1)
        self.started_at = time.time()
        self.startup_error: str | None = None
        self.legacy_sse = False
        self._status_dirty = asyncio.Event()
        self._status_urgent = asyncio.Event()
        self._retry_due = asyncio.Event()
        self._retries: set[asyncio.Task[None]] = set()
        self._tls_sessions: dict[str, lazyhttp.LazySession] = {}

    # ---- lifecycle ---------------------------------------------------------------------

    async def start(self, wait: float = 30.0) -> None:
        """Take the first backend set, connect it, build lists; raises ConflictError (manual mode)."""
        if self._http is None:
            # aiohttp loads on first use only: plain-http backends are served by `httpclient`.
            self._http = lazyhttp.LazySession()
        if self._fast is None:
            self._fast = httpclient.Client()
        self._tasks.append(asyncio.create_task(self._follow_source(), name="vmcp-source"))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await self._first_set.wait()
        if self.startup_error:
            await self.stop()
            raise ConflictError(self.startup_error)
        self._tasks.append(asyncio.create_task(self._health_loop(), name="vmcp-health"))
        self._tasks.append(asyncio.create_task(self._reconnect_loop(), name="vmcp-reconnect"))
        self._tasks.append(asyncio.create_task(self._session_loop(), name="vmcp-sessions"))
        self._tasks.append(asyncio.create_task(self._status_loop(), name="vmcp-status"))
        if self._watcher is not None:
            self._tasks.append(asyncio.create_task(self._watcher.run(), name="vmcp-config"))

    async def stop(self) -> None:
        for ls in list(self.listeners):
            with contextlib.suppress(asyncio.QueueFull):
                ls.queue.put_nowait({})  # ends the stream
        for t in [*self._tasks, *self._retries]:
            t.cancel()
        for t in [*self._tasks, *self._retries]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        await asyncio.gather(*(self._disconnect(b) for b in self.backends.values()), return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.status_writer.write(self.status())
        await self._outgoing.close()
        for session in self._tls_sessions.values():
            await session.close()
        self._tls_sessions.clear()
        if self.finder is not None:
            await self.finder.close()
        if self.code is not None:
            await self.code.close()
        if self._own_http and self._http is not None:
            await self._http.close()
            self._http = None
        if self._fast is not None:
            self._fast.close()
            self._fast = None

    async def _follow_source(self) -> None:
        try:
            async for specs in self.source.watch():
                try:
                    await self.apply(specs)
                except ConflictError as exc:
                    self.startup_error = str(exc)
                    if not self._first_set.is_set():
                        self._first_set.set()
                        return
                    log.error("backend set change rejected: %s", exc)
                self._first_set.set()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("backend source failed")
            self._first_set.set()

    async def apply(self, specs: list[BackendSpec]) -> None:
        """Move to a new backend set: connect new ones, drop removed ones, reconnect changed URLs."""
        new = {s.name: s for s in specs}
        removed = [b for n, b in self.backends.items() if n not in new or new[n] != b.spec]
        for b in removed:
            del self.backends[b.spec.name]
        if removed and self._first_set.is_set():
            # Withdraw their capabilities at once, so lists and status never show a removed backend.
            for m in self.rebuild():
                self.broadcast_list_changed(m)
        await asyncio.gather(*(self._disconnect(b) for b in removed), return_exceptions=True)
        fh = self.config.operational.failure_handling
        added = []
        for name, spec in new.items():
            if name not in self.backends:
                b = Backend(spec=spec, health=BackendHealth.from_config(fh))
                self.backends[name] = b
                added.append(b)
        if not self._first_set.is_set():
            # The first set is connected before the gateway serves (and a conflict stops it).
            await asyncio.gather(*(self._connect(b) for b in added))
            self.rebuild(strict=True)
        else:
            # Each newcomer connects in a task of its own, which publishes its lists when connected:
            # a backend whose connect is slow (a proxy starting its 2026-era server) does not hold up
            # the next backend set, nor the newcomers that joined with it.
            for b in added:
                self._track(self._connect_and_publish(b, counted=True))
        if removed or added:
            log.info(
                "backends now %s (added %s, removed %s)",
                sorted(self.backends),
                [b.spec.name for b in added],
                [b.spec.name for b in removed],
            )

    async def _connect(self, b: Backend, counted: bool = True) -> bool:
        """Connect (initialize, then the lists); False when it failed. A failure is recorded as a
        health failure when `counted` (not for the extra tries between checks), and an extra try
        is scheduled while the backend is in its reconnect window (`health.reconnect_delay`)."""
        async with b.connecting:
            if b.upstream is not None:
                return True
            assert self._http is not None
            http, auth = self._http, self._outgoing.for_backend(b.spec.name, self._http)
            settings = next((c for c in self.config.backends if c.name == b.spec.name), None)
            if settings is not None and settings.headers:
                auth = WithHeaders(backend_headers(settings.headers, b.spec.name), auth)
            ca_file = settings.ca_file or settings.ca_bundle_path if settings is not None else None
            if ca_file:
                http = self._tls_session(ca_file)
            up = make_upstream(
                b.spec.name,
                b.spec.url,
                b.spec.transport,
                http,
                auth=auth,
                time_limit=self.config.operational.timeouts.for_backend(b.spec.name),
                on_notification=self._on_backend_notification,
                client_info={"name": f"mcpfleet-vmcp/{self.config.name}", "version": "1"},
                fast=self._fast if b.spec.transport != "sse" and http is self._http else None,
            )
            # A backend joining while the gateway serves is published once its 2025-era session is
            # connected and listed; its 2026 era follows (`_connect_modern`). The first set, which
            # the gateway serves only once connected, is probed in both eras at once.
            deferred = self._first_set.is_set()
            try:
                async with asyncio.timeout(self._check_timeout + 5):
                    await up.connect(defer_modern=deferred)
            except lazyhttp.errors(RPCError, TimeoutError) as exc:
                with contextlib.suppress(Exception):
                    await up.close()
                msg = exc.message if isinstance(exc, RPCError) else f"connect: {type(exc).__name__} {exc}"
                if counted:
                    b.health.record_failure(msg)
                    log.warning("backend %s: %s", b.spec.name, msg)
                else:
                    log.debug("backend %s: not connected yet: %s", b.spec.name, msg)
                self._schedule_retry(b)
                return False
            b.upstream = up
            b.retry_at = None
            b.health.record_success()
            await self._fetch_lists(b, tuple(LISTS))
            self._status_dirty.set()
            self._status_urgent.set()
            if deferred and up.legacy and not up.modern:
                self._track(self._connect_modern(b, up))
            return True

    async def _connect_modern(self, b: Backend, up: BaseUpstream) -> None:
        """The 2026-era probe of a backend published on its 2025-era session: once it answers, its
        lists in that era replace the 2025-era ones the 2026-era aggregate used meanwhile."""
        try:
            async with asyncio.timeout(self._check_timeout + 5):
                if not await up.connect_modern():
                    return
        except lazyhttp.errors(RPCError, TimeoutError) as exc:
            log.info(
                "backend %s: 2026 era not connected (served on its 2025-era session): %s", b.spec.name, exc
            )
            return
        if b.upstream is not up:
            return  # disconnected or replaced meanwhile
        await self._fetch_lists(b, tuple(LISTS), eras=("modern",))
        if b.upstream is not up:
            return
        for m in self.rebuild():
            self.broadcast_list_changed(m)

    def _tls_session(self, ca_file: str) -> lazyhttp.LazySession:
        """A client session whose TLS trusts `ca_file` (an MCPServerEntry's CA bundle), one per file."""
        session = self._tls_sessions.get(ca_file)
        if session is None:
            context = ssl.create_default_context(cafile=ca_file)

            def make(client: ModuleType) -> aiohttp.ClientSession:
                made: aiohttp.ClientSession = client.ClientSession(
                    connector=client.TCPConnector(ssl=context, limit=0, ttl_dns_cache=300),
                    timeout=client.ClientTimeout(total=None),
                    auto_decompress=False,
                )
                return made

            session = self._tls_sessions[ca_file] = lazyhttp.LazySession(make)
        return session

    async def _disconnect(self, b: Backend) -> None:
        up, b.upstream = b.upstream, None
        if up is not None:
            await up.close()

    async def _fetch_lists(
        self, b: Backend, methods: tuple[str, ...], eras: tuple[Era, ...] = ("legacy", "modern")
    ) -> None:
        """Refresh some list kinds of one backend, in every protocol era it speaks (of `eras`)."""
        up = b.upstream
        if up is None:
            return
        eras = tuple(e for e in eras if (up.legacy if e == "legacy" else up.modern))
        for era in eras:
            b.lists.setdefault(era, BackendLists(b.spec.name))

        async def one(method: str, era: Era) -> None:
            cap, key, attr = LISTS[method]
            target = b.lists[era]
            if cap not in up.capabilities:
                setattr(target, attr, [])
                return
            items: list[dict[str, Any]] = []
            cursor: str | None = None
            try:
                for _ in range(1000):
                    params = {"cursor": cursor} if cursor else None
                    res = await up.call(method, params, era=era)
                    items.extend(x for x in res.get(key, []) if isinstance(x, dict))
                    cursor = res.get("nextCursor")
                    if not cursor:
                        break
            except RPCError as exc:
                # One failing list call must not drop the backend's other capabilities.
                b.list_errors[method] = exc.message
                log.warning("backend %s: %s (%s) failed: %s", b.spec.name, method, era, exc.message)
                return
            b.list_errors.pop(method, None)
            setattr(target, attr, items)

        await asyncio.gather(*(one(m, e) for m in methods for e in eras))

    # ---- aggregation -------------------------------------------------------------------

    def _serving(self, b: Backend) -> bool:
        return b.connected and (b.health.healthy or not self.best_effort)

    @property
    def agg(self) -> Aggregate:
        """The 2025-era view (used for status counts)."""
        return self.aggs["legacy"]

    def rebuild(self, strict: bool = False) -> set[str]:
        """Recompute both eras' aggregates and list caches; returns the list methods that changed."""
        changed: set[str] = set()
        new: dict[Era, Aggregate] = {}
        for era in ("legacy", "modern"):
            lists = [b.lists_for(era) for _n, b in sorted(self.backends.items()) if self._serving(b)]
            try:
                agg = aggregate.build(lists, self.config.aggregation, self.config.tool_configs)
            except ConflictError:
                if strict:
                    raise
                log.exception("aggregation failed; keeping the previous lists")
                return set()
            agg.tools.extend(_composite_listing(ct) for ct in self.config.composite_tools)
            if self.code is not None:
                agg.tools.append(tool_definition(self.config.code_mode))
            agg.catalogue = agg.tools
            if self.config.optimizer is not None:
                meta = meta_tools(self.config.optimizer)
                agg.tools = meta + agg.catalogue if self.config.optimizer.expose_all_tools else meta
            new[era] = agg
        if self.finder is not None:
            self.finder.update({era: agg.catalogue for era, agg in new.items()})
        self._pinned.clear()
        for era, agg in new.items():
            old = self.aggs[era]
            self.aggs[era] = agg
            for method, (_cap, key, _attr) in LISTS.items():
                items = self._items(agg, method)
                if items != self._items(old, method):
                    changed.add(method)
                if era == "legacy":
                    self._cache[(method, era)] = wire.dumps({key: items})
                else:
                    modern = {key: items, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
                    self._cache[(method, era)] = wire.dumps(modern)
        self.legacy_sse = any(
            b.upstream.sse_responses for b in self.backends.values() if b.upstream is not None
        )
        self._status_dirty.set()
        return changed

    def reconfigure(self, config: VMCPConfig) -> set[str] | None:
        """Take the live-applicable settings (`LIVE_CONFIG_FIELDS`) of a re-read config in place.

        Sessions, streams and backend connections stay; clients listening for list changes are told.
        Returns the list methods that changed, or None when those settings are the same as now.
        Other fields are not taken: the platform restarts the gateway when they change.
        """
        authz_changed = self._reconfigure_authz(config)
        live = {"aggregation", "composite_tools", "tool_configs", "optimizer", "code_mode"}
        if config.model_dump(include=live) == self.config.model_dump(include=live):
            if authz_changed:
                # What each caller may list changed: clients re-list.
                for m in ("tools/list", "prompts/list", "resources/list"):
                    self.broadcast_list_changed(m)
                return {"tools/list", "prompts/list", "resources/list"}
            return None
        old = self.config
        self.config = self.config.model_copy(update={k: getattr(config, k) for k in live})
        self.composites = {c.name: c for c in config.composite_tools}
        if config.optimizer != old.optimizer:
            if self.finder is not None:
                self._spawn(self.finder.close())
            self.finder = ToolFinder(config.optimizer) if config.optimizer else None
        if config.code_mode != old.code_mode:
            if self.code is not None:
                self._spawn(self.code.close())
            self.code = CodeRunner(config.code_mode) if config.code_mode.enabled else None
        elif self.code is not None:
            # A reload ends the idle spare too: it was started for the old settings and catalogue.
            self._spawn(self.code.drop_spare())
        changed = self.rebuild()
        for m in changed:
            self.broadcast_list_changed(m)
        log.info("applied the aggregation settings of the new config; changed: %s", sorted(changed))
        return changed

    def _reconfigure_authz(self, config: VMCPConfig) -> bool:
        """Take a changed `authz` in place (sessions stay); an invalid one keeps the current policies."""
        if config.authz == self.config.authz:
            return False
        try:
            if config.authz is None:
                self.policy.engine = None
            elif self.policy.engine is None:
                self.policy.engine = PolicyEngine(config.authz, base_dir=self._config_dir)
            else:
                self.policy.engine.replace(config.authz)
        except AuthzConfigError as exc:
            log.warning("authz changed but was not applied (keeping the current policies): %s", exc)
            return False
        self.config = self.config.model_copy(update={"authz": config.authz})
        log.info("applied the authz policies of the new config")
        return True

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    @staticmethod
    def _items(agg: Aggregate, method: str) -> list[dict[str, Any]]:
        return {
            "tools/list": agg.tools,
            "resources/list": agg.resources,
            "resources/templates/list": agg.templates,
            "prompts/list": agg.prompts,
        }[method]

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        ups = [b.upstream for b in self.backends.values() if b.upstream is not None]
        if self.composites or self.finder or self.code or any("tools" in u.capabilities for u in ups):
            caps["tools"] = {"listChanged": True}
        if any("resources" in u.capabilities for u in ups):
            sub = any((u.capabilities.get("resources") or {}).get("subscribe") for u in ups)
            caps["resources"] = {"listChanged": True, "subscribe": bool(sub)}
        if any("prompts" in u.capabilities for u in ups):
            caps["prompts"] = {"listChanged": True}
        if any("completions" in u.capabilities for u in ups):
            caps["completions"] = {}
        if any("logging" in u.capabilities for u in ups):
            caps["logging"] = {}
        return caps

    def instructions(self) -> str | None:
        parts = [u.instructions for b in self.backends.values() if (u := b.upstream) and u.instructions]
        return "\n\n".join(parts) if parts else None

    def pinned(self, result: bytes) -> Pinned | None:
        """The copy-free wire form of a large result this gateway serves from its list cache (see
        `pinned`); None for anything else (a list filtered for one caller, a small one)."""
        pin = self._pinned.get(result)
        if pin is None and len(result) >= MIN_BYTES and any(result is v for v in self._cache.values()):
            pin = self._pinned.add(result)
        return pin

    def cached_list(self, method: str, era: Era) -> bytes:
        if not self.best_effort:
            down = [n for n, b in self.backends.items() if b.health.state == "unavailable"]
            if down:
                raise RPCError(
                    wire.BACKEND_UNAVAILABLE,
                    f"backends unavailable: {', '.join(sorted(down))} (partialFailureMode is 'fail')",
                )
        return self._cache.get((method, era)) or wire.dumps({LISTS[method][1]: []})

    # ---- notifications from backends --------------------------------------------------

    async def _on_backend_notification(self, up: BaseUpstream, msg: dict[str, Any]) -> None:
        method = msg.get("method", "")
        b = self.backends.get(up.name)
        if b is None or b.upstream is not up:
            return
        if method in _LIST_CHANGED:
            await self._fetch_lists(b, _LIST_CHANGED[method])
            # Forward the backend's signal even if our merged view looks the same (a description
            # may differ in a way we do not compare, and clients expect the notification).
            for m in self.rebuild() | {_LIST_CHANGED[method][0]}:
                self.broadcast_list_changed(m)
        elif method == "notifications/resources/updated":
            uri = (msg.get("params") or {}).get("uri")
            for ls in list(self.listeners):
                subs = ls.uris if ls.uris is not None else (ls.session.subscriptions if ls.session else set())
                if uri in subs:
                    self._deliver(ls, msg)
        elif method == "notifications/message":
            for ls in list(self.listeners):
                if ls.session is not None:
                    self._deliver(ls, msg)

    def broadcast_list_changed(self, list_method: str) -> None:
        kind = list_method.split("/")[0]
        msg = {"jsonrpc": "2.0", "method": f"notifications/{kind}/list_changed"}
        if list_method == "resources/templates/list":
            return  # covered by resources/list_changed
        for ls in list(self.listeners):
            if getattr(ls, kind):
                self._deliver(ls, msg)

    def _deliver(self, ls: Listener, msg: dict[str, Any]) -> None:
        if ls.meta is not None:
            params = dict(msg.get("params") or {})
            params["_meta"] = {**(params.get("_meta") or {}), **ls.meta}
            msg = {**msg, "params": params}
        with contextlib.suppress(asyncio.QueueFull):
            ls.queue.put_nowait(msg)

    # ---- dispatch ----------------------------------------------------------------------

    async def dispatch(
        self, method: str, params: dict[str, Any] | None, ctx: CallContext
    ) -> dict[str, Any] | bytes:
        """Serve one request; returns a result dict, or pre-serialized result bytes for cached lists."""
        audit = self.policy.audit
        if audit is None or not audit.wants(method):
            return await self._dispatch(method, params, ctx)
        started = time.perf_counter()
        outcome, reason = "error", None
        response: Any = None
        try:
            result = await self._dispatch(method, params, ctx)
            tool_error = isinstance(result, dict) and result.get("isError") is True
            outcome = audit.outcome("tool_error" if tool_error else "success", application=True)
            response = result
            return result
        except RPCError as exc:
            # A refusal by policy is the gateway's own decision; any other JSON-RPC error is read
            # from the answer (detectApplicationErrors).
            denied = exc.code == FORBIDDEN
            outcome = "denied" if denied else audit.outcome("error", application=True)
            reason = exc.message
            response = {"code": exc.code, "message": exc.message}
            raise
        finally:
            session_id = ctx.session.id if ctx.session is not None else None
            self._audit(
                audit,
                method,
                params,
                outcome,
                started,
                ctx.caller,
                ctx.backend,
                ctx.client_id,
                reason,
                session_id,
                response=response,
            )

    def audit_refusal(
        self, msg: dict[str, Any], outcome: str, reason: str, started: float, session_id: str | None
    ) -> None:
        """The audit event of a request answered before dispatch (over the rate limits)."""
        audit = self.policy.audit
        method = msg.get("method")
        if audit is None or not isinstance(method, str) or not audit.wants(method):
            return
        caller = CALLER.get() or _NOBODY
        self._audit(
            audit,
            method,
            msg.get("params"),
            outcome,
            started,
            caller,
            None,
            msg.get("id"),
            reason,
            session_id,
        )

    @staticmethod
    def _audit(
        audit: AuditLog,
        method: str,
        params: Any,
        outcome: str,
        started: float,
        caller: Caller,
        backend: str | None,
        request_id: Any,
        reason: str | None,
        session_id: str | None,
        parent: dict[str, Any] | None = None,
        response: Any = None,
    ) -> None:
        meta = params.get("_meta") if isinstance(params, dict) else None
        traceparent = caller.traceparent or (meta.get("traceparent") if isinstance(meta, dict) else None)
        audit.record(
            method=method,
            params=params,
            outcome=outcome,
            duration=time.perf_counter() - started,
            claims=caller.claims,
            client=caller.client,
            backend=backend,
            request_id=request_id,
            trace_id=trace_id_of(traceparent if isinstance(traceparent, str) else None),
            reason=reason,
            session_id=session_id,
            parent=parent,
            response=response,
        )

    def audit_event(
        self,
        audit: AuditLog,
        params: dict[str, Any],
        outcome: str,
        started: float,
        ctx: CallContext,
        reason: str | None,
        session_id: str | None,
        response: Any = None,
    ) -> None:
        """The audit event of a tools/call made for a client (`nested.call`), linked to its request."""
        parent = ctx.via.wire() if ctx.via is not None else None
        self._audit(
            audit,
            "tools/call",
            params,
            outcome,
            started,
            ctx.caller,
            ctx.backend,
            None,
            reason,
            session_id,
            parent,
            response,
        )

    def authorize(
        self, ctx: CallContext, target: Target, backend: str | None, method: str = "tools/call"
    ) -> None:
        """Raise the FORBIDDEN RPCError unless the caller of `ctx` may use `target` (on `backend`).

        The one authorization check of the gateway: client requests, composite steps and any other
        caller that acts for a client (code mode, find-tool) go through it.
        """
        decision = self.policy.check(ctx.caller.claims, target, backend)
        if decision is not None and not decision.allowed:
            log.info("denied %s of %s %r: %s", method, target.feature, target.name, decision.reason)
            raise RPCError(
                FORBIDDEN, denial(method, target), {"reason": "policy", target.feature: target.name}
            )

    def _filtered_list(self, method: str, ctx: CallContext) -> dict[str, Any] | bytes:
        """A list as the caller may see it (the shared cached bytes when authorization is off)."""
        cached = self.cached_list(method, ctx.era)
        if self.policy.engine is None or method == "resources/templates/list":
            return cached
        agg = self.aggs[ctx.era]
        key = LISTS[method][1]
        items = self._items(agg, method)
        if method == "tools/list":
            backend_of = {n: r.backend for n, r in agg.tool_routes.items()}
        elif method == "prompts/list":
            backend_of = {n: r.backend for n, r in agg.prompt_routes.items()}
        else:
            backend_of = agg.resource_routes
        result: dict[str, Any] = self.policy.filter_result(
            ctx.caller.claims, method, {key: items}, backend_of
        )
        if ctx.era == "modern":
            result.update({"resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
        return result

    async def _dispatch(
        self, method: str, params: dict[str, Any] | None, ctx: CallContext
    ) -> dict[str, Any] | bytes:
        p = params or {}
        if method == "tools/call":
            return await self.call_tool(p, ctx)
        if method in LISTS:
            return self._filtered_list(method, ctx)
        if self.policy.engine is not None and method != "prompts/get":
            # Prompts are checked below, where their route is known; the others here.
            self._authorize_named(method, p, ctx)
        if method == "resources/read":
            return await self._forward(self._resource_backend(p, ctx.era), method, p, ctx)
        if method == "prompts/get":
            route = self.aggs[ctx.era].prompt_routes.get(str(p.get("name")))
            if route is None:
                raise RPCError(wire.INVALID_PARAMS, f"Unknown prompt: {p.get('name')}")
            target = target_of(method, p)
            if target is not None:
                self.authorize(ctx, target, route.backend, method)
            return await self._forward(route.backend, method, {**p, "name": route.original}, ctx)
        if method in ("resources/subscribe", "resources/unsubscribe"):
            return await self._subscription(method, p, ctx)
        if method == "completion/complete":
            return await self._complete(p, ctx)
        if method == "logging/setLevel":
            return await self._set_level(p, ctx)
        if method == "ping":
            return {}
        raise RPCError(wire.METHOD_NOT_FOUND, f"Method not found: {method}")

    async def _subscription(self, method: str, p: dict[str, Any], ctx: CallContext) -> dict[str, Any] | bytes:
        """resources/(un)subscribe at the owning backend, remembered in the client's session."""
        uri = str(p.get("uri"))
        res = await self._forward(self._resource_backend(p, ctx.era), method, p, ctx)
        if ctx.session is not None:
            if method == "resources/subscribe":
                ctx.session.subscriptions.add(uri)
            else:
                ctx.session.subscriptions.discard(uri)
            if self.session_store is not None:
                await self.session_store.save(ctx.session)
        return res

    async def _set_level(self, p: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """logging/setLevel: kept for the session, passed to every backend that logs."""
        if ctx.session is not None:
            ctx.session.log_level = p.get("level")
            if self.session_store is not None:
                await self.session_store.save(ctx.session)
        targets = [
            b.spec.name for b in self.backends.values() if b.upstream and "logging" in b.upstream.capabilities
        ]
        results = await asyncio.gather(
            *(self._forward(n, "logging/setLevel", p, ctx) for n in targets), return_exceptions=True
        )
        for r in results:
            if isinstance(r, RPCError) and not isinstance(r, BackendUnavailable):
                raise r
        return {}

    def _resource_backend(self, p: dict[str, Any], era: Era) -> str:
        uri = p.get("uri")
        backend = aggregate.route_resource(self.aggs[era], uri) if isinstance(uri, str) else None
        if backend is None:
            # SEP-2164: the 2026 wire reports an unknown resource as invalid params.
            code = wire.INVALID_PARAMS if era == "modern" else wire.RESOURCE_NOT_FOUND
            raise RPCError(code, f"Resource not found: {uri}", {"uri": uri})
        return backend

    async def _complete(self, p: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        ref = p.get("ref") or {}
        if ref.get("type") == "ref/prompt":
            route = self.aggs[ctx.era].prompt_routes.get(str(ref.get("name")))
            if route is None:
                raise RPCError(wire.INVALID_PARAMS, f"Unknown prompt: {ref.get('name')}")
            return await self._forward(
                route.backend, "completion/complete", {**p, "ref": {**ref, "name": route.original}}, ctx
            )
        if ref.get("type") == "ref/resource":
            uri = ref.get("uri")
            backend = aggregate.route_resource(self.aggs[ctx.era], uri) if isinstance(uri, str) else None
            if backend is None and isinstance(uri, str):
                backend = self._template_owner(uri, ctx.era)
            if backend is None:
                raise RPCError(wire.INVALID_PARAMS, f"Unknown resource reference: {uri}")
            return await self._forward(backend, "completion/complete", p, ctx)
        raise RPCError(
            wire.INVALID_PARAMS, "completion/complete: ref.type must be ref/prompt or ref/resource"
        )

    def _template_owner(self, uri_template: str, era: Era) -> str | None:
        for b in self.backends.values():
            if any(t.get("uriTemplate") == uri_template for t in b.lists_for(era).templates):
                return b.spec.name
        return None

    def _authorize_named(self, method: str, p: dict[str, Any], ctx: CallContext) -> None:
        """Authorize a request naming a resource or a prompt (read, subscribe, completion)."""
        target = target_of(method, p)
        if target is not None:
            self.authorize(ctx, target, self._owner_of(target, ctx.era), method)

    def _owner_of(self, target: Target, era: Era) -> str | None:
        """The backend serving a prompt / resource target (None when unknown)."""
        agg = self.aggs[era]
        if target.feature == "prompt":
            route = agg.prompt_routes.get(target.name)
            return route.backend if route is not None else None
        if target.feature == "resource":
            return aggregate.route_resource(agg, target.name) or self._template_owner(target.name, era)
        return None

    def tool_allowed(self, name: str, ctx: CallContext) -> bool:
        """Whether the caller of `ctx` may see and call tool `name` (the optimizer filters find_tool
        answers with it): the list question of the policies (no arguments), as tools/list asks it."""
        if self.policy.engine is None:
            return True
        route = self.aggs[ctx.era].tool_routes.get(name)
        decision = self.policy.check(
            ctx.caller.claims, Target("tool", name), route.backend if route else None
        )
        return decision is None or decision.allowed

    async def call_tool(self, p: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """tools/call: the one path of a client's call, and of each call made by call_tool or a script
        (authorized here, then run as a composite or routed)."""
        name = p.get("name")
        args = p.get("arguments")
        meta = (self.finder is not None and name in META_TOOLS) or (
            self.code is not None and name == SCRIPT_TOOL
        )
        if meta and self.policy.engine is not None:
            # The optimizer's / code mode's own tools are tools like any other (backend none); the
            # calls they make are authorized again, one by one, through this method.
            self.authorize(ctx, Target("tool", str(name), args if isinstance(args, dict) else None), None)
        if self.finder is not None and name in META_TOOLS:
            return await self._meta_tool(str(name), p.get("arguments"), ctx)
        if self.code is not None and name == SCRIPT_TOOL:
            return await self._script(p.get("arguments"), ctx)
        comp = self.composites.get(name) if isinstance(name, str) else None
        if comp is not None:
            if self.policy.engine is not None:
                self.authorize(ctx, Target("tool", comp.name, args if isinstance(args, dict) else None), None)
            return await self._runner.run(comp, p.get("arguments") or {}, ctx)
        route = self.aggs[ctx.era].tool_routes.get(name) if isinstance(name, str) else None
        if route is None:
            # Like the SDK servers: an unknown tool is a tool-level error result, not a protocol error.
            return unknown_tool_result(name)
        if self.policy.engine is not None:
            assert isinstance(name, str)
            self.authorize(ctx, Target("tool", name, args if isinstance(args, dict) else None), route.backend)
        if route.original != name:
            p = {**p, "name": route.original}
        return await self._forward(route.backend, "tools/call", p, ctx)

    async def _meta_tool(self, name: str, arguments: Any, ctx: CallContext) -> dict[str, Any]:
        """find_tool / call_tool of the optimizer."""
        assert self.finder is not None
        if name == FIND_TOOL:
            return await self.finder.find(arguments, ctx.era, lambda tool: self.tool_allowed(tool, ctx))
        tool, params = call_arguments(arguments)
        inner = nested.inner_context(ctx, CALL_TOOL)
        try:
            return await nested.call(self, tool, params, inner)
        finally:
            ctx.backend = inner.backend  # the client's own event names the backend too

    async def _script(self, arguments: Any, ctx: CallContext) -> dict[str, Any]:
        """execute_tool_script: each call the script makes is a tools/call of the caller's own."""
        assert self.code is not None
        if ctx.via is not None and ctx.via.in_script:
            # Scripts never start scripts, by any path (a script's call_tool("call_tool", ...) too):
            # each would hold a worker process, and nesting multiplies them.
            return {
                "content": [
                    {
                        "type": "text",
                        "text": f"{SCRIPT_TOOL} cannot be called from a script, directly or through "
                        f"{CALL_TOOL}: scripts never start scripts",
                    }
                ],
                "isError": True,
            }
        script = self.code.validate(arguments)

        async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
            # A new context per call: concurrent calls each name their own backend in the audit.
            inner = nested.inner_context(ctx, SCRIPT_TOOL, emit=None, client_id=None)
            return await nested.call(self, tool, args, inner)

        names = [t["name"] for t in self.aggs[ctx.era].catalogue if t.get("name") != SCRIPT_TOOL]
        if self.finder is not None:
            names += sorted(META_TOOLS)
        return await self.code.run(script, names, call)

    async def _call_step(
        self, tool: str, arguments: dict[str, Any], ctx: CallContext, time_limit: float | None
    ) -> dict[str, Any]:
        """Composite steps: route by `workload.tool` (hidden tools included) or advertised name."""
        agg = self.aggs[ctx.era]
        route: Route | None = agg.step_routes.get(tool) or agg.tool_routes.get(tool)
        if route is None:
            raise RPCError(wire.INVALID_PARAMS, f"composite step: unknown tool {tool!r}")
        step_ctx = CallContext(era=ctx.era, token=ctx.token, caller=ctx.caller, passthrough=ctx.passthrough)
        if self.policy.engine is not None:
            # Each step is authorized as the caller's own tools/call of the tool (its advertised
            # name when it has one, else the step's `workload.tool`).
            advertised = next((n for n, r in agg.tool_routes.items() if r == route), tool)
            self.authorize(step_ctx, Target("tool", advertised, arguments), route.backend)
        return await self._forward(
            route.backend,
            "tools/call",
            {"name": route.original, "arguments": arguments},
            step_ctx,
            time_limit,
        )

    async def _elicit(
        self, message: str, schema: dict[str, Any], ctx: CallContext, time_limit: float | None
    ) -> dict[str, Any]:
        """Ask the calling client's user (a composite tool's elicitation step): `elicitation/create`
        on the call's stream, the answer routed back by `client_message`."""
        session, emit = ctx.session, ctx.emit
        if session is None or emit is None:
            raise RPCError(wire.METHOD_NOT_FOUND, "the client has no back channel for elicitation")
        gid = f"vmcp-{next(self._ids)}"
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        session.pending[gid] = answer
        try:
            await emit(
                {
                    "jsonrpc": "2.0",
                    "id": gid,
                    "method": "elicitation/create",
                    "params": {"message": message, "requestedSchema": schema},
                }
            )
            async with asyncio.timeout(time_limit):
                reply = await answer
        finally:
            session.pending.pop(gid, None)
        if "error" in reply:
            error = reply.get("error") or {}
            raise RPCError(wire.INTERNAL_ERROR, str(error.get("message") or "elicitation failed"))
        result = reply.get("result")
        return result if isinstance(result, dict) else {"action": "cancel"}

    async def _forward(
        self,
        backend: str,
        method: str,
        params: dict[str, Any],
        ctx: CallContext,
        time_limit: float | None = None,
    ) -> dict[str, Any]:
        ctx.backend = backend
        if self.tracer is None:
            return await self._forward_call(backend, method, params, ctx, time_limit, None)
        return await self._forward_traced(self.tracer, backend, method, params, ctx, time_limit)

    def _backend_attrs(self, backend: str) -> dict[str, Any]:
        """Span attributes naming a backend (url.full, server.address / server.port), cached per URL."""
        b = self.backends.get(backend)
        url = b.spec.url if b is not None else ""
        attrs = self._span_attrs.get(url)
        if attrs is None:
            attrs = {}
            if url:
                parts = urlsplit(url)
                attrs["url.full"] = url
                if parts.hostname:
                    attrs["server.address"] = parts.hostname
                port = parts.port or (443 if parts.scheme == "https" else 80)
                attrs["server.port"] = port
            self._span_attrs[url] = attrs
        return attrs

    async def _forward_traced(
        self,
        tracer: Tracer,
        backend: str,
        method: str,
        params: dict[str, Any],
        ctx: CallContext,
        time_limit: float | None,
    ) -> dict[str, Any]:
        """`_forward` inside a CLIENT span whose context goes to the backend as `traceparent`."""
        attrs: dict[str, Any] = {
            telemetry.MCP_METHOD: method,
            telemetry.VMCP_BACKEND: backend,
            telemetry.VMCP_ERA: ctx.era,
            **self._backend_attrs(backend),
        }
        target = params.get("name") if method in ("tools/call", "prompts/get") else None
        if isinstance(target, str):
            attrs[telemetry.TOOL_NAME if method == "tools/call" else telemetry.PROMPT_NAME] = target
            name = f"{method} {target}"
        else:
            name = method
        uri = params.get("uri")
        if isinstance(uri, str):
            attrs[telemetry.MCP_RESOURCE_URI] = uri
        # Not made the current span: nothing below it in this process has spans, and the backend
        # learns about it from the headers (saves the context attach / detach on the call path).
        span = tracer.start_span(
            name,
            kind=SpanKind.CLIENT,
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        )
        try:
            headers: dict[str, str] = {}
            telemetry.inject(headers, set_span_in_context(span))
            try:
                res = await self._forward_call(backend, method, params, ctx, time_limit, headers)
            except BackendUnavailable as exc:
                span.set_attribute(telemetry.VMCP_OUTCOME, "unavailable")
                span.set_attribute(telemetry.RPC_STATUS_CODE, str(exc.code))
                telemetry.record_error(span, str(exc.code), exc.message)
                raise
            except RPCError as exc:
                span.set_attribute(telemetry.VMCP_OUTCOME, "rpc_error")
                span.set_attribute(telemetry.RPC_STATUS_CODE, str(exc.code))
                telemetry.record_error(span, str(exc.code), exc.message)
                raise
            except BaseException as exc:
                cancelled = isinstance(exc, asyncio.CancelledError)
                span.set_attribute(telemetry.VMCP_OUTCOME, "cancelled" if cancelled else "error")
                telemetry.record_error(span, type(exc).__qualname__)
                raise
            if method == "tools/call" and res.get("isError") is True:
                span.set_attribute(telemetry.VMCP_OUTCOME, "tool_error")
                telemetry.record_error(span, "tool_error")
            else:
                span.set_attribute(telemetry.VMCP_OUTCOME, "ok")
            return res
        finally:
            span.end()

    async def _forward_call(
        self,
        backend: str,
        method: str,
        params: dict[str, Any],
        ctx: CallContext,
        time_limit: float | None,
        trace_headers: Mapping[str, str] | None,
    ) -> dict[str, Any]:
        b = self.backends.get(backend)
        up = b.upstream if b is not None else None
        if b is None or up is None:
            raise BackendUnavailable(backend, "not connected")
        if not b.health.allow_call():
            raise BackendUnavailable(backend, "circuit breaker open")
        on_message = self._relay(ctx, up)
        sink = None
        sess = ctx.session
        if sess is not None and ctx.client_id is not None:
            cid = ctx.client_id

            def sink(uid: int) -> None:
                sess.inflight[cid] = (up, uid)

        if ctx.passthrough:
            # The client's allowlisted headers ride with the call's own per-request headers (the
            # upstream's protocol and auth headers are set after them, so they cannot be overridden).
            trace_headers = {**ctx.passthrough, **(trace_headers or {})}
        m = self.metrics.child(backend, method)
        t0 = time.perf_counter()
        try:
            res = await up.call(
                method,
                params,
                era=ctx.era,
                on_message=on_message,
                headers=ctx.forward_headers,
                subject_token=ctx.token,
                time_limit=time_limit,
                request_id_sink=sink,
                trace_headers=trace_headers,
            )
        except BackendUnavailable as exc:
            m.error()
            if b.health.record_failure(exc.reason):
                self._on_health_change(b)
            raise
        except RPCError:
            m.error()
            raise
        finally:
            m.observe(time.perf_counter() - t0)
            if sink is not None:
                sess.inflight.pop(ctx.client_id, None)  # type: ignore[union-attr]
        if b.health.state != "ready" or b.health.circuit != "closed":
            if b.health.record_success():
                self._on_health_change(b)
        return res

    def _relay(self, ctx: CallContext, up: BaseUpstream) -> Callable[[dict[str, Any]], Awaitable[None]]:
        """Handles messages a backend sends while answering a call: forwards them to the caller
        (server-to-client requests get gateway ids) and feeds change notifications to the cache."""
        emit = ctx.emit

        async def relay(msg: dict[str, Any]) -> None:
            if not msg:
                # SSE_OPENED. The front commits to SSE only when a message besides the result comes;
                # a stream carrying just the result is answered as JSON (cheaper, equally valid).
                return
            method = msg.get("method")
            if (
                method is not None
                and "id" not in msg
                and (method in _LIST_CHANGED or method == "notifications/resources/updated")
            ):
                task = asyncio.create_task(self._on_backend_notification(up, msg))
                self._bg.add(task)
                task.add_done_callback(self._bg.discard)
            if emit is None:
                if method is not None and "id" in msg:
                    await up.send_message(
                        wire.error_message(msg["id"], wire.METHOD_NOT_FOUND, "no client to ask")
                    )
                return
            if method is not None and "id" in msg:
                if ctx.session is None:
                    await up.send_message(
                        wire.error_message(msg["id"], wire.METHOD_NOT_FOUND, "client has no back channel")
                    )
                    return
                gid = f"vmcp-{next(self._ids)}"
                ctx.session.pending[gid] = (up, msg["id"])
                msg = {**msg, "id": gid}
            await emit(msg)

        return relay

    async def client_message(self, session: ClientSession, msg: dict[str, Any]) -> None:
        """A response or notification a 2025-era client POSTed: route it to the right backend."""
        if "method" not in msg:
            target = session.pending.pop(str(msg.get("id")), None)
            if isinstance(target, asyncio.Future):
                if not target.done():
                    target.set_result(msg)
            elif target is not None:
                up, orig = target
                await up.send_message({**msg, "id": orig}, session.token)
            return
        if msg["method"] == "notifications/cancelled":
            rid = (msg.get("params") or {}).get("requestId")
            tgt = session.inflight.get(rid)
            if tgt is not None:
                up, uid = tgt
                params = {**(msg.get("params") or {}), "requestId": uid}
                await up.send_message(
                    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
                )

    # ---- sessions ----------------------------------------------------------------------

    def new_session(
        self, version: str, token: str | None, subject: str | None = None, owner: str | None = None
    ) -> ClientSession:
        """Open a client session; raises SessionLimitError at `max_sessions`, or
        SubjectSessionLimitError at `max_sessions_per_subject` of `owner` (after expiring idle ones)."""
        if len(self.sessions) >= self.max_sessions or self._owner_full(owner):
            now = time.monotonic()
            if now - self._cap_pruned > 1.0:  # a scan at most once a second while at a limit
                self._cap_pruned = now
                self.prune_sessions()
            if len(self.sessions) >= self.max_sessions:
                raise SessionLimitError(self.max_sessions)
            if self._owner_full(owner):
                raise SubjectSessionLimitError(self.max_sessions_per_subject)
        s = ClientSession(id=uuid.uuid4().hex, version=version, token=token, subject=subject, owner=owner)
        self._add(s)
        return s

    def _owner_full(self, owner: str | None) -> bool:
        return owner is not None and self._owned.get(owner, 0) >= self.max_sessions_per_subject

    def _add(self, s: ClientSession) -> None:
        self.sessions[s.id] = s
        if s.owner is not None:
            self._owned[s.owner] = self._owned.get(s.owner, 0) + 1

    def session_for(self, sid: str, subject: str | None) -> ClientSession | None:
        """The session `sid` if `subject` opened it; None otherwise (unknown, or another subject's)."""
        s = self.sessions.get(sid)
        if s is None or s.subject != subject:
            return None
        return s

    async def open_session(
        self, version: str, token: str | None, subject: str | None = None, owner: str | None = None
    ) -> ClientSession:
        """`new_session`, recorded in the session store for the other replicas."""
        s = self.new_session(version, token, subject, owner)
        if self.session_store is not None:
            await self.session_store.save(s)
        return s

    async def find_session(self, sid: str, subject: str | None) -> ClientSession | None:
        """`session_for`, or a session another replica opened (adopted from the session store)."""
        s = self.session_for(sid, subject)
        store = self.session_store
        if store is None:
            return s
        if s is not None:
            self._background(store.touch(sid))
            return s
        record = await store.load(sid)
        if record is None or record.get("subject") != subject or sid in self.sessions:
            return self.session_for(sid, subject)
        if len(self.sessions) >= self.max_sessions:
            return None
        owner = session_owner(subject, None)
        if self._owner_full(owner):
            return None
        s = ClientSession(id=sid, version=record["version"], subject=subject, owner=owner)
        s.subscriptions = {u for u in record.get("subscriptions") or () if isinstance(u, str)}
        level = record.get("logLevel")
        s.log_level = level if isinstance(level, str) else None
        self._add(s)
        if s.subscriptions or s.log_level:
            self._background(self._reestablish(s))
        return s

    async def _reestablish(self, s: ClientSession) -> None:
        """An adopted session's subscriptions and log level, sent to the backends on this replica's
        connections (the replica that took them may be gone)."""
        ctx = CallContext(era="legacy", token=s.token)
        for uri in sorted(s.subscriptions):
            with contextlib.suppress(RPCError):
                await self._forward(
                    self._resource_backend({"uri": uri}, "legacy"), "resources/subscribe", {"uri": uri}, ctx
                )
        if s.log_level:
            with contextlib.suppress(RPCError):
                await self._set_level({"level": s.log_level}, ctx)

    def _background(self, work: Any) -> None:
        if work is None:
            return
        task = work if isinstance(work, asyncio.Task) else asyncio.create_task(work)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    async def close_session(self, sid: str) -> bool:
        """DELETE: `end_session` here and in the session store (the session ends on every replica)."""
        ended = self.end_session(sid)
        if self.session_store is not None:
            await self.session_store.delete(sid)
        return ended

    def end_session(self, sid: str) -> bool:
        s = self.sessions.pop(sid, None)
        if s is None:
            return False
        if s.owner is not None:
            left = self._owned.get(s.owner, 1) - 1
            if left > 0:
                self._owned[s.owner] = left
            else:
                self._owned.pop(s.owner, None)
        for ls in [x for x in self.listeners if x.session is s]:
            self.listeners.discard(ls)
            with contextlib.suppress(asyncio.QueueFull):
                ls.queue.put_nowait({})  # wakes the stream writer, which then ends
        return True

    # ---- health and status --------------------------------------------------------------

    def _on_health_change(self, b: Backend) -> None:
        log.info("backend %s is now %s", b.spec.name, b.health.state)
        self._status_dirty.set()
        if self.best_effort:
            for m in self.rebuild():
                self.broadcast_list_changed(m)

    async def check_backend(self, b: Backend, counted: bool = True) -> None:
        """One health check (`counted`) or extra connect try (not `counted`) of backend `b`."""
        if b.upstream is None:
            await self._connect_and_publish(b, counted)
            return
        if not counted:
            return  # connected meanwhile: its health is the health loop's
        try:
            await b.upstream.ping(self._check_timeout)
        except RPCError as exc:
            if isinstance(exc, BackendUnavailable):
                changed = b.health.record_failure(exc.reason)
            else:
                changed = b.health.record_success()  # it answered: alive, just does not know ping
        else:
            changed = b.health.record_success()
        if changed:
            if b.health.state == "ready":
                await self._fetch_lists(b, tuple(LISTS))  # it may have restarted with other lists
            self._on_health_change(b)
            if not self.best_effort:
                for m in self.rebuild():
                    self.broadcast_list_changed(m)

    async def _connect_and_publish(self, b: Backend, counted: bool) -> None:
        """Connect a backend not connected yet; on success its lists join the aggregate."""
        if not await self._connect(b, counted):
            return
        if self.backends.get(b.spec.name) is not b:
            await self._disconnect(b)  # removed (or its URL changed) while connecting
            return
        self._on_health_change(b)
        for m in self.rebuild():
            self.broadcast_list_changed(m)

    def prune_sessions(self, idle: float | None = None) -> int:
        """Forget 2025-era client sessions idle for longer than `idle` (clients that never DELETE)."""
        if idle is None:
            idle = self.session_idle
        now = time.monotonic()
        stale = [sid for sid, s in self.sessions.items() if s.stream is None and now - s.last_seen > idle]
        if self.session_store is not None:
            for sid in stale:  # only forgotten here: the record expires in Redis on its own
                self.session_store.forget(sid)
        for sid in stale:
            self.end_session(sid)
        return len(stale)

    async def _session_loop(self) -> None:
        # Often enough that a session outlives its idle limit by at most a quarter of it (<= 1 min).
        every = min(max(self.session_idle / 4, 0.05), 60.0)
        while True:
            await asyncio.sleep(every)
            if n := self.prune_sessions():
                log.debug("expired %d idle client sessions", n)

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self._check_interval)
            await asyncio.gather(
                *(self.check_backend(b) for b in list(self.backends.values())), return_exceptions=True
            )

    def _track(self, connect: Coroutine[Any, Any, None]) -> None:
        """Run a connect attempt in its own task (cancelled by `stop`)."""
        task = asyncio.create_task(connect)
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)

    def _schedule_retry(self, b: Backend) -> None:
        delay = reconnect_delay(b.tries, time.monotonic() - b.joined, self._check_interval)
        b.tries += 1
        b.retry_at = None if delay is None else time.monotonic() + delay
        if delay is not None:
            self._retry_due.set()

    async def _reconnect_loop(self) -> None:
        """Extra connect tries of the backends not connected yet, each when its retry is due (each
        in its own task: a backend that hangs does not hold up the others)."""
        while True:
            now = time.monotonic()
            waiting = [b for b in self.backends.values() if b.upstream is None and b.retry_at is not None]
            for b in waiting:
                if b.retry_at is not None and b.retry_at <= now:
                    b.retry_at = None  # `_connect` schedules the next one if this one fails too
                    self._track(self.check_backend(b, counted=False))
            pending = [b.retry_at for b in waiting if b.retry_at is not None]
            self._retry_due.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(pending) - now if pending else None):
                    await self._retry_due.wait()

    async def _status_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._status_interval):
                    await self._status_dirty.wait()
            self._status_dirty.clear()
            self._status_urgent.clear()
            try:
                await self.status_writer.write(self.status())
            except Exception as exc:
                log.warning("status writer failed: %s", exc)
            # Bursts of changes (counts, health flaps) coalesce into one write per STATUS_COALESCE
            # seconds; a backend that just connected and listed is reported at once: the platforms
            # count a gateway ready only once it has reported every backend.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STATUS_COALESCE):
                    await self._status_urgent.wait()

    def ready(self) -> bool:
        if not self.backends:
            return False
        up = [b for b in self.backends.values() if b.connected and b.health.healthy]
        return bool(up) if self.best_effort else len(up) == len(self.backends)

    def status(self) -> dict[str, Any]:
        backends = []
        for name, b in sorted(self.backends.items()):
            up = b.upstream
            auth = self.config.outgoing_auth.for_backend(name)
            eras = [e for e, on in (("2025-11-25", up and up.legacy), ("2026-07-28", up and up.modern)) if on]
            backends.append(
                {
                    "name": name,
                    # Credentials in a backend URL (userinfo, query values) never reach a status
                    # reader (HTTP, status file, the VirtualMCPServer's status): masked as `/health`
                    # of the proxy masks them; so are URLs inside error texts.
                    "url": redact_url(b.spec.url),
                    "transport": b.spec.transport,
                    "metadata": dict(b.spec.metadata),
                    "state": b.health.state if b.connected or b.health.state != "ready" else "unavailable",
                    "connected": b.connected,
                    "lastCheck": _iso(b.health.last_check),
                    "error": redact_text(b.health.last_error) if b.health.last_error else b.health.last_error,
                    "consecutiveFailures": b.health.consecutive_failures,
                    "circuitBreaker": b.health.circuit if b.health.breaker_enabled else None,
                    "circuitLastChanged": _iso(b.health.circuit_changed)
                    if b.health.breaker_enabled
                    else None,
                    "mcpRevision": up.revision() if up is not None else None,
                    "authType": auth.type,
                    "authConfigRef": auth.auth_config_ref,
                    "protocolEras": eras,
                    "listErrors": {m: redact_text(e) for m, e in b.list_errors.items()},
                    "counts": {
                        "tools": len(b.lists_for("legacy").tools),
                        "resources": len(b.lists_for("legacy").resources),
                        "resourceTemplates": len(b.lists_for("legacy").templates),
                        "prompts": len(b.lists_for("legacy").prompts),
                    },
                }
            )
        healthy = sum(1 for b in self.backends.values() if b.connected and b.health.state == "ready")
        if not self.backends or healthy == 0:
            phase = "Failed" if self.backends else "Pending"
        else:
            phase = "Ready" if healthy == len(self.backends) else "Degraded"
        return {
            "name": self.config.name,
            "phase": phase,
            "ready": self.ready(),
            "partialFailureMode": "best_effort" if self.best_effort else "fail",
            "backends": backends,
            "backendCount": len(self.backends),
            "healthyBackends": healthy,
            "counts": {
                "tools": len(self.agg.tools),
                "resources": len(self.agg.resources),
                "resourceTemplates": len(self.agg.templates),
                "prompts": len(self.agg.prompts),
            },
            "sessions": len(self.sessions),
            **({"optimizer": self.finder.status()} if self.finder is not None else {}),
        }


def _composite_listing(tool: CompositeTool) -> dict[str, Any]:
    """A composite tool as tools/list shows it (with its outputSchema when it declares `output`)."""
    listed: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.parameters,
    }
    schema = output_schema(tool)
    if schema is not None:
        listed["outputSchema"] = schema
    return listed


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
