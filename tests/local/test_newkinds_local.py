"""The kinds ToolHive added under `mcpfleet up` (the in-process local runner): a real MCP server over
http joins a group as an MCPServerEntry and is reached through the gateway directly; a
VirtualMCPCompositeToolDefinition referenced by the gateway runs, its elicitation step asking the
real MCP client; the config kinds get their status; an EmbeddingServer image is refused naming
`spec.image`."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.client import Client

from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from tests.local.conftest import manifest, reconcile_until
from tests.vmcp.test_real_servers import EVERYTHING, process

PORTS = (32400, 32499)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _manifests(folder: Path, remote: str) -> None:
    files = {
        "group.yaml": manifest("MCPGroup", "remote", {}),
        "entry.yaml": manifest(
            "MCPServerEntry",
            "everything",
            {
                "remoteUrl": remote,
                "transport": "streamable-http",
                "groupRef": {"name": "remote"},
                "allowPrivateEndpoint": True,
                "headerForward": {"addPlaintextHeaders": {"X-Tenant": "t1"}},
            },
        ),
        "private.yaml": manifest(
            "MCPServerEntry",
            "not-allowed",
            {"remoteUrl": remote, "transport": "streamable-http", "groupRef": {"name": "remote"}},
        ),
        "composite.yaml": manifest(
            "VirtualMCPCompositeToolDefinition",
            "ask-echo",
            {
                "name": "ask_and_echo",
                "description": "Ask the user for a word, then echo it",
                "steps": [
                    {
                        "id": "ask",
                        "type": "elicitation",
                        "message": "Which word?",
                        "schema": {
                            "type": "object",
                            "properties": {"word": {"type": "string"}},
                            "required": ["word"],
                        },
                        "onDecline": {"action": "skip_remaining"},
                        "timeout": "20s",
                    },
                    {
                        "id": "say",
                        "tool": "everything.echo",
                        "arguments": {"message": "{{.steps.ask.output.word}}"},
                        "dependsOn": ["ask"],
                    },
                ],
            },
        ),
        "gateway.yaml": manifest(
            "VirtualMCPServer",
            "gw",
            {
                "config": {"groupRef": "remote", "compositeToolRefs": [{"name": "ask-echo"}]},
                "incomingAuth": {"type": "anonymous"},
            },
        ),
        "oidc.yaml": manifest(
            "MCPOIDCConfig", "idp", {"type": "inline", "inline": {"issuer": "https://auth.example.com"}}
        ),
        "authz.yaml": manifest(
            "MCPAuthzConfig",
            "policy",
            {"type": "cedarv1", "config": {"policies": ["permit(principal, action, resource);"]}},
        ),
        "embedding.yaml": manifest("EmbeddingServer", "emb", {}),
    }
    for name, text in files.items():
        (folder / name).write_text(text)


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.timeout(240)
async def test_entry_composite_and_config_kinds_on_the_local_platform(tmp_path: Path) -> None:
    port = _free_port()
    manifests = tmp_path / "m"
    manifests.mkdir()
    _manifests(manifests, f"http://127.0.0.1:{port}/mcp")
    state = await State.open(tmp_path / "state")
    runner = Runner(manifests, state, port_range=PORTS)
    with process([str(EVERYTHING), "streamableHttp"], port, env={"PORT": str(port)}):
        try:

            async def status(kind: str, name: str) -> dict[str, Any]:
                obj = await state.get_object(kind, "default", name)
                return dict(obj.status) if obj is not None else {}

            async def gateway_ready() -> dict[str, Any] | None:
                current = await status("VirtualMCPServer", "gw")
                return current if current.get("phase") == "Ready" and current.get("url") else None

            gateway = await reconcile_until(runner, "gateway Ready", gateway_ready, within=120)
            assert (await status("MCPServerEntry", "everything"))["phase"] == "Valid"
            refused = await status("MCPServerEntry", "not-allowed")
            assert refused["phase"] == "Failed" and "spec.allowPrivateEndpoint" in refused["message"]
            definition = await status("VirtualMCPCompositeToolDefinition", "ask-echo")
            assert definition["referencingWorkloads"] == [{"kind": "VirtualMCPServer", "name": "gw"}]
            # ToolHive's fields for this kind, mirrored from the condition and the references.
            assert definition["referencingVirtualServers"] == ["gw"]
            assert definition["validationStatus"] == "Valid" and definition["validationErrors"] == []
            for kind, name in (("MCPOIDCConfig", "idp"), ("MCPAuthzConfig", "policy")):
                config = await status(kind, name)
                assert len(config["configHash"]) == 64 and config["conditions"][0]["status"] == "True"
            embedding = await status("EmbeddingServer", "emb")
            assert embedding["phase"] == "Failed" and embedding["message"].startswith("spec.image:")

            answers: list[types.ElicitResult] = [
                types.ElicitResult(action="accept", content={"word": "mcpfleet-rocks"}),
                types.ElicitResult(action="decline"),
            ]
            asked: list[Any] = []

            async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
                asked.append(params)
                return answers[len(asked) - 1]

            async with Client(str(gateway["url"]), mode="legacy", elicitation_callback=elicit) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"everything_echo", "ask_and_echo"} <= names
                direct = await client.call_tool("everything_echo", {"message": "direct"})
                assert "direct" in _text(direct)
                accepted = await asyncio.wait_for(client.call_tool("ask_and_echo", {}), 30)
                assert not accepted.is_error and "mcpfleet-rocks" in _text(accepted), _text(accepted)
                declined = await asyncio.wait_for(client.call_tool("ask_and_echo", {}), 30)
                assert not declined.is_error and "skipped" in _text(declined), _text(declined)
            assert [p.message for p in asked] == ["Which word?", "Which word?"]
        finally:
            await runner.shutdown()
            await state.close()
