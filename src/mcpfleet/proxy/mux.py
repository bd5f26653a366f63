"""JSON-RPC multiplexer: many client peers over one stdio child.

The proxy is a relay, not an MCP implementation: messages pass through unchanged except for
what sharing one child requires:

* request ids: every client request gets a fresh child-side id (two clients both send id 1);
  the response gets the client's id back and goes to the peer that asked;
* progress tokens: passed through untouched unless another in-flight request on the child
  already uses the same token, then replaced by a unique one and mapped back;
* `notifications/cancelled` from a client names the client's id; it is rewritten to the child id;
* child -> client messages: responses and progress go to their request's peer; server->client
  requests (sampling, elicitation, roots) and other request-time notifications (logging) go to the
  peer whose request is the most recent one in flight on the child (for log messages: the most
  recent one that can receive logs; a 2026-07-28 request without a logLevel opt-in cannot) (stdio carries no request
  association, so this is the only signal; with requests of several sessions in flight at the
  same moment it is a best guess, documented in docs/proxy.md); `resources/updated` goes to the
  peers subscribed to that URI; list-changed and anything else unattributable is broadcast;
* 2026-07-28 `subscriptions/listen` notifications of a native 2026-07-28 child carry the listen
  request's id in `_meta["io.modelcontextprotocol/subscriptionId"]`; it is mapped back like a
  request id (on the shared handshake-era child, `bridge.py` holds the listen streams and parks
  InputRequiredResult rounds with `hand_over`);
* child restart: in-flight requests fail with an error naming the cause, and when the child had
  been initialised (handshake era) the new process is initialised again with the last
  `initialize` params before any client request reaches it, so sessions survive a crash;
* tool policy (an MCPToolConfig from `--run-config`, `mcpfleet.toolconfig`): `tools/list` results
  are filtered and overridden page by page (the proxy's own `call`s too, so cached schemas use the
  names clients see); a `tools/call` for a hidden tool is answered here as an unknown tool and a
  renamed tool's call reaches the child under its original name.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcpfleet.toolconfig import ToolPolicy, unknown_tool_result

log = logging.getLogger(__name__)

RequestId = int | str
JSON = dict[str, Any]

INTERNAL_ERROR = -32603
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
CHILD_EXITED_MESSAGE = "the MCP server process exited before answering; it is being restarted"


class Peer(Protocol):
    """One client-side endpoint (a streamable-HTTP session, an SSE session, one stateless exchange)."""

    @property
    def broadcast(self) -> bool:
        """Whether unsolicited notifications (list changes, unattributed logs) go to this peer."""
        ...

    async def deliver(self, message: JSON, related_request_id: RequestId | None) -> None:
        """Send a child message to the client; `related_request_id`: the client request it belongs to."""
        ...


class ChildLink(Protocol):
    """What the multiplexer needs from the child process."""

    async def send(self, message: JSON) -> None: ...


@dataclass
class _Pending:
    peer: Peer | None
    client_id: RequestId
    method: str
    client_token: Any = None
    child_token: Any = None
    future: asyncio.Future[JSON] | None = None
    # False for a 2026-07-28 request that did not opt in to log messages (no logLevel in _meta):
    # the server sends it none, so an unattributed log line cannot be this request's.
    wants_logs: bool = True


@dataclass
class _Stats:
    requests: int = 0
    responses: int = 0
    notifications_in: int = 0
    notifications_out: int = 0
    server_requests: int = 0
    failed_on_exit: int = 0


@dataclass
class Multiplexer:
    """Routes JSON-RPC traffic between client peers and one child."""

    name: str = "child"
    ready_timeout: float = 30.0
    _child: ChildLink | None = None
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _pending: dict[int, _Pending] = field(default_factory=dict)
    _tokens: dict[tuple[str, Any], int] = field(default_factory=dict)
    _server_requests: dict[tuple[str, Any], Peer] = field(default_factory=dict)
    _peers: dict[int, Peer] = field(default_factory=dict)
    _subscriptions: dict[str, set[int]] = field(default_factory=dict)
    _last_initialize: JSON | None = None
    initialize_result: JSON | None = None
    """The child's latest answer to `initialize` (a client's, the proxy's own or a re-initialisation)."""
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    _reinit_task: asyncio.Task[None] | None = None
    stats: _Stats = field(default_factory=_Stats)
    on_tools_changed: Callable[[], Awaitable[None]] | None = None
    tool_policy: ToolPolicy | None = None

    def bind(self, child: ChildLink) -> None:
        self._child = child

    # -- peers -----------------------------------------------------------------------------------

    def add_peer(self, peer: Peer) -> None:
        self._peers[id(peer)] = peer

    async def remove_peer(self, peer: Peer) -> None:
        """Forget a peer: cancel its in-flight requests on the child and drop its subscriptions."""
        self._peers.pop(id(peer), None)
        for uris in self._subscriptions.values():
            uris.discard(id(peer))
        for child_id, pending in list(self._pending.items()):
            if pending.peer is peer:
                self._drop(child_id)
                await self._send_quietly(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": child_id, "reason": "client went away"},
                    }
                )
        for key, target in list(self._server_requests.items()):
            if target is peer:
                # The child is waiting for this client's answer (sampling, elicitation...); without
                # one its tool call would hang until the server's own timeout.
                del self._server_requests[key]
                await self._send_quietly(_error(key[1], INTERNAL_ERROR, "the client disconnected"))

    # -- client -> child -------------------------------------------------------------------------

    async def _policy_call(self, policy: ToolPolicy, peer: Peer, message: JSON) -> JSON | None:
        """A tools/call under the MCPToolConfig: renamed to the server's name, or answered here (None)
        when the client cannot see the tool."""
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if not isinstance(params, dict) or not isinstance(name, str):
            return message
        original = policy.original_name(name)
        if original is None:
            result = unknown_tool_result(name)
            meta = params.get("_meta")
            if isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta:
                result["resultType"] = "complete"  # required from 2026-07-28 on
            await peer.deliver({"jsonrpc": "2.0", "id": message["id"], "result": result}, None)
            return None
        return message if original == name else {**message, "params": {**params, "name": original}}

    async def request(self, peer: Peer, message: JSON, *, wants_logs: bool | None = None) -> None:
        """Forward a client request; the response arrives later through `peer.deliver`.

        `wants_logs` overrides what the request's `_meta` says (a translated 2026-07-28 request
        reaches the child without its envelope, `proxy/bridge.py`)."""
        client_id: RequestId = message["id"]
        method = str(message.get("method", ""))
        if self.tool_policy is not None and method == "tools/call":
            renamed = await self._policy_call(self.tool_policy, peer, message)
            if renamed is None:
                return
            message = renamed
        if not await self._wait_ready():
            await peer.deliver(_error(client_id, INTERNAL_ERROR, f"{self.name} is not running"), None)
            return
        child_id = next(self._ids)
        params = message.get("params")
        pending = _Pending(
            peer=peer,
            client_id=client_id,
            method=method,
            wants_logs=_wants_logs(params) if wants_logs is None else wants_logs,
        )
        out = dict(message)
        out["id"] = child_id
        if isinstance(params, dict):
            meta = params.get("_meta")
            if isinstance(meta, dict) and "progressToken" in meta:
                token = meta["progressToken"]
                pending.client_token = token
                child_token = token
                if _key(token) in self._tokens:
                    # Another in-flight request already owns this token on the child.
                    child_token = f"mcpfleet-progress-{child_id}"
                    out["params"] = {**params, "_meta": {**meta, "progressToken": child_token}}
                pending.child_token = child_token
                self._tokens[_key(child_token)] = child_id
            if method == "initialize":
                self._last_initialize = params
            elif method == "resources/subscribe" and isinstance(params.get("uri"), str):
                self._subscriptions.setdefault(params["uri"], set()).add(id(peer))
            elif method == "resources/unsubscribe" and isinstance(params.get("uri"), str):
                self._subscriptions.get(params["uri"], set()).discard(id(peer))
        self._pending[child_id] = pending
        self.stats.requests += 1
        if not await self._send_quietly(out):
            self._drop(child_id)
            await peer.deliver(_error(client_id, INTERNAL_ERROR, f"{self.name} is not running"), None)

    async def notify(self, peer: Peer, message: JSON) -> None:
        """Forward a client notification (mapping the id in `notifications/cancelled`)."""
        self.stats.notifications_in += 1
        if message.get("method") == "notifications/cancelled":
            params = message.get("params") or {}
            child_id = self._child_id_of(peer, params.get("requestId"))
            if child_id is None:
                return  # Already answered or never seen: nothing to cancel.
            message = {**message, "params": {**params, "requestId": child_id}}
        await self._send_quietly(message)

    async def respond(self, peer: Peer, message: JSON) -> None:
        """Forward a client's answer to a server->client request."""
        key = _key(message.get("id"))
        if self._server_requests.get(key) is not peer:
            log.debug("%s: dropping a response to an unknown server request %r", self.name, message.get("id"))
            return
        del self._server_requests[key]
        await self._send_quietly(message)

    async def call(self, method: str, params: JSON | None = None, deadline: float = 30.0) -> JSON:
        """Send a request of the proxy's own to the child and return its response message."""
        if not await self._wait_ready():
            raise RuntimeError(f"{self.name} is not running")
        child_id = next(self._ids)
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        self._pending[child_id] = _Pending(peer=None, client_id=child_id, method=method, future=future)
        msg: JSON = {"jsonrpc": "2.0", "id": child_id, "method": method}
        if params is not None:
            msg["params"] = params
        try:
            if not await self._send_quietly(msg):
                raise RuntimeError(f"{self.name} is not running")
            return await asyncio.wait_for(future, deadline)
        finally:
            self._pending.pop(child_id, None)

    async def notify_child(self, message: JSON) -> bool:
        """Send a notification of the proxy's own to the child; False when it is not running."""
        return await self._send_quietly(message)

    def is_initialized(self) -> bool:
        return self._last_initialize is not None

    def remember_initialize(self, params: JSON) -> None:
        """The proxy initialised the child itself: a restarted child gets the same handshake."""
        self._last_initialize = params

    def subscribe(self, peer: Peer, uri: str) -> bool:
        """Route `resources/updated` for `uri` to `peer`; True when nobody else subscribed to it."""
        subscribers = self._subscriptions.setdefault(uri, set())
        first = not subscribers
        subscribers.add(id(peer))
        return first

    def subscribed(self, uri: str) -> bool:
        return bool(self._subscriptions.get(uri))

    def hand_over(self, old: Peer, new: Peer, client_id: RequestId | None = None) -> None:
        """Move `old`'s in-flight requests and the server requests waiting on it to `new`.

        How an InputRequiredResult round keeps the child's request alive after the client's HTTP
        exchange ended, and gives it to the exchange that brings the input (`proxy/bridge.py`).
        `client_id`: the id the request has in the new exchange."""
        for pending in self._pending.values():
            if pending.peer is old:
                pending.peer = new
                if client_id is not None:
                    pending.client_id = client_id
        for key, target in self._server_requests.items():
            if target is old:
                self._server_requests[key] = new

    # -- child -> client -------------------------------------------------------------------------

    async def on_child_message(self, message: JSON) -> None:
        if "method" in message:
            if "id" in message:
                await self._route_server_request(message)
            else:
                await self._route_notification(message)
            return
        child_id = message.get("id")
        pending = self._pending.get(child_id) if isinstance(child_id, int) else None
        if pending is None:
            log.debug("%s: response for unknown id %r", self.name, child_id)
            return
        self._drop(child_id)  # type: ignore[arg-type]
        self.stats.responses += 1
        if self.tool_policy is not None and pending.method == "tools/list":
            message = _present_tools(message, self.tool_policy)
        if pending.method == "initialize" and isinstance(message.get("result"), dict):
            self.initialize_result = message["result"]
        if pending.future is not None:
            if not pending.future.done():
                pending.future.set_result(message)
            return
        assert pending.peer is not None
        await pending.peer.deliver({**message, "id": pending.client_id}, None)

    async def on_child_start(self) -> None:
        """Called when a (new) child process is up; re-initialises it if clients had initialised one."""
        if self.on_tools_changed is not None:
            # A new process may list different tools: caches keyed on the old list are stale.
            await self.on_tools_changed()
        if self._last_initialize is None:
            self._ready.set()
            return
        # Runs as a task: the child's output is read by the caller only after this returns.
        self._reinit_task = asyncio.create_task(self._reinitialize(self._last_initialize))

    async def on_child_exit(self) -> None:
        """Fail every in-flight request: the process that owed the answers is gone."""
        self._ready.clear()
        if self._reinit_task is not None:
            self._reinit_task.cancel()
        pending = list(self._pending.items())
        self._pending.clear()
        self._tokens.clear()
        self._server_requests.clear()
        for _, entry in pending:
            self.stats.failed_on_exit += 1
            if entry.future is not None:
                if not entry.future.done():
                    entry.future.set_exception(RuntimeError(CHILD_EXITED_MESSAGE))
                continue
            assert entry.peer is not None
            with contextlib.suppress(Exception):
                await entry.peer.deliver(_error(entry.client_id, INTERNAL_ERROR, CHILD_EXITED_MESSAGE), None)

    def in_flight(self) -> int:
        return len(self._pending)

    # -- internals -------------------------------------------------------------------------------

    async def _reinitialize(self, params: JSON) -> None:
        child_id = next(self._ids)
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        self._pending[child_id] = _Pending(peer=None, client_id=child_id, method="initialize", future=future)
        try:
            await self._send_quietly(
                {"jsonrpc": "2.0", "id": child_id, "method": "initialize", "params": params}
            )
            reply = await asyncio.wait_for(future, self.ready_timeout)
            if "error" in reply:
                log.error("%s: re-initialising the restarted server failed: %s", self.name, reply["error"])
            await self._send_quietly({"jsonrpc": "2.0", "method": "notifications/initialized"})
            log.info("%s: restarted server re-initialised", self.name)
        except (TimeoutError, RuntimeError) as exc:
            log.error("%s: re-initialising the restarted server failed: %s", self.name, exc)
        finally:
            self._pending.pop(child_id, None)
            self._ready.set()

    async def _wait_ready(self) -> bool:
        if self._child is None:
            return False
        if self._ready.is_set():
            return True
        try:
            await asyncio.wait_for(self._ready.wait(), self.ready_timeout)
        except TimeoutError:
            return False
        return True

    async def _send_quietly(self, message: JSON) -> bool:
        if self._child is None:
            return False
        try:
            await self._child.send(message)
        except RuntimeError:
            return False
        return True

    def _drop(self, child_id: int) -> None:
        pending = self._pending.pop(child_id, None)
        if pending is not None and pending.child_token is not None:
            self._tokens.pop(_key(pending.child_token), None)

    def _child_id_of(self, peer: Peer, client_id: Any) -> int | None:
        for child_id, pending in self._pending.items():
            if pending.peer is peer and _key(pending.client_id) == _key(client_id):
                return child_id
        return None

    def _latest_client_request(self, logs: bool = False) -> _Pending | None:
        # dicts keep insertion order: the last entry is the request sent most recently.
        for pending in reversed(self._pending.values()):
            if pending.peer is not None and (pending.wants_logs or not logs):
                return pending
        return None

    async def _route_server_request(self, message: JSON) -> None:
        self.stats.server_requests += 1
        origin = self._latest_client_request()
        target: Peer | None = origin.peer if origin is not None else None
        related = origin.client_id if origin is not None else None
        if target is None:
            target = next(reversed(self._peers.values()), None) if self._peers else None
        if target is None:
            await self._send_quietly(
                _error(message["id"], INTERNAL_ERROR, "no client is connected to the proxy")
            )
            return
        self._server_requests[_key(message["id"])] = target
        await target.deliver(message, related)

    async def _route_notification(self, message: JSON) -> None:
        self.stats.notifications_out += 1
        method = message.get("method")
        params = message.get("params") or {}
        meta = params.get("_meta")
        if isinstance(meta, dict) and SUBSCRIPTION_ID_KEY in meta:
            # 2026-07-28 subscriptions/listen: the id of the listen request names the stream.
            pending = self._pending.get(meta[SUBSCRIPTION_ID_KEY])
            out_meta = {**meta, SUBSCRIPTION_ID_KEY: pending.client_id if pending else None}
            await _to_requester(pending, {**message, "params": {**params, "_meta": out_meta}})
            return
        if method == "notifications/progress":
            child_id = self._tokens.get(_key(params.get("progressToken")))
            pending = self._pending.get(child_id) if child_id is not None else None
            token = pending.client_token if pending else None
            await _to_requester(pending, {**message, "params": {**params, "progressToken": token}})
            return
        if method == "notifications/cancelled":
            peer = self._server_requests.pop(_key(params.get("requestId")), None)
            if peer is not None:
                await peer.deliver(message, None)
            return
        if method == "notifications/resources/updated":
            subscribers = self._subscriptions.get(str(params.get("uri")), set())
            targets = [p for key, p in self._peers.items() if key in subscribers]
            for peer in targets or self._broadcast_targets():
                await peer.deliver(message, None)
            return
        if isinstance(method, str) and method.endswith("/list_changed"):
            if method == "notifications/tools/list_changed" and self.on_tools_changed is not None:
                await self.on_tools_changed()
            for peer in self._broadcast_targets():
                await peer.deliver(message, None)
            return
        origin = self._latest_client_request(logs=method == "notifications/message")
        if origin is not None and origin.peer is not None:
            await origin.peer.deliver(message, origin.client_id)
            return
        for peer in self._broadcast_targets():
            await peer.deliver(message, None)

    def _broadcast_targets(self) -> list[Peer]:
        return [peer for peer in self._peers.values() if peer.broadcast]


async def _to_requester(pending: _Pending | None, message: JSON) -> None:
    """Deliver a notification to the client whose request it belongs to, if it is still waiting."""
    if pending is not None and pending.peer is not None:
        await pending.peer.deliver(message, pending.client_id)


def _present_tools(message: JSON, policy: ToolPolicy) -> JSON:
    """A `tools/list` response (one page) as the tool policy lets clients see it."""
    result = message.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        return message
    return {**message, "result": {**result, "tools": policy.present(result["tools"])}}


def _wants_logs(params: Any) -> bool:
    """False for a 2026-07-28 request without the logLevel opt-in: the server sends it no logs."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta:
        return LOG_LEVEL_KEY in meta
    return True


def _key(value: Any) -> tuple[str, Any]:
    # 1 and "1" are different JSON-RPC ids; keep them apart in dict keys.
    return (type(value).__name__, value)


def _error(request_id: RequestId | None, code: int, message: str) -> JSON:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
