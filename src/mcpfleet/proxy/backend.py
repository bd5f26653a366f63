"""The stdio backend of the proxy: the supervised child (one per server by default), with its multiplexer.

An MCP stdio connection is locked to one protocol era by its first request (the 2025-11-25
handshake, or the 2026-07-28 per-request envelope). By default (`modern_era="auto"`) the proxy
starts the command once (eagerly: its health is the proxy's health) and probes it with a
2026-07-28 `server/discover` as its first message:

* refused (a handshake-only server: python SDK 1.x, the TypeScript SDK answer an error and still
  accept `initialize` after it): the child stays the one handshake-era process and 2026-07-28
  clients are translated onto it (`proxy/bridge.py`), as `modern_era="translate"` always does;
* answered (the server speaks 2026-07-28 itself, dual-era or 2026-only) with capabilities that
  promise list-change or resource-update notifications (`announces_changes`: an mcp SDK 2.x server
  sends those only to 2026-07-28 listen streams, which the translation cannot reach): the probed
  child, now locked to 2026-07-28, serves 2026-07-28 clients untranslated, and handshake-era
  clients get a second instance started on their first request, as `modern_era="separate"` does;
* answered without such capabilities (e.g. `mcp-server-time`): the probed child is replaced by a
  fresh one (its pipe is locked to 2026-07-28) that is the one handshake-era process, translated
  onto as above; a 2026-only server then refuses the proxy's `initialize` and is relayed to
  untranslated on that one process (`EraBridge.native`).
* no answer within `ready_timeout`: the pipe's era is unknown, the child is replaced as above.

Clients of the same channel share it through the multiplexer; `per_session` gives each
handshake-era session its own process.

When the stdio belongs to something the proxy cannot start twice (a container reached through
the Kubernetes attach API), `single_stdio=True` makes both eras share the one channel untranslated:
the server then serves whichever era reached it first (docs/proxy.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from mcpfleet.backoff import Backoff
from mcpfleet.proxy.child import (
    ChildHooks,
    ChildProcess,
    ChildStatus,
    LifecycleHandler,
    MessageHandler,
)
from mcpfleet.proxy.mux import Multiplexer
from mcpfleet.toolconfig import ToolPolicy

log = logging.getLogger(__name__)

Era = Literal["handshake", "modern"]
ModernEra = Literal["auto", "translate", "separate"]
MODERN_ERA_MODES: tuple[ModernEra, ...] = ("auto", "translate", "separate")

PROBE_PROTOCOL_VERSION = "2026-07-28"
_PROBE: dict[str, Any] = {
    "_meta": {
        PROTOCOL_VERSION_META_KEY: PROBE_PROTOCOL_VERSION,
        CLIENT_CAPABILITIES_META_KEY: {},
        CLIENT_INFO_META_KEY: {"name": "mcpfleet-proxy", "version": "1"},
    }
}
"""The params of the era probe: the smallest valid 2026-07-28 `server/discover`."""


def announces_changes(capabilities: Any) -> bool:
    """Whether a server's 2026-07-28 capabilities promise list-change or resource-update
    notifications: mcp SDK 2.x servers send those only to 2026-07-28 listen streams, so translating
    such a server onto its handshake-era connection would lose them."""
    if not isinstance(capabilities, dict):
        return False
    for kind in ("tools", "prompts", "resources"):
        declared = capabilities.get(kind)
        if isinstance(declared, dict) and declared.get("listChanged") is True:
            return True
    resources = capabilities.get("resources")
    return isinstance(resources, dict) and resources.get("subscribe") is True


MAX_SESSION_SERVERS = 10
"""`--isolation session`: at most this many per-session server processes run at once by default
(each session, or legacy SSE stream, starts one; an anonymous client could otherwise start
thousands). A session's process ends with the session, idle ones included (the session idle timeout)."""


