"""Benchmark of the vMCP gateway's steady state: a `tools/list` of 1,000 tools, per gateway process.

Starts the bare backend of bench/vmcp_backends.py (10 backends x 100 tools on one port) and, in
turn, `--processes` gateway processes (`mcpfleet vmcp serve`) with the malloc thresholds of
`mcpfleet.malloctune` (`tuned`) and with glibc's defaults (`MCPFLEET_MALLOC_TUNE=0`, `default`, what runs unless the tuning is asked for),
alternating, so both see the same machine. For each process: one session, 200 first lists (their
minor page faults counted), then `--lists` lists one after another, measuring from /proc/PID/stat
the gateway's CPU time and minor page faults per list, and the client-side p50.

    .venv/bin/python -P bench/vmcp_steady.py [--processes 3] [--lists 2000]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# bench/vmcp.py's helpers; appended (not prepended): bench/operator.py must not shadow the stdlib.
sys.path.append(str(ROOT / "bench"))
from vmcp import HDR as HEADERS  # noqa: E402
from vmcp import free_port, wait_port  # noqa: E402

BACKENDS = ROOT / "bench" / "vmcp_backends.py"
PY = sys.executable
TICK = os.sysconf("SC_CLK_TCK")


def cpu_and_faults(pid: int) -> tuple[float, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command: state(0) ppid pgrp session tty tpgid flags minflt(7) cminflt majflt cmajflt utime(11) stime(12)
    return (int(fields[11]) + int(fields[12])) / TICK, int(fields[7])


def post(
    conn: http.client.HTTPConnection, body: dict[str, Any], headers: dict[str, str]
) -> tuple[bytes, Any]:
    conn.request("POST", "/mcp", json.dumps(body).encode(), headers)
    response = conn.getresponse()
    return response.read(), response.headers


def measure(port: int, pid: int, lists: int) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "b", "version": "1"},
        },
    }
    _, headers = post(conn, init, HEADERS)
    session = {**HEADERS, "mcp-session-id": headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    body = b""
    _, faults_start = cpu_and_faults(pid)
    for _ in range(200):
        body, _ = post(conn, request, session)
    _, faults_warm = cpu_and_faults(pid)
    if body.startswith(b"event:"):
        body = body.split(b"data: ", 1)[1]
    count = len(json.loads(body)["result"]["tools"])
    if count != 1000:
        raise RuntimeError(f"tools/list returned {count} tools, expected 1000")
    cpu0, faults0 = cpu_and_faults(pid)
    samples = []
    for _ in range(lists):
        started = time.perf_counter()
        post(conn, request, session)
        samples.append((time.perf_counter() - started) * 1000)
    cpu1, faults1 = cpu_and_faults(pid)
    conn.close()
    return {
        "cpu_ms_per_list": round((cpu1 - cpu0) * 1000 / lists, 4),
        "faults_per_list": round((faults1 - faults0) / lists, 2),
        "first_200_faults_per_list": round((faults_warm - faults_start) / 200, 2),
        "p50_ms": round(statistics.median(samples), 3),
        "bytes": len(body),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=3, help="gateway processes per mode")
    parser.add_argument("--lists", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"tuned": [], "default": []}
    backend_port = free_port()
    backend = subprocess.Popen([PY, str(BACKENDS), "bare", str(backend_port), "10", "100"])
    try:
        wait_port(backend_port, backend, 120)
        with tempfile.TemporaryDirectory(prefix="mcpfleet-steady-") as tmp:
            config = Path(tmp) / "vmcp.yaml"
            lines = ["name: bench", "backends:"]
            lines += [
                f"  - {{name: b{i}, url: 'http://127.0.0.1:{backend_port}/b{i}/mcp'}}" for i in range(10)
            ]
            lines += ["aggregation: {conflictResolution: prefix}"]
            config.write_text("\n".join(lines) + "\n")
            for _ in range(args.processes):
                for mode in ("tuned", "default"):
                    port = free_port()
                    env = {**os.environ, "MCPFLEET_MALLOC_TUNE": "1" if mode == "tuned" else "0"}
                    argv = [PY, "-m", "mcpfleet.cli.main", "vmcp", "serve", "--config", str(config)]
                    argv += ["--port", str(port), "--log-level", "warning"]
                    gateway = subprocess.Popen(
                        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                    )
                    try:
                        wait_port(port, gateway, 300)
                        time.sleep(1.0)  # backends connected
                        result = measure(port, gateway.pid, args.lists)
                    finally:
                        gateway.terminate()
                        gateway.wait(10)
                    print(mode, json.dumps(result), flush=True)
                    results[mode].append(result)
    finally:
        backend.terminate()
        backend.wait(10)
    for mode, runs in results.items():
        cpu = [r["cpu_ms_per_list"] for r in runs]
        faults = [r["faults_per_list"] for r in runs]
        p50 = [r["p50_ms"] for r in runs]
        first = [r["first_200_faults_per_list"] for r in runs]
        print(
            f"{mode}: first 200 lists {min(first):.1f}-{max(first):.1f} faults per list; then gateway CPU per list {min(cpu):.3f}-{max(cpu):.3f} ms, minor faults per list "
            f"{min(faults):.1f}-{max(faults):.1f}, client p50 {min(p50):.2f}-{max(p50):.2f} ms "
            f"({len(runs)} processes x {args.lists} lists)"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
