"""The one backoff policy (`mcpfleet.backoff`): delays, caps, jitter bounds, stable-run reset."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.backoff import Backoff


def test_delays_double_from_initial_up_to_the_cap() -> None:
    policy = Backoff(initial=0.5, factor=2, maximum=4)
    assert [policy.delay(n) for n in range(0, 7)] == [0.0, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_a_long_outage_does_not_overflow() -> None:
    assert Backoff(initial=0.2, maximum=5.0).delay(10**9) == 5.0


def test_a_stable_run_resets_the_count_and_a_quick_crash_adds_one() -> None:
    policy = Backoff(stable_after=30)
    assert policy.failures_after(5, ran_for=31.0) == 1
    assert policy.failures_after(5, ran_for=2.0) == 6


@pytest.mark.parametrize(
    "kwargs", [{"initial": -1}, {"maximum": -1}, {"factor": 0.5}, {"jitter": 1.5}, {"jitter": -0.1}]
)
def test_a_nonsensical_policy_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        Backoff(**kwargs)


@given(
    failures=st.integers(min_value=-5, max_value=10_000),
    jitter=st.floats(min_value=0, max_value=1),
    draw=st.floats(min_value=0, max_value=1, exclude_max=True),
)
def test_jittered_delays_stay_between_the_jittered_floor_and_the_exact_delay(
    failures: int, jitter: float, draw: float
) -> None:
    exact = Backoff(initial=0.2, maximum=5.0)
    jittered = Backoff(initial=0.2, maximum=5.0, jitter=jitter, random=lambda: draw)
    value = jittered.delay(failures)
    assert exact.delay(failures) * (1 - jitter) - 1e-12 <= value <= exact.delay(failures)
    assert 0.0 <= value <= 5.0
