"""Leader election for `mcpfleet operator run`: one coordination.k8s.io/v1 Lease, as client-go does it.

This module owns the Lease (`--leader-election-namespace` / `--leader-election-id`) and the decision
of whether this process leads: acquiring it, renewing it, noticing it is lost, and releasing it. It
owns nothing else: `app.run_operator` starts kopf and the controller only once `acquire()` returned,
and stops them (and exits non-zero) when `hold()` raises `LeadershipLost`.

The rules are client-go's `leaderelection` package:

* The Lease's spec is the record: `holderIdentity`, `leaseDurationSeconds`, `acquireTime`,
  `renewTime` (MicroTime), `leaseTransitions`.
* Every write is conditional on the `resourceVersion` read just before (a PUT of the whole Lease,
  or a POST when it does not exist yet): a 409 means another replica wrote first, and that replica
  won. A record is never overwritten blindly.
* A lease held by someone else is taken over only once it has not changed for its
  `leaseDurationSeconds`, measured on this process's monotonic clock from the moment this process
  *saw* the record change. `renewTime` is written for humans and other tools but never compared with
  the local wall clock, so clock skew between replicas does not matter.
* The leader renews every `retry_period`. If no renewal succeeded for `renew_deadline` (shorter than
  the lease duration, so this happens before any standby may take over), or the Lease names another
  holder, leadership is lost: `hold()` raises and the operator stops writing and exits non-zero so
  that its pod restarts as a standby (client-go's controllers exit the same way).
* On a clean shutdown the leader releases the Lease (empty `holderIdentity`, `leaseDurationSeconds`
  1), so a standby takes over at its next retry instead of waiting out the lease.

The clock, the wall clock, the sleep and the random jitter are parameters so the decisions can be
unit-tested with a fake clock (`tests/operator/test_leader_units.py`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn, Protocol

from mcpfleet.platform.kubernetes.api import ApiError

log = logging.getLogger("mcpfleet.operator.leader")

LEASE_API_VERSION = "coordination.k8s.io/v1"
JITTER_FACTOR = 1.2
"""client-go's: a candidate retries every retry_period * (1 + up to 1.2); renew_deadline must exceed
JITTER_FACTOR * retry_period."""


class LeaseApi(Protocol):
    """The verbs of `platform.kubernetes.api.KubeApi` the elector uses (a fake in the unit tests)."""

    async def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]: ...

    async def replace(self, manifest: dict[str, Any]) -> dict[str, Any]: ...


class LeadershipLost(RuntimeError):
    """The lease could not be renewed in time or another replica holds it: stop writing and exit."""


@dataclass(frozen=True)
class LeaderElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    """How long a standby waits, after it last saw the lease change, before taking it over."""
    renew_deadline: float = 10.0
    """How long the leader keeps trying to renew before it gives up leading."""
    retry_period: float = 2.0
    """How often the leader renews and a standby tries to acquire."""


def new_identity() -> str:
    """hostname (the pod name in a cluster) and a random suffix: two processes never share one."""
    return f"{socket.gethostname()}_{secrets.token_hex(4)}"


def micro_time(moment: datetime) -> str:
    """Kubernetes MicroTime: RFC 3339 with microseconds, UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _wall() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    """Acquires, renews and releases one Lease; `leading` says whether this process may write."""

    def __init__(
        self,
        api: LeaseApi,
        config: LeaderElectionConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = _wall,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.api = api
        self.config = config
        self._clock = clock
        self._wall = wall
        self._sleep = sleep
        self._jitter = jitter
        self.leading = False
        self.holder = ""
        """The holder named by the last record seen ("" when free or not read yet)."""
        self.transitions = 0
        self._observed: dict[str, Any] | None = None
        """The last record (Lease spec) seen, and when (local monotonic clock) it was first seen."""
        self._observed_at = 0.0
        self._renewed_at = 0.0
        """Local time at which the last successful acquire/renew request was *sent* (conservative)."""
        self._lost_to = ""

    @property
    def identity(self) -> str:
        return self.config.identity

    def _record(self, current: dict[str, Any], now: datetime) -> dict[str, Any]:
        ours = current.get("holderIdentity") == self.identity
        transitions = int(current.get("leaseTransitions") or 0)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.config.lease_duration)),
            "acquireTime": current.get("acquireTime")
            if ours and current.get("acquireTime")
            else micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": transitions if ours else transitions + 1,
        }

    def _manifest(self, spec: dict[str, Any], resource_version: str | None = None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.config.name, "namespace": self.config.namespace}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        return {"apiVersion": LEASE_API_VERSION, "kind": "Lease", "metadata": metadata, "spec": spec}

    def _observe(self, spec: dict[str, Any], at: float) -> None:
        if spec != self._observed:
            self._observed = spec
            self._observed_at = at
        self.holder = str(spec.get("holderIdentity") or "")
        self.transitions = int(spec.get("leaseTransitions") or 0)

    async def try_acquire_or_renew(self) -> bool:
        """One attempt (client-go's tryAcquireOrRenew): True when this process holds the lease now.

        A False never raises: a 409, another holder or an unreachable API server all mean "not now".
        When this process was leading and the lease names someone else, `leading` turns False.
        """
        sent_at = self._clock()
        try:
            lease = await self.api.get(LEASE_API_VERSION, "Lease", self.config.namespace, self.config.name)
            if lease is None:
                spec = self._record({}, self._wall())
                spec["leaseTransitions"] = 0
                created = await self.api.create(self._manifest(spec))
                return self._won(created.get("spec") or spec, sent_at)
            current: dict[str, Any] = dict(lease.get("spec") or {})
            # Seen changing now (after the GET), not when the request started: a later start of the
            # expiry countdown is the safe side.
            self._observe(current, self._clock())
            holder = self.holder
            if holder and holder != self.identity:
                if self.leading:
                    self.leading = False
                    self._lost_to = holder
                    return False
                duration = float(current.get("leaseDurationSeconds") or 0)
                if self._observed_at + duration > self._clock():
                    return False  # held, and not expired by our clock
                log.info("lease %s held by %s expired; taking it over", self._lease_name(), holder)
            spec = self._record(current, self._wall())
            resource_version = (lease.get("metadata") or {}).get("resourceVersion")
            replaced = await self.api.replace(self._manifest(spec, resource_version))
            return self._won(replaced.get("spec") or spec, sent_at)
        except ApiError as exc:
            if exc.code == 409:
                log.debug("lease %s: another replica wrote first (409)", self._lease_name())
            else:
                log.warning("lease %s: API error %s: %s", self._lease_name(), exc.code, exc.message)
            return False
        except Exception as exc:  # unreachable API server, a bad answer, a failed login: not now
            log.warning("lease %s: %s: %s", self._lease_name(), type(exc).__name__, exc)
            return False

    def _won(self, spec: dict[str, Any], sent_at: float) -> bool:
        self._observed = dict(spec)
        self._observed_at = self._clock()
        self.holder = self.identity
        self.transitions = int(spec.get("leaseTransitions") or 0)
        self._renewed_at = sent_at
        if not self.leading:
            log.info(
                "leading: lease %s acquired by %s (transitions %d)",
                self._lease_name(),
                self.identity,
                self.transitions,
            )
        self.leading = True
        return True

    def _lease_name(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"

    async def acquire(self) -> None:
        """Return once this process holds the lease (retrying every retry period, with jitter)."""
        log.info("waiting to lead: lease %s, identity %s", self._lease_name(), self.identity)
        announced = ""
        while True:
            try:
                async with asyncio.timeout(self.config.renew_deadline):
                    if await self.try_acquire_or_renew():
                        return
            except TimeoutError:
                log.warning("lease %s: no answer within %gs", self._lease_name(), self.config.renew_deadline)
            if self.holder and self.holder != announced:
                log.info("standby: lease %s is held by %s", self._lease_name(), self.holder)
                announced = self.holder
            await self._sleep(self.config.retry_period * (1 + JITTER_FACTOR * self._jitter()))

    async def hold(self) -> NoReturn:
        """Renew every retry period while leading; raise `LeadershipLost` as soon as it is lost.

        Lost means: the lease names another holder, or no renewal succeeded within renew_deadline of
        the last successful one (measured from when that request was sent).
        """
        if not self.leading:
            raise LeadershipLost(f"lease {self._lease_name()} is not held")
        while True:
            await self._sleep(self.config.retry_period)
            remaining = self._renewed_at + self.config.renew_deadline - self._clock()
            renewed = False
            if remaining > 0:
                try:
                    async with asyncio.timeout(remaining):
                        renewed = await self.try_acquire_or_renew()
                except TimeoutError:
                    renewed = False
            if self._lost_to:
                raise LeadershipLost(f"lease {self._lease_name()} is now held by {self._lost_to}")
            if not renewed and self._clock() - self._renewed_at >= self.config.renew_deadline:
                self.leading = False
                raise LeadershipLost(
                    f"lease {self._lease_name()} not renewed within {self.config.renew_deadline:g}s"
                )

    async def release(self) -> bool:
        """Give the lease up (clean shutdown, after the last write): a standby takes over at once.

        Conditional like every write: when the lease no longer names this process, nothing is written.
        """
        if not self.leading:
            return False
        self.leading = False
        try:
            async with asyncio.timeout(max(self.config.renew_deadline, 1.0)):
                lease = await self.api.get(
                    LEASE_API_VERSION, "Lease", self.config.namespace, self.config.name
                )
                current: dict[str, Any] = dict((lease or {}).get("spec") or {})
                if lease is None or current.get("holderIdentity") != self.identity:
                    return False
                now = micro_time(self._wall())
                spec = {
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": int(current.get("leaseTransitions") or 0),
                }
                await self.api.replace(
                    self._manifest(spec, (lease.get("metadata") or {}).get("resourceVersion"))
                )
        except Exception as exc:
            log.warning("lease %s: release failed (%s); it expires on its own", self._lease_name(), exc)
            return False
        self.holder = ""
        log.info("lease %s released by %s", self._lease_name(), self.identity)
        return True

    def state(self) -> dict[str, Any]:
        """For /stats."""
        return {
            "identity": self.identity,
            "lease": self._lease_name(),
            "leading": self.leading,
            "holder": self.holder,
            "transitions": self.transitions,
        }
