"""Routing: the aggregated view of the serving backends, per protocol era, and names -> backends.

Owns both eras' `Aggregate`s (conflict resolution is `aggregate.build`'s), the gateway's own tools
in them (composite tools, the code-mode tool, the optimizer's meta tools over the catalogue), the
pre-serialized list cache (rebuilt only when something changed, never per request; lists filtered
per caller when authorization is on) and its pinned copies, and the lookups that route a request:
a resource URI or template to its backend, the backend of a prompt / resource policy target.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mcpfleet.api.gatewayconfig import CompositeTool
from mcpfleet.policy.guard import Target
from mcpfleet.vmcp import aggregate, wire
from mcpfleet.vmcp.aggregate import Aggregate, ConflictError
from mcpfleet.vmcp.codemode import tool_definition
from mcpfleet.vmcp.composite import output_schema
from mcpfleet.vmcp.optimizer import meta_tools
from mcpfleet.vmcp.pinned import MIN_BYTES, Pinned, PinnedCache
from mcpfleet.vmcp.pool import LISTS
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    from mcpfleet.vmcp.context import CallContext
    from mcpfleet.vmcp.features import Features
    from mcpfleet.vmcp.pool import BackendPool
    from mcpfleet.vmcp.report import StatusReporter
    from mcpfleet.vmcp.upstream import Era

log = logging.getLogger(__name__)

_MODERN_LIST = {"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}


class Router:
    """The aggregate of the serving backends and its list cache (see the module docstring)."""

    def __init__(self, pool: BackendPool, features: Features, reporter: StatusReporter) -> None:
        self._pool = pool
        self._features = features
        self._reporter = reporter
        self.aggs: dict[Era, Aggregate] = {"legacy": Aggregate(), "modern": Aggregate()}
        self._cache: dict[tuple[str, Era], bytes] = {}
        self._pinned = PinnedCache()
        self.legacy_sse = False
        """Whether some backend answers 2025-era calls as SSE streams (then the front does too)."""

    def rebuild(self, strict: bool = False) -> set[str]:
        """Recompute both eras' aggregates and list caches; returns the list methods that changed."""
        new: dict[Era, Aggregate] = {}
        for era in ("legacy", "modern"):
            try:
                new[era] = self._build(era)
            except ConflictError:
                if strict:
                    raise
                log.exception("aggregation failed; keeping the previous lists")
                return set()
        finder = self._features.finder
        if finder is not None:
            finder.update({era: agg.catalogue for era, agg in new.items()})
        self._pinned.clear()
        changed: set[str] = set()
        for era, agg in new.items():
            old = self.aggs[era]
            self.aggs[era] = agg
            for method, (_cap, key, _attr) in LISTS.items():
                items = items_of(agg, method)
                if items != items_of(old, method):
                    changed.add(method)
                body = {key: items} if era == "legacy" else {key: items, **_MODERN_LIST}
                self._cache[(method, era)] = wire.dumps(body)
        self.legacy_sse = any(up.sse_responses for up in self._pool.upstreams())
        self._reporter.mark_dirty()
        return changed

    def _build(self, era: Era) -> Aggregate:
        """One era's aggregate: the serving backends' lists, then the gateway's own tools."""
        pool, config = self._pool, self._features.config
        lists = [b.lists_for(era) for _n, b in sorted(pool.backends.items()) if pool.serving(b)]
        agg = aggregate.build(lists, config.aggregation, config.tool_configs)
        agg.tools.extend(_composite_listing(ct) for ct in config.composite_tools)
        if self._features.code is not None:
            agg.tools.append(tool_definition(config.code_mode))
        agg.catalogue = agg.tools
        if config.optimizer is not None:
            meta = meta_tools(config.optimizer)
            agg.tools = meta + agg.catalogue if config.optimizer.expose_all_tools else meta
        return agg

    def pinned(self, result: bytes) -> Pinned | None:
        """The copy-free wire form of a large result this gateway serves from its list cache (see
        `pinned`); None for anything else (a list filtered for one caller, a small one)."""
        pin = self._pinned.get(result)
        if pin is None and len(result) >= MIN_BYTES and any(result is v for v in self._cache.values()):
            pin = self._pinned.add(result)
        return pin

    def cached_list(self, method: str, era: Era) -> bytes:
        if not self._pool.best_effort:
            down = self._pool.unavailable()
            if down:
                raise RPCError(
                    wire.BACKEND_UNAVAILABLE,
                    f"backends unavailable: {', '.join(down)} (partialFailureMode is 'fail')",
                )
        return self._cache.get((method, era)) or wire.dumps({LISTS[method][1]: []})

    def filtered_list(self, method: str, ctx: CallContext) -> dict[str, Any] | bytes:
        """A list as the caller may see it (the shared cached bytes when authorization is off)."""
        cached = self.cached_list(method, ctx.era)
        policy = self._features.policy
        if policy.engine is None or method == "resources/templates/list":
            return cached
        agg = self.aggs[ctx.era]
        key = LISTS[method][1]
        items = items_of(agg, method)
        if method == "tools/list":
            backend_of = {n: r.backend for n, r in agg.tool_routes.items()}
        elif method == "prompts/list":
            backend_of = {n: r.backend for n, r in agg.prompt_routes.items()}
        else:
            backend_of = agg.resource_routes
        result: dict[str, Any] = policy.filter_result(ctx.caller.claims, method, {key: items}, backend_of)
        if ctx.era == "modern":
            result.update(_MODERN_LIST)
        return result

    def resource_backend(self, p: dict[str, Any], era: Era) -> str:
        """The backend serving the resource `p["uri"]`; the era's not-found error otherwise."""
        uri = p.get("uri")
        backend = aggregate.route_resource(self.aggs[era], uri) if isinstance(uri, str) else None
        if backend is None:
            # SEP-2164: the 2026 wire reports an unknown resource as invalid params.
            code = wire.INVALID_PARAMS if era == "modern" else wire.RESOURCE_NOT_FOUND
            raise RPCError(code, f"Resource not found: {uri}", {"uri": uri})
        return backend

    def template_owner(self, uri_template: str, era: Era) -> str | None:
        for b in self._pool.backends.values():
            if any(t.get("uriTemplate") == uri_template for t in b.lists_for(era).templates):
                return b.spec.name
        return None

    def owner_of(self, target: Target, era: Era) -> str | None:
        """The backend serving a prompt / resource target (None when unknown)."""
        agg = self.aggs[era]
        if target.feature == "prompt":
            route = agg.prompt_routes.get(target.name)
            return route.backend if route is not None else None
        if target.feature == "resource":
            return aggregate.route_resource(agg, target.name) or self.template_owner(target.name, era)
        return None


def items_of(agg: Aggregate, method: str) -> list[dict[str, Any]]:
    """The items of one list kind in an aggregate."""
    return {
        "tools/list": agg.tools,
        "resources/list": agg.resources,
        "resources/templates/list": agg.templates,
        "prompts/list": agg.prompts,
    }[method]


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
