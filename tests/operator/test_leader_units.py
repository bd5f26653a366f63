"""Unit tests (no cluster) of the leader election decisions: a fake Lease API with resourceVersion
semantics and a fake monotonic clock that the test moves by hand; the wall clocks of the two
candidates disagree by an hour to show that skew changes nothing."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.operator.leader import LeaderElectionConfig, LeaderElector, LeadershipLost
from mcpfleet.operator.settings import LeaderElectionSettings, from_environment
from mcpfleet.platform.kubernetes.api import ApiError


class FakeLeases:
    """One Lease store: GET, POST (409 if it exists), PUT (409 unless resourceVersion matches)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.calls: list[str] = []
        self.fail = False

    def _check(self) -> None:
        if self.fail:
            raise ApiError(503, "unavailable")

    async def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append("get")
        self._check()
        return copy.deepcopy(self.lease)

    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("create")
        self._check()
        if self.lease is not None:
            raise ApiError(409, "exists", "AlreadyExists")
        return self._store(manifest)

    async def replace(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("update")
        self._check()
        assert self.lease is not None
        if manifest["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "the object has been modified", "Conflict")
        return self._store(manifest)

    def _store(self, manifest: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(manifest)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.lease = stored
        return copy.deepcopy(stored)

    @property
    def spec(self) -> dict[str, Any]:
        assert self.lease is not None
        spec: dict[str, Any] = self.lease["spec"]
        return spec


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _elector(
    api: FakeLeases, identity: str, clock: Clock, skew: timedelta = timedelta(0), **durations: float
) -> LeaderElector:
    config = LeaderElectionConfig(
        namespace="ns",
        name="mcpfleet-operator",
        identity=identity,
        lease_duration=durations.get("lease", 15.0),
        renew_deadline=durations.get("renew", 10.0),
        retry_period=durations.get("retry", 2.0),
    )
    # The wall clock follows the fake clock (2026-01-01T00:00:00Z at 1000.0), shifted by `skew`.
    epoch = datetime(2026, 1, 1, tzinfo=UTC) - timedelta(seconds=1000) + skew
    return LeaderElector(
        api, config, clock=clock, wall=lambda: epoch + timedelta(seconds=clock.now), jitter=lambda: 0.0
    )


async def test_first_candidate_creates_the_lease_and_a_second_waits_for_expiry() -> None:
    api, clock = FakeLeases(), Clock()
    a = _elector(api, "a", clock)
    b = _elector(api, "b", clock, skew=timedelta(hours=1))  # its wall clock is an hour ahead
    assert await a.try_acquire_or_renew() and a.leading
    assert api.spec["holderIdentity"] == "a" and api.spec["leaseDurationSeconds"] == 15
    assert api.spec["leaseTransitions"] == 0
    assert api.spec["renewTime"] == "2026-01-01T00:00:00.000000Z" == api.spec["acquireTime"]
    # b sees a fresh lease: it waits, without writing, however far its own wall clock is ahead.
    assert not await b.try_acquire_or_renew() and not b.leading and b.holder == "a"
    assert api.calls == ["get", "create", "get"]
    clock.now += 14.9
    assert not await b.try_acquire_or_renew()
    # a renews: b's countdown restarts from the moment it sees the change.
    assert await a.try_acquire_or_renew()
    acquired = api.spec["acquireTime"]
    assert not await b.try_acquire_or_renew()
    clock.now += 14.9
    assert not await b.try_acquire_or_renew()
    writes_before = sum(c in ("create", "update") for c in api.calls)
    assert writes_before == 2  # the create and one renewal; b never wrote
    # a stops renewing (crashed): 15 s after b last saw a change, b takes over.
    clock.now += 0.2
    assert await b.try_acquire_or_renew() and b.leading
    assert api.spec["holderIdentity"] == "b" and api.spec["leaseTransitions"] == 1
    assert api.spec["acquireTime"] != acquired
    # a comes back: it sees another holder and stops leading at once, without writing.
    calls = len(api.calls)
    assert not await a.try_acquire_or_renew() and not a.leading
    assert api.calls[calls:] == ["get"]


async def test_a_renewal_keeps_acquire_time_and_transitions() -> None:
    api, clock = FakeLeases(), Clock()
    a = _elector(api, "a", clock)
    assert await a.try_acquire_or_renew()
    first = copy.deepcopy(api.spec)
    clock.now += 2
    assert await a.try_acquire_or_renew()
    assert api.spec["acquireTime"] == first["acquireTime"]
    assert api.spec["renewTime"] == "2026-01-01T00:00:02.000000Z"
    assert api.spec["leaseTransitions"] == first["leaseTransitions"]


async def test_conflict_means_someone_else_won_and_nothing_is_overwritten() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = _elector(api, "a", clock), _elector(api, "b", clock)
    assert await a.try_acquire_or_renew()
    clock.now += 20  # expired for both candidates that look now
    assert not await b.try_acquire_or_renew()  # first look: b starts its countdown now
    clock.now += 20

    # b reads the expired lease; before b's write lands, c takes it (resourceVersion moves on).
    c = _elector(api, "c", clock)
    original_get = api.get

    async def racing_get(*args: Any) -> dict[str, Any] | None:
        seen = await original_get(*args)
        api.get = original_get  # type: ignore[method-assign]
        c._observed, c._observed_at = copy.deepcopy(api.spec), clock.now - 100
        assert await c.try_acquire_or_renew()
        return seen

    api.get = racing_get  # type: ignore[method-assign]
    assert not await b.try_acquire_or_renew()
    assert not b.leading and api.spec["holderIdentity"] == "c"

    # Two candidates creating the lease at once: the second POST gets 409 and loses.
    api2 = FakeLeases()
    x, y = _elector(api2, "x", clock), _elector(api2, "y", clock)
    get = api2.get

    async def both_see_nothing(*args: Any) -> dict[str, Any] | None:
        return None

    api2.get = both_see_nothing  # type: ignore[method-assign]
    assert await x.try_acquire_or_renew()
    assert not await y.try_acquire_or_renew() and not y.leading
    api2.get = get  # type: ignore[method-assign]
    assert api2.spec["holderIdentity"] == "x"


async def test_release_lets_a_standby_take_over_at_once() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = _elector(api, "a", clock), _elector(api, "b", clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert await a.release() and not a.leading
    assert api.spec["holderIdentity"] == "" and api.spec["leaseDurationSeconds"] == 1
    assert api.spec["leaseTransitions"] == 0
    assert await b.try_acquire_or_renew()  # no waiting: the lease names nobody
    assert api.spec["holderIdentity"] == "b" and api.spec["leaseTransitions"] == 1
    # Releasing a lease held by someone else writes nothing.
    a.leading = True
    calls = len(api.calls)
    assert not await a.release()
    assert api.calls[calls:] == ["get"] and api.spec["holderIdentity"] == "b"


async def test_hold_gives_up_after_the_renew_deadline_and_when_taken() -> None:
    # Real (short) time here: hold() bounds every attempt with asyncio.timeout on the loop clock.
    api = FakeLeases()
    loop = asyncio.get_running_loop()
    config = LeaderElectionConfig("ns", "l", "a", lease_duration=1.0, renew_deadline=0.4, retry_period=0.05)
    a = LeaderElector(api, config, clock=loop.time)
    assert await a.try_acquire_or_renew()
    api.fail = True  # the API server stops answering successfully
    started = loop.time()
    with pytest.raises(LeadershipLost, match=r"not renewed within 0\.4s"):
        await asyncio.wait_for(a.hold(), timeout=5)
    assert 0.35 <= loop.time() - started < 2.0 and not a.leading

    # Another holder in the lease: lost at the next renewal, not at the deadline.
    api.fail = False
    b = LeaderElector(api, LeaderElectionConfig("ns", "l", "b", 1.0, 0.4, 0.05), clock=loop.time)
    api.lease = None
    assert await b.try_acquire_or_renew()
    assert api.lease is not None
    api.lease["spec"]["holderIdentity"] = "intruder"
    with pytest.raises(LeadershipLost, match="now held by intruder"):
        await asyncio.wait_for(b.hold(), timeout=5)
    assert api.lease["spec"]["holderIdentity"] == "intruder"


async def test_acquire_retries_until_the_holder_is_gone() -> None:
    api, clock = FakeLeases(), Clock()
    a = _elector(api, "a", clock)
    assert await a.try_acquire_or_renew()
    b = _elector(api, "b", clock)
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.now += seconds

    b._sleep = sleep
    b._jitter = lambda: 0.5
    await asyncio.wait_for(b.acquire(), timeout=5)
    assert b.leading and api.spec["holderIdentity"] == "b"
    # Retries every retry period with client-go's jitter (2 s * (1 + 1.2 * 0.5) = 3.2 s), until 15 s
    # without a change had passed.
    assert sleeps and all(s == pytest.approx(3.2) for s in sleeps)
    assert 15 <= sum(sleeps) < 15 + 3.2


def test_leader_election_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("mcpfleet.operator.settings.SERVICE_ACCOUNT_NAMESPACE", tmp_path / "absent")
    settings = from_environment()
    assert settings.leader_election == LeaderElectionSettings()
    assert not settings.leader_election.enabled
    monkeypatch.setenv("MCPFLEET_LEADER_ELECT", "true")
    monkeypatch.setenv("MCPFLEET_LEADER_ELECTION_ID", "my-lease")
    ns_file = tmp_path / "namespace"
    ns_file.write_text("mcpfleet-system\n")
    monkeypatch.setattr("mcpfleet.operator.settings.SERVICE_ACCOUNT_NAMESPACE", ns_file)
    election = from_environment().leader_election
    assert election.enabled and election.name == "my-lease" and election.namespace == "mcpfleet-system"
    assert (election.lease_duration, election.renew_deadline, election.retry_period) == (15, 10, 2)
    assert not from_environment(leader_elect=False).leader_election.enabled
    custom = from_environment(
        leader_election_namespace="team-a",
        leader_election_lease_duration=4,
        leader_election_renew_deadline=3,
        leader_election_retry_period=0.5,
    ).leader_election
    assert custom.namespace == "team-a" and custom.lease_duration == 4 and custom.retry_period == 0.5
    with pytest.raises(ValueError, match="--leader-election-renew-deadline / MCPFLEET_LEADER_ELECTION_RENEW"):
        from_environment(leader_election_lease_duration=5, leader_election_renew_deadline=5)
    with pytest.raises(ValueError, match="--leader-election-retry-period / MCPFLEET_LEADER_ELECTION_RETRY"):
        from_environment(leader_election_retry_period=9)
    with pytest.raises(ValueError, match="--leader-election-namespace / MCPFLEET_LEADER_ELECTION_NAMESPACE"):
        from_environment(leader_election_namespace="Not_A_Namespace")
    with pytest.raises(ValueError, match="--leader-election-id / MCPFLEET_LEADER_ELECTION_ID"):
        from_environment(leader_election_id="bad name")
    monkeypatch.setenv("MCPFLEET_LEADER_ELECTION_LEASE_DURATION", "soon")
    with pytest.raises(ValueError, match="--leader-election-lease-duration / MCPFLEET_LEADER_ELECTION_LEASE"):
        from_environment()
    monkeypatch.delenv("MCPFLEET_LEADER_ELECTION_LEASE_DURATION")
    monkeypatch.setenv("MCPFLEET_LEADER_ELECT", "maybe")
    with pytest.raises(ValueError, match="--leader-elect / MCPFLEET_LEADER_ELECT"):
        from_environment()
    monkeypatch.setenv("MCPFLEET_LEADER_ELECT", "false")
    monkeypatch.setattr("mcpfleet.operator.settings.SERVICE_ACCOUNT_NAMESPACE", tmp_path / "absent")
    assert from_environment().leader_election.namespace == "default"
