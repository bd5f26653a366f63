"""2026-07-28 requests served by the handshake-era child: the translation between protocol eras.

A stdio connection is locked to one era by its first request, and nearly every published server
speaks the handshake era, so the proxy runs one process per server, initialised once (its own
`initialize` when no handshake client did it first), and translates each 2026-07-28 exchange onto
that connection (docs/proxy.md, "One process for both protocol eras"):

* the per-request `_meta` envelope (protocol version, client capabilities, client info, log level)
  is taken off before the request reaches the child, which refuses it on a handshake connection;
  the log level becomes a filter on the log notifications the exchange gets;
* the answer gets what 2026-07-28 requires and the child cannot say: `resultType`, the caching
  hints of cacheable results (`ttlMs: 0`, `cacheScope: "private"`: never cache, the safe
  reading) and the `serverInfo` stamp;
* `server/discover` is answered from the child's `initialize` result;
* `subscriptions/listen` is a stream fed by the child's `*/list_changed` notifications and, for
  the URIs it names, by `resources/subscribe` on the child and its `resources/updated`;
* a server-to-client request (elicitation, sampling, roots) made while an exchange's request is
  in flight ends that exchange with an InputRequiredResult: the child's request and the tool call
  stay pending, parked under an unguessable `requestState`; the client's retry carrying
  `inputResponses` answers the child and takes the original call's answer (or the next round).

Methods that 2026-07-28 removed (`ping`, `logging/setLevel`, `resources/subscribe`,
`resources/unsubscribe`) are refused here, as a 2026-07-28 server refuses them (on the shared
connection some would also act for every client).

A server that refuses `initialize` as a 2026-07-28-only server does (-32022, or method not found)
has no handshake connection to translate onto: 2026-07-28 requests are relayed to it untranslated
(`native`), on the same single process; handshake-era clients get its refusal, as they would from
the server directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.version import LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

from mcpfleet.proxy.mux import JSON, LOG_LEVEL_KEY, SUBSCRIPTION_ID_KEY, Multiplexer, RequestId

log = logging.getLogger(__name__)

SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
ENVELOPE_KEYS = frozenset(
    {PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, LOG_LEVEL_KEY}
)
CACHEABLE_METHODS = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}
)
REMOVED_METHODS = frozenset({"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
INPUT_METHODS = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
"""Server-to-client requests that become InputRequiredResult rounds, and the client capability each needs."""

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LIST_CHANGED_FILTERS = {
    "notifications/tools/list_changed": "toolsListChanged",
    "notifications/prompts/list_changed": "promptsListChanged",
    "notifications/resources/list_changed": "resourcesListChanged",
}

ROUND_TIMEOUT = 300.0
"""A parked round the client does not come back to within this many seconds is given up: the
child's request gets an error and its call is cancelled."""
MAX_ROUNDS = 256
"""Parked rounds at once; beyond that a server request is refused (each holds a child request)."""
MAX_LISTEN_URIS = 256
"""`resourceSubscriptions` of one `subscriptions/listen`, at most."""

MODERN_ONLY_CODES = (-32022, -32601)
"""`initialize` refused with these (the stdio form of "not part of 2026-07-28", or method not found):
the server speaks only 2026-07-28."""
MISSING_CAPABILITY = -32021
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603

# What the proxy declares when it initialises the child itself: each 2026-07-28 request states its
# own capabilities, and a server request a client did not declare is refused per exchange.
PROXY_CLIENT_CAPABILITIES: JSON = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {},
    "roots": {"listChanged": True},
}


def _error(request_id: RequestId | None, code: int, message: str) -> JSON:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


@dataclass
class Envelope:
    """The 2026-07-28 per-request `_meta` of one exchange, taken off its request."""

    capabilities: JSON
    log_level: str | None

    @classmethod
    def strip(cls, message: JSON) -> tuple[JSON, Envelope]:
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not isinstance(params, dict) or not isinstance(meta, dict):
            return message, cls({}, None)
        capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY)
        level = meta.get(LOG_LEVEL_KEY)
        rest = {key: value for key, value in meta.items() if key not in ENVELOPE_KEYS}
        out_params = {key: value for key, value in params.items() if key != "_meta"}
        if rest:
            out_params["_meta"] = rest
        envelope = cls(
            capabilities if isinstance(capabilities, dict) else {},
            level if isinstance(level, str) and level in LOG_LEVELS else None,
        )
        return {**message, "params": out_params}, envelope

    def declares(self, capability: str) -> bool:
        return isinstance(self.capabilities.get(capability), dict)

    def wants_log(self, notification: JSON) -> bool:
        if self.log_level is None:
            return False
        params = notification.get("params")
        level = params.get("level") if isinstance(params, dict) else None
        if level not in LOG_LEVELS:
            return True  # a level this proxy does not know: the client decides
        return LOG_LEVELS.index(level) >= LOG_LEVELS.index(self.log_level)