class SessionServerLimit(RuntimeError):
    """`--isolation session` is at its cap of running per-session servers: refuse the new session."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"too many session servers running (limit {limit}, --max-session-servers); "
            "end unused sessions with DELETE, or retry later"
        )


class Child(Protocol):
    """A supervised stdio endpoint (a local process, or a container's attached stdio)."""

    @property
    def running(self) -> bool: ...

    async def start(self) -> None: ...

    async def stop(self, grace: float = 3.0) -> None: ...

    async def send(self, message: Mapping[str, Any]) -> None: ...

    def status(self) -> ChildStatus: ...


ChildFactory = Callable[[str, MessageHandler, LifecycleHandler, LifecycleHandler], Child]
"""(name, on_message, on_exit, on_start) -> a child that is not started yet."""


def process_factory(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    backoff: Backoff | None = None,
    hooks: ChildHooks | None = None,
) -> ChildFactory:
    """Children that are local processes running `command`."""
    if not command:
        raise ValueError("command: give the stdio server to run after `--`")

    def make(
        name: str, on_message: MessageHandler, on_exit: LifecycleHandler, on_start: LifecycleHandler
    ) -> Child:
        return ChildProcess(
            command,
            on_message=on_message,
            on_exit=on_exit,
            on_start=on_start,
            env=env,
            cwd=cwd,
            backoff=backoff,
            name=name,
            hooks=hooks,
        )

    return make


@dataclass
class Channel:
    """A child and the multiplexer in front of it."""

    era: Era
    child: Child
    mux: Multiplexer


class StdioBackend:
    """Owns the children; hands out the channel for an era (starting it on first use)."""

    def __init__(
        self,
        factory: ChildFactory,
        *,
        single_stdio: bool = False,
        per_session: bool = False,
        ready_timeout: float = 30.0,
        tool_policy: ToolPolicy | None = None,
        max_session_servers: int = MAX_SESSION_SERVERS,
        modern_era: ModernEra = "auto",
    ) -> None:
        if modern_era not in MODERN_ERA_MODES:
            raise ValueError(f"--modern-era: expected auto, translate or separate, got {modern_era!r}")
        if max_session_servers < 1:
            raise ValueError(f"--max-session-servers: must be at least 1, got {max_session_servers}")
        self.max_session_servers = max_session_servers
        self._factory = factory
        self._tool_policy = tool_policy
        self._per_session = per_session
        self._single = single_stdio
        self.modern_era: ModernEra = modern_era
        self._ready_timeout = ready_timeout
        self._channels: dict[Era, Channel] = {}
        self._dedicated: dict[int, Channel] = {}
        self._dedicated_ids = 0
        self._lock = asyncio.Lock()
        self.native_modern: bool | None = None
        """`auto`: whether the probe found a server that speaks 2026-07-28 itself (None: not probed yet)."""
        self.probe: dict[str, Any] = {}
        """`auto`: what the probe saw (shown in /health as `eraProbe`)."""

    async def start(self) -> None:
        # `per_session`: nothing shared runs until a 2026-07-28 client needs it (probed then).
        if self._per_session:
            return
        if self._auto():
            await self._probe()  # starts the one child; a handshake-era second one only on demand
        else:
            await self.channel("handshake")

    async def stop(self) -> None:
        for channel in [*{id(c): c for c in self._channels.values()}.values(), *self._dedicated.values()]:
            await channel.child.stop()
        self._channels.clear()
        self._dedicated.clear()

    async def dedicated(self) -> Multiplexer:
        """A new child for one session alone (`--isolation session`); give it back with `release`.
        Raises SessionServerLimit when `max_session_servers` already run (checked and counted with
        no await in between, so concurrent sessions cannot overshoot)."""
        if len(self._dedicated) >= self.max_session_servers:
            raise SessionServerLimit(self.max_session_servers)
        self._dedicated_ids += 1
        name = f"session server {self._dedicated_ids}"
        mux = Multiplexer(name=name, ready_timeout=self._ready_timeout, tool_policy=self._tool_policy)
        child = self._factory(name, mux.on_child_message, mux.on_child_exit, mux.on_child_start)
        mux.bind(child)
        self._dedicated[id(mux)] = Channel(era="handshake", child=child, mux=mux)
        await child.start()
        return mux

    async def release(self, mux: Multiplexer) -> None:
        channel = self._dedicated.pop(id(mux), None)
        if channel is not None:
            await channel.child.stop()

    def translates(self) -> bool:
        """Whether 2026-07-28 clients are translated onto the handshake-era child."""
        if self._single or self.modern_era == "separate":
            return False
        return self.modern_era == "translate" or not self.native_modern

    def _auto(self) -> bool:
        return self.modern_era == "auto" and not self._single

    async def channel(self, era: Era) -> Channel:
        if self._auto() and self.native_modern is None:
            await self._probe()
        if self._single or self.translates():
            era = "handshake"  # one child serves both eras
        existing = self._channels.get(era)
        if existing is not None:
            return existing
        async with self._lock:
            if era in self._channels:
                return self._channels[era]
            return await self._open(era)

    async def _open(self, era: Era, name: str | None = None) -> Channel:
        """Start a child for `era` (called under the lock)."""
        if name is None:
            name = "server" if self._single or self.translates() else f"{era} server"
        mux = Multiplexer(name=name, ready_timeout=self._ready_timeout, tool_policy=self._tool_policy)
        child = self._factory(name, mux.on_child_message, mux.on_child_exit, mux.on_child_start)
        mux.bind(child)
        await child.start()
        channel = Channel(era=era, child=child, mux=mux)
        self._channels[era] = channel
        return channel

    async def _probe(self) -> None:
        """`auto`: start the child and send a 2026-07-28 `server/discover` as its first message, then
        settle the layout (the module docstring); `probe` records what was seen, for /health."""
        async with self._lock:
            if self.native_modern is not None:
                return
            channel = await self._open("handshake", name="server")
            started = time.monotonic()
            try:
                reply = await channel.mux.call("server/discover", _PROBE, deadline=self._ready_timeout)
            except TimeoutError:
                # No answer: the pipe's era is unknown (a late answer may lock it to 2026-07-28).
                log.warning("server: no answer to the era probe in %ss; restarting it", self._ready_timeout)
                await self._reopen_for_handshake(channel)
                self.probe = {"answered": False, "restarted": True}
                self.native_modern = False
                return
            except RuntimeError as exc:
                # Not running (failed to start or died): a restarted child never saw the probe.
                log.warning("server: the era probe failed (%s); translating 2026-07-28", exc)
                self.probe = {"answered": False, "restarted": False}
                self.native_modern = False
                return
            seconds = round(time.monotonic() - started, 4)
            result = reply.get("result")
            answered = isinstance(result, dict)
            changes = isinstance(result, dict) and announces_changes(result.get("capabilities"))
            self.native_modern = changes
            self.probe = {"answered": answered, "announcesChanges": changes, "seconds": seconds}
            if changes:
                del self._channels["handshake"]
                channel.era = "modern"
                self._channels["modern"] = channel
                log.info("server announces list changes in 2026-07-28: served natively, twice")
            elif answered:
                # The probe locked this pipe to 2026-07-28: a fresh process for the one handshake era.
                restart_started = time.monotonic()
                await self._reopen_for_handshake(channel)
                self.probe["restarted"] = True
                self.probe["restartSeconds"] = round(time.monotonic() - restart_started, 4)

    async def _reopen_for_handshake(self, probed: Channel) -> None:
        """Replace the probed child by a fresh one as the handshake-era channel (under the lock)."""
        await probed.child.stop()
        del self._channels["handshake"]
        await self._open("handshake", name="server")

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Healthy when every started child is running; the body shows each child's status."""
        children: dict[str, Any] = {}
        for era, ch in self._channels.items():
            children[era] = {**ch.child.status().as_dict(), "inFlight": ch.mux.in_flight()}
        for ch in self._dedicated.values():
            children[ch.mux.name] = {**ch.child.status().as_dict(), "inFlight": ch.mux.in_flight()}
        everything = [*self._channels.values(), *self._dedicated.values()]
        # With per-session children and no session open there is nothing that could be down.
        healthy = (bool(everything) or self._per_session) and all(ch.child.running for ch in everything)
        body: dict[str, Any] = {"status": "ok" if healthy else "unavailable", "children": children}
        if self.native_modern is not None:
            body["eraProbe"] = {"nativeModern": self.native_modern, **self.probe}
        return healthy, body
