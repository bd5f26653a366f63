"""An MCPServer with a toolConfigRef on the local platform: its own proxy URL serves the filtered,
renamed tool list (the proxy reads the run config the runner wrote: `--run-config`)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.types import TextContent

from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from tests.local.conftest import manifest

TOOLS = manifest(
    "MCPToolConfig",
    "time-tools",
    {
        "toolsFilter": ["get_current_time"],
        "toolsOverride": {"get_current_time": {"name": "now", "description": "The time now."}},
    },
)
SERVER = manifest(
    "MCPServer",
    "time",
    {
        "image": "uvx://mcp-server-time",
        "transport": "stdio",
        "args": ["--local-timezone=UTC"],
        "toolConfigRef": {"name": "time-tools"},
    },
)


@pytest.mark.timeout(150)
async def test_server_with_tool_config_is_served_filtered(tmp_path: Path) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "time.yaml").write_text(TOOLS + "\n---\n" + SERVER)
    state = await State.open(tmp_path / "state")
    runner = Runner(manifests, state, port_range=(43000, 43999))
    try:
        url: str | None = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            await runner.reconcile()
            obj = await state.get_object("MCPServer", "default", "time")
            status: dict[str, Any] = obj.status if obj is not None else {}
            if status.get("phase") == "Running" and status.get("url"):
                url = status["url"]
                break
            await asyncio.sleep(0.3)
        assert url is not None, "the server did not reach Running"
        for mode in ("legacy", "2026-07-28"):
            async with Client(url, mode=mode) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert set(tools) == {"now"} and tools["now"].description == "The time now."
                result = await client.call_tool("now", {"timezone": "Europe/Paris"})
                text = result.content[0]
                assert not result.is_error and isinstance(text, TextContent) and "Europe/Paris" in text.text
                hidden = await client.call_tool("convert_time", {})
                assert hidden.is_error
    finally:
        await runner.shutdown()
        await state.close()
