"""Forwarding: one request to one backend, and the back channel between a backend and the client.

Owns the call path to a backend's upstream: the circuit breaker's gate, the per-backend metrics,
the CLIENT span when tracing is on (its context sent as `traceparent`), the client's passthrough
headers, recording the outcome in the backend's health (`BackendPool.record_*`). While a backend
answers, what it sends besides the result is relayed to the caller (server-to-client requests get
gateway ids) and its change notifications go to the pool; what the client sends back (responses,
cancellations: `client_message`) is routed to the backend that asked. The gateway's own
server-to-client request (a composite step's elicitation) goes out the same way (`elicit`).
Authorization happens before (`dispatch`); this module forwards what it is given.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry.trace import SpanKind, set_span_in_context

from mcpfleet import telemetry
from mcpfleet.vmcp import wire
from mcpfleet.vmcp.pool import LIST_CHANGED
from mcpfleet.vmcp.upstream import BackendUnavailable, BaseUpstream
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from mcpfleet.vmcp.context import CallContext, ClientSession
    from mcpfleet.vmcp.metrics import Metrics
    from mcpfleet.vmcp.pool import BackendPool


class Forwarder:
    """Sends requests to backends for clients (see the module docstring)."""

    def __init__(self, pool: BackendPool, metrics: Metrics, tracer: Tracer | None) -> None:
        self._pool = pool
        self.metrics = metrics
        # None: tracing off, and the call path pays one `is None` test for it.
        self.tracer = tracer
        self._span_attrs: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)
        self._bg: set[asyncio.Task[Any]] = set()

    async def forward(
        self,
        backend: str,
        method: str,
        params: dict[str, Any],
        ctx: CallContext,
        time_limit: float | None = None,
    ) -> dict[str, Any]:
        ctx.backend = backend
        if self.tracer is None:
            return await self._call(backend, method, params, ctx, time_limit, None)
        return await self._traced(self.tracer, backend, method, params, ctx, time_limit)

    def _backend_attrs(self, backend: str) -> dict[str, Any]:
        """Span attributes naming a backend (url.full, server.address / server.port), cached per URL."""
        b = self._pool.backends.get(backend)
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

    def _span_name(
        self, backend: str, method: str, params: dict[str, Any], era: str
    ) -> tuple[str, dict[str, Any]]:
        """The CLIENT span's name and attributes for a request."""
        attrs: dict[str, Any] = {
            telemetry.MCP_METHOD: method,
            telemetry.VMCP_BACKEND: backend,
            telemetry.VMCP_ERA: era,
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
        return name, attrs

    async def _traced(
        self,
        tracer: Tracer,
        backend: str,
        method: str,
        params: dict[str, Any],
        ctx: CallContext,
        time_limit: float | None,
    ) -> dict[str, Any]:
        """`forward` inside a CLIENT span whose context goes to the backend as `traceparent`."""
        name, attrs = self._span_name(backend, method, params, ctx.era)
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
                res = await self._call(backend, method, params, ctx, time_limit, headers)
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

    async def _call(
        self,
        backend: str,
        method: str,
        params: dict[str, Any],
        ctx: CallContext,
        time_limit: float | None,
        trace_headers: Mapping[str, str] | None,
    ) -> dict[str, Any]:
        b = self._pool.backends.get(backend)
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
            self._pool.record_failure(b, exc)
            raise
        except RPCError:
            m.error()
            raise
        finally:
            m.observe(time.perf_counter() - t0)
            if sink is not None:
                sess.inflight.pop(ctx.client_id, None)  # type: ignore[union-attr]
        self._pool.record_success(b)
        return res

    def _relay(self, ctx: CallContext, up: BaseUpstream) -> Callable[[dict[str, Any]], Awaitable[None]]:
        """Handles messages a backend sends while answering a call: forwards them to the caller
        (server-to-client requests get gateway ids) and feeds change notifications to the pool."""
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
                and (method in LIST_CHANGED or method == "notifications/resources/updated")
            ):
                task = asyncio.create_task(self._pool.on_backend_notification(up, msg))
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

    async def elicit(
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
