"""Real registry servers behind the gateway, and real clients in front of it.

Backends: `mcp-server-time` (PyPI) over `mcpfleet proxy`, `@modelcontextprotocol/server-everything`
(npm) in its own streamable-HTTP mode and in its legacy SSE mode. Clients: the `mcp` SDK client
in both protocol eras and the MCP Inspector CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.client import Client

from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import free_port

REPO = Path(__file__).resolve().parents[2]
NODE_BIN = REPO / "tools" / "node" / "node_modules" / ".bin"
EVERYTHING = NODE_BIN / "mcp-server-everything"
INSPECTOR = NODE_BIN / "mcp-inspector-cli"
TIME_SERVER = Path(sys.executable).with_name("mcp-server-time")


@contextlib.contextmanager
def process(
    cmd: list[str], port: int, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[None]:
    for exe in (Path(cmd[0]),):
        if not exe.exists():
            raise RuntimeError(f"{exe} is missing; run `make venv node-tools`")
    full_env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full_env, cwd=cwd or REPO
    )
    try:
        import socket
        import time

        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                raise RuntimeError(f"{cmd[0]} exited with {proc.returncode}:\n{out[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{cmd[0]} did not listen on {port} within 30 s")
            time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def real_backends() -> Iterator[dict[str, str]]:
    t, e, s = free_port(), free_port(), free_port()
    with (
        process(
            [sys.executable, "-m", "mcpfleet.cli.main", "proxy", "--port", str(t), "--", str(TIME_SERVER)], t
        ),
        process([str(EVERYTHING), "streamableHttp"], e, env={"PORT": str(e)}),
        process([str(EVERYTHING), "sse"], s, env={"PORT": str(s)}),
    ):
        yield {
            "time": f"http://127.0.0.1:{t}/mcp",
            "everything": f"http://127.0.0.1:{e}/mcp",
            "everysse": f"http://127.0.0.1:{s}/sse",
        }


@pytest.fixture
async def real_gateway(real_backends: dict[str, str], gateway: GatewayFactory) -> AsyncIterator[str]:
    cfg = {
        "name": "real",
        "backends": [
            {"name": "time", "url": real_backends["time"]},
            {"name": "everything", "url": real_backends["everything"]},
            {"name": "everysse", "url": real_backends["everysse"], "transport": "sse"},
        ],
    }
    gw = await gateway(cfg)
    yield gw.url


def _text(res: Any) -> str:
    return "".join(getattr(c, "text", "") for c in res.content)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_sdk_client_through_gateway(real_gateway: str, mode: str) -> None:
    async with Client(real_gateway, mode=mode) as c:  # type: ignore[arg-type]
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"time_get_current_time", "time_convert_time", "everything_echo", "everysse_echo"} <= names
        now = await c.call_tool("time_get_current_time", {"timezone": "UTC"})
        assert json.loads(_text(now))["timezone"] == "UTC"
        assert "hello" in _text(await c.call_tool("everything_echo", {"message": "hello"}))
        assert "via sse" in _text(await c.call_tool("everysse_echo", {"message": "via sse"}))
        assert "7" in _text(await c.call_tool("everything_get-sum", {"a": 3, "b": 4}))
        prompts = {p.name for p in (await c.list_prompts()).prompts}
        assert any(p.startswith("everything_") for p in prompts)
        resources = (await c.list_resources()).resources
        assert resources, "everything's resources are aggregated"
        read = await c.read_resource(str(resources[0].uri))
        assert read.contents


async def test_sampling_request_passes_through(real_gateway: str) -> None:
    """everything asks the *client* to sample while answering a tool call; the gateway relays both ways."""
    asked: list[Any] = []

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled-by-client"),
            model="test-model",
        )

    async with Client(real_gateway, mode="legacy", sampling_callback=sampling) as c:
        res = await asyncio.wait_for(
            c.call_tool("everything_trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}), 20
        )
    assert asked, "the sampling request reached the client"
    assert "sampled-by-client" in _text(res)


async def test_inspector_cli_lists_and_calls(real_gateway: str) -> None:
    if not INSPECTOR.exists():
        raise RuntimeError(f"{INSPECTOR} is missing; run `make node-tools`")
    # The CLI reads its own package.json relative to the working directory.
    cwd = INSPECTOR.resolve().parent
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

    async def run(*args: str) -> dict[str, Any]:
        proc = await asyncio.create_subprocess_exec(
            str(INSPECTOR),
            "--cli",
            real_gateway,
            "--transport",
            "http",
            *args,
            cwd=cwd,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()[-2000:]
        text = out.decode()
        return json.loads(text[text.index("{") :])  # type: ignore[no-any-return]

    listed = await run("--method", "tools/list")
    names = {t["name"] for t in listed["tools"]}
    assert "time_get_current_time" in names and "everything_echo" in names
    called = await run(
        "--method",
        "tools/call",
        "--tool-name",
        "time_convert_time",
        "--tool-arg",
        "source_timezone=UTC",
        "--tool-arg",
        "time=12:00",
        "--tool-arg",
        "target_timezone=Asia/Tokyo",
    )
    assert called["isError"] is False
    assert "Asia/Tokyo" in json.dumps(called)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_progress_notifications_pass_through(real_gateway: str, mode: str) -> None:
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with Client(real_gateway, mode=mode) as c:  # type: ignore[arg-type]
        res = await asyncio.wait_for(
            c.call_tool(
                "everything_trigger-long-running-operation",
                {"duration": 1, "steps": 3},
                progress_callback=progress,
            ),
            20,
        )
    assert not res.is_error
    assert len(seen) >= 2 and seen == sorted(seen)  # streamed as they happened, in order


async def test_elicitation_request_passes_through(real_gateway: str) -> None:
    """everything asks the client for input mid-call; the answer travels back through the gateway."""
    asked: list[Any] = []

    async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="decline")

    async with Client(real_gateway, mode="legacy", elicitation_callback=elicit) as c:
        res = await asyncio.wait_for(c.call_tool("everything_trigger-elicitation-request", {}), 20)
    assert asked, "the elicitation request reached the client"
    assert "decline" in _text(res).lower()
