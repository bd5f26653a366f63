"""Benchmark of service start: launch -> first answered request, for each data-plane service.

For `mcpfleet proxy`, `mcpfleet vmcp serve` and `mcpfleet registry serve`, spawns the command (the
console script of this venv, as a user or a container runs it) and polls `GET /health` every 2 ms;
reports the seconds from `Popen` to the first HTTP answer (any status: the server is serving) and to
the first 200, and the CPU time (user + system, `/proc/PID/stat`) the service process had used at
its first 200: on a shared machine the wall-clock time measures the other processes too, the CPU
time is what the start costs (what a quiet core would wait, give or take the I/O). Also the import
time of the CLI entry alone (`python -c "import mcpfleet.cli.main"`) and of a bare `python -c pass`,
the floor of any Python service on this machine, each with its CPU time. Runs alternate between the
services, so each sees the same load; reported: median and min over `--runs`, and the load average
before and after.

Bytecode is cached (in a folder of the benchmark's own, `PYTHONPYCACHEPREFIX`), as an installed
package has it (`make venv` and the image compile it at install): with the environment's
`PYTHONDONTWRITEBYTECODE` every start would otherwise compile mcpfleet's own modules from source.

    .venv/bin/python -P bench/startup.py [--runs 7] [--json out.json] [--mcpfleet OTHER/.venv/bin/mcpfleet]

`--mcpfleet` (repeatable) measures other installs too (e.g. a checkout of the previous version),
alternating with this one run by run: a side-by-side comparison on the same machine load.

Besides /health, the proxy and the registry are timed to their first real request, made right after
the first 200 (column "first request", with the CPU time at its answer): for the proxy an MCP
`initialize` (streamable HTTP, handshake era) answered through the proxy by its stdio child, for the
registry `GET /v0.1/servers?limit=30`. The stdio server behind the proxy is `bench/stdio_responder.py`,
a one-file standard-library JSON-RPC responder answering `initialize` and `tools/list` (it starts like
a bare `python -c pass`), so the figure is the proxy's own cost (the proxy's /health is 200 once its
child runs); the vMCP has one backend that is not listening (it serves
/health before any backend answers); the registry has one file source of two servers on SQLite,
and `registry 10k` one of 10,000 servers, started on its existing database (synced by the unmeasured
first start): its /health answers once the catalogue is loaded from the database (issue 17).
`vmcp mcp` is the gateway's first real MCP answer (issue 19): a gateway whose one backend does
answer (a small streamable-HTTP MCP server in this process, started before the gateway and not
measured: `McpBackend`) is sent `initialize`, `notifications/initialized` and `tools/list` until
the list holds the backend's tool; its columns are launch -> the first `initialize` result
("first answer") and -> the first `tools/list` with the backend's tool ("first 200"), with the CPU
time at the latter. /health can answer before the gateway serves MCP; this column cannot.
`python -X importtime -m mcpfleet.cli.main ...` shows where the remaining time goes.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# bench/mcpwire.py; appended (not prepended): bench/operator.py must not shadow the stdlib.
sys.path.append(str(Path(__file__).resolve().parent))
from mcpwire import initialize_request, response_message

MCPFLEET = str(Path(sys.executable).parent / "mcpfleet")
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "mcpfleet-bench-pycache")
RESPONDER = Path(__file__).resolve().parent / "stdio_responder.py"
INITIALIZE = initialize_request("2025-06-18", "bench-startup")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (/proc/PID/stat utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _registry_config(work: Path, name: str, servers: int) -> Path:
    """A registry config with one file source of `servers` servers, on SQLite in `work`."""
    data = work / f"{name}-servers.json"
    entries = [
        {"name": f"io.example/s{i:05d}", "description": f"server {i}", "version": "1.0.0"}
        for i in range(servers)
    ]
    data.write_text(json.dumps({"servers": entries}))
    config = work / f"{name}.json"
    source = {"name": "gen", "file": {"path": str(data)}, "syncPolicy": {"interval": "1h"}}
    database = {"url": f"sqlite+aiosqlite:///{work / (name + '.db')}"}
    config.write_text(json.dumps({"registryName": name, "sources": [source], "database": database}))
    return config


def _configs(work: Path) -> dict[str, list[str]]:
    vmcp = work / "vmcp.yaml"
    dead = free_port()
    vmcp.write_text(f"name: bench\nbackends:\n  - {{name: b, url: 'http://127.0.0.1:{dead}/mcp'}}\n")
    registry = _registry_config(work, "bench", 2)
    registry_10k = _registry_config(work, "bench10k", 10_000)
    # -P: bench/ must not shadow the standard library (bench/operator.py would).
    child = [sys.executable, "-P", str(RESPONDER)]
    return {
        "proxy": ["proxy", "--port", "{port}", "--", *child],
        "vmcp": ["vmcp", "serve", "--config", str(vmcp), "--port", "{port}", "--log-level", "warning"],
        "registry": [
            "registry",
            "serve",
            "--config",
            str(registry),
            "--port",
            "{port}",
            "--log-level",
            "warning",
        ],
        "registry 10k": [
            "registry",
            "serve",
            "--config",
            str(registry_10k),
            "--port",
            "{port}",
            "--log-level",
            "warning",
        ],
    }


def mcp_initialize(port: int) -> None:
    """An MCP `initialize` through the proxy; raises unless the stdio child's answer comes back."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=json.dumps(INITIALIZE).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        # JSON or an SSE stream the transport closes after the response: read() returns either way.
        body = response.read()
    if b"bench-responder" not in body:
        raise RuntimeError(f"initialize through the proxy: unexpected answer {body[:200]!r}")


