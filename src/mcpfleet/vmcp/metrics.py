"""Prometheus metrics of the gateway: requests, errors and latency per backend and method.

Uses its own CollectorRegistry (no process-global state) so several gateways can live in one
process (tests) and `/metrics` shows only this gateway's series. Label children are cached so
the hot path does one dict lookup, one counter increment and one histogram observation.
"""

from __future__ import annotations

# The package's submodules, not its `__init__` (deferred: `mcpsdk.py`); the exposition format
# loads with the first `/metrics`, not at every gateway's start.
from prometheus_client.metrics import Counter, Histogram
from prometheus_client.registry import CollectorRegistry

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _Child:
    __slots__ = ("_err", "_lat", "_req")

    def __init__(self, req: Counter, err: Counter, lat: Histogram, backend: str, method: str) -> None:
        self._req = req.labels(backend=backend, method=method)
        self._err = err.labels(backend=backend, method=method)
        self._lat = lat.labels(backend=backend, method=method)

    def error(self) -> None:
        self._err.inc()

    def observe(self, seconds: float) -> None:
        self._req.inc()
        self._lat.observe(seconds)


class Metrics:
    @property
    def content_type(self) -> str:
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        return CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._req = Counter(
            "vmcp_backend_requests",
            "Requests forwarded to a backend",
            ["backend", "method"],
            registry=self.registry,
        )
        self._err = Counter(
            "vmcp_backend_errors",
            "Forwarded requests that failed",
            ["backend", "method"],
            registry=self.registry,
        )
        self._lat = Histogram(
            "vmcp_backend_request_duration_seconds",
            "Latency of forwarded requests",
            ["backend", "method"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self._front = Counter(
            "vmcp_client_requests", "Requests received from clients", ["method"], registry=self.registry
        )
        self._children: dict[tuple[str, str], _Child] = {}
        self._front_children: dict[str, Counter] = {}

    def child(self, backend: str, method: str) -> _Child:
        key = (backend, method)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = _Child(self._req, self._err, self._lat, backend, method)
        return c

    def client_request(self, method: str) -> None:
        c = self._front_children.get(method)
        if c is None:
            c = self._front_children[method] = self._front.labels(method=method)
        c.inc()

    def render(self) -> bytes:
        from prometheus_client.exposition import generate_latest

        return generate_latest(self.registry)
