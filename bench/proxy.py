"""Benchmark: latency the `mcpfleet proxy` hop adds to `tools/call`, and calls/s at 1 and 16 clients.

Targets (all the conformance fixture server, tool `test_simple_text`):
  stdio-direct      raw JSON-RPC lines on the fixture's stdin/stdout (no HTTP at all)
  http-direct       the fixture's own streamable HTTP (mcp SDK transport), 2025-11-25 and 2026-07-28
  proxy             `mcpfleet proxy -- fixture --transport stdio`, 2025-11-25 and 2026-07-28

The clients are minimal raw JSON-RPC clients (aiohttp / pipes), so the figures measure the
servers and the hop, not an SDK client. 16 clients = 16 sessions each calling back to back.

    .venv/bin/python bench/proxy.py [--calls 300] [--seconds 3] [--markdown docs/bench-proxy.md]
"""

from __future__ import annotations

import os
import sys

# Run as `python bench/proxy.py`, bench/ is sys.path[0] and its sibling scripts (e.g. operator.py)
# would shadow standard modules of the same name; drop it before anything imports them.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import itertools  # noqa: E402
import platform  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
from collections.abc import AsyncIterator, Awaitable, Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import aiohttp  # noqa: E402
import orjson  # noqa: E402

# bench/mcpwire.py; appended (not prepended), so bench/operator.py does not shadow the stdlib.
sys.path.append(os.path.dirname(os.path.abspath(__file__)))
from mcpwire import initialize_params, initialize_request, response_message  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "conformance" / "fixture_server.py"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
CALL = {"name": "test_simple_text", "arguments": {}}
CLIENT_INFO = {"name": "bench", "version": "1"}

Call = Callable[[], Awaitable[None]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def process(cmd: list[str], health: str) -> Any:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(health, timeout=1)
            break
        except urllib.error.HTTPError:
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{cmd} did not start") from None
            time.sleep(0.1)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (Linux /proc), to compare work per call under noisy load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sse_payload(body: bytes) -> dict[str, Any]:
    message = response_message(body, orjson.loads)  # orjson: the client's parse is in the timed loop
    if message is None:
        raise RuntimeError(f"no response in {body[:200]!r}")
    return dict(message)


class HttpClient:
    """One MCP client over streamable HTTP (a session in the handshake era, none in 2026-07-28)."""

    def __init__(self, http: aiohttp.ClientSession, url: str, era: str) -> None:
        self.http, self.url, self.era = http, url, era
        self.headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        self.ids = itertools.count(1)

    async def open(self) -> None:
        if self.era == MODERN:
            self.headers["MCP-Protocol-Version"] = MODERN
            return
        msg = initialize_request(LEGACY, CLIENT_INFO["name"], request_id=0)
        async with self.http.post(self.url, data=orjson.dumps(msg), headers=self.headers) as resp:
            await resp.read()
            self.headers["Mcp-Session-Id"] = resp.headers["Mcp-Session-Id"]
        self.headers["MCP-Protocol-Version"] = LEGACY
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with self.http.post(self.url, data=orjson.dumps(note), headers=self.headers) as resp:
            await resp.read()

    async def call(self) -> None:
        params: dict[str, Any] = dict(CALL)
        headers = self.headers
        if self.era == MODERN:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            }
            headers = {**headers, "Mcp-Method": "tools/call", "Mcp-Name": "test_simple_text"}
        msg = {"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call", "params": params}
        async with self.http.post(self.url, data=orjson.dumps(msg), headers=headers) as resp:
            reply = _sse_payload(await resp.read())
        if "result" not in reply:
            raise RuntimeError(f"tools/call failed: {reply}")


class StdioClient:
    """Raw JSON-RPC over the fixture's stdio; requests are pipelined and matched by id."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.proc: asyncio.subprocess.Process | None = None
        self.reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(FIXTURE),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        self.reader = asyncio.create_task(self._read())
        await self._request("initialize", initialize_params(LEGACY, CLIENT_INFO["name"]))
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            await self.proc.wait()
        if self.reader is not None:
            self.reader.cancel()

    async def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(msg) + b"\n")
        await self.proc.stdin.drain()

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = next(self.ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[rid] = future
        await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return await future

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            msg = orjson.loads(line)
            future = self.waiting.pop(msg.get("id"), None) if "method" not in msg else None
            if future is not None:
                future.set_result(msg)

    async def call(self) -> None:
        reply = await self._request("tools/call", dict(CALL))
        if "result" not in reply:
            raise RuntimeError(f"tools/call failed: {reply}")


async def latency(call: Call, calls: int, pid: int) -> tuple[float, float, float]:
    """p50 and p99 in ms, and the server process's CPU ms per call, over `calls` sequential calls."""
    for _ in range(20):  # warm-up
        await call()
    cpu = cpu_seconds(pid)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    cpu_ms = (cpu_seconds(pid) - cpu) * 1000 / calls
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))], cpu_ms


