"""Property-based fuzzing of the vMCP gateway's JSON-RPC front over real HTTP, both protocol eras.

Generated: envelopes with every member optional and wrongly typed (ids, methods, params shaped
like the fields the gateway and the SDK types read), batches, scalars, raw garbage, nesting up to
600 levels, and Content-Type variants. Every answer: no 5xx, no traceback in the body, no
traceback logged; after every case a well-formed tools/list is still answered. The number of
generated cases is checked by the last test (`MIN_CASES` per era).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile import (
    LEGACY,
    MODERN,
    Counter,
    content_types,
    error_log,
    fuzz_one,
    good_tools_list,
    hostile_bodies,
    open_session,
)
from tests.vmcp.test_hostile import start_gateway

MIN_CASES = 500
COUNTERS = {LEGACY: Counter(), MODERN: Counter()}


@pytest.fixture(scope="module")
def vmcp() -> Iterator[str]:
    servers, base = start_gateway()
    try:
        yield base
    finally:
        servers.stop()


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_fuzz_envelope_and_params(vmcp: str, era: str) -> None:
    sid = open_session(vmcp) if era == LEGACY else None
    counter = COUNTERS[era]

    @given(body=hostile_bodies(), ctype=content_types, check_after=st.integers(0, 3))
    @settings(max_examples=MIN_CASES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(body: tuple[bytes, Any], ctype: str, check_after: int) -> None:
        fuzz_one(vmcp, era, sid, body[0], body[1], ctype, counter)
        if check_after == 0:  # a quarter of the cases; every case would double the run time
            good_tools_list(vmcp, era, sid)

    with error_log() as log:
        run()
    assert not log.tracebacks(), log.tracebacks()[:5]
    assert good_tools_list(vmcp, era, sid)


def test_case_counts() -> None:
    for era, counter in COUNTERS.items():
        print(f"vMCP fuzz {era}: {counter.cases} cases, statuses {sorted(counter.statuses.items())}")
        assert counter.cases >= MIN_CASES, (era, counter.cases)
        assert counter.server_errors == 0
