"""Property-based fuzzing of the proxy's streamable-HTTP endpoint over real HTTP, both eras.

The same generated inputs as the vMCP suite (tests/hostile.py): envelopes with every member
optional and wrongly typed, params shaped like the fields MCP methods read, batches, scalars,
garbage, nesting up to 600 levels, Content-Type variants. Every answer: no 5xx, no traceback in
the body or the log; a well-formed tools/list is still answered afterwards. The number of
generated cases is checked by the last test (`MIN_CASES` per era).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.hostile import LEGACY, MODERN, Counter, report_counts, run_fuzz, running
from tests.proxy.test_hostile import start_proxy

MIN_CASES = 400
COUNTERS = {LEGACY: Counter(), MODERN: Counter()}


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    with running(start_proxy) as base:
        yield base


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_fuzz_envelope_and_params(proxy: str, era: str) -> None:
    run_fuzz(proxy, era, COUNTERS[era], MIN_CASES)


def test_case_counts() -> None:
    report_counts("proxy", COUNTERS, MIN_CASES)
