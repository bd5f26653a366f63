"""Fixtures for the conformance tests: suite results per (target, spec version), computed once."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import pytest

from tests.conformance import harness


@pytest.fixture(scope="session")
def fixture_url() -> Iterator[str]:
    with harness.fixture_http() as url:
        yield url


@pytest.fixture(scope="session")
def proxy_url() -> Iterator[str]:
    port = harness.free_port()
    cmd = [
        sys.executable,
        "-m",
        "mcpfleet.cli.main",
        "proxy",
        "--port",
        str(port),
        "--",
        *harness.fixture_stdio_command(),
    ]
    with harness.serving(cmd, f"http://127.0.0.1:{port}/health"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="session")
def remote_proxy_url(fixture_url: str) -> Iterator[str]:
    port = harness.free_port()
    cmd = [sys.executable, "-m", "mcpfleet.cli.main", "proxy", "--port", str(port), "--remote", fixture_url]
    with harness.serving(cmd, f"http://127.0.0.1:{port}/health"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="session")
def supervised_proxy_url() -> Iterator[str]:
    with harness.supervised_proxy() as url:
        yield url


@pytest.fixture(scope="session")
def suite_results(request: pytest.FixtureRequest) -> Callable[[str, str], harness.SuiteResult]:
    """Results per (target, spec version); each target's server starts on first use only."""
    cache: dict[tuple[str, str], harness.SuiteResult] = {}
    fixtures = {
        "fixture-direct": "fixture_url",
        "proxy": "proxy_url",
        "remote-proxy": "remote_proxy_url",
        "supervised-proxy": "supervised_proxy_url",
    }

    def get(target: str, spec_version: str) -> harness.SuiteResult:
        if (target, spec_version) not in cache:
            url = request.getfixturevalue(fixtures[target])
            cache[(target, spec_version)] = harness.run_suite(url, spec_version)
        return cache[(target, spec_version)]

    return get
