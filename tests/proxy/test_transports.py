"""SSE transport, remote mode, and the CLI's argument errors."""

from __future__ import annotations

import json
import logging

import aiohttp
import pytest
from mcp.client.client import Client
from mcp.client.sse import sse_client
from mcp.types import TextContent
from starlette.types import Receive, Scope, Send

from mcpfleet.proxy.remote import RemoteProxyApp, headers_from_env
from tests.conformance import harness
from tests.proxy.conftest import RunningProxy, serve_app


async def test_sse_transport(fixture_proxy: RunningProxy) -> None:
    async with Client(sse_client(f"{fixture_proxy.base}/sse"), mode="legacy") as client:
        tools = await client.list_tools()
        assert "test_simple_text" in {t.name for t in tools.tools}
        result = await client.call_tool("test_embedded_resource", {})
        assert result.content[0].type == "resource"


async def test_remote_mode_relays_to_a_remote_server() -> None:
    with harness.fixture_http() as remote_url:
        async with serve_app(RemoteProxyApp(remote_url)) as base:
            for mode in ("legacy", "2026-07-28"):
                async with Client(f"{base}/mcp", mode=mode) as client:
                    result = await client.call_tool("test_simple_text", {})
                    text = result.content[0]
                    assert isinstance(text, TextContent) and text.text.startswith("This is a simple text")


async def test_remote_mode_adds_headers_from_env(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[dict[str, str]] = []

    async def upstream(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    caplog.set_level(logging.DEBUG)
    headers = headers_from_env({"Authorization": "UPSTREAM_TOKEN"}, {"UPSTREAM_TOKEN": "Bearer s3cret"})
    async with serve_app(upstream) as upstream_base:
        async with serve_app(RemoteProxyApp(f"{upstream_base}/mcp", headers)) as base:
            async with aiohttp.ClientSession() as http:
                payload = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
                request_headers = {"Accept": "application/json, text/event-stream", "Mcp-Session-Id": "abc"}
                async with http.post(f"{base}/mcp", json=payload, headers=request_headers) as resp:
                    assert resp.status == 200
                    assert (await resp.json())["id"] == 1
    assert seen, "the upstream got no request"
    assert seen[-1]["authorization"] == "Bearer s3cret"
    assert seen[-1]["mcp-session-id"] == "abc"
    assert seen[-1]["host"] == upstream_base.removeprefix("http://")
    assert "s3cret" not in caplog.text


async def test_remote_mode_reports_an_unreachable_remote() -> None:
    port = harness.free_port()  # nothing listens there
    async with serve_app(RemoteProxyApp(f"http://127.0.0.1:{port}/mcp")) as base:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}) as resp:
                assert resp.status == 502
            async with http.get(f"{base}/health") as resp:
                assert "ClientConnectorError" in (await resp.json())["lastError"]


def test_headers_from_env_names_the_missing_variable() -> None:
    with pytest.raises(ValueError, match="TOKEN_X is not set"):
        headers_from_env({"Authorization": "TOKEN_X"}, {})


def test_cli_rejects_bad_arguments() -> None:
    from typer.testing import CliRunner

    from mcpfleet.cli.main import app

    runner = CliRunner()
    no_command = runner.invoke(app, ["proxy", "--port", "0"])
    assert no_command.exit_code != 0 and "after `--`" in no_command.output
    bad_pair = runner.invoke(
        app, ["proxy", "--remote", "http://127.0.0.1:1/mcp", "--header-from-env", "Authorization"]
    )
    assert bad_pair.exit_code != 0 and "NAME=VALUE" in bad_pair.output
    both = runner.invoke(app, ["proxy", "--remote", "http://127.0.0.1:1/mcp", "--attach", "ns/pod"])
    assert both.exit_code != 0 and "exactly one of" in both.output
    bad_target = runner.invoke(app, ["proxy", "--attach", "just-a-pod"])
    assert bad_target.exit_code != 0 and "NAMESPACE/POD" in bad_target.output
