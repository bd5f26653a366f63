"""Property-based fuzzing of the vMCP gateway's JSON-RPC front over real HTTP, both protocol eras.

Generated: envelopes with every member optional and wrongly typed (ids, methods, params shaped
like the fields the gateway and the SDK types read), batches, scalars, raw garbage, nesting up to
600 levels, and Content-Type variants. Every answer: no 5xx, no traceback in the body, no
traceback logged; after every case a well-formed tools/list is still answered. The number of
generated cases is checked by the last test (`MIN_CASES` per era).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.hostile import LEGACY, MODERN, Counter, report_counts, run_fuzz, running
from tests.vmcp.test_hostile import start_gateway

MIN_CASES = 500
COUNTERS = {LEGACY: Counter(), MODERN: Counter()}


@pytest.fixture(scope="module")
def vmcp() -> Iterator[str]:
    with running(start_gateway) as base:
        yield base


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_fuzz_envelope_and_params(vmcp: str, era: str) -> None:
    run_fuzz(vmcp, era, COUNTERS[era], MIN_CASES)


def test_case_counts() -> None:
    report_counts("vMCP", COUNTERS, MIN_CASES)
