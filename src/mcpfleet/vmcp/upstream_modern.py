"""Protocol 2026-07-28 on a streamable-HTTP backend: sessionless requests with the `_meta` envelope.

`ModernChannel` owns that era's wire: every request carries the envelope (version, client info,
client capabilities) and the `Mcp-Protocol-Version` / `Mcp-Method` / `Mcp-Name` headers; the era
is probed with `server/discover`; a `subscriptions/listen` stream carries the list_changed
notifications the backend advertises.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcpfleet.vmcp import lazyhttp, wire
from mcpfleet.vmcp.upstream import (
    STREAM_RETRY,
    CallOptions,
    is_event_stream,
    relay_notifications,
    request_ids,
)
from mcpfleet.vmcp.upstream_http import Exchange

log = logging.getLogger(__name__)


class ModernChannel:
    """The 2026-era wire of one backend (see the module docstring)."""

    def __init__(self, exchange: Exchange, time_limit: float, client_info: Mapping[str, Any]) -> None:
        self._x = exchange
        self.name = exchange.name
        self.timeout = time_limit
        self.envelope = {
            wire.META_VERSION: wire.LATEST_MODERN,
            wire.META_CLIENT_INFO: client_info,
            wire.META_CLIENT_CAPS: {},
        }
        self.closed = False

    async def discover(self) -> dict[str, Any]:
        """`server/discover`: the backend's versions, capabilities, instructions and server info."""
        return await self.post("server/discover", {"_meta": self.envelope}, CallOptions(era="modern"), None)

    def with_envelope(self, params: dict[str, Any] | None) -> dict[str, Any]:
        """`params` with the envelope in `_meta` (a client's own envelope is kept)."""
        p = dict(params) if params else {}
        meta = dict(p.get("_meta") or {})
        if wire.META_VERSION not in meta:
            meta.update(self.envelope)
        p["_meta"] = meta
        return p

    async def post(
        self, method: str, params: dict[str, Any], opts: CallOptions, time_limit: float | None
    ) -> dict[str, Any]:
        """One request (`params` with its envelope): the `Mcp-*` headers, then `opts.headers`
        (the client's `Mcp-Param-*`), the trace headers, the outgoing auth."""
        rid = next(request_ids)
        if opts.request_id_sink is not None:
            opts.request_id_sink(rid)
        version = params.get("_meta", {}).get(wire.META_VERSION, wire.LATEST_MODERN)
        hdrs = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            wire.H_VERSION: version,
            wire.H_METHOD: method,
        }
        name_key = wire.NAME_PARAM.get(method)
        if name_key is not None and isinstance(params.get(name_key), str):
            hdrs[wire.H_NAME] = _encode_header(params[name_key])
        if opts.headers:
            hdrs.update(opts.headers)
        if opts.trace_headers:
            hdrs.update(opts.trace_headers)
        hdrs.update(await self._x.auth.headers(opts.subject_token))
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        limit = self.timeout if time_limit is None else time_limit
        return (await self._x.exchange(body, hdrs, opts.on_message, limit, None))[1]

    async def listen(
        self, capabilities: dict[str, Any], notify: Callable[[dict[str, Any]], Awaitable[None]]
    ) -> None:
        """Hold a `subscriptions/listen` stream open for the list_changed kinds advertised."""
        wanted = {
            "toolsListChanged": bool((capabilities.get("tools") or {}).get("listChanged")),
            "promptsListChanged": bool((capabilities.get("prompts") or {}).get("listChanged")),
            "resourcesListChanged": bool((capabilities.get("resources") or {}).get("listChanged")),
        }
        wanted = {k: v for k, v in wanted.items() if v}
        if not wanted:
            return
        failures = 0
        x = self._x
        while not self.closed:
            try:
                params = {"notifications": wanted, "_meta": self.envelope}
                body = {
                    "jsonrpc": "2.0",
                    "id": next(request_ids),
                    "method": "subscriptions/listen",
                    "params": params,
                }
                hdrs = {
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json",
                    wire.H_VERSION: wire.LATEST_MODERN,
                    wire.H_METHOD: "subscriptions/listen",
                }
                hdrs.update(await x.auth.headers(None))
                # A backend that does not offer listen streams answers something else: the 2025 GET
                # stream remains. Plain http goes through httpclient, as the GET stream does.
                if x.fast is not None:
                    resp = await x.fast.request("POST", x.url, hdrs, wire.dumps(body))
                    try:
                        if not is_event_stream(resp.status, resp.headers):
                            return
                        failures = 0
                        await relay_notifications(
                            self.name, resp.iter_chunks(), notify, list_changed_only=True
                        )
                    finally:
                        resp.abort()  # a stream is never reused, and may be cut short here
                else:
                    no_limit = await lazyhttp.no_timeout()
                    async with x.http.post(x.url, data=wire.dumps(body), headers=hdrs, timeout=no_limit) as r:
                        if not is_event_stream(r.status, r.headers):
                            return
                        failures = 0
                        await relay_notifications(
                            self.name, r.content.iter_any(), notify, list_changed_only=True
                        )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("backend %s: listen stream: %s", self.name, exc)
            failures += 1
            await asyncio.sleep(STREAM_RETRY.delay(failures))


def _encode_header(value: str) -> str:
    from mcp.shared.inbound import encode_header_value

    return encode_header_value(value)
