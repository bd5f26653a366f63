"""`mcpfleet embeddings serve`: start-up to /health, memory (RSS and peak), and request times.

Each run starts the server as a user would (`mcpfleet embeddings serve --port P`, the bundled default
model), times process start to the first 200 from /health, sends one /embed of 128 tool-sized texts
(what the gateway sends per batch), then 50 single-query /embed requests, and reads VmRSS / VmHWM from
/proc. Medians over the runs.

Run: `.venv/bin/python -P bench/embeddings.py [--runs 5]`.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

TEXT = "get_weather Return the weather forecast for a city: temperature, rain and wind for tomorrow"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memory_kb(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def one_run() -> dict[str, float]:
    port = free_port()
    mcpfleet = Path(sys.executable).parent / "mcpfleet"
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(mcpfleet), "embeddings", "serve", "--port", str(port)])
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=30) as http:
            while True:
                try:
                    if http.get(f"{base}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.01)
            started = time.perf_counter() - t0
            t1 = time.perf_counter()
            http.post(f"{base}/embed", json={"inputs": [TEXT] * 128}).raise_for_status()
            batch = time.perf_counter() - t1
            singles = []
            for i in range(50):
                t2 = time.perf_counter()
                http.post(f"{base}/embed", json={"inputs": f"what will the weather be in city {i}"})
                singles.append(time.perf_counter() - t2)
        mem = memory_kb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
    return {
        "start_to_health_s": started,
        "first_batch_128_ms": batch * 1000,
        "single_query_p50_ms": statistics.median(singles) * 1000,
        "rss_mb": mem["VmRSS"] / 1024,
        "peak_rss_mb": mem["VmHWM"] / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = [one_run() for _ in range(parser.parse_args().runs)]
    for key in runs[0]:
        values = [r[key] for r in runs]
        print(f"{key}: median {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f})")


if __name__ == "__main__":
    main()