class ParkedPeer:
    """Holds an exchange's child request between two InputRequiredResult rounds."""

    broadcast = False

    def __init__(self) -> None:
        self.held: list[tuple[JSON, RequestId | None]] = []

    async def deliver(self, message: JSON, related_request_id: RequestId | None) -> None:
        if len(self.held) < 1000:  # bounded: a server spamming a parked call loses the excess
            self.held.append((message, related_request_id))


@dataclass
class Round:
    """One InputRequiredResult round: the client holds `token`, the child waits on `child_request_id`."""

    token: str
    method: str
    key: str
    child_request_id: Any
    parked: ParkedPeer
    expiry: asyncio.TimerHandle | None = None


class BridgedPeer:
    """One 2026-07-28 exchange on the handshake child: answers are translated, server requests
    become InputRequiredResult rounds."""

    broadcast = False

    def __init__(self, bridge: EraBridge, request_id: RequestId, method: str, envelope: Envelope) -> None:
        self.queue: asyncio.Queue[JSON] = asyncio.Queue()
        self._bridge = bridge
        self.request_id = request_id
        self.method = method
        self.envelope = envelope

    async def deliver(self, message: JSON, related_request_id: RequestId | None) -> None:
        if "method" in message and "id" in message:
            await self._bridge.open_round(self, message)
        elif "method" in message:
            if message["method"] == "notifications/message" and not self.envelope.wants_log(message):
                return
            self.queue.put_nowait(message)
        else:
            self.queue.put_nowait(self._bridge.complete(self.method, message))


class ListenPeer:
    """A `subscriptions/listen` stream fed by the child's change notifications."""

    broadcast = True

    def __init__(self, request_id: RequestId, wanted: JSON) -> None:
        self.queue: asyncio.Queue[JSON] = asyncio.Queue(maxsize=1024)
        self.request_id = request_id
        self.kinds = {key for key in LIST_CHANGED_FILTERS.values() if wanted.get(key) is True}
        uris = wanted.get("resourceSubscriptions")
        self.uris: list[str] = [u for u in uris if isinstance(u, str)] if isinstance(uris, list) else []

    def acknowledgement(self) -> JSON:
        honored: JSON = {key: True for key in sorted(self.kinds)}
        if self.uris:
            honored["resourceSubscriptions"] = list(self.uris)
        return {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": honored, "_meta": {SUBSCRIPTION_ID_KEY: self.request_id}},
        }

    async def deliver(self, message: JSON, related_request_id: RequestId | None) -> None:
        method = message.get("method")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if method in LIST_CHANGED_FILTERS:
            wanted = LIST_CHANGED_FILTERS[method] in self.kinds
        elif method == "notifications/resources/updated":
            wanted = params.get("uri") in self.uris
        else:
            wanted = False
        if not wanted:
            return
        meta = params.get("_meta")
        out_meta = {**(meta if isinstance(meta, dict) else {}), SUBSCRIPTION_ID_KEY: self.request_id}
        with contextlib.suppress(asyncio.QueueFull):  # a client that stopped reading loses events
            self.queue.put_nowait({**message, "params": {**params, "_meta": out_meta}})


