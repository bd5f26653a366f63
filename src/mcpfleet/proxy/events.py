"""A bounded in-memory SSE event store: lets a handshake-era client resume a broken response
stream with `Last-Event-ID` (streamable HTTP resumability) without unbounded memory.

One store per session (it dies with the session); the oldest events are dropped first, so a
client that comes back after more than `max_events` newer events gets no replay (the SDK
transport then answers as for an unknown event id).
"""

from __future__ import annotations

import itertools
from collections import OrderedDict

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCMessage


class BoundedEventStore(EventStore):
    def __init__(self, max_events: int = 1000) -> None:
        if max_events <= 0:
            raise ValueError("max_events must be positive")
        self._max = max_events
        self._ids = itertools.count(1)
        self._events: OrderedDict[int, tuple[str, JSONRPCMessage | None]] = OrderedDict()

    # No __len__: the SDK transport tests `if self._event_store:`, and an empty store must not be falsy.
    @property
    def size(self) -> int:
        return len(self._events)

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = next(self._ids)
        self._events[event_id] = (stream_id, message)
        while len(self._events) > self._max:
            self._events.popitem(last=False)
        return str(event_id)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        try:
            after = int(last_event_id)
        except ValueError:
            return None
        known = self._events.get(after)
        if known is None:
            return None
        stream_id = known[0]
        # Snapshot first: sending may let new events be stored (and old ones evicted) meanwhile.
        later = [(eid, msg) for eid, (sid, msg) in self._events.items() if eid > after and sid == stream_id]
        for event_id, message in later:
            if message is not None:  # None marks a priming event, which carries no message
                await send_callback(EventMessage(message, str(event_id)))
        return stream_id
