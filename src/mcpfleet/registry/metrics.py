"""Prometheus metrics of the registry server, on a registry of their own (no process-global state)."""

from __future__ import annotations

# The package's submodules, not its `__init__` (deferred: `mcpsdk.py`); the exposition format
# loads with the first `/metrics`, not at every registry's start.
from prometheus_client.metrics import Counter, Gauge, Histogram
from prometheus_client.registry import CollectorRegistry


class RegistryMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "mcpfleet_registry_http_requests",
            "HTTP requests served, by route and status code.",
            ["route", "code"],
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "mcpfleet_registry_http_request_duration_seconds",
            "Time to answer API requests, by route.",
            ["route"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5),
            registry=self.registry,
        )
        self.syncs = Counter(
            "mcpfleet_registry_syncs",
            "Source syncs by result: applied, unchanged or failed.",
            ["source", "result"],
            registry=self.registry,
        )
        self.sync_seconds = Histogram(
            "mcpfleet_registry_sync_duration_seconds",
            "Duration of source syncs (fetch, parse, store).",
            ["source"],
            registry=self.registry,
        )
        self.source_up = Gauge(
            "mcpfleet_registry_source_up",
            "1 when the last sync of the source succeeded, 0 when it failed.",
            ["source"],
            registry=self.registry,
        )
        self.source_entries = Gauge(
            "mcpfleet_registry_source_entries",
            "Entries the source contributed at its last good sync (after filtering).",
            ["source"],
            registry=self.registry,
        )
        self.source_entry_errors = Gauge(
            "mcpfleet_registry_source_entry_errors",
            "Entries of the source rejected at its last sync (bad JSON, schema, duplicates).",
            ["source"],
            registry=self.registry,
        )
        self.last_success = Gauge(
            "mcpfleet_registry_source_last_success_timestamp_seconds",
            "Unix time of the last successful sync of the source.",
            ["source"],
            registry=self.registry,
        )
        self.catalogue_entries = Gauge(
            "mcpfleet_registry_catalogue_entries",
            "Entries served (not deleted) in the merged catalogue.",
            registry=self.registry,
        )
        self.generation = Gauge(
            "mcpfleet_registry_catalogue_generation",
            "Generation of the merged catalogue; bumps whenever its content changes.",
            registry=self.registry,
        )

    def render(self) -> bytes:
        from prometheus_client.exposition import generate_latest

        return generate_latest(self.registry)
