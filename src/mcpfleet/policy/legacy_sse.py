"""List answers on the legacy SSE transport's GET stream, filtered by authorization, failing closed.

With the HTTP+SSE transport (2024-11-05) a client POSTs each request to the `/messages/?...` URL the
stream's first event (`endpoint`) named, the POST is answered 202, and the JSON-RPC response
travels on the `GET /sse` stream. So the proxy's policy layer (`policy.asgi`) pairs the two:

* each `GET /sse` stream it relays is read event by event (`policy.sse.SseRewriter`, as a client
  parses it); its `endpoint` event registers the stream under that URL's query (the session);
* a list request POSTed to a session (`expect`) is recorded with its id, method and the caller's
  claims *before* it reaches the server, so its answer cannot come first; a list request for a
  session this layer does not stream, or one over `MAX_PENDING` unanswered lists, is refused;
* a response on the stream whose id matches a recorded list (ids compared loosely: `5`, `5.0`
  and `"5"` match, so a client that reads ids differently still reads a filtered answer) has its
  result filtered as a list answer; later responses with that id are filtered too;
* this layer's own answers to a POSTed request (a refusal) go on the stream too, as the transport
  answers (the POST gets 202): a client reads responses only there (the SDK's `sse_client` treats
  an HTTP error on the POST as a broken transport, and the call would never end);
* an event over `max_event` bytes is not relayed (never held); every list still waiting on the
  stream is answered with a JSON-RPC error then, as its answer may have been that event, and a
  later answer to it is dropped. An event whose data is not JSON is dropped, except `endpoint`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from mcpfleet.auth.binding import AmbiguousSession, query_session
from mcpfleet.policy.guard import Policy
from mcpfleet.policy.sse import DROP, MAX_EVENT_BYTES, Events, SseRewriter, event, text_event

log = logging.getLogger(__name__)

Message = dict[str, Any]
Send = Callable[[Message], Awaitable[None]]

MAX_PENDING = 1024
"""Unanswered list requests per stream: beyond, new list requests are refused (bounded memory)."""
MAX_ANSWERED = 1024
"""Answered (or failed) list ids remembered per stream, so a repeated answer is still filtered."""
UNFILTERABLE = -32603


def id_key(value: Any) -> str:
    """A JSON-RPC id as a key that treats `5`, `5.0`, `"5"` (and `true` / `1`) as one."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float | str):
        return str(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def session_key(url_or_query: bytes) -> bytes:
    """What pairs a POST with its stream: the session its query names, read as the SDK transport
    reads it (`auth.binding.query_session`), so every spelling the transport routes to a stream
    (upper case, braces, `urn:uuid:`, percent-encoding) pairs with that stream. A query naming
    `session_id` twice pairs with nothing (its list requests are refused); one without it (another
    server's endpoint URL, behind `--remote`) is its own key, as sent."""
    try:
        session = query_session(url_or_query)
    except AmbiguousSession:
        return b""
    if session is None:
        return url_or_query
    return b"session_id=" + session.encode()


@dataclass(frozen=True)
class _List:
    request_id: Any
    method: str
    claims: Mapping[str, Any] | None


class _Stream:
    """One GET stream being relayed: its rewriter and the list requests whose answers it carries."""

    def __init__(self, streams: LegacyStreams, send: Send, max_event: int) -> None:
        self._streams = streams
        self._send = send
        self.key: bytes | None = None
        self.path = ""
        self.pending: OrderedDict[str, _List] = OrderedDict()
        self._answered: OrderedDict[str, _List | None] = OrderedDict()  # None: failed, drop answers
        self._rewriter = SseRewriter(self._rewrite, self._overflow, max_event, text=self._text)
        self._lock = asyncio.Lock()  # our answers go out between whole events, never inside one
        self._started = False

    async def send(self, message: Message) -> None:
        async with self._lock:
            await self._relay(message)

    async def inject(self, message: Any) -> None:
        """Send a JSON-RPC message of ours on the stream (between two whole events)."""
        async with self._lock:
            if self._started:
                await self._send({"type": "http.response.body", "body": event(message), "more_body": True})

    async def _relay(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._started = True
            # The body changes length: never a content-length on a rewritten stream.
            headers = [(k, v) for k, v in message.get("headers", []) if k != b"content-length"]
            await self._send({**message, "headers": headers})
            return
        if message["type"] != "http.response.body":
            await self._send(message)
            return
        more = bool(message.get("more_body"))
        out = self._rewriter.feed(message.get("body", b""))
        if not more:
            out += self._rewriter.end()
        await self._send({"type": "http.response.body", "body": out, "more_body": more})

    def _text(self, others: list[bytes], data: bytes) -> bytes:
        names = [line.partition(b":")[2].strip() for line in others if line.partition(b":")[0] == b"event"]
        if names and names[-1] == b"endpoint" and b"\n" not in data:
            url = urlsplit(data.strip())
            path = unquote(url.path.decode("utf-8", "replace"))  # as the server's scope["path"] reads it
            if self._streams.register(self, session_key(url.query), path):
                return text_event(others, data)
            # A second endpoint, or one naming another stream's session: a client posting there
            # would get its list answered on a stream that does not expect it.
            log.warning("an SSE endpoint event that names no new session was dropped from a filtered stream")
            return b""
        log.warning("an SSE event whose data is not JSON was dropped from a filtered stream")
        return b""

    def _rewrite(self, message: Any) -> Any:
        if isinstance(message, list):
            rewritten = [self._rewrite_one(m) for m in message]
            return [m for m in rewritten if m is not DROP]
        return self._rewrite_one(message)

    def _rewrite_one(self, message: Any) -> Any:
        if not isinstance(message, dict) or "method" in message or "id" not in message:
            return message
        key = id_key(message["id"])
        entry = self.pending.pop(key, None)
        if entry is None:
            if key not in self._answered:
                return message  # not a list's answer
            entry = self._answered[key]
            if entry is None:
                return DROP  # answered with an error already (its answer could not be filtered)
        self._answered[key] = entry
        self._answered.move_to_end(key)
        if len(self._answered) > MAX_ANSWERED:
            self._answered.popitem(last=False)
        if "result" not in message:
            return message
        policy = self._streams.policy
        return {**message, "result": policy.filter_result(entry.claims, entry.method, message["result"])}

    def _overflow(self) -> Any:
        if not self.pending:
            return DROP
        errors = []
        for key, entry in self.pending.items():
            errors.append(
                {
                    "jsonrpc": "2.0",
                    "id": entry.request_id,
                    "error": {
                        "code": UNFILTERABLE,
                        "message": f"an event on the SSE stream is larger than {self._streams.max_event} "
                        "bytes and may be this list's answer: not relayed (it cannot be authorized)",
                    },
                }
            )
            self._answered[key] = None
        self.pending.clear()
        while len(self._answered) > MAX_ANSWERED:
            self._answered.popitem(last=False)
        return Events(errors)


class LegacyStreams:
    """The legacy-SSE GET streams one policy layer relays, by session (see the module docstring)."""

    def __init__(self, policy: Policy, max_event: int = MAX_EVENT_BYTES) -> None:
        self.policy = policy
        self.max_event = max_event
        self._by_key: dict[bytes, _Stream] = {}
        self._paths: Counter[str] = Counter()  # the message paths the open streams' endpoints name

    def open(self, send: Send) -> _Stream:
        return _Stream(self, send, self.max_event)

    def register(self, stream: _Stream, key: bytes, path: str = "") -> bool:
        """Pair `stream` with the session `key` its endpoint event names: once per stream, and only
        a key no other stream holds. `path`: the URL's path, where POSTs to that session go."""
        if stream.key is not None or not key or key in self._by_key:
            return False
        stream.key = key
        stream.path = path
        self._by_key[key] = stream
        self._paths[path] += 1
        return True

    def knows(self, query: bytes) -> bool:
        return session_key(query) in self._by_key

    def is_message_path(self, path: str) -> bool:
        """Whether an open stream's endpoint names this path: a POST there is an MCP message, whatever
        session its query names (a spelling this layer does not pair is still authorized)."""
        return self._paths.get(path, 0) > 0

    def close(self, stream: _Stream) -> None:
        if stream.key is not None and self._by_key.get(stream.key) is stream:
            del self._by_key[stream.key]
            self._paths[stream.path] -= 1
            if self._paths[stream.path] <= 0:
                del self._paths[stream.path]

    def stream(self, query: bytes) -> _Stream | None:
        """The stream of the session a POST with this query string belongs to."""
        return self._by_key.get(session_key(query))

    def expect(
        self, query: bytes, request_id: Any, method: str, claims: Mapping[str, Any] | None
    ) -> str | None:
        """Record a list request POSTed with this query string; why it is refused, or None."""
        stream = self._by_key.get(session_key(query))
        if stream is None:
            return "its answer would travel on an SSE stream this proxy does not relay"
        if len(stream.pending) >= MAX_PENDING:
            return f"more than {MAX_PENDING} list requests are waiting for their answers on this session"
        key = id_key(request_id)
        stream.pending[key] = _List(request_id, method, claims)
        stream.pending.move_to_end(key)
        return None

    def __len__(self) -> int:
        return len(self._by_key)
