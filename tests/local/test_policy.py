"""`authzConfig` and `audit` on the local platform (`mcpfleet up`), with real servers from PyPI and npm:
the proxy and the gateway enforce the manifest's Cedar policies, write audit lines, and a policy edit
applies without restarting the process (same pid, same session)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from mcpfleet.policy.guard import FORBIDDEN
from tests.local.conftest import Up, manifest
from tests.waiting import wait_until

TIME_ONLY = ['permit(principal, action == Action::"call_tool", resource == Tool::"get_current_time");']
GATEWAY = [
    'permit(principal, action == Action::"call_tool", resource in Backend::"time");',
    'permit(principal, action == Action::"call_tool", resource == Tool::"everything_echo") '
    # Lists are filtered without arguments: a condition on one says what to do when it is absent.
    'when { !(context has arg_message) || context.arg_message != "forbidden" };',
]


def time_server(policies: list[str]) -> str:
    spec: dict[str, Any] = {
        "image": "uvx://mcp-server-time",
        "transport": "stdio",
        "args": ["--local-timezone=UTC"],
        "groupRef": "demo",
        "authzConfig": {"type": "inline", "inline": {"policies": policies}},
        "audit": {"enabled": True, "logFile": "audit.jsonl"},
    }
    return manifest("MCPServer", "time", spec)


def files(time_policies: list[str]) -> dict[str, str]:
    everything = {
        "image": "npx://@modelcontextprotocol/server-everything",
        "transport": "stdio",
        "groupRef": "demo",
    }
    gateway = {
        "config": {"groupRef": "demo", "audit": {"enabled": True, "logFile": "audit.jsonl"}},
        "incomingAuth": {
            "type": "anonymous",
            "authzConfig": {"type": "inline", "inline": {"policies": GATEWAY}},
        },
    }
    return {
        "group.yaml": manifest("MCPGroup", "demo", {}),
        "time.yaml": time_server(time_policies),
        "everything.yaml": manifest("MCPServer", "everything", everything),
        "gateway.yaml": manifest("VirtualMCPServer", "gw", gateway),
    }


@pytest.mark.timeout(420)
async def test_policies_and_audit_on_the_local_platform(running_up: Any) -> None:
    up: Up = running_up(files(TIME_ONLY))
    time_status = await up.wait_phase("MCPServer", "time", {"Running"}, limit=180)
    everything_status = await up.wait_phase("MCPServer", "everything", {"Running"}, limit=240)
    gw_status = await up.wait_phase("VirtualMCPServer", "gw", {"Ready", "Running"}, limit=180)
    async with Client(time_status["url"], mode="legacy") as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"get_current_time"}
        assert not (await c.call_tool("get_current_time", {"timezone": "UTC"})).is_error
        # The proxy's process record (hosted proxies report their child's pid).
        assert "MCPServer/default/time/proxy/0" in up.processes()
        with pytest.raises(MCPError) as denied:
            await c.call_tool(
                "convert_time", {"source_timezone": "UTC", "time": "10:00", "target_timezone": "UTC"}
            )
        assert denied.value.error.code == FORBIDDEN

        # Edit the manifest's policy: the file is rewritten, the proxy is not restarted, and the
        # open session sees the new policy.
        (up.manifests / "time.yaml").write_text(
            time_server(['permit(principal, action == Action::"call_tool", resource);'])
        )

        async def both_listed() -> bool | None:
            names = {t.name for t in (await c.list_tools()).tools}
            return True if names == {"get_current_time", "convert_time"} else None

        await wait_until(both_listed, "the edited policy applied", within=60, interval=0.5)
        assert not (
            await c.call_tool(
                "convert_time", {"source_timezone": "UTC", "time": "10:00", "target_timezone": "UTC"}
            )
        ).is_error
    # The proxy was not restarted: the session opened before the edit carried on through it (a
    # restarted proxy forgets its sessions). Its child's pid is not compared: a hosted proxy may
    # restart its server child transparently (seen once under load in CI, cause not yet known).
    assert "MCPServer/default/time/proxy/0" in up.processes()

    async with Client(everything_status["url"], mode="legacy") as direct:
        # Another tool of the everything server (its names change between releases): not permitted.
        other = sorted(t.name for t in (await direct.list_tools()).tools if t.name != "echo")[0]
    async with Client(gw_status["url"], mode="legacy") as c:

        async def listed() -> set[str] | None:
            names = {t.name for t in (await c.list_tools()).tools}
            return names if {"everything_echo", "time_get_current_time"} <= names else None

        # The gateway follows its group live: the members' tools appear once it has connected them.
        tools = await wait_until(
            listed, "the gateway lists the members' permitted tools", within=90, interval=1
        )
        assert f"everything_{other}" not in tools  # listed only what the caller may call
        assert not (await c.call_tool("everything_echo", {"message": "hi"})).is_error
        with pytest.raises(MCPError) as denied:
            await c.call_tool("everything_echo", {"message": "forbidden"})
        assert denied.value.error.code == FORBIDDEN
        with pytest.raises(MCPError) as denied:
            await c.call_tool(f"everything_{other}", {})
        assert denied.value.error.code == FORBIDDEN

    config = up.state_dir / "config"
    proxy_audit = [
        json.loads(line) for line in (config / "mcpserver/default/time/audit.jsonl").read_text().splitlines()
    ]
    assert {e["outcome"] for e in proxy_audit if e["method"] == "tools/call"} == {"success", "denied"}
    gw_audit = [
        json.loads(line)
        for line in (config / "virtualmcpserver/default/gw/audit.jsonl").read_text().splitlines()
    ]
    denied_targets = {e["target"]["name"] for e in gw_audit if e["outcome"] == "denied"}
    assert denied_targets == {"everything_echo", f"everything_{other}"}
    echo = next(e for e in gw_audit if e.get("target", {}).get("name") == "everything_echo")
    assert echo["backend"] == "everything" and echo["arguments"] == {"message": "[redacted]"}


def test_configmap_policies_are_a_problem_locally(tmp_path: Path) -> None:
    from mcpfleet.api.mcpserver import MCPServer
    from mcpfleet.reconcile import mcpserver
    from mcpfleet.reconcile.model import World

    server = MCPServer.model_validate(
        json.loads(
            manifest(
                "MCPServer",
                "t",
                {
                    "image": "uvx://mcp-server-time",
                    "authzConfig": {"type": "configMap", "configMap": {"name": "p"}},
                },
            )
        )
    )
    server.metadata.namespace = "default"
    plan = mcpserver.plan(server, World(platform="local", namespace="default"))
    assert plan.problems and plan.problems[0].startswith(
        "spec.authzConfig.configMap: policies from a ConfigMap"
    )
    assert plan.containers == ()