@dataclass
class EraBridge:
    """Translates 2026-07-28 exchanges onto the shared handshake-era connection of one child."""

    mux: Multiplexer
    round_timeout: float = ROUND_TIMEOUT
    max_rounds: int = MAX_ROUNDS
    native: bool = False
    """The child refused `initialize` as a 2026-07-28-only server does: 2026-07-28 exchanges are
    relayed to it untranslated (there is no handshake connection to translate onto)."""
    _rounds: dict[str, Round] = field(default_factory=dict)
    _init_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _round_ids: int = 0

    # -- the child's handshake ---------------------------------------------------------------------

    async def ensure_initialized(self) -> JSON | None:
        """The child's `initialize` result, initialising it first when no client has; None when it
        could not be initialised (the error reaches the client as the exchange's answer)."""
        async with self._init_lock:
            if self.native:
                return None
            if self.mux.is_initialized() and self.mux.initialize_result is not None:
                return self.mux.initialize_result
            params: JSON = {
                "protocolVersion": LATEST_HANDSHAKE_VERSION,
                "capabilities": PROXY_CLIENT_CAPABILITIES,
                "clientInfo": {"name": "mcpfleet-proxy", "version": "1"},
            }
            try:
                reply = await self.mux.call("initialize", params)
            except (RuntimeError, TimeoutError) as exc:
                log.warning("%s: initialising the server failed: %s", self.mux.name, exc)
                return None
            if not isinstance(reply.get("result"), dict):
                error = reply.get("error")
                if isinstance(error, dict) and error.get("code") in MODERN_ONLY_CODES:
                    # The server speaks only 2026-07-28: its own answers are served untranslated.
                    log.info("%s: the server refused initialize (%s): 2026-07-28 only", self.mux.name, error)
                    self.native = True
                else:
                    log.warning("%s: the server refused initialize: %s", self.mux.name, error)
                return None
            self.mux.remember_initialize(params)
            await self.mux.notify_child({"jsonrpc": "2.0", "method": "notifications/initialized"})
            return self.mux.initialize_result

    def _server_info(self) -> Any:
        result = self.mux.initialize_result or {}
        return result.get("serverInfo")

    def complete(self, method: str, message: JSON) -> JSON:
        """A child's answer as 2026-07-28 requires it (resultType, caching hints, serverInfo stamp)."""
        result = message.get("result")
        if not isinstance(result, dict):
            return message
        out = dict(result)
        out.setdefault("resultType", "complete")
        if method in CACHEABLE_METHODS and out["resultType"] == "complete":  # never on input_required
            out.setdefault("ttlMs", 0)
            out.setdefault("cacheScope", "private")
        info = self._server_info()
        meta = out.get("_meta")
        if isinstance(info, dict) and (
            meta is None or (isinstance(meta, dict) and not meta.get(SERVER_INFO_KEY))
        ):
            out["_meta"] = {**(meta or {}), SERVER_INFO_KEY: info}
        return {**message, "result": out}

    def discover(self, request_id: RequestId, initialized: JSON) -> JSON:
        result: JSON = {
            "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
            "capabilities": initialized.get("capabilities") or {},
            "serverInfo": initialized.get("serverInfo") or {"name": self.mux.name, "version": "unknown"},
            "ttlMs": 0,
            "cacheScope": "private",
        }
        if isinstance(initialized.get("instructions"), str):
            result["instructions"] = initialized["instructions"]
        return self.complete("server/discover", {"jsonrpc": "2.0", "id": request_id, "result": result})

    # -- exchanges -------------------------------------------------------------------------------

    async def start(self, message: JSON) -> BridgedPeer | ListenPeer:
        """Begin one exchange: the peer whose queue carries its messages, the answer last."""
        request_id: RequestId = message["id"]
        method = str(message["method"])
        stripped, envelope = Envelope.strip(message)
        peer = BridgedPeer(self, request_id, method, envelope)
        if method in REMOVED_METHODS:
            text = f"Method not found: {method} is not part of protocol 2026-07-28"
            peer.queue.put_nowait(_error(request_id, METHOD_NOT_FOUND, text))
            return peer
        initialized = await self.ensure_initialized()
        if initialized is None:
            text = f"{self.mux.name} could not be initialised; see the proxy's /health"
            peer.queue.put_nowait(_error(request_id, INTERNAL_ERROR, text))
            return peer
        if method == "server/discover":
            peer.queue.put_nowait(self.discover(request_id, initialized))
            return peer
        if method == "subscriptions/listen":
            return await self._listen(stripped, peer)
        params = stripped.get("params")
        state = params.get("requestState") if isinstance(params, dict) else None
        if state is not None:
            await self._resume(peer, stripped, state)
            return peer
        await self.mux.request(peer, stripped, wants_logs=envelope.log_level is not None)
        return peer

    async def finish(self, peer: BridgedPeer | ListenPeer) -> None:
        """The exchange's HTTP response ended: cancel what it still has on the child."""
        await self.mux.remove_peer(peer)
        if isinstance(peer, ListenPeer):
            for uri in peer.uris:
                if not self.mux.subscribed(uri):
                    with contextlib.suppress(RuntimeError, TimeoutError):
                        await self.mux.call("resources/unsubscribe", {"uri": uri}, deadline=5.0)

    async def _listen(self, message: JSON, fallback: BridgedPeer) -> BridgedPeer | ListenPeer:
        params = message.get("params")
        wanted = params.get("notifications") if isinstance(params, dict) else None
        if not isinstance(wanted, dict):
            text = "Invalid params: subscriptions/listen needs a notifications object"
            fallback.queue.put_nowait(_error(message["id"], INVALID_PARAMS, text))
            return fallback
        peer = ListenPeer(message["id"], wanted)
        if len(peer.uris) > MAX_LISTEN_URIS:
            text = f"Invalid params: notifications.resourceSubscriptions: at most {MAX_LISTEN_URIS} URIs"
            fallback.queue.put_nowait(_error(message["id"], INVALID_PARAMS, text))
            return fallback
        self.mux.add_peer(peer)
        for uri in peer.uris:
            if self.mux.subscribe(peer, uri):
                with contextlib.suppress(RuntimeError, TimeoutError):
                    await self.mux.call("resources/subscribe", {"uri": uri}, deadline=10.0)
        peer.queue.put_nowait(peer.acknowledgement())
        return peer

    # -- InputRequiredResult rounds ---------------------------------------------------------------

    async def open_round(self, peer: BridgedPeer, request: JSON) -> None:
        """The child asked the client of `peer`'s exchange something: end the exchange with an
        InputRequiredResult and park the child's requests until the client's retry."""
        method = str(request.get("method"))
        capability = INPUT_METHODS.get(method)
        if capability is None:
            await self.mux.respond(peer, _error(request["id"], METHOD_NOT_FOUND, f"{method}: not supported"))
            return
        if not peer.envelope.declares(capability):
            # The request fails as 2026-07-28 says; the exchange's end cancels the call on the child
            # and answers its server request.
            text = f"{method} needs the client capability {capability!r}, which the request did not declare"
            refusal = _error(peer.request_id, MISSING_CAPABILITY, text)
            refusal["error"]["data"] = {"requiredCapabilities": {capability: {}}}
            peer.queue.put_nowait(refusal)
            return
        if len(self._rounds) >= self.max_rounds:
            text = f"{method}: too many clients are being asked for input (limit {self.max_rounds})"
            await self.mux.respond(peer, _error(request["id"], INTERNAL_ERROR, text))
            return
        parked = ParkedPeer()
        self.mux.hand_over(peer, parked)
        self._round_ids += 1
        token = secrets.token_urlsafe(32)
        round_ = Round(token, peer.method, f"input-{self._round_ids}", request["id"], parked)
        round_.expiry = asyncio.get_running_loop().call_later(
            self.round_timeout, lambda: asyncio.ensure_future(self._expire(token))
        )
        self._rounds[token] = round_
        params = request.get("params")
        input_request: JSON = {"method": method}
        if isinstance(params, dict):
            input_request["params"] = params
        result: JSON = {
            "resultType": "input_required",
            "inputRequests": {round_.key: input_request},
            "requestState": token,
        }
        peer.queue.put_nowait(
            self.complete(peer.method, {"jsonrpc": "2.0", "id": peer.request_id, "result": result})
        )

    async def _resume(self, peer: BridgedPeer, message: JSON, state: Any) -> None:
        """The client's retry: answer the child's parked request, and let this exchange carry on."""
        round_ = self._rounds.get(state) if isinstance(state, str) else None
        if round_ is None or round_.method != peer.method:
            text = "Invalid params: requestState: unknown, expired or already used input round"
            peer.queue.put_nowait(_error(peer.request_id, INVALID_PARAMS, text))
            return
        del self._rounds[round_.token]
        if round_.expiry is not None:
            round_.expiry.cancel()
        self.mux.hand_over(round_.parked, peer, client_id=peer.request_id)
        params = message.get("params")
        responses = params.get("inputResponses") if isinstance(params, dict) else None
        answer = responses.get(round_.key) if isinstance(responses, dict) else None
        if isinstance(answer, dict):
            await self.mux.respond(peer, {"jsonrpc": "2.0", "id": round_.child_request_id, "result": answer})
        else:
            text = f"the client gave no input for {round_.key}"
            await self.mux.respond(peer, _error(round_.child_request_id, INVALID_PARAMS, text))
        for held, related in round_.parked.held:
            if "method" not in held:
                held = {**held, "id": peer.request_id}
            await peer.deliver(held, related)

    async def _expire(self, token: str) -> None:
        round_ = self._rounds.pop(token, None)
        if round_ is None:
            return
        log.info("%s: an input round was not answered within %ss", self.mux.name, self.round_timeout)
        await self.mux.respond(
            round_.parked,
            _error(round_.child_request_id, INTERNAL_ERROR, "the client did not answer in time"),
        )
        await self.mux.remove_peer(round_.parked)

    def open_rounds(self) -> int:
        return len(self._rounds)

    def close(self) -> None:
        """Forget every parked round (the proxy is stopping; the child goes with it)."""
        for round_ in self._rounds.values():
            if round_.expiry is not None:
                round_.expiry.cancel()
        self._rounds.clear()
