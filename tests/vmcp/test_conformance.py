"""The MCP conformance suite through the gateway: it must pass every check the fixture passes directly."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conformance import harness

EXPECTED = Path(__file__).with_name("conformance-expected-failures.yaml")


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with harness.fixture_http() as fixture_url:
        port = harness.free_port()
        cfg = tmp_path_factory.mktemp("vmcp") / "vmcp.yaml"
        cfg.write_text(
            "name: conformance\n"
            f"backends:\n  - {{name: fixture, url: '{fixture_url}'}}\n"
            "aggregation:\n  conflictResolution: priority\n"
            "  conflictResolutionConfig: {priorityOrder: [fixture]}\n"
        )
        cmd = [
            sys.executable,
            "-m",
            "mcpfleet.cli.main",
            "vmcp",
            "serve",
            "--config",
            str(cfg),
            "--port",
            str(port),
        ]
        with harness.serving(cmd, f"http://127.0.0.1:{port}/health"):
            yield {"fixture-direct": fixture_url, "vmcp": f"http://127.0.0.1:{port}/mcp"}


@pytest.fixture(scope="module")
def results(urls: dict[str, str]) -> Callable[[str, str], harness.SuiteResult]:
    cache: dict[tuple[str, str], harness.SuiteResult] = {}

    def get(target: str, version: str) -> harness.SuiteResult:
        if (target, version) not in cache:
            cache[(target, version)] = harness.run_suite(urls[target], version)
        return cache[(target, version)]

    return get


def _report(r: harness.SuiteResult) -> str:
    passed, failed = r.totals()
    lines = [f"{r.url} @ {r.spec_version}: {passed} passed, {failed} failed"]
    return "\n".join(
        lines + [f"  FAIL {c.key}: {c.message[:300]}" for c in r.checks if c.status == "FAILURE"]
    )


@pytest.mark.parametrize("spec_version", harness.SPEC_VERSIONS)
def test_gateway_passes_what_the_fixture_passes(
    results: Callable[[str, str], harness.SuiteResult], spec_version: str
) -> None:
    direct = results("fixture-direct", spec_version)
    through = results("vmcp", spec_version)
    expected = harness.expected_failures("vmcp", spec_version, EXPECTED)
    failed = through.failed_checks()
    assert failed - set(expected) == set(), f"unexpected failures\n{_report(through)}"
    assert set(expected) - failed == set(), f"stale expected-failures entries\n{_report(through)}"
    lost = direct.passed_checks() - through.passed_checks() - set(expected)
    assert lost == set(), f"checks lost behind the gateway: {sorted(lost)}\n{_report(through)}"
    passed, _ = through.totals()
    assert passed >= (70 if spec_version == "2025-11-25" else 140), _report(through)
    print(f"\nvMCP conformance {spec_version}: {_report(through)}; fixture directly: {direct.totals()}")
