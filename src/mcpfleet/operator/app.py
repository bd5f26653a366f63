"""kopf wiring: watch every mcpfleet kind and every managed child, feed the controller, serve /metrics.

kopf does the watching (list + watch per resource and namespace, reconnects, namespace globs, login
from a kubeconfig or the pod's service account). Only raw event handlers are registered, so kopf
writes nothing to the objects (no progress annotations, no finalizers): the controller decides every
write. Handlers are registered on a registry built here, never on kopf's global one.

With `--leader-elect` (`operator.leader`), kopf and the controller start only once this process holds
the Lease: a standby serves /healthz, /metrics and /stats and makes no request but the Lease's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import kopf
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mcpfleet.api.kinds import ALL_KINDS
from mcpfleet.api.meta import GROUP, LABEL_MANAGED_BY
from mcpfleet.api.versions import STORAGE_VERSION
from mcpfleet.operator import logfilter
from mcpfleet.operator.controller import Controller
from mcpfleet.operator.conversion import (
    serve_conversion_webhook,
    serve_out_of_cluster_webhook,
    webhook_port_from_env,
    webhook_url_from_env,
)
from mcpfleet.operator.leader import LeaderElectionConfig, LeaderElector, LeadershipLost, new_identity
from mcpfleet.operator.settings import OperatorSettings, default_leader_namespace
from mcpfleet.operator.store import Store
from mcpfleet.platform.kubernetes.api import KubeApi, RetryPolicy, kubeconfig_login, login_from
from mcpfleet.reconcile.common import MANAGED_BY

log = logging.getLogger("mcpfleet.operator")

CHILD_RESOURCES: tuple[tuple[str, str, str], ...] = (
    ("apps", "v1", "deployments"),
    ("", "v1", "services"),
    ("", "v1", "configmaps"),
    ("", "v1", "serviceaccounts"),
    ("", "v1", "persistentvolumeclaims"),
    ("networking.k8s.io", "v1", "networkpolicies"),
    ("rbac.authorization.k8s.io", "v1", "roles"),
    ("rbac.authorization.k8s.io", "v1", "rolebindings"),
)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and the exception, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(settings: OperatorSettings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    # kopf is chatty at INFO about every watch stream; keep it one level quieter than ours.
    kopf_level = max(logging.WARNING, root.level)
    logging.getLogger("kopf").setLevel(kopf_level)
    # Its failed API request attempts become one line per connectivity change (see logfilter).
    logfilter.install(handler, kopf_level)
    logging.getLogger("httpx").setLevel(logging.WARNING)


def build_registry(controller: Controller, settings: OperatorSettings) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    async def on_object(event: kopf.RawEvent, **_: Any) -> None:
        raw = event["object"]
        controller.on_object(event.get("type"), dict(raw))

    async def on_child(event: kopf.RawEvent, **_: Any) -> None:
        controller.on_child(event.get("type"), dict(event["object"]))

    for kind in ALL_KINDS:
        # The stored version: watch events come from etcd as they are, with no webhook call each.
        kopf.on.event(
            GROUP, STORAGE_VERSION, kind.info.plural, registry=registry, id=f"watch-{kind.info.plural}"
        )(on_object)
    for group, version, plural in CHILD_RESOURCES:
        kopf.on.event(
            group,
            version,
            plural,
            labels={LABEL_MANAGED_BY: MANAGED_BY},
            registry=registry,
            id=f"watch-{plural}",
        )(on_child)

    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        if settings.kubeconfig:
            # Read from the named file (kopf's own kubeconfig login only reads $KUBECONFIG, and the
            # process environment is not ours to change).
            return kubeconfig_login(settings.kubeconfig)
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    kopf.on.login(registry=registry)(login)
    return registry


class NoDiffBaseStorage(kopf.DiffBaseStorage):
    """Keeps no diff base: only raw event handlers are registered, so kopf never diffs an object.

    kopf's default storage deep-copies every object on every watch event to build a diff base that
    only its change handlers (on.create / on.update) read; that copy was ~10 % of the operator's CPU
    while 1,000 servers converged.
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[kopf.FieldSpec] | None = None
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def kopf_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.diffbase_storage = NoDiffBaseStorage()
    # The controller posts its own events; kopf must not turn log lines into Event writes.
    settings.posting.enabled = False
    settings.watching.server_timeout = 600
    settings.watching.client_timeout = 660
    settings.networking.request_timeout = 60
    return settings


