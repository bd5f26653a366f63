"""The README quickstart under a real `mcpfleet up`: one process per stdio server, with clients of
both protocol eras connected to every server and to the gateway (issue 29).

`up` hosts each server's proxy in-process and launches the servers itself, so each launch of a
server is a direct child of `up` (the uvx / npx launcher, the server below it). Before, the first
2026-07-28 request started a second launch of the same server.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp.client.client import Client

from tests.local.conftest import Up
from tests.proxy.conftest import descendants

ROOT = Path(__file__).resolve().parents[2]
ERAS = ("legacy", "2026-07-28")
SERVERS = {"time": "mcp-server-time", "everything": "server-everything"}


def launches(up: Up, marker: str) -> list[str]:
    """Command lines of `up`'s direct children that launch the server named by `marker`."""
    return [
        cmd for pid, cmd in descendants(up.process.pid) if marker in cmd and _parent(pid) == up.process.pid
    ]


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


@pytest.mark.timeout(300)
async def test_quickstart_runs_one_process_per_server(
    tmp_path: Path, running_up: Callable[[dict[str, str]], Up]
) -> None:
    files = {path.name: path.read_text() for path in (ROOT / "examples" / "quickstart").glob("*.yaml")}
    assert shutil.which("npx") or (ROOT / "tools" / "node").exists(), "npx is needed for server-everything"
    up = running_up(files)
    for name in SERVERS:
        await up.wait_phase("MCPServer", name, {"Running"}, limit=240)
    gateway = await up.wait_phase("VirtualMCPServer", "gateway", {"Ready"}, limit=120)
    urls = {name: up.objects("MCPServer")[name]["url"] for name in SERVERS}
    for mode in ERAS:
        for name, url in [*urls.items(), ("gateway", gateway["url"])]:
            async with Client(url, mode=mode) as client:
                tools = await client.list_tools()
                assert tools.tools, f"{name} listed no tools in era {mode}"
        async with Client(gateway["url"], mode=mode) as client:
            result = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
            assert not result.is_error
    for name, marker in SERVERS.items():
        started = launches(up, marker)
        assert len(started) == 1, f"{name}: expected one process, `up` runs {started}"
