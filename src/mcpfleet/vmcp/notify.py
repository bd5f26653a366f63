"""Notifications to clients: the open notification streams (`Listener`s) and what reaches them.

Owns the set of listeners (2025-era GET streams, 2026-era `subscriptions/listen`), the
`list_changed` broadcast after the aggregate changed, and the delivery of a backend's
`resources/updated` (to the listeners subscribed to that URI) and log messages (to the sessions).
A full queue drops the message: a slow client never holds up the gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from mcpfleet.vmcp.context import ClientSession, Listener


class Notifier:
    """The gateway's notification streams to its clients."""

    def __init__(self) -> None:
        self.listeners: set[Listener] = set()

    def broadcast_list_changed(self, list_method: str) -> None:
        """`notifications/<kind>/list_changed` to every listener of that kind."""
        kind = list_method.split("/")[0]
        msg = {"jsonrpc": "2.0", "method": f"notifications/{kind}/list_changed"}
        if list_method == "resources/templates/list":
            return  # covered by resources/list_changed
        for ls in list(self.listeners):
            if getattr(ls, kind):
                self.deliver(ls, msg)

    def backend_message(self, msg: dict[str, Any]) -> None:
        """A backend's `resources/updated` or log message, to the listeners it concerns."""
        method = msg.get("method", "")
        if method == "notifications/resources/updated":
            uri = (msg.get("params") or {}).get("uri")
            for ls in list(self.listeners):
                subs = ls.uris if ls.uris is not None else (ls.session.subscriptions if ls.session else set())
                if uri in subs:
                    self.deliver(ls, msg)
        elif method == "notifications/message":
            for ls in list(self.listeners):
                if ls.session is not None:
                    self.deliver(ls, msg)

    @staticmethod
    def deliver(ls: Listener, msg: dict[str, Any]) -> None:
        if ls.meta is not None:
            params = dict(msg.get("params") or {})
            params["_meta"] = {**(params.get("_meta") or {}), **ls.meta}
            msg = {**msg, "params": params}
        with contextlib.suppress(asyncio.QueueFull):
            ls.queue.put_nowait(msg)

    def end_session(self, session: ClientSession) -> None:
        """Drop the streams of an ended session (each wakes and ends)."""
        for ls in [x for x in self.listeners if x.session is session]:
            self.listeners.discard(ls)
            with contextlib.suppress(asyncio.QueueFull):
                ls.queue.put_nowait({})  # wakes the stream writer, which then ends

    def close(self) -> None:
        """End every stream (the gateway stops)."""
        for ls in list(self.listeners):
            with contextlib.suppress(asyncio.QueueFull):
                ls.queue.put_nowait({})  # ends the stream
