"""The MCP conformance suite against the fixture server, directly and behind `mcpfleet proxy`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conformance import harness

Results = Callable[[str, str], harness.SuiteResult]


def _report(result: harness.SuiteResult) -> str:
    passed, failed = result.totals()
    lines = [f"{result.url} @ {result.spec_version}: {passed} passed, {failed} failed"]
    lines += [f"  FAIL {c.key}: {c.message[:300]}" for c in result.checks if c.status == "FAILURE"]
    return "\n".join(lines)


@pytest.mark.parametrize("spec_version", harness.SPEC_VERSIONS)
@pytest.mark.parametrize(
    "target",
    ["fixture-direct", "proxy", "proxy-separate", "proxy-translate", "remote-proxy", "supervised-proxy"],
)
def test_failures_match_expected(suite_results: Results, target: str, spec_version: str) -> None:
    result = suite_results(target, spec_version)
    expected = set(harness.expected_failures(target, spec_version))
    varying = harness.varying_checks("expected-failures.yaml", target, spec_version)
    failed = result.failed_checks()
    assert failed - expected == set(), f"unexpected failures\n{_report(result)}"
    assert expected - varying - failed == set(), (
        f"stale expected-failures entries (they pass now)\n{_report(result)}"
    )
    passed, _ = result.totals()
    # Guard against a run that silently selected (almost) nothing.
    assert passed >= 70, _report(result)


@pytest.mark.parametrize("spec_version", harness.SPEC_VERSIONS)
@pytest.mark.parametrize(
    "target",
    ["proxy", "proxy-separate", "proxy-translate", "remote-proxy", "supervised-proxy", "vmcp-over-proxy"],
)
def test_proxy_is_transparent(suite_results: Results, target: str, spec_version: str) -> None:
    """Every check the fixture passes directly also passes through the proxy (stdio and remote modes,
    the stdio proxy hosted in-process by `mcpfleet up`'s supervisor, the gateway in front of the
    stdio proxy), except, with the translation forced (`--modern-era translate`), exactly the
    translation losses listed in translation-losses.yaml. The default (`auto`) loses nothing: the
    fixture speaks 2026-07-28 itself, so the probe serves it natively."""
    direct = suite_results("fixture-direct", spec_version)
    proxied = suite_results(target, spec_version)
    lost = direct.passed_checks() - proxied.passed_checks()
    allowed, varying = set(), set()
    if target in TRANSLATING:
        allowed = set(harness.translation_losses(spec_version))
        varying = harness.varying_checks("translation-losses.yaml", spec_version)
    assert lost - allowed == set(), (
        f"checks lost behind the proxy: {sorted(lost - allowed)}\n{_report(proxied)}"
    )
    assert allowed - varying - lost == set(), (
        f"stale translation-losses entries (they pass now): {sorted(allowed - lost)}"
    )


TRANSLATING = ("proxy-translate",)
"""Targets where 2026-07-28 is translated onto the fixture's handshake-era connection."""


@pytest.mark.parametrize("spec_version", harness.SPEC_VERSIONS)
@pytest.mark.parametrize(
    ("target", "plain"), [("proxy-policy", "proxy"), ("remote-proxy-policy", "remote-proxy")]
)
def test_proxy_with_policy_and_audit_is_lossless(
    suite_results: Results,
    policy_suite_results: Results,
    policy_dir: Path,
    target: str,
    plain: str,
    spec_version: str,
) -> None:
    """A permit-all Cedar policy and audit on lose no check the plain proxy passes; audit lines appear."""
    without = suite_results(plain, spec_version)
    with_policy = policy_suite_results(target, spec_version)
    lost = without.passed_checks() - with_policy.passed_checks()
    assert lost == set(), f"checks lost with policy and audit on: {sorted(lost)}\n{_report(with_policy)}"
    assert with_policy.totals()[0] >= 70, _report(with_policy)
    events = [json.loads(line) for line in (policy_dir / "audit.jsonl").read_text().splitlines()]
    assert any(e["eventType"] == "mcp_tool_call" and e["outcome"] == "success" for e in events)
    assert not any(e["outcome"] == "denied" for e in events)
