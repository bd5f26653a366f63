"""`mcpfleet up` end to end on a temp folder: real packages (uvx, npx), the vMCP, the registry.

One `up` runs for the whole scenario, which goes through what a developer does: start, use the
gateway, add a server, watch a crash get repaired, break a server, remove one, `get`, `logs`, `down`.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from mcp.client.client import Client
from mcp.types import TextContent

from tests.local.conftest import Up, manifest, pid_alive, time_server
from tests.waiting import wait_until

GROUP = manifest("MCPGroup", "demo", {"description": "test servers"})
GATEWAY = manifest(
    "VirtualMCPServer",
    "gateway",
    {
        "config": {"groupRef": "demo", "aggregation": {"conflictResolution": "prefix"}},
        "incomingAuth": {"type": "anonymous"},
    },
)
REGISTRY = manifest(
    "MCPRegistry", "catalogue", {"registries": [{"name": "running", "format": "upstream", "kubernetes": {}}]}
)
EVERYTHING = manifest(
    "MCPServer",
    "everything",
    {"image": "npx://@modelcontextprotocol/server-everything", "transport": "stdio", "groupRef": "demo"},
    labels={"mcpfleet.dev/registry": "catalogue"},
)


async def _tools(url: str) -> set[str]:
    async with Client(url) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


async def _call_text(url: str, tool: str, arguments: dict[str, Any]) -> str:
    async with Client(url) as client:
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, result
        content = result.content[0]
        assert isinstance(content, TextContent)
        return content.text


async def _registry_names(url: str) -> set[str]:
    async with httpx.AsyncClient(trust_env=False) as http:
        response = await http.get(f"{url}/v0.1/servers", timeout=10)
    response.raise_for_status()
    return {item["server"]["title"] for item in response.json()["servers"]}


@pytest.mark.timeout(200)
async def test_up_runs_converges_and_goes_down(running_up: Any, tmp_path: Path) -> None:
    invalid = manifest(
        "MCPServer", "typo", {"image": "uvx://mcp-server-time", "transport": "stdio", "replicaz": 1}
    )
    up: Up = running_up(
        {
            "group.yaml": GROUP + "\n---\n" + GATEWAY,
            "registry.yaml": REGISTRY,
            "time.yaml": time_server("time"),
            "everything.yaml": EVERYTHING,
            "invalid.yaml": invalid,
            # Outside the group, so the gateway stays Ready; crashes at start-up (argparse error).
            "broken.yaml": time_server("broken", group=None, args=["--no-such-flag"]),
        }
    )
    # 1. Everything valid comes up; the invalid manifest is reported with file, document and field.
    time_status = await up.wait_phase("MCPServer", "time", {"Running"})
    await up.wait_phase("MCPServer", "everything", {"Running"}, limit=120)
    gateway = await up.wait_phase("VirtualMCPServer", "gateway", {"Ready"})
    registry = await up.wait_phase("MCPRegistry", "catalogue", {"Running"})
    assert time_status["url"].startswith("http://127.0.0.1:3")
    assert time_status["observedGeneration"] == 1 and time_status["readyReplicas"] == 1
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in time_status["conditions"])
    assert "typo" not in up.objects("MCPServer")
    await up.wait_for(
        "the invalid manifest reported",
        lambda: "invalid.yaml (document 1) MCPServer/typo: spec.replicaz" in up.output.read_text(),
    )

    # 2. A server that crashes at start-up ends Failed with its stderr in status.message.
    broken = await up.wait_phase("MCPServer", "broken", {"Failed"})
    assert "--no-such-flag" in broken["message"], broken["message"]
    assert "url" not in broken
    assert any(c["type"] == "Ready" and c["status"] == "False" for c in broken["conditions"])

    # 3. The vMCP aggregates both backends; a tool of each answers through it.
    gateway_url = gateway["url"]
    tools = await _wait_tools(up, gateway_url, {"time_get_current_time", "everything_echo"})
    assert "time_convert_time" in tools
    assert '"timezone": "UTC"' in await _call_text(gateway_url, "time_get_current_time", {"timezone": "UTC"})
    assert await _call_text(gateway_url, "everything_echo", {"message": "hello"}) == "Echo: hello"

    # 4. The registry lists the running, labelled servers (not the Failed one).
    await _wait_registry(up, registry["url"], {"time", "everything"}, exact=True)

    # 5. At the same time: a manifest added at runtime, and a server killed behind the supervisor's back.
    key = "MCPServer/default/time/proxy/0"
    old_pid = up.processes()[key]
    (up.manifests / "time2.yaml").write_text(time_server("time2"))
    os.killpg(old_pid, signal.SIGKILL)
    new_pid = await up.wait_for(
        "a new pid for time", lambda: (up.processes().get(key) or old_pid) != old_pid and up.processes()[key]
    )
    assert new_pid != old_pid
    await up.wait_phase("MCPServer", "time2", {"Running"})
    await up.wait_phase("MCPServer", "time", {"Running"})
    # The gateway follows the state: both show up without a restart of the gateway itself.
    await _wait_tools(up, gateway_url, {"time2_get_current_time", "time_get_current_time"})
    assert '"timezone": "UTC"' in await _call_text(gateway_url, "time2_get_current_time", {"timezone": "UTC"})
    assert '"timezone": "UTC"' in await _call_text(gateway_url, "time_get_current_time", {"timezone": "UTC"})
    await _wait_registry(up, registry["url"], {"time", "everything", "time2"}, exact=True)

    # 6. A removed manifest stops its server, which leaves the vMCP and the registry.
    time2_pid = up.processes()["MCPServer/default/time2/proxy/0"]
    (up.manifests / "time2.yaml").unlink()
    await up.wait_for("time2 gone from the state", lambda: "time2" not in up.objects("MCPServer"))
    await up.wait_for("time2's process stopped", lambda: not pid_alive(time2_pid))
    assert "time2_get_current_time" not in await _wait_tools_gone(up, gateway_url, "time2_get_current_time")
    await _wait_registry(up, registry["url"], {"time", "everything"}, exact=True)

    # 7. get / -o yaml / logs read the same state.
    # (Below a blank line, `get` lists the invalid manifests: see test_failure_visibility.py.)
    listing = up.get("get", "mcpservers").split("\n\n")[0].splitlines()
    assert listing[0].split() == ["NAME", "STATUS", "READY", "REPLICAS", "URL", "AGE"]
    rows = {line.split()[0]: line.split() for line in listing[1:]}
    assert rows["time"][1:4] == ["Running", "True", "1"]
    assert rows["broken"][1:3] == ["Failed", "False"]
    document = yaml.safe_load(up.get("get", "vmcp", "gateway", "-o", "yaml"))
    assert document["kind"] == "VirtualMCPServer" and document["status"]["phase"] == "Ready"
    assert document["status"]["url"] == gateway_url
    assert {b["name"] for b in document["status"]["discoveredBackends"]} == {"time", "everything"}
    groups = json.loads(up.get("get", "mcpgroups", "demo", "-o", "json"))
    assert sorted(groups["status"]["servers"]) == ["everything", "time"]
    assert "--no-such-flag" in up.get("logs", "broken")

    # 8. down stops `up` and every process it started.
    pids = list(up.processes().values())
    assert pids
    up.cli("down")
    assert up.process.wait(30) == 0
    for pid in pids:
        assert not pid_alive(pid), f"pid {pid} survived mcpfleet down"
    assert "stopped every process" in up.output.read_text()


async def _wait_tools(up: Up, url: str, wanted: set[str]) -> set[str]:
    async def listed() -> set[str] | None:
        tools = await _tools(url)
        return tools if wanted <= tools else None

    return await wait_until(
        listed,
        f"tools {wanted} in the vMCP",
        within=60,
        interval=0.5,
        tolerate=(Exception,),  # the gateway may be restarting its upstream connections
        context=lambda: up.output.read_text(),
    )


async def _wait_tools_gone(up: Up, url: str, tool: str) -> set[str]:
    async def gone() -> tuple[set[str]] | None:  # a tuple: the remaining tools may be an empty set
        tools = await _tools(url)
        return (tools,) if tool not in tools else None

    (tools,) = await wait_until(gone, f"{tool} no longer listed by the vMCP", within=60, interval=0.5)
    return tools


async def _wait_registry(up: Up, url: str, wanted: set[str], exact: bool = False) -> set[str]:
    async def listed() -> tuple[set[str]] | None:  # a tuple: `wanted` may be the empty set
        names = await _registry_names(url)
        return (names,) if ((names == wanted) if exact else (wanted <= names)) else None

    (names,) = await wait_until(listed, f"registry names {sorted(wanted)}", within=60, interval=0.5)
    return names
