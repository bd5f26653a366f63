"""One JSON-RPC exchange with a streamable-HTTP backend, in either protocol era.

`Exchange` POSTs a request (through `httpclient` for plain-http URLs, aiohttp otherwise) and reads
its answer: a JSON body, or an SSE stream whose other messages go to the call's `on_message` and
which is resumed with `Last-Event-ID` when the backend closes it early. HTTP-level failures become
`BackendUnavailable` or an RPCError naming the backend; a 404 for a 2025-era session id is
`SessionExpired` (the legacy session re-initializes). The era's headers are the caller's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcpfleet import jsonrpc, sse
from mcpfleet.vmcp import httpclient, lazyhttp, wire
from mcpfleet.vmcp.upstream import (
    SSE_OPENED,
    BackendUnavailable,
    HeaderProvider,
    MessageCallback,
    SessionExpired,
    event_message,
    http_error,
    result_of,
)
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    import aiohttp

    from mcpfleet.vmcp.upstream import Session

# JSON-RPC methods that only read: safe to send again if a connection drops after writing them
# (httpclient never re-sends anything else, e.g. a tools/call the backend may already have run).
_REPEATABLE = frozenset(
    {"ping", "server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list"}
)


class Exchange:
    """Requests and their answers on one backend URL (see the module docstring)."""

    def __init__(
        self,
        name: str,
        url: str,
        http: Session,
        fast: httpclient.Client | None,
        auth: HeaderProvider,
        resume_headers: Callable[[], dict[str, str]],
    ) -> None:
        self.name = name
        self.url = url
        self.http = http
        # POSTs (the hot path) go through the lean client for plain-http URLs; aiohttp otherwise.
        self.fast = fast if fast is not None and fast.supports(url) else None
        self.auth = auth
        self._resume_headers = resume_headers
        self.sse_responses = False
        """The backend answers 2025-era POSTs with SSE streams (the front mirrors that choice)."""

    async def exchange(
        self,
        body: dict[str, Any],
        hdrs: dict[str, str],
        on_message: MessageCallback | None,
        time_limit: float,
        subject_token: str | None,
    ) -> tuple[Mapping[str, str], dict[str, Any]]:
        """POST `body`; the answer's headers and result (RPCError: the backend's error)."""
        rid = body["id"]
        try:
            async with asyncio.timeout(time_limit):
                if self.fast is not None:
                    resp = await self.fast.request(
                        "POST", self.url, hdrs, wire.dumps(body), idempotent=body["method"] in _REPEATABLE
                    )
                    try:
                        msg = await self._response_message(
                            resp.status,
                            resp.headers,
                            resp.read,
                            resp.iter_chunks,
                            hdrs,
                            rid,
                            on_message,
                            subject_token,
                        )
                    finally:
                        resp.release()
                    return resp.headers, result_of(msg)
                async with self.http.post(self.url, data=wire.dumps(body), headers=hdrs) as ar:
                    msg = await self._response_message(
                        ar.status,
                        ar.headers,
                        ar.read,
                        ar.content.iter_any,
                        hdrs,
                        rid,
                        on_message,
                        subject_token,
                    )
                    return ar.headers, result_of(msg)
        except lazyhttp.errors() as exc:
            raise BackendUnavailable(self.name, f"{type(exc).__name__}: {exc}") from None
        except TimeoutError:
            raise BackendUnavailable(self.name, f"timed out after {time_limit:g}s") from None
        except httpclient.InvalidRequest as exc:
            raise RPCError(wire.INVALID_PARAMS, f"cannot forward to backend {self.name!r}: {exc}") from None
        except ValueError as exc:  # a malformed or over-size SSE stream or JSON message
            raise RPCError(
                wire.INTERNAL_ERROR, f"backend {self.name!r} sent an invalid response: {exc}"
            ) from None

    async def _response_message(
        self,
        status: int,
        headers: Mapping[str, str],
        read: Callable[[], Awaitable[bytes]],
        chunks: Callable[[], AsyncIterator[bytes]],
        hdrs: Mapping[str, str],
        rid: Any,
        on_message: MessageCallback | None,
        subject_token: str | None,
    ) -> dict[str, Any]:
        if status == 404 and wire.H_SESSION in hdrs:
            raise SessionExpired
        ctype = headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            if wire.H_SESSION in hdrs:
                self.sse_responses = True
            return await self._read_sse(chunks(), rid, on_message, subject_token)
        raw = await read()
        if not raw:
            if status >= 400:
                raise http_error(self.name, status)
            raise BackendUnavailable(self.name, f"empty HTTP {status} response")
        try:
            msg = wire.loads(raw)
        except ValueError:
            raise http_error(self.name, status) from None
        if not isinstance(msg, dict):
            raise http_error(self.name, status)
        problem = jsonrpc.answer_problem(msg, raw)
        if problem is not None:
            raise ValueError(problem)  # `exchange`: "backend ... sent an invalid response: ..."
        if status >= 400 and msg.get("id") != rid:
            # Not an answer to this request but the backend refusing the HTTP request itself (e.g.
            # "Missing session ID"): say which backend refused, not just what it said.
            err = msg.get("error")
            detail = err.get("message") if isinstance(err, dict) else None
            raise RPCError(
                wire.INTERNAL_ERROR,
                f"backend {self.name!r} refused the request: HTTP {status}"
                + (f": {detail}" if detail else ""),
            )
        return msg

    async def _read_sse(
        self,
        first: AsyncIterator[bytes],
        rid: Any,
        on_message: MessageCallback | None,
        subject_token: str | None,
    ) -> dict[str, Any]:
        """Read a response stream until our response; resume with Last-Event-ID if it closes early."""
        last_id: str | None = None
        retry_ms = 0
        if on_message is not None:
            await on_message(SSE_OPENED)  # lets the front answer in the same mode as the backend
        chunks = first
        resumed: aiohttp.ClientResponse | None = None
        try:
            for _ in range(100):
                async for ev in sse.iter_sse(chunks):
                    if ev.id is not None:
                        last_id = ev.id
                    if ev.retry is not None:
                        retry_ms = ev.retry
                    if not ev.data:
                        continue
                    msg = event_message(ev.data)
                    if "method" not in msg and msg.get("id") == rid:
                        return msg
                    if on_message is not None:
                        await on_message(msg)
                if resumed is not None:
                    resumed.release()
                    resumed = None
                if last_id is None:
                    raise BackendUnavailable(self.name, "response stream ended without a response")
                # The server closed the stream early (SSE polling): resume it with GET + Last-Event-ID.
                await asyncio.sleep(min(retry_ms, 5000) / 1000)
                resumed = await self._resume(last_id, subject_token)
                chunks = resumed.content.iter_any()
            raise BackendUnavailable(self.name, "response stream resumed too many times")
        finally:
            if resumed is not None:
                resumed.release()

    async def _resume(self, last_id: str, subject_token: str | None) -> aiohttp.ClientResponse:
        """GET the response stream again from after event `last_id` (SSE resumption)."""
        hdrs = self._resume_headers()
        hdrs["accept"] = "text/event-stream"
        hdrs["last-event-id"] = last_id
        hdrs.update(await self.auth.headers(subject_token))
        resumed = await self.http.get(self.url, headers=hdrs)
        if resumed.status != 200:
            resumed.release()
            raise BackendUnavailable(self.name, f"resuming the response stream: HTTP {resumed.status}")
        return resumed
