"""Against a live `mcpfleet up`: editing a VirtualMCPServer's tool filter / override applies in place.

The runner rewrites the gateway's config file; the gateway re-reads it (`vmcp.reload`) and changes its
tool list on the same process (same pid) and the same client session. `rollout_checksum` leaves
those fields out, so the runner does not restart it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from mcp.client.client import Client

from tests.local.conftest import Up, gateway_fleet
from tests.vmcp.servers import Served, sdk_backend


def _files(backend_url: str, aggregation: dict[str, Any]) -> str:
    return gateway_fleet(backend_url, {"aggregation": aggregation})


def _process(up: Up, name: str) -> tuple[str, int | None] | None:
    """The workload's process record (key and pid); None when `up` hosts it in-process. Then the
    same client session continuing is what shows the endpoint was not restarted: a restarted
    endpoint forgets its sessions."""
    return next(((key, pid) for key, pid in up.processes().items() if key.split("/")[2] == name), None)


async def _names(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


async def _until(client: Client, check: Any, what: str, limit: float) -> set[str]:
    deadline = time.monotonic() + limit
    names: set[str] = set()
    while time.monotonic() < deadline:
        names = await _names(client)
        if check(names):
            return names
        await asyncio.sleep(0.25)
    raise AssertionError(f"{what} not seen within {limit}s; tools: {sorted(names)}")


@pytest.mark.timeout(180)
async def test_filter_edit_applies_without_restarting_the_gateway(running_up: Any) -> None:
    backend = await Served(sdk_backend("alpha").streamable_http_app()).start()
    try:
        prefix = {"conflictResolution": "prefix"}
        up: Up = running_up({"fleet.yaml": _files(backend.url, prefix)})
        gateway = await up.wait_phase("VirtualMCPServer", "gw", {"Ready"}, limit=120)
        process = _process(up, "gw")  # recorded before Ready; none when hosted in `up`
        async with Client(gateway["url"], mode="legacy") as client:
            await _until(client, lambda n: {"alpha_echo", "alpha_upper"} <= n, "alpha's tools", 60)

            edited = {
                **prefix,
                "tools": [{"workload": "alpha", "filter": ["echo"], "overrides": {"echo": {"name": "say"}}}],
            }
            (up.manifests / "fleet.yaml").write_text(_files(backend.url, edited))
            started = time.monotonic()
            # The same client session sees the new list: the gateway was not restarted.
            names = await _until(client, lambda n: "alpha_say" in n, "the renamed tool", 30)
            elapsed = time.monotonic() - started
            assert "alpha_upper" not in names and "alpha_echo" not in names, names
            assert _process(up, "gw") == process
            result = await client.call_tool("alpha_say", {"text": "hi"})
            assert not result.is_error
        print(f"filter edit visible through the gateway after {elapsed:.1f}s")
        status = up.objects("VirtualMCPServer")["gw"]
        assert status["phase"] == "Ready", status
    finally:
        await backend.stop()
