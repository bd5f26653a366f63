"""Per-backend health state and the circuit breaker (bookkeeping only; the gateway drives probes).

A backend is `ready` after a successful probe or call, `unavailable` after `unhealthyThreshold`
consecutive failures (probes or calls that failed at the transport level), `unknown` before the
first observation. The optional circuit breaker opens after `failureThreshold` consecutive
failures: calls then fail fast until `timeout` elapses, when one half-open trial is let through.

A backend that has not answered `initialize` yet (still starting: a package downloading, a pod
not ready) is also tried between health checks, on `reconnect_delay`'s schedule: 0.1 s, doubling
to at most 1 s, for the first `RECONNECT_WINDOW` seconds after it joined; then only at health
checks. Those extra tries are not health checks: a failed one is not counted as a failure (the
threshold and the breaker count what they counted before), a successful one is a success.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from mcpfleet.api.duration import parse_duration
from mcpfleet.api.gatewayconfig import FailureHandling

RECONNECT_FIRST = 0.1
"""Seconds before the first extra connect try of a backend whose connect failed."""
RECONNECT_MAX = 1.0
"""The longest wait between extra tries: a backend serves within about this long of answering."""
RECONNECT_WINDOW = 120.0
"""Extra tries stop this many seconds after the backend joined (at most ~125 tries in all)."""

State = Literal["ready", "degraded", "unavailable", "unknown"]


def reconnect_delay(tries: int, since_joined: float, check_interval: float) -> float | None:
    """Seconds until the next extra connect try after `tries` failed tries, or None: the health
    checks alone go on (the window is over, or they come as often anyway)."""
    delay = min(RECONNECT_MAX, RECONNECT_FIRST * (1 << min(tries, 16)))
    if since_joined + delay > RECONNECT_WINDOW or delay >= check_interval:
        return None
    return delay


Circuit = Literal["closed", "open", "half-open"]


@dataclass
class BackendHealth:
    threshold: int
    breaker_enabled: bool = False
    breaker_threshold: int = 5
    breaker_timeout: float = 60.0
    state: State = "unknown"
    consecutive_failures: int = 0
    last_check: float | None = None
    last_error: str | None = None
    circuit: Circuit = "closed"
    circuit_changed: float | None = None
    _opened_at: float = field(default=0.0, repr=False)

    @classmethod
    def from_config(cls, fh: FailureHandling) -> BackendHealth:
        cb = fh.circuit_breaker
        return cls(
            threshold=fh.unhealthy_threshold,
            breaker_enabled=cb.enabled,
            breaker_threshold=cb.failure_threshold,
            breaker_timeout=parse_duration(cb.timeout),
        )

    def record_success(self) -> bool:
        """Returns True if the state changed (so the caller can rebuild / report)."""
        self.last_check = time.time()
        self.consecutive_failures = 0
        self.last_error = None
        if self.circuit != "closed":
            self._set_circuit("closed")
        changed = self.state != "ready"
        self.state = "ready"
        return changed

    def record_failure(self, error: str) -> bool:
        self.last_check = time.time()
        self.consecutive_failures += 1
        self.last_error = error
        if self.breaker_enabled and (
            self.circuit == "half-open" or self.consecutive_failures >= self.breaker_threshold
        ):
            if self.circuit != "open":
                self._set_circuit("open")
            self._opened_at = time.monotonic()
        new: State = self.state
        if self.consecutive_failures >= self.threshold:
            new = "unavailable"
        elif self.state == "ready":
            new = "degraded"
        changed = new != self.state
        self.state = new
        return changed

    def allow_call(self) -> bool:
        """Circuit check before a call: False while open; flips to half-open after the timeout."""
        if self.circuit == "open":
            if time.monotonic() - self._opened_at >= self.breaker_timeout:
                self._set_circuit("half-open")
                return True
            return False
        return True

    @property
    def healthy(self) -> bool:
        return self.state in ("ready", "degraded", "unknown")

    def _set_circuit(self, c: Circuit) -> None:
        self.circuit = c
        self.circuit_changed = time.time()
