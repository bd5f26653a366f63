"""The MCP conformance suite against the fixture server, directly and behind `mcpfleet proxy`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conformance import harness

Results = Callable[[str, str], harness.SuiteResult]


def _report(result: harness.SuiteResult) -> str:
    passed, failed = result.totals()
    lines = [f"{result.url} @ {result.spec_version}: {passed} passed, {failed} failed"]
    lines += [f"  FAIL {c.key}: {c.message[:300]}" for c in result.checks if c.status == "FAILURE"]
    return "\n".join(lines)


@pytest.mark.parametrize("spec_version", harness.SPEC_VERSIONS)
@pytest.mark.parametrize("target", ["fixture-direct", "proxy", "remote-proxy", "supervised-proxy"])
def test_failures_match_expected(suite_results: Results, target: str, spec_version: str) -> None:
    result = suite_results(target, spec_version)
    expected = set(harness.expected_failures(target, spec_version))
    failed = result.failed_checks()
    assert failed - expected == set(), f"unexpected failures\n{_report(result)}"
    assert expected - failed == set(), f"stale expected-failures entries (they pass now)\n{_report(result)}"
    passed, _ = result.totals()
    # Guard against a run that silently selected (almost) nothing.
    assert passed >= 70, _report(result)


@pytest.mark.parametrize("spec_version", harness.SPEC_VERSIONS)
@pytest.mark.parametrize("target", ["proxy", "remote-proxy", "supervised-proxy"])
def test_proxy_is_transparent(suite_results: Results, target: str, spec_version: str) -> None:
    """Every check the fixture passes directly also passes through the proxy (stdio and remote modes,
    and the stdio proxy hosted in-process by `mcpfleet up`'s supervisor)."""
    direct = suite_results("fixture-direct", spec_version)
    proxied = suite_results(target, spec_version)
    lost = direct.passed_checks() - proxied.passed_checks()
    assert lost == set(), f"checks lost behind the proxy: {sorted(lost)}\n{_report(proxied)}"
