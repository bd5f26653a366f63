"""`--modern-era auto` (the default): the proxy probes its child with a 2026-07-28 `server/discover`
as the first message and picks the layout from the answer (`proxy/backend.py`, issue 29).

Against real servers over stdio: a strict handshake-only server (refuses the probe) keeps ONE
process for clients of both eras, never restarted; the conformance fixture (mcp SDK 2.x, dual-era,
announcing list changes) answers it and serves 2026-07-28 natively on the probed process while
handshake clients get a second one; a 2026-07-28-only server that announces no list changes is
served untranslated on one fresh process; a server that never answers requests sent before
`initialize` is replaced after the probe's timeout and then serves the handshake era.
(`mcp-server-time`, dual-era without list changes: tests/proxy/test_real_servers.py.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp.client.client import Client

from mcpfleet.proxy.backend import StdioBackend, process_factory
from tests.conformance import harness
from tests.proxy.conftest import running_proxy
from tests.proxy.test_era_bridge import answer, call, envelope, exchange

HERE = Path(__file__).parent
STRICT_SERVER = [sys.executable, str(HERE / "handshake_server.py")]
MODERN_ONLY_SERVER = [sys.executable, str(HERE / "modern_only_server.py")]
SILENT_BEFORE_INITIALIZE = [
    sys.executable,
    "-c",
    "import json, sys\n"
    "for line in sys.stdin:\n"
    "    m = json.loads(line)\n"
    "    if m.get('method') == 'initialize':\n"
    "        r = {'protocolVersion': '2025-11-25', 'capabilities': {}, 'serverInfo': {'name': 'silent', 'version': '1'}}\n"
    "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n",
]


async def test_a_handshake_only_server_runs_once_for_both_eras() -> None:
    async with running_proxy(STRICT_SERVER, modern_era="auto") as proxy:
        _, health = await proxy.health()
        assert health["eraProbe"]["nativeModern"] is False and not health["eraProbe"]["answered"], health
        assert "restarted" not in health["eraProbe"]
        pid = health["children"]["handshake"]["pid"]
        status, messages = await exchange(proxy, call("echo_params", {"a": 1}))
        assert status == 200 and answer(messages)["result"]["resultType"] == "complete", messages
        async with Client(proxy.url, mode="legacy") as client:
            assert {tool.name for tool in (await client.list_tools()).tools} >= {"echo_params"}
        _, health = await proxy.health()
        assert list(health["children"]) == ["handshake"] and health["children"]["handshake"]["pid"] == pid
        assert health["children"]["handshake"]["restarts"] == 0


async def test_a_dual_era_server_serves_2026_natively_and_handshake_on_a_second_process() -> None:
    async with running_proxy(harness.fixture_stdio_command(), modern_era="auto") as proxy:
        _, health = await proxy.health()
        assert health["eraProbe"]["nativeModern"] is True and list(health["children"]) == ["modern"], health
        modern_pid = health["children"]["modern"]["pid"]
        # Untranslated: the fixture's own caching hints and its InputRequiredResult tools reach the client.
        status, messages = await exchange(proxy, call("test_simple_text"))
        assert status == 200 and answer(messages)["result"]["resultType"] == "complete"
        async with Client(proxy.url, mode="2026-07-28") as client:
            assert (await client.list_tools()).tools
        assert list((await proxy.health())[1]["children"]) == ["modern"], (
            "no second process before a handshake client"
        )
        async with Client(proxy.url, mode="legacy") as client:
            result = await client.call_tool("test_simple_text", {})
            assert not result.is_error
        _, health = await proxy.health()
        assert sorted(health["children"]) == ["handshake", "modern"], health
        assert health["children"]["modern"]["pid"] == modern_pid
        assert health["children"]["handshake"]["pid"] != modern_pid


async def test_a_2026_only_server_is_served_untranslated() -> None:
    async with running_proxy(MODERN_ONLY_SERVER, modern_era="auto") as proxy:
        _, health = await proxy.health()
        assert health["eraProbe"]["answered"] and health["eraProbe"]["restarted"], health
        status, messages = await exchange(proxy, call("where"))
        assert status == 200 and answer(messages)["result"]["content"][0]["text"] == "served at 2026-07-28"
        listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": envelope()}}
        _, messages = await exchange(proxy, listed)
        assert answer(messages)["result"]["cacheScope"] == "public"  # its own hints: untranslated
        assert list((await proxy.health())[1]["children"]) == ["handshake"]


@pytest.mark.timeout(60)
async def test_a_server_silent_before_initialize_is_restarted_once_then_serves_the_handshake() -> None:
    backend = StdioBackend(process_factory(SILENT_BEFORE_INITIALIZE), ready_timeout=1.0)
    await backend.start()
    try:
        assert backend.native_modern is False and backend.translates()
        channel = await backend.channel("handshake")
        assert channel.child.status().restarts == 0  # a fresh process, not a restart of the probed one
        reply = await channel.mux.call(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
            deadline=10.0,
        )
        assert reply["result"]["serverInfo"]["name"] == "silent"
        assert await backend.channel("modern") is channel  # translated onto the one process
    finally:
        await backend.stop()
