"""The gateway: a thin facade composing the parts of the virtual MCP server's core.

Protocol-era independent: the ASGI front (`app.py`) parses and validates the wire, then calls
`Gateway.dispatch(method, params, ctx)`. The parts, each constructed here with the collaborators
it needs (no part reaches into another's state):

- `pool.BackendPool`: the backends: connect, lists, health, circuit breaker, reconnects;
- `routing.Router`: both eras' aggregates (conflict resolution), the list cache, name -> backend;
- `forwarding.Forwarder`: one request to one backend (metrics, tracing, the back channel);
- `dispatch.Dispatcher`: what each method means; the one authorization check and the audit;
- `clientsessions.ClientSessions`: 2025-era client sessions (caps, expiry, other replicas');
- `notify.Notifier`: the clients' notification streams;
- `features.Features`: the live settings (config, composites, optimizer, code mode, policy);
- `report.StatusReporter`: the status document and when it is written.

Lists are served from a cache rebuilt only when a backend's lists change (list_changed
notification, connect, health transition), never per request; `Gateway._publish` is that rebuild
and the `list_changed` it announces.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.api.duration import parse_duration
from mcpfleet.vmcp import auditing, lazyhttp
from mcpfleet.vmcp.aggregate import Aggregate, ConflictError
from mcpfleet.vmcp.backends import BackendSource
from mcpfleet.vmcp.clientsessions import (
    MAX_SESSIONS,
    MAX_SESSIONS_PER_SUBJECT,
    SESSION_IDLE_SECONDS,
    ClientSessions,
    SessionLimitError,
    SubjectSessionLimitError,
    session_owner,
)
from mcpfleet.vmcp.config import VMCPConfig
from mcpfleet.vmcp.context import CALLER, CallContext, Caller, ClientSession, Emit, Listener, current_caller
from mcpfleet.vmcp.dispatch import Dispatcher
from mcpfleet.vmcp.features import Features
from mcpfleet.vmcp.forwarding import Forwarder
from mcpfleet.vmcp.metrics import Metrics
from mcpfleet.vmcp.notify import Notifier
from mcpfleet.vmcp.pinned import Pinned
from mcpfleet.vmcp.pool import LISTS, Backend, BackendPool
from mcpfleet.vmcp.reload import ConfigWatcher
from mcpfleet.vmcp.report import STATUS_COALESCE, StatusReporter, gateway_status
from mcpfleet.vmcp.routing import Router
from mcpfleet.vmcp.status import NoopStatusWriter, StatusWriter
from mcpfleet.vmcp.upstream import Era

if TYPE_CHECKING:
    import aiohttp
    from opentelemetry.trace import Tracer

    from mcpfleet.policy.guard import Policy
    from mcpfleet.ratelimit import Limiter
    from mcpfleet.vmcp.codemode import CodeRunner
    from mcpfleet.vmcp.optimizer import ToolFinder
    from mcpfleet.vmcp.sessions import SessionStore

log = logging.getLogger(__name__)

__all__ = [
    "CALLER",
    "LISTS",
    "MAX_SESSIONS",
    "MAX_SESSIONS_PER_SUBJECT",
    "SESSION_IDLE_SECONDS",
    "STATUS_COALESCE",
    "Backend",
    "CallContext",
    "Caller",
    "ClientSession",
    "Emit",
    "Gateway",
    "Listener",
    "SessionLimitError",
    "SubjectSessionLimitError",
    "current_caller",
    "session_owner",
]


class Gateway:
    """The parts of the gateway, wired (see the module docstring), and its lifecycle."""

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
        self.source = source
        self.started_at = time.time()
        self.features = Features(config, Path(config_file).parent if config_file else None)
        interval = parse_duration(config.operational.failure_handling.status_reporting_interval)
        self.reporter = StatusReporter(status_writer or NoopStatusWriter(), interval, self.status)
        self.notifier = Notifier()
        self.pool = BackendPool(
            config,
            publish=self._publish,
            notify=self.notifier.backend_message,
            reporter=self.reporter,
            http=http,
        )
        self.router = Router(self.pool, self.features, self.reporter)
        self.forwarder = Forwarder(self.pool, metrics or Metrics(), tracer)
        self.client_sessions = ClientSessions(
            self.notifier,
            self._reestablish,
            max_sessions=max_sessions,
            max_sessions_per_subject=max_sessions_per_subject,
            session_idle=session_idle,
        )
        self.dispatcher = Dispatcher(
            self.features, self.pool, self.router, self.forwarder, self.client_sessions
        )
        # The file `config` was read from: followed while running, its aggregation settings re-applied.
        self._watcher = ConfigWatcher(config_file, self) if config_file else None
        self._tasks: list[asyncio.Task[Any]] = []
        # The hot paths, bound once (no facade call per request).
        self.dispatch = self.dispatcher.dispatch
        self.call_tool = self.dispatcher.call_tool
        self.authorize = self.dispatcher.authorize
        self.tool_allowed = self.dispatcher.tool_allowed
        self.client_message = self.forwarder.client_message
        self.cached_list = self.router.cached_list
        self.pinned: Callable[[bytes], Pinned | None] = self.router.pinned
        self.broadcast_list_changed = self.notifier.broadcast_list_changed
        self.new_session = self.client_sessions.new_session
        self.open_session = self.client_sessions.open_session
        self.session_for = self.client_sessions.session_for
        self.find_session = self.client_sessions.find_session
        self.close_session = self.client_sessions.close_session
        self.end_session = self.client_sessions.end_session
        self.prune_sessions = self.client_sessions.prune_sessions
        self.apply = self.pool.apply
        self.check_backend = self.pool.check_backend
        self.ready = self.pool.ready
        self.rebuild = self.router.rebuild

    # ---- lifecycle ---------------------------------------------------------------------

    async def start(self, wait: float = 30.0) -> None:
        """Take the first backend set, connect it, build lists; raises ConflictError (manual mode)."""
        try:
            await self.pool.start(self.source, wait)
        except ConflictError:
            await self.stop()
            raise
        self._tasks.append(asyncio.create_task(self.client_sessions.expire_loop(), name="vmcp-sessions"))
        self._tasks.append(asyncio.create_task(self.reporter.loop(), name="vmcp-status"))
        if self._watcher is not None:
            self._tasks.append(asyncio.create_task(self._watcher.run(), name="vmcp-config"))

    async def stop(self) -> None:
        self.notifier.close()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        await self.pool.stop()
        with contextlib.suppress(Exception):
            await self.reporter.write_now()
        await self.pool.close()
        await self.features.close()

    def _publish(self, *, strict: bool = False, also: tuple[str, ...] = ()) -> None:
        """Rebuild the aggregate; tell listening clients what changed (and `also`)."""
        changed = self.router.rebuild(strict=strict)
        if strict:
            return  # the first set: the gateway does not serve yet
        for m in changed | set(also):
            self.notifier.broadcast_list_changed(m)

    async def _reestablish(self, s: ClientSession) -> None:
        """An adopted session's subscriptions and log level, set up again (`Dispatcher.reestablish`)."""
        await self.dispatcher.reestablish(s)

    def reconfigure(self, config: VMCPConfig) -> set[str] | None:
        """Take the live-applicable settings (`LIVE_CONFIG_FIELDS`) of a re-read config in place.

        Sessions, streams and backend connections stay; clients listening for list changes are told.
        Returns the list methods that changed, or None when those settings are the same as now.
        Other fields are not taken: the platform restarts the gateway when they change.
        """
        taken = self.features.reconfigure(config)
        if taken is None:
            return None
        if taken == "authz":
            # What each caller may list changed: clients re-list.
            for m in ("tools/list", "prompts/list", "resources/list"):
                self.notifier.broadcast_list_changed(m)
            return {"tools/list", "prompts/list", "resources/list"}
        changed = self.router.rebuild()
        for m in changed:
            self.notifier.broadcast_list_changed(m)
        log.info("applied the aggregation settings of the new config; changed: %s", sorted(changed))
        return changed

    # ---- what the front and the platforms read -------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        return self.pool.capabilities(own_tools=self.features.own_tools())

    def instructions(self) -> str | None:
        return self.pool.instructions()

    def audit_refusal(
        self, msg: dict[str, Any], outcome: str, reason: str, started: float, session_id: str | None
    ) -> None:
        """The audit event of a request answered before dispatch (over the rate limits)."""
        auditing.refusal(self.features.policy.audit, msg, outcome, reason, started, session_id)

    def status(self) -> dict[str, Any]:
        finder = self.features.finder
        return gateway_status(
            self.config,
            self.pool,
            self.agg,
            len(self.client_sessions.sessions),
            finder.status() if finder is not None else None,
        )

    @property
    def config(self) -> VMCPConfig:
        return self.features.config

    @property
    def policy(self) -> Policy:
        return self.features.policy

    @property
    def finder(self) -> ToolFinder | None:
        return self.features.finder

    @property
    def code(self) -> CodeRunner | None:
        return self.features.code

    @property
    def backends(self) -> dict[str, Backend]:
        return self.pool.backends

    @property
    def best_effort(self) -> bool:
        return self.pool.best_effort

    @property
    def aggs(self) -> dict[Era, Aggregate]:
        return self.router.aggs

    @property
    def agg(self) -> Aggregate:
        """The 2025-era view (used for status counts)."""
        return self.router.aggs["legacy"]

    @property
    def legacy_sse(self) -> bool:
        return self.router.legacy_sse

    @property
    def listeners(self) -> set[Listener]:
        return self.notifier.listeners

    @property
    def sessions(self) -> dict[str, ClientSession]:
        return self.client_sessions.sessions

    @property
    def metrics(self) -> Metrics:
        return self.forwarder.metrics

    @property
    def tracer(self) -> Tracer | None:
        return self.forwarder.tracer

    @property
    def status_writer(self) -> StatusWriter:
        return self.reporter.writer

    @property
    def max_sessions(self) -> int:
        return self.client_sessions.max_sessions

    @property
    def session_store(self) -> SessionStore | None:
        return self.client_sessions.store

    @session_store.setter
    def session_store(self, store: SessionStore | None) -> None:
        self.client_sessions.store = store

    @property
    def limiter(self) -> Limiter | None:
        return self.dispatcher.limiter

    @limiter.setter
    def limiter(self, limiter: Limiter | None) -> None:
        self.dispatcher.limiter = limiter
