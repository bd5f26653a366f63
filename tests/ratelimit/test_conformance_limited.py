"""The MCP conformance suite stays lossless through the gateway and the proxy with rate limits on
(limits high enough that the suite never meets them: what is tested is that the hook changes
nothing else). The gateway's buckets are in Redis (the multi-replica path), the proxy's in memory."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mcp.client.client import Client

from tests.conformance import harness
from tests.conftest import run_async
from tests.redis_server import start_redis
from tests.vmcp.test_conformance import _report

VMCP_EXPECTED = Path(__file__).parents[1] / "vmcp" / "conformance-expected-failures.yaml"
LIMITS = {
    "shared": {"maxTokens": 100000, "refillPeriod": "1m"},
    "perUser": {"maxTokens": 100000, "refillPeriod": "1m"},
    "tools": [{"name": "test_simple_text", "shared": {"maxTokens": 100000, "refillPeriod": "1m"}}],
}


def _first_requests(url: str) -> None:
    """One request of each protocol era before the suite starts: a fresh process's first request
    pays its lazy imports (seconds on a loaded machine), which would eat the suite's 20 s scenario
    budget."""

    async def both_eras() -> None:
        for mode in ("legacy", "2026-07-28"):
            async with Client(url, mode=mode) as c:  # type: ignore[arg-type]
                await c.list_tools()

    run_async(asyncio.wait_for(both_eras(), 240))


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("limited")
    redis = start_redis(tmp)
    try:
        with harness.fixture_http() as fixture_url:
            vmcp_port, proxy_port = harness.free_port(), harness.free_port()
            cfg = tmp / "vmcp.json"
            cfg.write_text(
                json.dumps(
                    {
                        "name": "conformance",
                        "backends": [{"name": "fixture", "url": fixture_url}],
                        "aggregation": {
                            "conflictResolution": "priority",
                            "conflictResolutionConfig": {"priorityOrder": ["fixture"]},
                        },
                        "rateLimiting": LIMITS,
                        "sessionStorage": {"provider": "redis", "address": f"127.0.0.1:{redis.port}"},
                    }
                )
            )
            run_config = tmp / "runconfig.json"
            run_config.write_text(json.dumps({"name": "fixture", "rateLimiting": LIMITS}))
            vmcp = [sys.executable, "-m", "mcpfleet.cli.main", "vmcp", "serve", "--config", str(cfg)]
            proxy = [sys.executable, "-m", "mcpfleet.cli.main", "proxy", "--run-config", str(run_config)]
            os.environ["MCPFLEET_REDIS_PASSWORD"] = redis.password
            try:
                with (
                    harness.serving(
                        [*vmcp, "--port", str(vmcp_port)], f"http://127.0.0.1:{vmcp_port}/health", 180
                    ),
                    harness.serving(
                        [*proxy, "--port", str(proxy_port), "--", *harness.fixture_stdio_command()],
                        f"http://127.0.0.1:{proxy_port}/health",
                        180,
                    ),
                ):
                    for url in (f"http://127.0.0.1:{vmcp_port}/mcp", f"http://127.0.0.1:{proxy_port}/mcp"):
                        _first_requests(url)
                    yield {
                        "fixture-direct": fixture_url,
                        "vmcp": f"http://127.0.0.1:{vmcp_port}/mcp",
                        "proxy": f"http://127.0.0.1:{proxy_port}/mcp",
                    }
            finally:
                del os.environ["MCPFLEET_REDIS_PASSWORD"]
    finally:
        redis.process.terminate()
        redis.process.wait(10)


@pytest.fixture(scope="module")
def results(urls: dict[str, str]) -> Callable[[str, str], harness.SuiteResult]:
    """Suite results per (target, spec version), each run once."""
    return functools.cache(lambda target, version: harness.run_suite(urls[target], version))


@pytest.mark.parametrize("spec_version", harness.SPEC_VERSIONS)
@pytest.mark.parametrize("target", ["vmcp", "proxy"])
def test_lossless_with_rate_limits_on(
    results: Callable[[str, str], harness.SuiteResult], target: str, spec_version: str
) -> None:
    direct = results("fixture-direct", spec_version)
    through = results(target, spec_version)
    # The gateway's known differences (its own expected-failures list) are the same with limits on;
    # the stdio proxy's default layout (`--modern-era auto`, docs/proxy.md) loses nothing.
    expected: set[str] = set()
    if target == "vmcp":
        expected = set(harness.expected_failures("vmcp", spec_version, VMCP_EXPECTED))
    lost = direct.passed_checks() - through.passed_checks() - expected
    assert lost == set(), f"checks lost with rate limits on: {sorted(lost)}\n{_report(through)}"
    passed, _ = through.totals()
    assert passed >= 70, _report(through)
