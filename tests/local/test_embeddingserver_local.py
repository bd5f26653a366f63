"""An EmbeddingServer running mcpfleet's own embedding server (`image: mcpfleet://embeddings`, the model
bundled in a PyPI package) under `mcpfleet up` (the in-process local runner): it becomes Ready with
its URL, a VirtualMCPServer referencing it gets hybrid find_tool ranking with nothing else configured,
and the gateway's /status names the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.client import Client

from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from mcpfleet.vmcp.embedmodel import DEFAULT_MODEL
from tests.conformance.harness import free_port
from tests.local.conftest import manifest, reconcile_until
from tests.vmcp.servers import Served, sdk_backend

PORTS = (32500, 32599)


@pytest.mark.timeout(240)
async def test_builtin_embedding_server_under_up(tmp_path: Path) -> None:
    backend = await Served(sdk_backend("alpha").streamable_http_app()).start()
    manifests = tmp_path / "m"
    manifests.mkdir()
    files = {
        "emb.yaml": manifest(
            "EmbeddingServer", "emb", {"image": "mcpfleet://embeddings", "port": free_port()}
        ),
        "group.yaml": manifest("MCPGroup", "team", {}),
        "alpha.yaml": manifest("MCPRemoteProxy", "alpha", {"remoteURL": backend.url, "groupRef": "team"}),
        "gw.yaml": manifest(
            "VirtualMCPServer",
            "gw",
            {
                "config": {"groupRef": "team"},
                "embeddingServerRef": {"name": "emb"},
                "incomingAuth": {"type": "anonymous"},
            },
        ),
    }
    for name, text in files.items():
        (manifests / name).write_text(text)
    state = await State.open(tmp_path / "state")
    runner = Runner(manifests, state, port_range=PORTS)
    try:

        async def status(kind: str, name: str) -> dict[str, Any]:
            obj = await state.get_object(kind, "default", name)
            return dict(obj.status) if obj is not None else {}

        async def ready(kind: str, name: str) -> dict[str, Any] | None:
            current = await status(kind, name)
            return current if current.get("phase") == "Ready" and current.get("url") else None

        emb = await reconcile_until(
            runner, "embedding server Ready", lambda: ready("EmbeddingServer", "emb"), 120
        )
        async with httpx.AsyncClient() as http:
            info = (await http.get(f"{emb['url'].rstrip('/')}/info")).json()
            assert info["model_id"] == DEFAULT_MODEL
        gw = await reconcile_until(runner, "gateway Ready", lambda: ready("VirtualMCPServer", "gw"), 120)
        base = gw["url"].removesuffix("/mcp")

        async def hybrid() -> dict[str, Any] | None:
            async with httpx.AsyncClient() as http:
                optimizer = (await http.get(f"{base}/status")).json().get("optimizer") or {}
            return optimizer if optimizer.get("ranking") == "hybrid" else None

        optimizer = await reconcile_until(runner, "hybrid ranking", hybrid, 60)
        assert optimizer["embeddings"]["state"] == "ready"
        assert optimizer["embeddings"]["model"] == DEFAULT_MODEL, json.dumps(optimizer)
        async with Client(gw["url"], mode="legacy") as client:
            res = await client.call_tool("find_tool", {"tool_description": "make text upper case"})
            tools = res.structured_content["tools"]
            assert tools[0]["name"].endswith("upper") and tools[0]["score"] <= 1.0, tools
    finally:
        await runner.shutdown()
        await state.close()
        await backend.stop()
