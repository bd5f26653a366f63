"""MCPToolConfig enforcement by the proxy (`--run-config`): filtered and renamed tools, every transport."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.client.sse import sse_client
from mcp.shared.subscriptions import ToolsListChanged
from mcp.types import CallToolResult, TextContent

from mcpfleet.backoff import Backoff
from mcpfleet.proxy.attach import AttachTarget, attach_factory, load_kubeconfig
from mcpfleet.proxy.mux import Multiplexer
from mcpfleet.proxy.runconfig import RunConfigError, load_run_config
from mcpfleet.toolconfig import Override, ToolPolicy
from tests.conformance import harness
from tests.proxy.attach_endpoint import AttachEndpoint
from tests.proxy.conftest import running_proxy, wait_healthy

ERAS = ["legacy", "2026-07-28"]

# What reconcile/mcpserver.py run_config() writes for an MCPServer with a toolConfigRef.
RUN_CONFIG: dict[str, Any] = {
    "name": "fixture",
    "namespace": "default",
    "image": "uvx://fixture",
    "transport": "stdio",
    "proxyMode": "streamable-http",
    "args": [],
    "env": {},
    "secretEnv": [],
    "toolConfig": {
        "name": "fixture-tools",
        "configHash": "0" * 64,
        "spec": {
            "toolsFilter": ["test_simple_text", "test_x_mcp_header", "test_trigger_tool_change"],
            "toolsOverride": {
                "test_simple_text": {"name": "simple", "description": "Plain text, renamed."},
                "test_x_mcp_header": {"name": "regional"},
                "test_image_content": {"name": "picture"},
            },
        },
    },
}
VISIBLE = {"simple", "regional", "test_trigger_tool_change"}


def _policy(tmp_path: Path) -> ToolPolicy:
    path = tmp_path / "runconfig.json"
    path.write_text(json.dumps(RUN_CONFIG))
    policy = load_run_config(path).tool_policy()
    assert policy is not None
    return policy


def _text(result: CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


async def _check(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == VISIBLE
    assert tools["simple"].description == "Plain text, renamed."
    # A renamed tool is called by its new name; the server sees the original one.
    assert _text(await client.call_tool("simple", {})) == "This is a simple text response for testing."
    assert _text(await client.call_tool("regional", {"region": "eu"})) == "region=eu"
    # Filtered out (also when renamed: the filter lists neither name), or renamed away: unknown.
    for hidden in ("test_image_content", "picture", "test_embedded_resource", "test_simple_text"):
        refused = await client.call_tool(hidden, {})
        assert refused.is_error and _text(refused) == f"Unknown tool: {hidden}"


async def test_filter_and_overrides_both_eras_and_sse(tmp_path: Path) -> None:
    async with running_proxy(
        harness.fixture_stdio_command(), transport="sse", tool_policy=_policy(tmp_path)
    ) as proxy:
        for mode in ERAS:
            async with Client(proxy.url, mode=mode) as client:
                await _check(client)
        async with Client(sse_client(f"{proxy.base}/sse"), mode="legacy") as client:
            await _check(client)


async def test_isolated_sessions_are_filtered_too(tmp_path: Path) -> None:
    async with running_proxy(
        harness.fixture_stdio_command(), isolation="session", tool_policy=_policy(tmp_path)
    ) as proxy:
        async with Client(proxy.url, mode="legacy") as client:
            await _check(client)


async def test_attach_mode_is_filtered_too(tmp_path: Path) -> None:
    endpoint = AttachEndpoint()
    async with endpoint.serving():
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(endpoint.kubeconfig())
        target = AttachTarget(endpoint.namespace, endpoint.pod, endpoint.container)
        factory = attach_factory(load_kubeconfig(kubeconfig), target, Backoff(initial=0.2))
        async with running_proxy(factory=factory, tool_policy=_policy(tmp_path)) as proxy:
            async with Client(proxy.url, mode="legacy") as client:
                await _check(client)


async def test_tools_list_changed_passes_through(tmp_path: Path) -> None:
    # The fixture announces list changes only on 2026-07-28 listen streams (the SDK's
    # notify_tools_changed), so its native 2026-07-28 process is what shows them; the translated
    # listen stream is covered by tests/proxy/test_era_bridge.py.
    command = harness.fixture_stdio_command()
    async with running_proxy(command, tool_policy=_policy(tmp_path), modern_era="separate") as proxy:
        async with Client(proxy.url, mode="2026-07-28") as client:
            async with client.listen(tools_list_changed=True) as subscription:
                assert _text(await client.call_tool("test_trigger_tool_change", {})) == "tool list changed"
                events = aiter(subscription)
                event = await asyncio.wait_for(anext(events), 10)
                assert isinstance(event, ToolsListChanged)
            assert {t.name for t in (await client.list_tools()).tools} == VISIBLE


class _Peer:
    broadcast = True

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def deliver(self, message: dict[str, Any], related_request_id: Any) -> None:
        self.messages.append(message)


class _Child:
    """Answers tools/list in two pages and echoes the tool name of tools/call."""

    def __init__(self, mux: Multiplexer) -> None:
        self.mux = mux
        self.sent: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        params = message.get("params") or {}
        if message.get("method") == "tools/list":
            page = params.get("cursor")
            tools = [{"name": "a"}, {"name": "b"}] if page is None else [{"name": "c"}, {"name": "d"}]
            result: dict[str, Any] = {"tools": tools}
            if page is None:
                result["nextCursor"] = "2"
        else:
            result = {"content": [{"type": "text", "text": params.get("name")}]}
        await self.mux.on_child_message({"jsonrpc": "2.0", "id": message["id"], "result": result})


async def test_every_page_of_a_paginated_list_is_filtered_and_renamed() -> None:
    policy = ToolPolicy(allow=frozenset({"a", "d"}), overrides={"d": Override(name="dee")})
    mux = Multiplexer(tool_policy=policy)
    child = _Child(mux)
    mux.bind(child)
    await mux.on_child_start()
    peer = _Peer()
    await mux.request(peer, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    await mux.request(peer, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "2"}})
    first, second = peer.messages
    assert first["result"] == {"tools": [{"name": "a"}], "nextCursor": "2"}
    assert second["result"] == {"tools": [{"name": "dee"}]}
    # The proxy's own calls (the 2026-07-28 Mcp-Param schema cache) see the client's view too.
    own = await mux.call("tools/list", {"cursor": "2"})
    assert own["result"]["tools"] == [{"name": "dee"}]

    await mux.request(peer, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "dee"}})
    assert peer.messages[-1]["result"]["content"][0]["text"] == "d"
    assert child.sent[-1]["params"]["name"] == "d"
    sent = len(child.sent)
    await mux.request(peer, {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "b"}})
    assert peer.messages[-1] == {
        "jsonrpc": "2.0",
        "id": 4,
        "result": {"content": [{"type": "text", "text": "Unknown tool: b"}], "isError": True},
    }
    assert len(child.sent) == sent  # refused without reaching the server


def test_run_config_errors_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "runconfig.json"
    with pytest.raises(RunConfigError, match="cannot read"):
        load_run_config(path)
    path.write_text("{")
    with pytest.raises(RunConfigError, match="not JSON"):
        load_run_config(path)
    bad = {"toolConfig": {"name": "t", "spec": {"toolsOverride": {"a": {"name": "no spaces"}}}}}
    path.write_text(json.dumps(bad))
    with pytest.raises(RunConfigError, match=r"toolConfig\.spec\.toolsOverride\.a\.name"):
        load_run_config(path)
    path.write_text(json.dumps({"toolConfig": {"name": "t", "spec": {"toolsFilter": "a"}}}))
    with pytest.raises(RunConfigError, match=r"toolConfig\.spec\.toolsFilter"):
        load_run_config(path)
    path.write_text(json.dumps({"name": "s", "args": []}))
    assert load_run_config(path).tool_policy() is None  # no MCPToolConfig referenced: nothing to enforce


async def test_cli_enforces_the_run_config_and_refuses_a_broken_one(tmp_path: Path) -> None:
    run_config = tmp_path / "runconfig.json"
    run_config.write_text(json.dumps(RUN_CONFIG))
    port = harness.free_port()
    cli = [
        sys.executable,
        "-m",
        "mcpfleet.cli.main",
        "proxy",
        "--port",
        str(port),
        "--run-config",
        str(run_config),
    ]
    cmd = [*cli, "--", *harness.fixture_stdio_command()]
    proc = await asyncio.create_subprocess_exec(*cmd, stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        base = f"http://127.0.0.1:{port}"
        await wait_healthy(base)
        async with Client(f"{base}/mcp", mode="2026-07-28") as client:
            await _check(client)
    finally:
        proc.terminate()
        await proc.wait()
    run_config.write_text(json.dumps({"toolConfig": {"name": "t", "spec": {"toolsFilter": [1]}}}))
    broken = await asyncio.create_subprocess_exec(*cli, "--", "true", stderr=subprocess.PIPE)
    _, stderr = await asyncio.wait_for(broken.communicate(), 60)
    assert broken.returncode != 0 and "toolConfig.spec.toolsFilter.0" in stderr.decode()
    run_config.write_text(json.dumps(RUN_CONFIG))
    remote = [*cli[:-2], "--run-config", str(run_config), "--remote", "http://127.0.0.1:1/mcp"]
    refused = await asyncio.create_subprocess_exec(*remote, stderr=subprocess.PIPE)
    _, stderr = await asyncio.wait_for(refused.communicate(), 60)
    assert refused.returncode != 0 and "--remote" in stderr.decode()