class ControllerCollector(Collector):
    """Exposes the controller's own counters at scrape time (nothing is copied on the hot path)."""

    def __init__(self, controller: Controller, elector: LeaderElector | None = None) -> None:
        self.controller = controller
        self.elector = elector

    def collect(self) -> Iterator[Metric]:
        controller = self.controller
        requests = CounterMetricFamily(
            "mcpfleet_operator_api_requests",
            "API requests made by the operator's client (the Lease's by the leader elector).",
            labels=["verb", "kind"],
        )
        counted = controller.api.requests.copy()
        if self.elector is not None and isinstance(self.elector.api, KubeApi):
            counted.update(self.elector.api.requests)
        for (verb, kind), count in sorted(counted.items()):
            requests.add_metric([verb, kind], count)
        retries = CounterMetricFamily(
            "mcpfleet_operator_api_retries",
            "Requests resent after a 429, a 5xx or a dropped connection (not counted in api_requests).",
            labels=["cause"],
        )
        for cause, count in sorted(controller.api.retries.items()):
            retries.add_metric([cause], count)
        reconciles = CounterMetricFamily(
            "mcpfleet_operator_reconciles", "Reconcile passes by kind.", labels=["kind"]
        )
        for kind, count in sorted(controller.stats.reconciles_by_kind.items()):
            reconciles.add_metric([kind], count)
        yield requests
        yield retries
        yield reconciles
        yield GaugeMetricFamily(
            "mcpfleet_operator_queue_depth", "Keys waiting or being reconciled.", value=len(controller.queue)
        )
        yield CounterMetricFamily(
            "mcpfleet_operator_reconcile_errors",
            "Reconcile passes that failed (retried with backoff).",
            value=controller.stats.errors,
        )
        yield CounterMetricFamily(
            "mcpfleet_operator_conflicts",
            "Status writes refused with 409 (the object was re-read and reconciled again).",
            value=controller.stats.conflicts,
        )
        yield GaugeMetricFamily(
            "mcpfleet_operator_leader",
            "1 while this process leads (always 1 without --leader-elect), 0 while it stands by.",
            value=1 if is_leader(self.elector) else 0,
        )


def is_leader(elector: LeaderElector | None) -> bool:
    """Without leader election the only process acts as the leader."""
    return elector is None or elector.leading


