"""A backend on the 2024-11-05 HTTP+SSE transport (`transport: sse`): `SSEUpstream`.

One standing GET stream carries the `endpoint` event (where to POST), the answers to the requests
POSTed there (matched by id) and the backend's notifications; a request the backend sends outside
any call is refused. The stream closing fails every pending call (`BackendUnavailable`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from mcpfleet import jsonrpc, sse
from mcpfleet.vmcp import lazyhttp, wire
from mcpfleet.vmcp.upstream import (
    GATEWAY_CLIENT_CAPS,
    BackendUnavailable,
    BaseUpstream,
    CallOptions,
    HeaderProvider,
    NoAuth,
    NotificationCallback,
    http_error,
    request_ids,
    result_of,
)
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    from mcpfleet.vmcp.upstream import Session

log = logging.getLogger(__name__)


class SSEUpstream(BaseUpstream):
    """A backend on the 2024-11-05 HTTP+SSE transport: GET stream, POSTs to the `endpoint` URL."""

    def __init__(
        self,
        name: str,
        url: str,
        http: Session,
        *,
        auth: HeaderProvider | None = None,
        time_limit: float = 30.0,
        on_notification: NotificationCallback | None = None,
        client_info: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            name, url, time_limit=time_limit, on_notification=on_notification, client_info=client_info
        )
        self._http = http
        self._auth = auth or NoAuth()
        self._endpoint: asyncio.Future[str] | None = None
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._bg: set[asyncio.Task[None]] = set()
        self.legacy = True

    async def connect(self, defer_modern: bool = False) -> None:
        loop = asyncio.get_running_loop()
        self._endpoint = loop.create_future()
        self._reader = asyncio.create_task(self._read_stream(), name=f"vmcp-sse-{self.name}")
        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.shield(self._endpoint)
        except TimeoutError:
            await self.close()
            raise BackendUnavailable(self.name, "no endpoint event on the SSE stream") from None
        res = await self.call(
            "initialize",
            {
                "protocolVersion": "2024-11-05",
                "capabilities": GATEWAY_CLIENT_CAPS,
                "clientInfo": self._client_info,
            },
        )
        self.capabilities = dict(res.get("capabilities") or {})
        self.server_info = dict(res.get("serverInfo") or {})
        self.instructions = res.get("instructions")
        self.negotiated_version = str(res.get("protocolVersion") or "2024-11-05")
        await self.send_message({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _checked(self, data: str) -> dict[str, Any]:
        """The message of one event of the legacy SSE stream; one that cannot be relayed (too deep)
        becomes an error answer to its request, naming the backend, instead of ending the stream."""
        msg = wire.loads(data)
        if not isinstance(msg, dict):
            return {}  # not a JSON-RPC message: nothing to route
        problem = jsonrpc.answer_problem(msg, data)
        if problem is None:
            return msg
        log.warning("backend %s: invalid message dropped: %s", self.name, problem)
        if "method" in msg:
            return {}
        error = {
            "code": wire.INTERNAL_ERROR,
            "message": f"backend {self.name!r} sent an invalid response: {problem}",
        }
        return {"jsonrpc": "2.0", "id": msg.get("id"), "error": error}

    async def _stream_message(self, msg: dict[str, Any]) -> None:
        """One message of the legacy SSE stream: a response, a notification, or a request we refuse."""
        if not msg:
            return
        if "method" not in msg:
            fut = self._pending.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
        elif "id" not in msg:
            if self._on_notification is not None:
                # Not awaited here: the handler may call this backend, whose answers
                # arrive on this very stream.
                t = asyncio.create_task(self._on_notification(self, msg))
                self._bg.add(t)
                t.add_done_callback(self._bg.discard)
        else:
            # A server-to-client request outside any call context: refuse it politely.
            await self.send_message(wire.error_message(msg["id"], wire.METHOD_NOT_FOUND, "not supported"))

    async def _read_stream(self) -> None:
        assert self._endpoint is not None
        try:
            hdrs = {"accept": "text/event-stream"}
            hdrs.update(await self._auth.headers(None))
            no_limit = await lazyhttp.no_timeout()
            async with self._http.get(self.url, headers=hdrs, timeout=no_limit) as r:
                if r.status != 200:
                    raise BackendUnavailable(self.name, f"SSE stream HTTP {r.status}")
                async for ev in sse.iter_sse(r.content.iter_any()):
                    if ev.event == "endpoint":
                        if not self._endpoint.done():
                            self._endpoint.set_result(urljoin(self.url, ev.data.strip()))
                        continue
                    if not ev.data:
                        continue
                    await self._stream_message(self._checked(ev.data))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("backend %s: SSE stream ended: %s", self.name, exc)
        finally:
            err = BackendUnavailable(self.name, "SSE stream closed")
            if not self._endpoint.done():
                self._endpoint.set_exception(err)
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(err)
            self._pending.clear()

    async def _call(self, method: str, params: dict[str, Any] | None, opts: CallOptions) -> dict[str, Any]:
        if (
            self._endpoint is None
            or not self._endpoint.done()
            or self._endpoint.exception() is not None
            or self._reader is None
            or self._reader.done()
        ):
            raise BackendUnavailable(self.name, "not connected (SSE stream closed)")
        rid = next(request_ids)
        if opts.request_id_sink is not None:
            opts.request_id_sink(rid)
        if params and "_meta" in params:
            params = {k: v for k, v in params.items() if k != "_meta"}
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            body["params"] = params
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            await self._post(body, opts.subject_token, opts.trace_headers)
            async with asyncio.timeout(self.timeout if opts.time_limit is None else opts.time_limit):
                return result_of(await fut)
        except TimeoutError:
            raise BackendUnavailable(self.name, "timed out") from None
        except ValueError as exc:
            raise RPCError(
                wire.INTERNAL_ERROR, f"backend {self.name!r} sent an invalid response: {exc}"
            ) from None
        finally:
            self._pending.pop(rid, None)

    async def _post(
        self, msg: dict[str, Any], subject_token: str | None, trace_headers: Mapping[str, str] | None = None
    ) -> None:
        assert self._endpoint is not None
        hdrs = {"content-type": "application/json"}
        if trace_headers:
            hdrs.update(trace_headers)
        hdrs.update(await self._auth.headers(subject_token))
        try:
            async with self._http.post(self._endpoint.result(), data=wire.dumps(msg), headers=hdrs) as r:
                await r.read()
                if r.status >= 400:
                    raise http_error(self.name, r.status)
        except lazyhttp.errors() as exc:
            raise BackendUnavailable(self.name, f"{type(exc).__name__}: {exc}") from None

    async def send_message(self, msg: dict[str, Any], subject_token: str | None = None) -> None:
        await self._post(msg, subject_token)

    async def ping(self, time_limit: float) -> None:
        await self.call("ping", None, time_limit=time_limit)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
            self._reader = None