def registry_list(port: int) -> None:
    """The registry's first page of servers; raises unless it is a 200 with a `servers` list."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v0.1/servers?limit=30", timeout=30) as response:
        body = json.loads(response.read())
    if not isinstance(body.get("servers"), list) or not body["servers"]:
        raise RuntimeError(f"registry list: unexpected answer {str(body)[:200]}")


FIRST_REQUEST: dict[str, Callable[[int], None]] = {
    "proxy": mcp_initialize,
    "registry": registry_list,
    "registry 10k": registry_list,
}
"""Per service: its first real request, made right after its first 200 on /health."""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass(frozen=True)
class _Launch:
    """One measured start: the `mcpfleet` process, the port it serves on, and when it was spawned."""

    proc: subprocess.Popen[bytes]
    port: int
    started: float  # time.monotonic() just before Popen: the figures count from here
    name: str  # the command's first two words, for errors

    def since(self) -> float:
        """Seconds since the spawn."""
        return time.monotonic() - self.started

    def attempts(self, timeout: float) -> Iterator[None]:
        """Yield once per poll, 2 ms apart, until `timeout` seconds after the spawn; raises if the
        process exits meanwhile (a start that failed, not a slow one)."""
        while self.since() < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
            yield
            time.sleep(0.002)


@contextlib.contextmanager
def _launched(args: list[str], mcpfleet: str) -> Iterator[_Launch]:
    """Spawn `mcpfleet ARGS` on a free port (`{port}` in `args`), quiet, stopped when the block ends."""
    port = free_port()
    argv = [mcpfleet, *(a.replace("{port}", str(port)) for a in args)]
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    try:
        yield _Launch(proc, port, started, " ".join(args[:2]))
    finally:
        _stop(proc)


def launch_to_first(
    args: list[str],
    mcpfleet: str = MCPFLEET,
    timeout: float = 180.0,
    path: str = "/health",
    request: Callable[[int], None] | None = None,
) -> dict[str, float]:
    with _launched(args, mcpfleet) as launch:
        url = f"http://127.0.0.1:{launch.port}{path}"
        first: float | None = None
        for _ in launch.attempts(timeout):
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    status = response.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            except OSError:
                continue
            now = launch.since()
            first = now if first is None else first
            if status == 200:
                cpu = cpu_seconds(launch.proc.pid)
                result = {"first_answer": round(first, 3), "first_200": round(now, 3), "cpu": round(cpu, 3)}
                if request is not None:
                    request(launch.port)
                    result["first_request"] = round(launch.since(), 3)
                    result["cpu_request"] = round(cpu_seconds(launch.proc.pid), 3)
                return result
        raise RuntimeError(f"{launch.name}: no 200 from {url} within {timeout}s")


class _McpHandler(http.server.BaseHTTPRequestHandler):
    """One streamable-HTTP MCP server of the 2025 era, JSON answers only: `initialize` (a session
    id), `tools/list` (one tool), `ping`; GET (no notification stream) is 405, DELETE ends nothing."""

    protocol_version = "HTTP/1.1"  # keep-alive, as a real backend

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the benchmark prints only its figures."""

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(405)

    def do_DELETE(self) -> None:
        self._send(200)

    def do_POST(self) -> None:
        msg = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        if "id" not in msg:
            self._send(202)
            return
        method, result = msg.get("method"), None
        if method == "initialize":
            result = {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench-backend", "version": "1"},
            }
        elif method == "tools/list":
            schema = {"type": "object", "properties": {"text": {"type": "string"}}}
            result = {"tools": [{"name": "echo", "description": "Echo.", "inputSchema": schema}]}
        elif method == "ping":
            result = {}
        answer: dict[str, object] = {"jsonrpc": "2.0", "id": msg["id"]}
        if result is None:
            answer["error"] = {"code": -32601, "message": f"method not found: {method}"}
        else:
            answer["result"] = result
        headers = {"content-type": "application/json", "mcp-session-id": "bench-session"}
        self._send(200, json.dumps(answer).encode(), headers)