def metrics_registry(controller: Controller, elector: LeaderElector | None = None) -> CollectorRegistry:
    """A registry of this controller only (no process-global state: tests run several operators)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ControllerCollector(controller, elector))
    return registry


def stats_document(controller: Controller, elector: LeaderElector | None = None) -> dict[str, Any]:
    """JSON for tests and the benchmark: request counts, reconciles per object, queue state.

    `requests` / `writes` / `total` are the controller's (a standby's stay at zero); the Lease's own
    requests are under `leaderElection.requests`.
    """
    election: dict[str, Any] | None = None
    if elector is not None:
        election = elector.state()
        if isinstance(elector.api, KubeApi):
            election["requests"] = {f"{v} {k}": n for (v, k), n in sorted(elector.api.requests.items())}
    return {
        "leader": is_leader(elector),
        "leaderElection": election,
        "requests": {f"{verb} {kind}": n for (verb, kind), n in sorted(controller.api.requests.items())},
        "writes": controller.api.writes,
        "retries": dict(controller.api.retries),
        "total": controller.api.total,
        "reconciles": {"/".join(key): n for key, n in sorted(controller.stats.reconciles.items())},
        "reconcilesByKind": dict(controller.stats.reconciles_by_kind),
        "errors": controller.stats.errors,
        "conflicts": controller.stats.conflicts,
        "queue": len(controller.queue),
        "idle": controller.queue.idle,
        "synced": controller.synced.is_set(),
        "objects": len(controller.store.keys()),
        "pid": os.getpid(),
    }


async def serve_http(
    controller: Controller, host: str, port: int, elector: LeaderElector | None = None
) -> web.AppRunner:
    registry = metrics_registry(controller, elector)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(stats_document(controller, elector))

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")  # alive: the event loop answers (a standby too)

    async def readyz(_: web.Request) -> web.Response:
        if not is_leader(elector):
            return web.Response(text="standby", status=503)
        if controller.synced.is_set():
            return web.Response(text="ok")
        return web.Response(text="starting", status=503)

    async def resync(_: web.Request) -> web.Response:
        if not is_leader(elector):
            return web.json_response({"error": "standby: not leading"}, status=503)
        await controller.relist()
        return web.json_response({"queued": len(controller.queue)})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/stats", stats)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_post("/resync", resync)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server: Any = site._server
    for sock in server.sockets if server is not None else ():
        bound = sock.getsockname()[1]
        # Printed so a test or a script that asked for port 0 learns where to look.
        print(f"mcpfleet operator: metrics on http://{host}:{bound}/metrics", file=sys.stderr, flush=True)
    return runner


def _leader_elector(settings: OperatorSettings) -> LeaderElector | None:
    election = settings.leader_election
    if not election.enabled:
        return None
    config = LeaderElectionConfig(
        namespace=election.namespace,
        name=election.name,
        identity=new_identity(),
        lease_duration=election.lease_duration,
        renew_deadline=election.renew_deadline,
        retry_period=election.retry_period,
    )
    # A client of its own: a renewal never waits behind the reconciles' connections, and the
    # controller's request counters stay the controller's (a standby's remain at zero). No client-side
    # retries: the elector retries every retry_period itself, and a back-off must never outlast the
    # renew deadline.
    return LeaderElector(
        KubeApi(login_from(settings.kubeconfig), connections=2, retry=RetryPolicy(attempts=1)), config
    )


def _on_signals(stopping: asyncio.Event) -> bool:
    """SIGTERM / SIGINT set `stopping` (until kopf, once started, takes both signals over)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    loop = asyncio.get_running_loop()
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
    except (NotImplementedError, RuntimeError):
        return False
    return True


async def _first_set(*events: asyncio.Event | None) -> None:
    """Return once any of `events` is set."""
    waits = [asyncio.ensure_future(event.wait()) for event in events if event is not None]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()


async def _reclaim_signals(ready: asyncio.Event, stopping: asyncio.Event) -> None:
    # kopf installs its own SIGTERM / SIGINT handlers as it starts (once, before it is ready).
    # Take them back: a leader's stop then releases the lease as soon as the workers stopped,
    # instead of after kopf's own shutdown (which lets its idle per-object workers expire, ~5 s).
    await ready.wait()
    await asyncio.sleep(0.5)
    _on_signals(stopping)


async def _acquired(elector: LeaderElector, stop_task: asyncio.Task[Any]) -> bool:
    """Wait for the lease; False when asked to stop first (a standby stops with nothing to release)."""
    acquire_task = asyncio.create_task(elector.acquire(), name="leader-acquire")
    await asyncio.wait([acquire_task, stop_task], return_when=asyncio.FIRST_COMPLETED)
    if not acquire_task.done():
        acquire_task.cancel()
        await asyncio.gather(acquire_task, return_exceptions=True)
        return False
    acquire_task.result()
    return True


def _raise_failure(done: set[asyncio.Task[Any]]) -> None:
    """Re-raise the exception a finished task ended with (a lost lease is logged first)."""
    for task in done:
        exc = None if task.cancelled() else task.exception()
        if exc is not None:
            if isinstance(exc, LeadershipLost):
                log.error("leadership lost: %s; stopping every writer and exiting", exc)
            raise exc


