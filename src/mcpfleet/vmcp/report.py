"""The gateway's status document (`/status`, the status file, the VirtualMCPServer's status) and
when it is written.

`StatusReporter` writes the document through the `StatusWriter` when something changed (coalesced
to one write per `STATUS_COALESCE` seconds, at once right after a backend connected, at least every
`statusReportingInterval`); `gateway_status` builds it from the backend pool and the aggregate.
Credentials in backend URLs and error texts never reach a status reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcpfleet.redact import redact_text, redact_url

if TYPE_CHECKING:
    from mcpfleet.vmcp.aggregate import Aggregate
    from mcpfleet.vmcp.config import VMCPConfig
    from mcpfleet.vmcp.pool import Backend, BackendPool
    from mcpfleet.vmcp.status import StatusWriter

log = logging.getLogger(__name__)

# The status report is written at most once per this many seconds, except right after a backend
# connected (see `StatusReporter.loop`).
STATUS_COALESCE = 0.5


class StatusReporter:
    """Writes the status document when it changed: `mark_dirty` (any change), `mark_urgent` (a
    backend connected and listed: reported at once, the platforms wait for every backend)."""

    def __init__(self, writer: StatusWriter, interval: float, document: Callable[[], dict[str, Any]]) -> None:
        self.writer = writer
        self._interval = interval
        self._document = document
        self._dirty = asyncio.Event()
        self._urgent = asyncio.Event()

    def mark_dirty(self) -> None:
        self._dirty.set()

    def mark_urgent(self) -> None:
        self._dirty.set()
        self._urgent.set()

    async def write_now(self) -> None:
        await self.writer.write(self._document())

    async def loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._interval):
                    await self._dirty.wait()
            self._dirty.clear()
            self._urgent.clear()
            try:
                await self.write_now()
            except Exception as exc:
                log.warning("status writer failed: %s", exc)
            # Bursts of changes (counts, health flaps) coalesce into one write per STATUS_COALESCE
            # seconds; a backend that just connected and listed is reported at once: the platforms
            # count a gateway ready only once it has reported every backend.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STATUS_COALESCE):
                    await self._urgent.wait()


def backend_status(name: str, b: Backend, config: VMCPConfig) -> dict[str, Any]:
    """One backend's entry of the status document."""
    up = b.upstream
    auth = config.outgoing_auth.for_backend(name)
    eras = [e for e, on in (("2025-11-25", up and up.legacy), ("2026-07-28", up and up.modern)) if on]
    health = b.health
    legacy = b.lists_for("legacy")
    return {
        "name": name,
        # Credentials in a backend URL (userinfo, query values) never reach a status reader (HTTP,
        # status file, the VirtualMCPServer's status): masked as `/health` of the proxy masks
        # them; so are URLs inside error texts.
        "url": redact_url(b.spec.url),
        "transport": b.spec.transport,
        "metadata": dict(b.spec.metadata),
        "state": health.state if b.connected or health.state != "ready" else "unavailable",
        "connected": b.connected,
        "lastCheck": _iso(health.last_check),
        "error": redact_text(health.last_error) if health.last_error else health.last_error,
        "consecutiveFailures": health.consecutive_failures,
        "circuitBreaker": health.circuit if health.breaker_enabled else None,
        "circuitLastChanged": _iso(health.circuit_changed) if health.breaker_enabled else None,
        "mcpRevision": up.revision() if up is not None else None,
        "authType": auth.type,
        "authConfigRef": auth.auth_config_ref,
        "protocolEras": eras,
        "listErrors": {m: redact_text(e) for m, e in b.list_errors.items()},
        "counts": {
            "tools": len(legacy.tools),
            "resources": len(legacy.resources),
            "resourceTemplates": len(legacy.templates),
            "prompts": len(legacy.prompts),
        },
    }


def gateway_status(
    config: VMCPConfig, pool: BackendPool, agg: Aggregate, sessions: int, optimizer: dict[str, Any] | None
) -> dict[str, Any]:
    """The whole status document (`agg`: the 2025-era aggregate, whose counts it shows)."""
    backends = pool.backends
    healthy = sum(1 for b in backends.values() if b.connected and b.health.state == "ready")
    if not backends or healthy == 0:
        phase = "Failed" if backends else "Pending"
    else:
        phase = "Ready" if healthy == len(backends) else "Degraded"
    return {
        "name": config.name,
        "phase": phase,
        "ready": pool.ready(),
        "partialFailureMode": "best_effort" if pool.best_effort else "fail",
        "backends": [backend_status(name, b, config) for name, b in sorted(backends.items())],
        "backendCount": len(backends),
        "healthyBackends": healthy,
        "counts": {
            "tools": len(agg.tools),
            "resources": len(agg.resources),
            "resourceTemplates": len(agg.templates),
            "prompts": len(agg.prompts),
        },
        "sessions": sessions,
        **({"optimizer": optimizer} if optimizer is not None else {}),
    }


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