async def throughput(calls: list[Call], seconds: float) -> float:
    done = 0
    stop = time.perf_counter() + seconds

    async def loop(call: Call) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await call()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in calls))
    return done / (time.perf_counter() - started)


@contextlib.asynccontextmanager
async def http_clients(url: str, era: str, count: int) -> AsyncIterator[list[HttpClient]]:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        clients = [HttpClient(http, url, era) for _ in range(count)]
        for client in clients:
            await client.open()
        yield clients


async def measure_http(url: str, era: str, calls: int, seconds: float, pid: int) -> dict[str, float]:
    async with http_clients(url, era, 16) as clients:
        p50, p99, cpu = await latency(clients[0].call, calls, pid)
        one = await throughput([clients[0].call], seconds)
        sixteen = await throughput([c.call for c in clients], seconds)
    return {"p50": p50, "p99": p99, "cpu": cpu, "c1": one, "c16": sixteen}


async def measure_stdio(calls: int, seconds: float) -> dict[str, float]:
    client = StdioClient()
    await client.open()
    try:
        assert client.proc is not None
        p50, p99, cpu = await latency(client.call, calls, client.proc.pid)
        one = await throughput([client.call], seconds)
        sixteen = await throughput([client.call] * 16, seconds)
    finally:
        await client.close()
    return {"p50": p50, "p99": p99, "cpu": cpu, "c1": one, "c16": sixteen}


def run(coro: Awaitable[dict[str, float]]) -> dict[str, float]:
    """Clients run on uvloop like the proxy does, so loop overhead is comparable."""
    import uvloop

    async def wrapper() -> dict[str, float]:
        return await coro

    return uvloop.run(wrapper())


def main() -> None:
    parser = argparse.ArgumentParser(description="mcpfleet proxy benchmark")
    parser.add_argument("--calls", type=int, default=300, help="sequential calls for the latency figures")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput run")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = parser.parse_args()

    rows: list[tuple[str, dict[str, float]]] = []
    rows.append(("stdio direct (raw pipe, 16 = pipelined)", run(measure_stdio(args.calls, args.seconds))))
    port = free_port()
    fixture = [sys.executable, str(FIXTURE), "--transport", "http", "--port", str(port)]
    with process(fixture, f"http://127.0.0.1:{port}/mcp") as server:
        url = f"http://127.0.0.1:{port}/mcp"
        for era in (LEGACY, MODERN):
            rows.append(
                (
                    f"fixture HTTP direct, {era}",
                    run(measure_http(url, era, args.calls, args.seconds, server.pid)),
                )
            )
    port = free_port()
    proxy = [sys.executable, "-m", "mcpfleet.cli.main", "proxy", "--port", str(port), "--", sys.executable]
    proxy += [str(FIXTURE)]
    with process(proxy, f"http://127.0.0.1:{port}/health") as server:
        url = f"http://127.0.0.1:{port}/mcp"
        for era in (LEGACY, MODERN):
            rows.append(
                (
                    f"mcpfleet proxy -> stdio, {era}",
                    run(measure_http(url, era, args.calls, args.seconds, server.pid)),
                )
            )

    load = os.getloadavg()[0]
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared; load average {load:.1f} at the end), "
        f"Python {platform.python_version()}. Tool: `test_simple_text` of the conformance fixture.",
        "",
        "Server CPU = CPU time of the serving process per sequential call (for the proxy: the proxy",
        "process alone; the stdio child behind it does the work of the stdio-direct row).",
        "",
        "| target | p50 ms | p99 ms | server CPU ms/call | calls/s, 1 client | calls/s, 16 clients |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows:
        lines.append(
            f"| {name} | {r['p50']:.2f} | {r['p99']:.2f} | {r['cpu']:.2f} | {r['c1']:.0f} | {r['c16']:.0f} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.markdown is not None:
        args.markdown.write_text(table + "\n")


if __name__ == "__main__":
    main()
