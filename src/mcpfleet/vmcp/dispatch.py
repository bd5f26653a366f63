"""Dispatch: one client request, authorized, audited and served (forwarded, or answered here).

Owns what a method means at the gateway: lists (from the router's cache, filtered per caller),
`tools/call` (the one path of a client's call and of each call made through call_tool or by a
script: authorized, then run as a composite, a meta tool, a script, or routed to its backend),
prompts, resources, subscriptions (remembered in the session), completions, log levels; the one
authorization check (`authorize`) and the audit event of each request. Routing is the `Router`'s,
sending to a backend the `Forwarder`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from mcpfleet.policy.guard import FORBIDDEN, Policy, Target, denial, target_of
from mcpfleet.toolconfig import unknown_tool_result
from mcpfleet.vmcp import aggregate, auditing, nested, wire
from mcpfleet.vmcp.codemode import SCRIPT_TOOL
from mcpfleet.vmcp.composite import CompositeRunner
from mcpfleet.vmcp.context import CallContext, ClientSession
from mcpfleet.vmcp.optimizer import CALL_TOOL, FIND_TOOL, META_TOOLS, call_arguments
from mcpfleet.vmcp.pool import LISTS
from mcpfleet.vmcp.upstream import BackendUnavailable
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    from mcpfleet.ratelimit import Limiter
    from mcpfleet.vmcp.aggregate import Route
    from mcpfleet.vmcp.clientsessions import ClientSessions
    from mcpfleet.vmcp.features import Features
    from mcpfleet.vmcp.forwarding import Forwarder
    from mcpfleet.vmcp.pool import BackendPool
    from mcpfleet.vmcp.routing import Router

log = logging.getLogger(__name__)


class Dispatcher:
    """Serves client requests (see the module docstring)."""

    def __init__(
        self,
        features: Features,
        pool: BackendPool,
        router: Router,
        forwarder: Forwarder,
        sessions: ClientSessions,
    ) -> None:
        self._features = features
        self._pool = pool
        self._router = router
        self._forwarder = forwarder
        self._sessions = sessions
        self._runner = CompositeRunner(self._call_step, tracer=forwarder.tracer, elicit=forwarder.elicit)
        # rateLimiting, set by the HTTP front that owns it: calls made through call_tool and by
        # scripts are charged here (vmcp/nested.py), the client's own requests there.
        self.limiter: Limiter | None = None

    @property
    def policy(self) -> Policy:
        return self._features.policy

    async def dispatch(
        self, method: str, params: dict[str, Any] | None, ctx: CallContext
    ) -> dict[str, Any] | bytes:
        """Serve one request; returns a result dict, or pre-serialized result bytes for cached lists."""
        audit = self._features.policy.audit
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
            auditing.record(
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

    async def _dispatch(
        self, method: str, params: dict[str, Any] | None, ctx: CallContext
    ) -> dict[str, Any] | bytes:
        p = params or {}
        if method == "tools/call":
            return await self.call_tool(p, ctx)
        if method in LISTS:
            return self._router.filtered_list(method, ctx)
        if self._features.policy.engine is not None and method != "prompts/get":
            # Prompts are checked below, where their route is known; the others here.
            self._authorize_named(method, p, ctx)
        if method == "resources/read":
            return await self._forwarder.forward(self._router.resource_backend(p, ctx.era), method, p, ctx)
        if method == "prompts/get":
            return await self._get_prompt(p, ctx)
        if method in ("resources/subscribe", "resources/unsubscribe"):
            return await self._subscription(method, p, ctx)
        if method == "completion/complete":
            return await self._complete(p, ctx)
        if method == "logging/setLevel":
            return await self.set_level(p, ctx)
        if method == "ping":
            return {}
        raise RPCError(wire.METHOD_NOT_FOUND, f"Method not found: {method}")

    async def _get_prompt(self, p: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        route = self._router.aggs[ctx.era].prompt_routes.get(str(p.get("name")))
        if route is None:
            raise RPCError(wire.INVALID_PARAMS, f"Unknown prompt: {p.get('name')}")
        target = target_of("prompts/get", p)
        if target is not None:
            self.authorize(ctx, target, route.backend, "prompts/get")
        return await self._forwarder.forward(route.backend, "prompts/get", {**p, "name": route.original}, ctx)

    async def _subscription(self, method: str, p: dict[str, Any], ctx: CallContext) -> dict[str, Any] | bytes:
        """resources/(un)subscribe at the owning backend, remembered in the client's session."""
        uri = str(p.get("uri"))
        res = await self._forwarder.forward(self._router.resource_backend(p, ctx.era), method, p, ctx)
        if ctx.session is not None:
            if method == "resources/subscribe":
                ctx.session.subscriptions.add(uri)
            else:
                ctx.session.subscriptions.discard(uri)
            await self._sessions.save(ctx.session)
        return res

    async def set_level(self, p: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """logging/setLevel: kept for the session, passed to every backend that logs."""
        if ctx.session is not None:
            ctx.session.log_level = p.get("level")
            await self._sessions.save(ctx.session)
        targets = [
            b.spec.name
            for b in self._pool.backends.values()
            if b.upstream and "logging" in b.upstream.capabilities
        ]
        results = await asyncio.gather(
            *(self._forwarder.forward(n, "logging/setLevel", p, ctx) for n in targets), return_exceptions=True
        )
        for r in results:
            if isinstance(r, RPCError) and not isinstance(r, BackendUnavailable):
                raise r
        return {}

    async def _complete(self, p: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        ref = p.get("ref") or {}
        if ref.get("type") == "ref/prompt":
            route = self._router.aggs[ctx.era].prompt_routes.get(str(ref.get("name")))
            if route is None:
                raise RPCError(wire.INVALID_PARAMS, f"Unknown prompt: {ref.get('name')}")
            return await self._forwarder.forward(
                route.backend, "completion/complete", {**p, "ref": {**ref, "name": route.original}}, ctx
            )
        if ref.get("type") == "ref/resource":
            uri = ref.get("uri")
            agg = self._router.aggs[ctx.era]
            backend = aggregate.route_resource(agg, uri) if isinstance(uri, str) else None
            if backend is None and isinstance(uri, str):
                backend = self._router.template_owner(uri, ctx.era)
            if backend is None:
                raise RPCError(wire.INVALID_PARAMS, f"Unknown resource reference: {uri}")
            return await self._forwarder.forward(backend, "completion/complete", p, ctx)
        raise RPCError(
            wire.INVALID_PARAMS, "completion/complete: ref.type must be ref/prompt or ref/resource"
        )

    async def reestablish(self, s: ClientSession) -> None:
        """An adopted session's subscriptions and log level, sent to the backends on this replica's
        connections (the replica that took them may be gone)."""
        ctx = CallContext(era="legacy", token=s.token)
        for uri in sorted(s.subscriptions):
            with contextlib.suppress(RPCError):
                backend = self._router.resource_backend({"uri": uri}, "legacy")
                await self._forwarder.forward(backend, "resources/subscribe", {"uri": uri}, ctx)
        if s.log_level:
            with contextlib.suppress(RPCError):
                await self.set_level({"level": s.log_level}, ctx)

    # ---- authorization -----------------------------------------------------------------

    def authorize(
        self, ctx: CallContext, target: Target, backend: str | None, method: str = "tools/call"
    ) -> None:
        """Raise the FORBIDDEN RPCError unless the caller of `ctx` may use `target` (on `backend`).

        The one authorization check of the gateway: client requests, composite steps and any other
        caller that acts for a client (code mode, find-tool) go through it.
        """
        decision = self._features.policy.check(ctx.caller.claims, target, backend)
        if decision is not None and not decision.allowed:
            log.info("denied %s of %s %r: %s", method, target.feature, target.name, decision.reason)
            raise RPCError(
                FORBIDDEN, denial(method, target), {"reason": "policy", target.feature: target.name}
            )

    def _authorize_named(self, method: str, p: dict[str, Any], ctx: CallContext) -> None:
        """Authorize a request naming a resource or a prompt (read, subscribe, completion)."""
        target = target_of(method, p)
        if target is not None:
            self.authorize(ctx, target, self._router.owner_of(target, ctx.era), method)

    def tool_allowed(self, name: str, ctx: CallContext) -> bool:
        """Whether the caller of `ctx` may see and call tool `name` (the optimizer filters find_tool
        answers with it): the list question of the policies (no arguments), as tools/list asks it."""
        policy = self._features.policy
        if policy.engine is None:
            return True
        route = self._router.aggs[ctx.era].tool_routes.get(name)
        decision = policy.check(ctx.caller.claims, Target("tool", name), route.backend if route else None)
        return decision is None or decision.allowed

    # ---- tools -------------------------------------------------------------------------

    async def call_tool(self, p: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """tools/call: the one path of a client's call, and of each call made by call_tool or a script
        (authorized here, then run as a composite or routed)."""
        features = self._features
        name = p.get("name")
        args = p.get("arguments")
        checked = features.policy.engine is not None
        meta = (features.finder is not None and name in META_TOOLS) or (
            features.code is not None and name == SCRIPT_TOOL
        )
        if meta and checked:
            # The optimizer's / code mode's own tools are tools like any other (backend none); the
            # calls they make are authorized again, one by one, through this method.
            self.authorize(ctx, Target("tool", str(name), args if isinstance(args, dict) else None), None)
        if features.finder is not None and name in META_TOOLS:
            return await self._meta_tool(str(name), p.get("arguments"), ctx)
        if features.code is not None and name == SCRIPT_TOOL:
            return await self._script(p.get("arguments"), ctx)
        comp = features.composites.get(name) if isinstance(name, str) else None
        if comp is not None:
            if checked:
                self.authorize(ctx, Target("tool", comp.name, args if isinstance(args, dict) else None), None)
            return await self._runner.run(comp, p.get("arguments") or {}, ctx)
        route = self._router.aggs[ctx.era].tool_routes.get(name) if isinstance(name, str) else None
        if route is None:
            # Like the SDK servers: an unknown tool is a tool-level error result, not a protocol error.
            return unknown_tool_result(name)
        if checked:
            assert isinstance(name, str)
            self.authorize(ctx, Target("tool", name, args if isinstance(args, dict) else None), route.backend)
        if route.original != name:
            p = {**p, "name": route.original}
        return await self._forwarder.forward(route.backend, "tools/call", p, ctx)

    async def _meta_tool(self, name: str, arguments: Any, ctx: CallContext) -> dict[str, Any]:
        """find_tool / call_tool of the optimizer."""
        finder = self._features.finder
        assert finder is not None
        if name == FIND_TOOL:
            return await finder.find(arguments, ctx.era, lambda tool: self.tool_allowed(tool, ctx))
        tool, params = call_arguments(arguments)
        inner = nested.inner_context(ctx, CALL_TOOL)
        try:
            return await nested.call(self, tool, params, inner)
        finally:
            ctx.backend = inner.backend  # the client's own event names the backend too

    async def _script(self, arguments: Any, ctx: CallContext) -> dict[str, Any]:
        """execute_tool_script: each call the script makes is a tools/call of the caller's own."""
        code = self._features.code
        assert code is not None
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
        script = code.validate(arguments)

        async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
            # A new context per call: concurrent calls each name their own backend in the audit.
            inner = nested.inner_context(ctx, SCRIPT_TOOL, emit=None, client_id=None)
            return await nested.call(self, tool, args, inner)

        names = [t["name"] for t in self._router.aggs[ctx.era].catalogue if t.get("name") != SCRIPT_TOOL]
        if self._features.finder is not None:
            names += sorted(META_TOOLS)
        return await code.run(script, names, call)

    async def _call_step(
        self, tool: str, arguments: dict[str, Any], ctx: CallContext, time_limit: float | None
    ) -> dict[str, Any]:
        """Composite steps: route by `workload.tool` (hidden tools included) or advertised name."""
        agg = self._router.aggs[ctx.era]
        route: Route | None = agg.step_routes.get(tool) or agg.tool_routes.get(tool)
        if route is None:
            raise RPCError(wire.INVALID_PARAMS, f"composite step: unknown tool {tool!r}")
        step_ctx = CallContext(era=ctx.era, token=ctx.token, caller=ctx.caller, passthrough=ctx.passthrough)
        if self._features.policy.engine is not None:
            # Each step is authorized as the caller's own tools/call of the tool (its advertised
            # name when it has one, else the step's `workload.tool`).
            advertised = next((n for n, r in agg.tool_routes.items() if r == route), tool)
            self.authorize(step_ctx, Target("tool", advertised, arguments), route.backend)
        return await self._forwarder.forward(
            route.backend,
            "tools/call",
            {"name": route.original, "arguments": arguments},
            step_ctx,
            time_limit,
        )
