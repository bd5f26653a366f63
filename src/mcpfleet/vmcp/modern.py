"""The gateway's front for protocol 2026-07-28 on `/mcp`: one self-contained POST per request.

No session: each request carries its envelope (`_meta`: version, client info and capabilities),
and the `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` headers are checked against it with the
SDK's own inbound ladder. `server/discover` and `subscriptions/listen` are answered here; every
other method is dispatched to the gateway. JSON-RPC errors map to HTTP statuses
(`wire.ERROR_HTTP_STATUS`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from mcpfleet import jsonrpc
from mcpfleet.auth.asgi import scope_subject
from mcpfleet.vmcp import wire
from mcpfleet.vmcp.context import CallContext, Listener
from mcpfleet.vmcp.front import (
    UNSUPPORTED_MEDIA_TYPE,
    EraFront,
    Receive,
    ResponseStream,
    Scope,
    Send,
    accepts,
    read_body,
    respond,
    respond_pinned,
    response_body,
    server_version,
)
from mcpfleet.vmcp.wire import RPCError

_SUBSCRIPTION_ID_META = "io.modelcontextprotocol/subscriptionId"


class ModernFront(EraFront):
    """`/mcp` for 2026-07-28 clients (see the module docstring)."""

    async def handle(
        self, scope: Scope, receive: Receive, send: Send, h: dict[str, str], token: str | None
    ) -> None:
        if scope["method"] != "POST":
            await respond(send, 405, b"", [(b"allow", b"POST")])
            return
        has_json, has_sse = accepts(h)
        if not (has_json and has_sse):
            await respond(send, 406, b"")
            return
        if not jsonrpc.is_json_media_type(h.get("content-type")):
            await respond(send, 415, UNSUPPORTED_MEDIA_TYPE)
            return
        try:
            msg = jsonrpc.decode(await read_body(receive), self.max_json_depth)
            kind = jsonrpc.check_message(msg)
        except jsonrpc.MessageError as exc:
            await respond(send, 400, exc.body())
            return
        version = h.get(wire.H_VERSION, "")
        if kind == "response":
            invalid = "Body must be a single JSON-RPC request or notification object"
            await respond(send, 400, wire.dumps(wire.error_message(None, wire.INVALID_REQUEST, invalid)))
            return
        if kind == "notification":
            if version not in wire.MODERN_VERSIONS:
                await self._modern_error(send, None, _unsupported(version))
            else:
                await respond(send, 202, b"", [])
            return
        req_id = msg["id"]
        dup = _duplicated_routing_header(scope)
        if dup is not None:
            await self._modern_error(
                send, req_id, RPCError(wire.HEADER_MISMATCH, f"{dup} header appears more than once")
            )
            return
        from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request

        verdict = classify_inbound_request(msg, headers=h)
        if isinstance(verdict, InboundLadderRejection):
            await self._modern_error(send, req_id, RPCError(verdict.code, verdict.message, verdict.data))
            return
        if await self._limited(send, scope_subject(scope), msg, []):
            return
        await self._modern_request(receive, send, h, token, msg, version)

    async def _modern_request(
        self,
        receive: Receive,
        send: Send,
        h: dict[str, str],
        token: str | None,
        msg: dict[str, Any],
        version: str,
    ) -> None:
        """A 2026-07-28 request that passed the envelope checks: discover, listen, or a gateway method."""
        req_id, method = msg["id"], msg["method"]
        params = msg.get("params")
        if method in wire.MODERN_METHODS:
            try:
                jsonrpc.check_params("request", method, params, wire.LATEST_MODERN, req_id)
            except jsonrpc.MessageError as exc:
                await self._modern_error(send, req_id, RPCError(exc.code, exc.message))
                return
        self.gateway.metrics.client_request(method)
        if method == "server/discover":
            if self.tracer is None:
                await respond(send, 200, response_body(req_id, self._discover()))
            else:
                with self._server_span(self.tracer, method, params, h, "modern", version, None, req_id):
                    await respond(send, 200, response_body(req_id, self._discover()))
            return
        if method == "subscriptions/listen":
            await self._listen(receive, send, req_id, params or {})
            return
        if method not in wire.MODERN_METHODS:
            await self._modern_error(
                send, req_id, RPCError(wire.METHOD_NOT_FOUND, f"Method not found: {method}")
            )
            return
        fwd = None
        if method == "tools/call":
            fwd = {k: v for k, v in h.items() if k.startswith(wire.H_PARAM_PREFIX)} or None
        stream = ResponseStream(send, [])
        ctx = CallContext(
            era="modern",
            emit=stream.emit,
            token=token,
            forward_headers=fwd,
            client_id=req_id,
            passthrough=self._passthrough(h),
        )
        try:
            if self.tracer is None:
                result = await self.gateway.dispatch(method, params, ctx)
            else:
                result = await self._traced_dispatch(
                    self.tracer, method, params, ctx, h, version, None, req_id
                )
        except RPCError as exc:
            body = wire.dumps(wire.error_message(req_id, exc.code, exc.message, exc.data))
            await stream.finish(wire.ERROR_HTTP_STATUS.get(exc.code, 200), body)
            return
        if isinstance(result, dict) and "resultType" not in result:
            result["resultType"] = "complete"
        pin = self.gateway.pinned(result) if isinstance(result, bytes) and not stream.started else None
        if pin is not None:
            await respond_pinned(send, pin, req_id, False, [])
            return
        await stream.finish(200, response_body(req_id, result))

    async def _modern_error(self, send: Send, req_id: Any, exc: RPCError) -> None:
        body = wire.dumps(wire.error_message(req_id, exc.code, exc.message, exc.data))
        await respond(send, wire.ERROR_HTTP_STATUS.get(exc.code, 200), body)

    def _discover(self) -> dict[str, Any]:
        res: dict[str, Any] = {
            "supportedVersions": list(wire.MODERN_VERSIONS),
            "capabilities": self.gateway.capabilities(),
            "resultType": "complete",
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {wire.META_SERVER_INFO: {"name": self.gateway.config.name, "version": server_version()}},
        }
        instr = self.gateway.instructions()
        if instr:
            res["instructions"] = instr
        return res

    async def _listen(self, receive: Receive, send: Send, req_id: Any, params: dict[str, Any]) -> None:
        wanted = params.get("notifications") or {}
        caps = self.gateway.capabilities()
        honored: dict[str, Any] = {}
        for key, cap in (
            ("toolsListChanged", "tools"),
            ("promptsListChanged", "prompts"),
            ("resourcesListChanged", "resources"),
        ):
            if wanted.get(key) is True and cap in caps:
                honored[key] = True
        uris = [u for u in wanted.get("resourceSubscriptions") or [] if isinstance(u, str)]
        if uris and (caps.get("resources") or {}).get("subscribe"):
            honored["resourceSubscriptions"] = uris
            for uri in uris:
                with contextlib.suppress(RPCError):
                    await self.gateway.dispatch(
                        "resources/subscribe", {"uri": uri}, CallContext(era="legacy")
                    )
        meta = {_SUBSCRIPTION_ID_META: req_id}
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1000)
        ls = Listener(
            queue=q,
            tools=bool(honored.get("toolsListChanged")),
            prompts=bool(honored.get("promptsListChanged")),
            resources=bool(honored.get("resourcesListChanged")),
            uris=frozenset(honored.get("resourceSubscriptions") or ()),
            meta=meta,
        )
        ack = {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": honored, "_meta": meta},
        }
        self.gateway.listeners.add(ls)
        try:
            await self._pump(receive, send, q, [], ack)
        finally:
            self.gateway.listeners.discard(ls)


def _unsupported(version: str) -> RPCError:
    return RPCError(
        wire.UNSUPPORTED_VERSION,
        "Unsupported protocol version",
        {"supported": list(wire.MODERN_VERSIONS), "requested": version},
    )


def _duplicated_routing_header(scope: Scope) -> str | None:
    seen: set[bytes] = set()
    for k, _ in scope["headers"]:
        if k in (b"mcp-protocol-version", b"mcp-method", b"mcp-name"):
            if k in seen:
                return str(k.decode())
            seen.add(k)
    return None
