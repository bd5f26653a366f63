"""The one exponential backoff policy: restart and retry delays everywhere in mcpfleet.

A process supervisor (`platform/local/supervisor.py`), the proxy's child and attach supervisors, the
operator's work queue and initial list, the Kubernetes API client's retries, the registry's watch and the
gateway's standing notification streams all wait `initial * factor**(failures - 1)` seconds, capped at
`maximum`, before trying again. Supervisors also forgive: a run that lasted `stable_after` seconds
counts as a success, so the next crash waits `initial` again instead of the cap.

`jitter` spreads the retries of many workers that failed together (a restarted API server must not be
hit by every client at the same instant): with `jitter=0.5` a delay is drawn between half and all of the
exponential value.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backoff:
    """Delays `initial * factor**(failures - 1)`, capped at `maximum`; none before the first failure."""

    initial: float = 0.5
    factor: float = 2.0
    maximum: float = 30.0
    stable_after: float = 30.0
    """A run at least this long resets the failure count (supervisors)."""
    jitter: float = 0.0
    """Fraction of each delay drawn at random: 0 gives exact delays, 0.5 between half and all of it."""
    random: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.initial < 0 or self.maximum < 0:
            raise ValueError("backoff: initial and maximum must not be negative")
        if self.factor < 1:
            raise ValueError(f"backoff: factor must be at least 1, got {self.factor}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"backoff: jitter must be between 0 and 1, got {self.jitter}")

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` consecutive failures (0 or fewer: no wait)."""
        if failures <= 0:
            return 0.0
        # The exponent is bounded so that a long outage (thousands of failures) cannot overflow a float.
        exponent = min(failures - 1, 64)
        exact = float(min(self.maximum, self.initial * self.factor**exponent))
        if not self.jitter:
            return exact
        return exact * (1.0 - self.jitter * self.random())

    def failures_after(self, failures: int, ran_for: float) -> int:
        """The failure count after a run of `ran_for` seconds ended: 1 after a stable run, else one more."""
        return 1 if ran_for >= self.stable_after else failures + 1
