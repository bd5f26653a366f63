"""Stdio proxies hosted in `up`'s process (`platform/local/hosted.py`): which workloads are hosted,
and that a crash of one server restarts only that server while every endpoint keeps serving."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from mcpfleet.platform.local.hosted import INPROCESS_ENV, hostable
from mcpfleet.platform.local.supervisor import ProcessSpec, Supervisor
from mcpfleet.proxy.config import ProxyConfig

# The smallest stdio MCP server: answers initialize (and any other request) and nothing else.
TINY_SERVER = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    result = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "tiny", "version": "1"}}
    out = {"jsonrpc": "2.0", "id": msg["id"], "result": result if msg["method"] == "initialize" else {}}
    sys.stdout.write(json.dumps(out) + "\\n")
    sys.stdout.flush()
"""


def test_which_workloads_are_hosted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INPROCESS_ENV, raising=False)
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    proxy = ("mcpfleet", "proxy", "--config", "proxy.json", "--port", "{port}")
    stdio = ProxyConfig(command=["uvx", "mcp-server-time"])
    assert hostable((*proxy, "--", "uvx", "mcp-server-time"), proxy=stdio)
    assert hostable(("mcpfleet", "vmcp", "serve", "--config", "x"))
    assert hostable(("mcpfleet", "registry", "serve", "--config", "x"))
    # Their own process: remote relays, attached containers, incoming auth (read from the config),
    # own environment, a proxy whose config is not known.
    assert not hostable(proxy, proxy=ProxyConfig(remote="http://x/mcp"))
    assert not hostable(proxy, proxy=ProxyConfig(remote_from_env="URL"))
    assert not hostable(proxy, proxy=ProxyConfig(attach={"namespace": "ns", "pod": "p"}))  # type: ignore[arg-type]
    assert not hostable(proxy, proxy=ProxyConfig(command=["uvx", "x"], auth_config="a.json"))
    assert not hostable((*proxy, "--", "uvx", "x"))
    assert not hostable(("mcpfleet", "vmcp", "serve", "--config", "x"), has_env=True)
    assert not hostable(("uvx", "mcp-server-time"))
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    assert not hostable(("mcpfleet", "registry", "serve", "--config", "x"))
    monkeypatch.delenv("OTEL_TRACES_EXPORTER")
    monkeypatch.setenv(INPROCESS_ENV, "0")
    assert not hostable((*proxy, "--", "uvx", "x"), proxy=stdio)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read(path: Path) -> str:
    return path.read_text()


def _cmdline(pid: int) -> str:
    return _read(Path(f"/proc/{pid}/cmdline"))


async def _noop(*_args: object) -> None:
    return None


def tiny_proxy_spec(name: str, port: int, tmp_path: Path) -> ProcessSpec:
    """A hosted `mcpfleet proxy` (served in this process) in front of `TINY_SERVER`."""
    argv = (sys.executable, "-m", "mcpfleet.cli.main", "proxy", "--host", "127.0.0.1", "--port", str(port))
    return ProcessSpec(
        key=f"MCPServer/default/{name}/proxy/0",
        kind="MCPServer",
        name=name,
        log_name=name,
        argv=(*argv, "--", sys.executable, "-c", TINY_SERVER),
        env={"PATH": os.environ.get("PATH", ""), "MCPFLEET_TEST_SECRET_ELSEWHERE": ""},
        cwd=tmp_path,
        port=port,
        health_url=f"http://127.0.0.1:{port}/health",
        fingerprint="1",
        mcp_probe_url=f"http://127.0.0.1:{port}/mcp",
        hosted=True,
        proxy=ProxyConfig(host="127.0.0.1", port=port, command=[sys.executable, "-c", TINY_SERVER]),
    )


async def _wait(what: str, check: object, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {limit}s waiting for {what}")


@pytest.mark.timeout(300)
async def test_a_crashed_server_restarts_alone_and_every_endpoint_keeps_serving(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "logs", lambda: None, _noop, _noop)
    specs = [tiny_proxy_spec(name, _free_port(), tmp_path) for name in ("one", "two")]
    pids: dict[str, int] = {}
    try:
        for spec in specs:
            await supervisor.ensure(spec)

        def ready() -> bool:
            return all((s := supervisor.state(spec.key)) is not None and s.ready for spec in specs)

        await _wait("both hosted proxies ready", ready)
        for spec in specs:
            pid = supervisor.state(spec.key).pid  # type: ignore[union-attr]
            # The recorded pid is the server itself, a child of this process: no proxy interpreter.
            assert pid is not None and pid != os.getpid()
            assert "tiny" in _cmdline(pid)
            pids[spec.name] = pid

        os.killpg(pids["one"], signal.SIGKILL)

        def one_restarted() -> bool:
            state = supervisor.state(specs[0].key)
            return state is not None and state.pid not in (None, pids["one"])

        await _wait("a new server for one", one_restarted)
        assert supervisor.state(specs[1].key).pid == pids["two"]  # type: ignore[union-attr]
        assert supervisor.state(specs[0].key).restarts == 0  # type: ignore[union-attr]  # the endpoint stayed
        async with httpx.AsyncClient(trust_env=False) as http:
            for spec in specs:
                assert spec.health_url is not None
                response = await http.get(spec.health_url, timeout=30)
                assert response.status_code == 200, response.text
        log = _read(tmp_path / "logs" / "one.log")
        assert "starting: " in log and "s since up: server spawned (pid" in log
    finally:
        await supervisor.stop_all()
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
