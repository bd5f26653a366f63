"""The gateway follows its config file: tool filters, overrides, composite tools and MCPToolConfigs
apply in place (same process, same client sessions, `list_changed` sent); a broken file is ignored."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from mcp.client.client import Client

from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, answer_message, initialize_request
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import Served
from tests.vmcp.test_gateway import _next_notification, two

VERSION = "2025-11-25"


def _rewrite(path: Path, config: dict[str, Any]) -> None:
    # As `mcpfleet up` does: a new file renamed over the old one (the kubelet swaps a symlink instead).
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(config))
    tmp.replace(path)


async def _tools(h: aiohttp.ClientSession, url: str, sid: str) -> set[str]:
    headers = {**STREAMABLE_HTTP_HEADERS, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    async with h.post(url, json=request, headers=headers) as r:
        assert r.status == 200, await r.text()
        body = await r.text()
    return {t["name"] for t in answer_message(body)["result"]["tools"]}


async def test_filter_and_override_edits_apply_live_on_the_same_session(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, tmp_path: Path
) -> None:
    config = two(*alpha_beta)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    gw = await gateway(config, config_file=str(path))
    async with aiohttp.ClientSession() as h:
        async with h.post(gw.url, json=initialize_request(), headers=STREAMABLE_HTTP_HEADERS) as r:
            sid = r.headers["mcp-session-id"]
        stream = await h.get(
            gw.url,
            headers={"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": VERSION},
        )
        before = await _tools(h, gw.url, sid)
        assert {"alpha_upper", "alpha_echo", "beta_beta_only"} <= before

        config["aggregation"] = {
            "tools": [
                {"workload": "alpha", "filter": ["echo"]},
                {"workload": "beta", "overrides": {"beta_only": {"name": "renamed"}}},
            ]
        }
        started = time.monotonic()
        _rewrite(path, config)
        note = await _next_notification(stream, "notifications/tools/list_changed", time_limit=10)
        assert note["method"] == "notifications/tools/list_changed"
        after = await _tools(h, gw.url, sid)  # the same session id still works
        elapsed = time.monotonic() - started
        assert "alpha_upper" not in after and "alpha_echo" in after
        assert "beta_renamed" in after and "beta_beta_only" not in after
        assert elapsed < 5, f"took {elapsed:.1f}s"

        # An invalid file is not applied: the last good settings stay.
        path.write_text("aggregation: {conflictResolution: nonsense}\n")
        await asyncio.sleep(2.5)
        assert await _tools(h, gw.url, sid) == after
        stream.close()


async def test_tool_config_and_composite_edits_apply_live(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, tmp_path: Path
) -> None:
    config = two(
        *alpha_beta,
        aggregation={"tools": [{"workload": "alpha", "toolConfigRef": {"name": "tc"}}]},
        toolConfigs={"tc": {"toolsFilter": ["echo"]}},
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    gw = await gateway(config, config_file=str(path))
    async with Client(gw.url, mode="legacy") as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert "alpha_echo" in names and "alpha_upper" not in names
        # The MCPToolConfig now keeps `upper` only, and a composite tool appears.
        config["toolConfigs"] = {"tc": {"toolsFilter": ["upper"]}}
        config["compositeTools"] = [
            {
                "name": "shout",
                "description": "Upper-case with alpha",
                "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
                "steps": [{"id": "up", "tool": "alpha.upper", "arguments": {"text": "{{.params.text}}"}}],
            }
        ]
        _rewrite(path, config)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            names = {t.name for t in (await c.list_tools()).tools}
            if "shout" in names:
                break
            await asyncio.sleep(0.2)
        assert "shout" in names and "alpha_upper" in names and "alpha_echo" not in names, names
        result = await c.call_tool("shout", {"text": "hi"})
        assert not result.is_error and "HI" in json.dumps(result.model_dump(mode="json"))


def test_watcher_sees_a_configmap_style_symlink_swap(tmp_path: Path) -> None:
    """The kubelet updates a mounted ConfigMap by pointing `..data` at a new directory (an atomic
    rename of a symlink); `vmcp.yaml -> ..data/vmcp.yaml` then names a new file, seen by the watcher."""
    from mcpfleet.vmcp.reload import stamp

    def version(name: str, content: str) -> None:
        (tmp_path / name).mkdir()
        (tmp_path / name / "vmcp.yaml").write_text(content)
        (tmp_path / "..data_tmp").symlink_to(name)
        (tmp_path / "..data_tmp").replace(tmp_path / "..data")

    same = "aggregation: {conflictResolution: prefix}\n"
    version("..2026_01", same)
    (tmp_path / "vmcp.yaml").symlink_to("..data/vmcp.yaml")
    first = stamp(tmp_path / "vmcp.yaml")
    version("..2026_02", same)  # same size, possibly the same mtime: a new inode all the same
    assert first is not None and stamp(tmp_path / "vmcp.yaml") not in (None, first)