class McpBackend:
    """The answering backend of `vmcp mcp`, served by a thread of the benchmark (unmeasured)."""

    def __init__(self) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _McpHandler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/mcp"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _mcp_post(url: str, msg: dict[str, object], session: str | None) -> tuple[str | None, dict[str, object]]:
    """POST one JSON-RPC message to a streamable-HTTP endpoint: (session id, the JSON-RPC answer)
    from a JSON or an SSE response ({} for an accepted notification)."""
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if session:
        headers["mcp-session-id"] = session
    request = urllib.request.Request(url, data=json.dumps(msg).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
        sid = response.headers.get("mcp-session-id") or session
    return sid, response_message(body) or {}


def launch_to_first_mcp(
    args: list[str], mcpfleet: str = MCPFLEET, timeout: float = 180.0
) -> dict[str, float]:
    """Launch -> the first `initialize` result, -> the first `tools/list` holding the backend's
    `echo` tool (and the CPU time then): what a client of the gateway waits for."""
    with _launched(args, mcpfleet) as launch:
        url = f"http://127.0.0.1:{launch.port}/mcp"
        first: float | None = None
        session: str | None = None
        for _ in launch.attempts(timeout):
            try:
                if first is None:
                    session, answer = _mcp_post(url, INITIALIZE, None)
                    if "result" not in answer:
                        raise RuntimeError(f"initialize answered {answer}")
                    first = launch.since()
                    _mcp_post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
                _, answer = _mcp_post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session)
            except OSError:  # not listening yet (an HTTPError is one too: a 503 while starting)
                continue
            result = answer.get("result")
            tools = result.get("tools", []) if isinstance(result, dict) else []
            if any(isinstance(t, dict) and str(t.get("name", "")).endswith("echo") for t in tools):
                cpu = cpu_seconds(launch.proc.pid)
                now = launch.since()
                return {"first_answer": round(first, 3), "first_200": round(now, 3), "cpu": round(cpu, 3)}
        raise RuntimeError(f"{launch.name}: no tools/list with the backend's tool within {timeout}s")


def _vmcp_mcp_config(work: Path, backend: McpBackend) -> list[str]:
    """`mcpfleet vmcp serve` with the answering backend (`vmcp mcp`)."""
    config = work / "vmcp-live.yaml"
    config.write_text(f"name: bench\nbackends:\n  - {{name: b, url: '{backend.url}'}}\n")
    return ["vmcp", "serve", "--config", str(config), "--port", "{port}", "--log-level", "warning"]


def python_seconds(code: str, python: str = sys.executable) -> dict[str, float]:
    """Wall-clock and CPU seconds (user + system of the child) of `python -c CODE`."""
    before = os.times()
    started = time.monotonic()
    subprocess.run([python, "-c", code], check=True, env=ENV)
    wall = time.monotonic() - started
    after = os.times()
    cpu = after.children_user - before.children_user + after.children_system - before.children_system
    return {"first_answer": round(wall, 3), "first_200": round(wall, 3), "cpu": round(cpu, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--mcpfleet", action="append", default=[], help="another install to compare")
    args = parser.parse_args()
    installs = [MCPFLEET, *args.mcpfleet]
    results: dict[str, list[dict[str, float]]] = {}
    load_before = os.getloadavg()
    backend = McpBackend()  # the answering backend of `vmcp mcp`, up before any gateway
    with tempfile.TemporaryDirectory(prefix="mcpfleet-startup-") as tmp:
        commands = _configs(Path(tmp))
        vmcp_mcp = _vmcp_mcp_config(Path(tmp), backend)
        for install in installs:  # one unmeasured start each: .pyc files, the registry's database
            for name, argv in commands.items():
                # The registries' first start syncs their source: ready (200) once it is in the database.
                launch_to_first(
                    argv, install, path="/readiness" if name.startswith("registry") else "/health"
                )
            launch_to_first_mcp(vmcp_mcp, install)
        for _ in range(args.runs):
            results.setdefault("python -c pass", []).append(python_seconds("pass"))
            for install in installs:
                label = "" if install == MCPFLEET else f" [{install}]"
                python = str(Path(install).parent / "python")
                results.setdefault(f"import mcpfleet.cli.main{label}", []).append(
                    python_seconds("import mcpfleet.cli.main", python)
                )
                for name, argv in commands.items():
                    results.setdefault(f"{name}{label}", []).append(
                        launch_to_first(argv, install, request=FIRST_REQUEST.get(name))
                    )
                results.setdefault(f"vmcp mcp{label}", []).append(launch_to_first_mcp(vmcp_mcp, install))
    backend.close()
    print(json.dumps(results, indent=2))
    print(f"load average before {load_before}, after {os.getloadavg()}")
    for name, runs in results.items():
        first = [r["first_answer"] for r in runs]
        ok = [r["first_200"] for r in runs]
        cpu = [r["cpu"] for r in runs]
        print(
            f"{name}: launch -> first answer median {statistics.median(first):.3f}s (min {min(first):.3f}), "
            f"-> first 200 median {statistics.median(ok):.3f}s (min {min(ok):.3f}), "
            f"CPU median {statistics.median(cpu):.3f}s (min {min(cpu):.3f}), n={len(runs)}"
        )
        if all("first_request" in r for r in runs):
            req = [r["first_request"] for r in runs]
            req_cpu = [r["cpu_request"] for r in runs]
            print(
                f"{name}: launch -> first request answered median {statistics.median(req):.3f}s "
                f"(min {min(req):.3f}), CPU median {statistics.median(req_cpu):.3f}s (min {min(req_cpu):.3f})"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
