"""Fixtures for the conformance tests: suite results per (target, spec version), computed once."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

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
def proxy_separate_url() -> Iterator[str]:
    """The stdio proxy with a second, native 2026-07-28 process (`--modern-era separate`)."""
    port = harness.free_port()
    cmd = [
        *[
            sys.executable,
            "-m",
            "mcpfleet.cli.main",
            "proxy",
            "--port",
            str(port),
            "--modern-era",
            "separate",
        ],
        "--",
        *harness.fixture_stdio_command(),
    ]
    with harness.serving(cmd, f"http://127.0.0.1:{port}/health"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="session")
def proxy_translate_url() -> Iterator[str]:
    """The stdio proxy with 2026-07-28 always translated onto one process (`--modern-era translate`)."""
    port = harness.free_port()
    command = harness.proxy_command(port, "--modern-era", "translate", "--", *harness.fixture_stdio_command())
    with harness.serving(command, f"http://127.0.0.1:{port}/health"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="session")
def vmcp_over_proxy_url(proxy_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The vMCP gateway in front of the stdio proxy (its default layout, `--modern-era auto`)."""
    port = harness.free_port()
    config = tmp_path_factory.mktemp("vmcp-over-proxy") / "vmcp.yaml"
    config.write_text(
        "name: conformance\n"
        f"backends:\n  - {{name: fixture, url: '{proxy_url}'}}\n"
        "aggregation:\n  conflictResolution: priority\n"
        "  conflictResolutionConfig: {priorityOrder: [fixture]}\n"
    )
    cmd = [sys.executable, "-m", "mcpfleet.cli.main", "vmcp", "serve", "--config", str(config)]
    with harness.serving([*cmd, "--port", str(port)], f"http://127.0.0.1:{port}/health"):
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
        "proxy-separate": "proxy_separate_url",
        "proxy-translate": "proxy_translate_url",
        "vmcp-over-proxy": "vmcp_over_proxy_url",
        "remote-proxy": "remote_proxy_url",
        "supervised-proxy": "supervised_proxy_url",
    }

    def get(target: str, spec_version: str) -> harness.SuiteResult:
        if (target, spec_version) not in cache:
            url = request.getfixturevalue(fixtures[target])
            cache[(target, spec_version)] = harness.run_suite(url, spec_version)
        return cache[(target, spec_version)]

    return get


PERMIT_ALL = {
    "version": "1.0",
    "type": "cedarv1",
    "cedar": {"policies": ["permit(principal, action, resource);"]},
}


@pytest.fixture(scope="session")
def policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A permit-all Cedar policy and audit on (to a file): what the policy variants of the proxy run with."""
    folder = tmp_path_factory.mktemp("policy")
    (folder / "authz.json").write_text(json.dumps(PERMIT_ALL))
    (folder / "audit.json").write_text(json.dumps({"enabled": True, "logFile": str(folder / "audit.jsonl")}))
    return folder


def _policy_args(folder: Path) -> list[str]:
    return ["--authz-config", str(folder / "authz.json"), "--audit-config", str(folder / "audit.json")]


@pytest.fixture(scope="session")
def policy_suite_results(
    fixture_url: str, policy_dir: Path
) -> Iterator[Callable[[str, str], harness.SuiteResult]]:
    """Suite results of the proxy (stdio and remote) with a permit-all policy and audit on."""
    port, remote_port = harness.free_port(), harness.free_port()
    base = [sys.executable, "-m", "mcpfleet.cli.main", "proxy"]
    stdio = [*base, "--port", str(port), *_policy_args(policy_dir), "--", *harness.fixture_stdio_command()]
    remote = [*base, "--port", str(remote_port), *_policy_args(policy_dir), "--remote", fixture_url]
    cache: dict[tuple[str, str], harness.SuiteResult] = {}
    with (
        harness.serving(stdio, f"http://127.0.0.1:{port}/health"),
        harness.serving(remote, f"http://127.0.0.1:{remote_port}/health"),
    ):
        urls = {
            "proxy-policy": f"http://127.0.0.1:{port}/mcp",
            "remote-proxy-policy": f"http://127.0.0.1:{remote_port}/mcp",
        }

        def get(target: str, spec_version: str) -> harness.SuiteResult:
            if (target, spec_version) not in cache:
                cache[(target, spec_version)] = harness.run_suite(urls[target], spec_version)
            return cache[(target, spec_version)]

        yield get
