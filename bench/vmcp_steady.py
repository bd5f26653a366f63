"""Benchmark of the vMCP gateway's steady state: a `tools/list` of 1,000 tools, per gateway process.

Starts the bare backend of bench/vmcp_backends.py (10 backends x 100 tools on one port) and, in
turn, `--processes` gateway processes (`mcpfleet vmcp serve`) with the malloc thresholds of
`mcpfleet.malloctune` (`tuned`) and with glibc's defaults (`MCPFLEET_MALLOC_TUNE=0`, `default`, what runs unless the tuning is asked for),
alternating, so both see the same machine. For each process: one session, 200 first lists (their
minor page faults counted), then `--lists` lists one after another in windows of 25, measuring the
gateway's main-thread CPU time (/proc/PID/schedstat, ns) and minor page faults per list, and the
client-side p50. Per process it prints the CPU per list of its 10th-percentile window (`cpu_p10_us`,
the figure least disturbed by other processes on a shared machine) and the median window; at the
end, how many processes were more than 1.3x the fastest one (the "slow mode" of issue 19).

`--aliasing` measures instead what made some processes slow (see `mcpfleet.vmcp.pinned`): the time
of a 171,805-byte copy by glibc's memmove and by the kernel (a loopback socket send after a
200-byte header write) for every destination-minus-source offset modulo 4096 (memmove) or source
page offset (send), and prints the offsets that cost more than twice the median.

    .venv/bin/python -P bench/vmcp_steady.py [--processes 5] [--lists 2000] [--aliasing]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import http.client
import json
import mmap
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# bench/vmcp.py's and bench/mcpwire.py's helpers; appended (not prepended): bench/operator.py must
# not shadow the stdlib.
sys.path.append(str(ROOT / "bench"))
from mcpwire import initialize_request, response_json  # noqa: E402

from vmcp import HDR as HEADERS  # noqa: E402
from vmcp import free_port, wait_port  # noqa: E402

BACKENDS = ROOT / "bench" / "vmcp_backends.py"
PY = sys.executable


WINDOW = 25
N_BYTES = 171_805


def cpu_and_faults(pid: int) -> tuple[float, int]:
    """Main-thread CPU seconds (schedstat, ns resolution) and the process' minor page faults."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command: state(0) ppid pgrp session tty tpgid flags minflt(7) ...
    cpu_ns = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    return cpu_ns / 1e9, int(fields[7])


def post(
    conn: http.client.HTTPConnection, body: dict[str, Any], headers: dict[str, str]
) -> tuple[bytes, Any]:
    conn.request("POST", "/mcp", json.dumps(body).encode(), headers)
    response = conn.getresponse()
    return response.read(), response.headers


def measure(port: int, pid: int, lists: int) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    _, headers = post(conn, initialize_request("2025-11-25", "b"), HEADERS)
    session = {**HEADERS, "mcp-session-id": headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    body = b""
    _, faults_start = cpu_and_faults(pid)
    for _ in range(200):
        body, _ = post(conn, request, session)
    _, faults_warm = cpu_and_faults(pid)
    body = response_json(body) or b""
    count = len(json.loads(body)["result"]["tools"])
    if count != 1000:
        raise RuntimeError(f"tools/list returned {count} tools, expected 1000")
    cpu0, faults0 = cpu_and_faults(pid)
    samples = []
    windows = []
    for _ in range(max(1, lists // WINDOW)):
        w0, _ = cpu_and_faults(pid)
        for _ in range(WINDOW):
            started = time.perf_counter()
            post(conn, request, session)
            samples.append((time.perf_counter() - started) * 1000)
        w1, _ = cpu_and_faults(pid)
        windows.append((w1 - w0) * 1e6 / WINDOW)
    cpu1, faults1 = cpu_and_faults(pid)
    conn.close()
    windows.sort()
    done = len(samples)
    return {
        "cpu_p10_us": round(windows[len(windows) // 10], 1),
        "cpu_p50_us": round(windows[len(windows) // 2], 1),
        "cpu_ms_per_list": round((cpu1 - cpu0) * 1000 / done, 4),
        "faults_per_list": round((faults1 - faults0) / done, 2),
        "first_200_faults_per_list": round((faults_warm - faults_start) / 200, 2),
        "p50_ms": round(statistics.median(samples), 3),
        "bytes": len(body),
    }


def aliasing() -> None:
    """Copy cost by relative page offset: glibc memmove, then the kernel's copy of a socket send."""
    region = mmap.mmap(-1, 8 << 20)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    region[:] = b"\1" * len(region)
    memmove = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").memmove
    memmove.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]

    def copy_us(delta: int) -> float:
        src, dst = base + 48, base + (2 << 20) + 48 + delta
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter_ns()
            for _ in range(10):
                memmove(dst, src, N_BYTES)
            best = min(best, (time.perf_counter_ns() - started) / 10_000)
        return best

    report("memmove: (dst - src) mod 4096", [(d, copy_us(d)) for d in range(4096)])

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    header = b"h" * 200
    view = memoryview(region)

    def reader() -> None:
        with contextlib.suppress(OSError):  # the socket closed at the end
            while True:
                got = 0
                while got < len(header) + N_BYTES:
                    data = client.recv(1 << 20)
                    if not data:
                        return
                    got += len(data)
                client.send(b"k")

    threading.Thread(target=reader, daemon=True).start()

    def send_us(offset: int) -> float:
        best = float("inf")
        for _ in range(20):
            server.send(header)
            started = time.perf_counter_ns()
            sent = server.send(view[offset : offset + N_BYTES])
            best = min(best, (time.perf_counter_ns() - started) / 1000)
            if sent != N_BYTES:
                raise RuntimeError(f"partial send {sent}")
            server.recv(1)
        return best

    report("send after a 200-byte header: source page offset", [(o, send_us(o)) for o in range(0, 4096, 16)])
    server.close()
    client.close()
    listener.close()


def report(what: str, timings: list[tuple[int, float]]) -> None:
    median = statistics.median(t for _, t in timings)
    slow = [(offset, round(t, 1)) for offset, t in timings if t > 2 * median]
    print(f"{what}: median {median:.1f} us for {N_BYTES} bytes; over 2x at {slow}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=5, help="gateway processes per mode")
    parser.add_argument("--lists", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--aliasing", action="store_true", help="measure copy cost by page offset instead")
    args = parser.parse_args()
    if args.aliasing:
        aliasing()
        return 0
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
    fastest = min(r["cpu_p10_us"] for runs in results.values() for r in runs)
    for mode, runs in results.items():
        p10 = [r["cpu_p10_us"] for r in runs]
        faults = [r["faults_per_list"] for r in runs]
        p50 = [r["p50_ms"] for r in runs]
        first = [r["first_200_faults_per_list"] for r in runs]
        slow = sum(1 for x in p10 if x > 1.3 * fastest)
        print(
            f"{mode}: first 200 lists {min(first):.1f}-{max(first):.1f} faults per list; then gateway CPU per list "
            f"(p10 window) {min(p10):.0f}-{max(p10):.0f} us, {slow} of {len(runs)} processes over 1.3x the fastest "
            f"({fastest:.0f} us); minor faults per list {min(faults):.1f}-{max(faults):.1f}, client p50 "
            f"{min(p50):.2f}-{max(p50):.2f} ms ({args.lists} lists each)"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
