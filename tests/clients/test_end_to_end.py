"""The loop of issue 30 as a new user runs it, each command the real one in a subprocess, with a
temporary HOME and MCPFLEET_HOME: `mcpfleet search time`, `mcpfleet run time`,
`mcpfleet client setup cursor` (Cursor's folder made first, so it is found), then a tool call with
the MCP SDK client through the URL written into Cursor's file; `mcpfleet down` in any case."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from mcp.client.client import Client


def _environment(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    real_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    environ = {
        **os.environ,
        "HOME": str(home),
        "MCPFLEET_HOME": str(tmp_path / "mcpfleet"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        # The package caches stay the machine's (a cached `uvx mcp-server-time` starts offline).
        "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(real_cache / "uv"),
        "npm_config_cache": os.environ.get("npm_config_cache") or str(Path.home() / ".npm"),
        "COLUMNS": "200",
    }
    environ.pop("MCPFLEET_STATE_DIR", None)
    environ.pop("CODEX_HOME", None)
    return environ


def _mcpfleet(environ: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpfleet.cli.main", *args],
        env=environ,
        cwd=environ["HOME"],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


async def _current_time(url: str) -> str:
    async with Client(url, read_timeout_seconds=120) as client:
        result = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
    assert not result.is_error, result
    return " ".join(getattr(part, "text", "") for part in result.content)


def test_search_run_client_setup_cursor_then_a_tool_call(tmp_path: Path) -> None:
    environ = _environment(tmp_path)
    cursor = Path(environ["HOME"]) / ".cursor"
    cursor.mkdir(parents=True)
    state = Path(environ["MCPFLEET_HOME"]) / "state"
    try:
        found = _mcpfleet(environ, "search", "time")
        assert found.returncode == 0, found.stderr
        assert "mcp-server-time" in found.stdout
        ran = _mcpfleet(environ, "run", "time", timeout=600)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "mcpfleet client setup" in ran.stdout
        setup = _mcpfleet(environ, "client", "setup", "cursor")
        assert setup.returncode == 0, setup.stderr
        written = json.loads((cursor / "mcp.json").read_text())
        url = written["mcpServers"]["mcpfleet"]["url"]
        assert url.startswith("http://127.0.0.1:") and url in setup.stdout
        answer = asyncio.run(_current_time(url))
        assert "UTC" in answer, answer
        listed = _mcpfleet(environ, "client", "list", "-o", "json")
        rows = {row["client"]: row for row in json.loads(listed.stdout)["clients"]}
        assert rows["cursor"]["found"] and rows["cursor"]["entry"] == "current"
    finally:
        down = _mcpfleet(environ, "down", "--state-dir", str(state), timeout=180)
        assert down.returncode == 0 or not state.exists(), down.stderr
