"""The backend pool: which backends the gateway has, their connections, lists, health and retries.

Owns the `Backend` table and everything that changes it: following the backend source (`apply` a
new set: connect newcomers, drop removed ones), connecting (outgoing auth, per-backend headers and
CA bundle, both protocol eras), fetching a backend's capability lists, the health checks and the
circuit breaker's transitions, and the extra connect tries of backends not connected yet.

It does not aggregate: when the serving set or a backend's lists change it calls the injected
`publish` (the gateway rebuilds the aggregate and tells listening clients); a backend's other
notifications go to the injected `notify`; changes worth reporting mark the `StatusReporter`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from mcpfleet.api.duration import parse_duration
from mcpfleet.vmcp import httpclient, lazyhttp
from mcpfleet.vmcp.aggregate import BackendLists, ConflictError
from mcpfleet.vmcp.auth.outgoing import OutgoingAuthFactory, WithHeaders, backend_headers
from mcpfleet.vmcp.backends import BackendSource, BackendSpec
from mcpfleet.vmcp.health import BackendHealth, reconnect_delay
from mcpfleet.vmcp.sseupstream import SSEUpstream
from mcpfleet.vmcp.streamable import Upstream
from mcpfleet.vmcp.upstream import BackendUnavailable, BaseUpstream, Era
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    import aiohttp

    from mcpfleet.vmcp.config import VMCPConfig
    from mcpfleet.vmcp.report import StatusReporter

log = logging.getLogger(__name__)

# list method -> (capability, result key, BackendLists attribute)
LISTS: dict[str, tuple[str, str, str]] = {
    "tools/list": ("tools", "tools", "tools"),
    "resources/list": ("resources", "resources", "resources"),
    "resources/templates/list": ("resources", "resourceTemplates", "templates"),
    "prompts/list": ("prompts", "prompts", "prompts"),
}
LIST_CHANGED = {
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
    "notifications/prompts/list_changed": ("prompts/list",),
}


class Publish(Protocol):
    """Rebuild the aggregate from the serving backends and tell listening clients what changed
    (`also`: list methods to announce even if the merged view looks the same). `strict`: the first
    set, before the gateway serves: a name conflict raises ConflictError, nobody is told."""

    def __call__(self, *, strict: bool = False, also: tuple[str, ...] = ()) -> None: ...


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


class BackendPool:
    """The gateway's backends (see the module docstring)."""

    def __init__(
        self,
        config: VMCPConfig,
        *,
        publish: Publish,
        notify: Callable[[dict[str, Any]], None],
        reporter: StatusReporter,
        http: aiohttp.ClientSession | lazyhttp.LazySession | None = None,
    ) -> None:
        # Only the settings a running gateway never takes live (backends, operational, auth, name).
        self.config = config
        self._publish = publish
        self._notify = notify
        self._reporter = reporter
        self._http = http
        self._own_http = http is None
        self._fast: httpclient.Client | None = None
        self._tls_sessions: dict[str, lazyhttp.LazySession] = {}
        self._outgoing = OutgoingAuthFactory(config.outgoing_auth)
        self.backends: dict[str, Backend] = {}
        fh = config.operational.failure_handling
        self._check_interval = parse_duration(fh.health_check_interval)
        self._check_timeout = parse_duration(fh.health_check_timeout)
        self.best_effort = fh.partial_failure_mode == "best_effort"
        self.startup_error: str | None = None
        self._first_set = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._retries: set[asyncio.Task[None]] = set()
        self._retry_due = asyncio.Event()

    # ---- lifecycle ---------------------------------------------------------------------

    async def start(self, source: BackendSource, wait: float) -> None:
        """Follow `source`; returns once its first set is connected (or `wait` passed), then checks
        health and retries in the background. Raises ConflictError (manual mode) for the first set."""
        if self._http is None:
            # aiohttp loads on first use only: plain-http backends are served by `httpclient`.
            self._http = lazyhttp.LazySession()
        if self._fast is None:
            self._fast = httpclient.Client()
        self._tasks.append(asyncio.create_task(self._follow(source), name="vmcp-source"))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await self._first_set.wait()
        if self.startup_error:
            raise ConflictError(self.startup_error)
        self._tasks.append(asyncio.create_task(self._health_loop(), name="vmcp-health"))
        self._tasks.append(asyncio.create_task(self._reconnect_loop(), name="vmcp-reconnect"))

    async def stop(self) -> None:
        """Stop following, checking and retrying; disconnect every backend."""
        for t in [*self._tasks, *self._retries]:
            t.cancel()
        for t in [*self._tasks, *self._retries]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        await asyncio.gather(*(self._disconnect(b) for b in self.backends.values()), return_exceptions=True)

    async def close(self) -> None:
        """Release the HTTP clients and the outgoing auth (after `stop`)."""
        await self._outgoing.close()
        for session in self._tls_sessions.values():
            await session.close()
        self._tls_sessions.clear()
        if self._own_http and self._http is not None:
            await self._http.close()
            self._http = None
        if self._fast is not None:
            self._fast.close()
            self._fast = None

    async def _follow(self, source: BackendSource) -> None:
        try:
            async for specs in source.watch():
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
            self._publish()
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
            self._publish(strict=True)
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

    # ---- connections -------------------------------------------------------------------

    def _make_upstream(self, b: Backend) -> BaseUpstream:
        """The upstream of a backend, with its outgoing auth, headers and CA bundle."""
        assert self._http is not None
        http, auth = self._http, self._outgoing.for_backend(b.spec.name, self._http)
        settings = next((c for c in self.config.backends if c.name == b.spec.name), None)
        if settings is not None and settings.headers:
            auth = WithHeaders(backend_headers(settings.headers, b.spec.name), auth)
        ca_file = settings.ca_file or settings.ca_bundle_path if settings is not None else None
        if ca_file:
            http = self._tls_session(ca_file)
        name, url = b.spec.name, b.spec.url
        time_limit = self.config.operational.timeouts.for_backend(name)
        info = {"name": f"mcpfleet-vmcp/{self.config.name}", "version": "1"}
        notify = self.on_backend_notification
        if b.spec.transport == "sse":
            return SSEUpstream(
                name, url, http, auth=auth, time_limit=time_limit, on_notification=notify, client_info=info
            )
        fast = self._fast if http is self._http else None
        return Upstream(
            name,
            url,
            http,
            auth=auth,
            time_limit=time_limit,
            on_notification=notify,
            client_info=info,
            fast=fast,
        )

    async def _connect(self, b: Backend, counted: bool = True) -> bool:
        """Connect (initialize, then the lists); False when it failed. A failure is recorded as a
        health failure when `counted` (not for the extra tries between checks), and an extra try
        is scheduled while the backend is in its reconnect window (`health.reconnect_delay`)."""
        async with b.connecting:
            if b.upstream is not None:
                return True
            up = self._make_upstream(b)
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
            await self.fetch_lists(b, tuple(LISTS))
            self._reporter.mark_urgent()
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
        await self.fetch_lists(b, tuple(LISTS), eras=("modern",))
        if b.upstream is not up:
            return
        self._publish()

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

    async def fetch_lists(
        self, b: Backend, methods: tuple[str, ...], eras: tuple[Era, ...] = ("legacy", "modern")
    ) -> None:
        """Refresh some list kinds of one backend, in every protocol era it speaks (of `eras`)."""
        up = b.upstream
        if up is None:
            return
        eras = tuple(e for e in eras if (up.legacy if e == "legacy" else up.modern))
        for era in eras:
            b.lists.setdefault(era, BackendLists(b.spec.name))
        await asyncio.gather(*(self._fetch_list(b, up, m, e) for m in methods for e in eras))

    @staticmethod
    async def _fetch_list(b: Backend, up: BaseUpstream, method: str, era: Era) -> None:
        """One list of one backend in one era, every page of it."""
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

    async def on_backend_notification(self, up: BaseUpstream, msg: dict[str, Any]) -> None:
        """A notification of a connected backend: a list change refreshes its lists and is published
        (announced even if the merged view looks the same: a description may differ in a way the
        aggregate does not compare, and clients expect the notification); others go to `notify`."""
        method = msg.get("method", "")
        b = self.backends.get(up.name)
        if b is None or b.upstream is not up:
            return
        if method in LIST_CHANGED:
            await self.fetch_lists(b, LIST_CHANGED[method])
            self._publish(also=(LIST_CHANGED[method][0],))
        else:
            self._notify(msg)

    # ---- what the pool serves ----------------------------------------------------------

    def serving(self, b: Backend) -> bool:
        """Whether a backend's lists are in the aggregate."""
        return b.connected and (b.health.healthy or not self.best_effort)

    def upstreams(self) -> list[BaseUpstream]:
        return [b.upstream for b in self.backends.values() if b.upstream is not None]

    def capabilities(self, own_tools: bool) -> dict[str, Any]:
        """The gateway's capabilities: the connected backends' (`own_tools`: the gateway has tools of
        its own, composite or meta tools)."""
        caps: dict[str, Any] = {}
        ups = self.upstreams()
        if own_tools or any("tools" in u.capabilities for u in ups):
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
        parts = [u.instructions for u in self.upstreams() if u.instructions]
        return "\n\n".join(parts) if parts else None

    def ready(self) -> bool:
        if not self.backends:
            return False
        up = [b for b in self.backends.values() if b.connected and b.health.healthy]
        return bool(up) if self.best_effort else len(up) == len(self.backends)

    def unavailable(self) -> list[str]:
        """The backends currently unavailable, by name."""
        return sorted(n for n, b in self.backends.items() if b.health.state == "unavailable")

    # ---- health ------------------------------------------------------------------------

    def on_health_change(self, b: Backend) -> None:
        log.info("backend %s is now %s", b.spec.name, b.health.state)
        self._reporter.mark_dirty()
        if self.best_effort:
            self._publish()

    def record_failure(self, b: Backend, exc: BackendUnavailable) -> None:
        """A call found the backend unavailable."""
        if b.health.record_failure(exc.reason):
            self.on_health_change(b)

    def record_success(self, b: Backend) -> None:
        """A call was answered (the common case, ready and closed, costs two comparisons)."""
        if b.health.state != "ready" or b.health.circuit != "closed":
            if b.health.record_success():
                self.on_health_change(b)

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
                await self.fetch_lists(b, tuple(LISTS))  # it may have restarted with other lists
            self.on_health_change(b)
            if not self.best_effort:
                self._publish()

    async def _connect_and_publish(self, b: Backend, counted: bool) -> None:
        """Connect a backend not connected yet; on success its lists join the aggregate."""
        if not await self._connect(b, counted):
            return
        if self.backends.get(b.spec.name) is not b:
            await self._disconnect(b)  # removed (or its URL changed) while connecting
            return
        self.on_health_change(b)
        self._publish()

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
