"""Against a live `mcpfleet up`: a VirtualMCPServer with the optimizer and code mode serves find_tool,
call_tool and execute_tool_script, and turning the optimizer off applies in place."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from mcp.client.client import Client

from tests.local.conftest import Up, gateway_fleet
from tests.vmcp.servers import Served, sdk_backend


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_optimizer_and_code_mode_under_mcpfleet_up(running_up: Any, mode: str) -> None:
    backend = await Served(sdk_backend("alpha").streamable_http_app()).start()
    try:
        features = {"optimizer": {"maxToolsToReturn": 3}, "codeMode": {"enabled": True}}
        up: Up = running_up({"fleet.yaml": gateway_fleet(backend.url, features)})
        gateway = await up.wait_phase("VirtualMCPServer", "gw", {"Ready"}, limit=120)
        async with Client(gateway["url"], mode=mode) as client:  # type: ignore[arg-type]
            deadline = time.monotonic() + 60
            names: list[str] = []
            while time.monotonic() < deadline:
                res = await client.call_tool("find_tool", {"tool_description": "upper case text"})
                names = [t["name"] for t in res.structured_content["tools"]]
                if names[:1] == ["alpha_upper"]:
                    break
                await asyncio.sleep(0.5)
            assert names[:1] == ["alpha_upper"], names
            assert {t.name for t in (await client.list_tools()).tools} == {"find_tool", "call_tool"}
            res = await client.call_tool(
                "call_tool",
                {
                    "tool_name": "execute_tool_script",
                    "parameters": {"script": "return alpha_upper(text='up')"},
                },
            )
            assert not res.is_error and res.structured_content == {"result": "UP"}
            # Off again, live: the full list comes back on the same session.
            (up.manifests / "fleet.yaml").write_text(gateway_fleet(backend.url, {}))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                listed = {t.name for t in (await client.list_tools()).tools}
                if "alpha_upper" in listed:
                    break
                await asyncio.sleep(0.5)
            assert "alpha_upper" in listed and "find_tool" not in listed, listed
    finally:
        await backend.stop()
