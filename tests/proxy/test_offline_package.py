"""A `uvx://` package that is not in the offline cache: the runner says so once and stops
(docs/dev-cluster.md), instead of restarting it forever behind "0/1 replicas ready"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcpfleet.proxy.unavailable import offline_miss

MCPFLEET = Path(sys.executable).parent / "mcpfleet"
UVX = Path(sys.executable).parent / "uvx"


def test_runner_gives_up_on_a_package_missing_offline(tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    env = {
        **os.environ,
        "PATH": f"{UVX.parent}:{os.environ.get('PATH', '')}",
        "UV_OFFLINE": "1",
        "UV_CACHE_DIR": str(tmp_path / "empty-uv-cache"),
        "MCPFLEET_TERMINATION_LOG": str(log),
    }
    proc = subprocess.run(
        [str(MCPFLEET), "proxy", "--port", "0", "--", "uvx", "mcp-server-not-in-any-cache"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    message = log.read_text()
    assert message.startswith(
        "package mcp-server-not-in-any-cache (uvx://mcp-server-not-in-any-cache) is not available offline in the image"
    ), message
    assert "not found in the cache" in message, message
    assert "is not available offline in the image" in proc.stderr, proc.stderr[-2000:]


def test_only_offline_misses_are_given_up() -> None:
    uv_miss = [
        "  x No solution found when resolving tool dependencies:",
        "  ╰─▶ Because pkg was not found in the cache and you require pkg, we can conclude that your requirements are unsatisfiable.",
        "      hint: Packages were unavailable because the network was disabled.",
    ]
    assert offline_miss(["uvx", "pkg"], uv_miss, {"UV_OFFLINE": "1"})
    # Online, the same package may come back (a registry outage): keep restarting.
    assert offline_miss(["uvx", "pkg"], uv_miss, {}) is None
    assert offline_miss(["python", "server.py"], uv_miss, {"UV_OFFLINE": "1"}) is None
    npm = [
        "npm error code ENOTCACHED",
        "npm error request to https://registry.npmjs.org/x failed: cache mode is 'only-if-cached'",
    ]
    got = offline_miss(["npx", "-y", "@scope/x@1.0"], npm, {"NPM_CONFIG_OFFLINE": "true"})
    assert got is not None and got.startswith("package @scope/x@1.0 (npx://@scope/x@1.0)")
    assert offline_miss(["npx", "-y", "x"], ["a crash"], {"NPM_CONFIG_OFFLINE": "true"}) is None
