"""Property-based fuzzing of the proxy's streamable-HTTP endpoint over real HTTP, both eras.

The same generated inputs as the vMCP suite (tests/hostile.py): envelopes with every member
optional and wrongly typed, params shaped like the fields MCP methods read, batches, scalars,
garbage, nesting up to 600 levels, Content-Type variants. Every answer: no 5xx, no traceback in
the body or the log; a well-formed tools/list is still answered afterwards. The number of
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
from tests.proxy.test_hostile import start_proxy

MIN_CASES = 500
COUNTERS = {LEGACY: Counter(), MODERN: Counter()}


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    servers, base = start_proxy()
    try:
        yield base
    finally:
        servers.stop()


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_fuzz_envelope_and_params(proxy: str, era: str) -> None:
    sid = open_session(proxy) if era == LEGACY else None
    good_tools_list(proxy, era, sid)  # the child of this era is up before the clock runs
    counter = COUNTERS[era]

    @given(body=hostile_bodies(), ctype=content_types, check_after=st.integers(0, 3))
    @settings(max_examples=MIN_CASES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(body: tuple[bytes, Any], ctype: str, check_after: int) -> None:
        fuzz_one(proxy, era, sid, body[0], body[1], ctype, counter)
        if check_after == 0:
            good_tools_list(proxy, era, sid)

    with error_log() as log:
        run()
    assert not log.tracebacks(), log.tracebacks()[:5]
    assert good_tools_list(proxy, era, sid)


def test_case_counts() -> None:
    for era, counter in COUNTERS.items():
        print(f"proxy fuzz {era}: {counter.cases} cases, statuses {sorted(counter.statuses.items())}")
        assert counter.cases >= MIN_CASES, (era, counter.cases)
        assert counter.server_errors == 0
