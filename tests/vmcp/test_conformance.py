"""The MCP conformance suite through the gateway: it must pass every check the fixture passes directly."""

from __future__ import annotations

import json
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


PERMIT_ALL = ["permit(principal, action, resource);"]


@pytest.fixture(scope="module")
def policy_url(urls: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The gateway over the same fixture with a permit-all Cedar policy and audit on (to a file)."""
    folder = tmp_path_factory.mktemp("vmcp-policy")
    port = harness.free_port()
    cfg = folder / "vmcp.yaml"
    config = {
        "name": "conformance-policy",
        "backends": [{"name": "fixture", "url": urls["fixture-direct"]}],
        "aggregation": {
            "conflictResolution": "priority",
            "conflictResolutionConfig": {"priorityOrder": ["fixture"]},
        },
        "authz": {"version": "1.0", "type": "cedarv1", "cedar": {"policies": PERMIT_ALL}},
        "audit": {"enabled": True, "logFile": str(folder / "audit.jsonl")},
    }
    cfg.write_text(json.dumps(config))
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
        yield f"http://127.0.0.1:{port}/mcp", folder


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


@pytest.mark.parametrize("spec_version", harness.SPEC_VERSIONS)
def test_gateway_with_policy_and_audit_is_lossless(
    results: Callable[[str, str], harness.SuiteResult], policy_url: tuple[str, Path], spec_version: str
) -> None:
    """A permit-all Cedar policy and audit on lose no check the plain gateway passes; audit lines appear."""
    url, folder = policy_url
    plain = results("vmcp", spec_version)
    with_policy = harness.run_suite(url, spec_version)
    lost = plain.passed_checks() - with_policy.passed_checks()
    assert lost == set(), f"checks lost with policy and audit on: {sorted(lost)}\n{_report(with_policy)}"
    events = [json.loads(line) for line in (folder / "audit.jsonl").read_text().splitlines()]
    assert any(e["eventType"] == "mcp_tool_call" and e["outcome"] == "success" for e in events)
    assert not any(e["outcome"] == "denied" for e in events)