async def _cancel(stop_flag: asyncio.Event, *tasks: asyncio.Task[Any] | None) -> None:
    """Cancel the tasks that exist, tell kopf to stop, and wait until the tasks ended."""
    running = [t for t in tasks if t is not None]
    for task in running:
        task.cancel()
    stop_flag.set()
    await asyncio.gather(*running, return_exceptions=True)


async def _close(runner: web.AppRunner | None, api: KubeApi, elector: LeaderElector | None) -> None:
    if runner is not None:
        await runner.cleanup()
    await api.close()
    if elector is not None and isinstance(elector.api, KubeApi):
        await elector.api.close()


async def run_operator(settings: OperatorSettings, stop: asyncio.Event | None = None) -> None:
    """Run until `stop` is set (or forever): kopf watches, controller workers, the HTTP endpoint.

    With leader election the HTTP endpoint starts at once and kopf and the workers only once the
    Lease is held. Raises `LeadershipLost` (after stopping every writer, so the caller exits
    non-zero) when the lease is lost; on any other exit the leader releases the lease last.
    """
    api = KubeApi(login_from(settings.kubeconfig))
    controller = Controller(api, Store(), settings)
    elector = _leader_elector(settings)
    registry = build_registry(controller, settings)
    ready = asyncio.Event()
    stop_flag = asyncio.Event()
    stopping = asyncio.Event()
    runner = None
    kopf_task: asyncio.Task[Any] | None = None
    controller_task: asyncio.Task[Any] | None = None
    lease_task: asyncio.Task[Any] | None = None
    signals_task: asyncio.Task[Any] | None = None

    stop_task = asyncio.create_task(_first_set(stopping, stop), name="stop")
    own_signals = False
    webhook_task: asyncio.Task[Any] | None = None
    try:
        if settings.metrics_port is not None:
            runner = await serve_http(controller, settings.metrics_host, settings.metrics_port, elector)
        webhook_port, webhook_url = webhook_port_from_env(), webhook_url_from_env()
        if webhook_url is not None:
            # Out of the cluster: the CRDs call this process at the URL the user gave.
            webhook_task = await serve_out_of_cluster_webhook(api, webhook_url)
        elif webhook_port is not None:
            # Every replica, before the lease: the API server converts through whichever pod it reaches.
            webhook_task = await serve_conversion_webhook(api, default_leader_namespace(), webhook_port)
        if elector is not None:
            # A standby has no kopf to catch SIGTERM: stop cleanly on it (nothing to release).
            own_signals = _on_signals(stopping)
            if not await _acquired(elector, stop_task):
                return
            lease_task = asyncio.create_task(elector.hold(), name="leader-renew")
        # The workers exist before kopf starts: kopf's shutdown waits for (and cancels) only the tasks
        # created after its own start, so it neither holds the exit up nor races us for the workers.
        controller_task = asyncio.create_task(controller.run(initial_list=True), name="controller")
        await asyncio.sleep(0)
        kopf_task = asyncio.create_task(
            kopf.operator(
                registry=registry,
                settings=kopf_settings(),
                standalone=True,
                clusterwide=settings.clusterwide,
                namespaces=settings.namespaces,
                ready_flag=ready,
                stop_flag=stop_flag,
            ),
            name="kopf",
        )
        if own_signals:
            signals_task = asyncio.create_task(_reclaim_signals(ready, stopping), name="signals")
        waiters = [t for t in (kopf_task, controller_task, stop_task, lease_task) if t is not None]
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        _raise_failure(done - {stop_task})
    finally:
        # Writers stop first: the workers and their event posts. kopf writes nothing (raw event handlers
        # only, no posting, no peering), so the lease is released as soon as they stopped, and a
        # standby takes over while kopf is still winding its watchers down.
        await _cancel(stop_flag, controller_task, stop_task, lease_task, signals_task, webhook_task)
        if elector is not None:
            await elector.release()
        if kopf_task is not None:
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError, Exception):
                await asyncio.wait_for(kopf_task, timeout=10)
        if own_signals:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
        await _close(runner, api, elector)
