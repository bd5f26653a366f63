"""Side by side with the official MCP registry (Go, PostgreSQL only), in the same run (issue 32).

Both registries serve the same 10,000 generated servers (`bench/registry.py`'s data) from a
PostgreSQL of their own, and are measured alternately, repetition by repetition (A B A B …), so both
see the same machine load:
- start: seconds from spawning the server on its existing database to the first answer of
  `GET /v0.1/servers?limit=1`, and the CPU seconds it used until then (best of 3 starts);
- reads, wrk (2 threads, 16 connections): the cursor walk `limit=100`, `versions/latest` of 1,000
  names, 10,000 unique uncached searches — the ratios are what matters on a shared machine;
- RSS after those reads (serving 10,000 servers);
- publishes: `POST /v0.1/publish`, each request a new server, wrk 2 connections, and the CPU time
  per publish of the registry and of PostgreSQL's processes (the sum is what a publish costs).
The official publishes with a token of its anonymous login (`/v0.1/auth/none`, its namespace
`io.modelcontextprotocol.anonymous/*`); ours with a bearer token of a local OIDC issuer, as in
`bench/registry.py`.

Build the official registry first, outside this checkout (see docs/bench-registry.md for the
commands), then:

    .venv/bin/python -P bench/registry_official.py --official PATH/TO/registry [--reps 3] [--duration 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
import registry as ours  # (bench/registry.py, beside this file)

JWT_SEED = "6b" * 32  # the official's token signing key: any 32-byte seed (a throwaway registry)


def official_env(db_url: str, port: int, seed: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "MCP_REGISTRY_DATABASE_URL": db_url,
            "MCP_REGISTRY_SERVER_ADDRESS": f"127.0.0.1:{port}",
            "MCP_REGISTRY_JWT_PRIVATE_KEY": JWT_SEED,
            "MCP_REGISTRY_ENABLE_REGISTRY_VALIDATION": "false",
            "MCP_REGISTRY_ENABLE_ANONYMOUS_AUTH": "true",
            "MCP_REGISTRY_SEED_FROM": str(seed) if seed else "",
        }
    )
    return env


def first_answer(port: int, proc: subprocess.Popen[bytes], started: float) -> tuple[float, float]:
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v0.1/servers?limit=1", timeout=2) as r:
                if json.loads(r.read())["metadata"]["count"] == 1:
                    return time.perf_counter() - started, ours.cpu_seconds(proc.pid)
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with {proc.returncode}") from None
            if time.perf_counter() - started > 600:
                raise SystemExit("no answer within 600 s") from None
            time.sleep(0.005)


class Official:
    """The official registry on a PostgreSQL of its own, seeded once with the servers."""

    def __init__(self, binary: Path, seed: Path) -> None:
        self.binary = binary
        self.pg = ours.Postgres()
        url = self.pg.start().replace("postgresql+asyncpg://", "postgres://")
        self.db_url = url + "?sslmode=disable"
        port = ours.free_port()
        proc = self.spawn(port, seed)
        try:
            first_answer(port, proc, time.perf_counter())
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v0.1/servers?limit=100") as r:
                assert json.loads(r.read())["metadata"]["count"] == 100
        finally:
            proc.terminate()
            proc.wait(timeout=30)

    def spawn(self, port: int, seed: Path | None = None) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [str(self.binary)],
            env=official_env(self.db_url, port, seed),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        self.pg.stop()


def best_start(spawn: Any, runs: int = 3) -> tuple[float, float]:
    best, best_cpu = float("inf"), float("inf")
    for _ in range(runs):
        port = ours.free_port()
        started = time.perf_counter()
        proc = spawn(port)
        try:
            wall, cpu = first_answer(port, proc, started)
            best, best_cpu = min(best, wall), min(best_cpu, cpu)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return best, best_cpu


def page_paths(base: str) -> list[str]:
    paths, cursor = [], None
    while True:
        path = "/v0.1/servers?limit=100" + (f"&cursor={quote(cursor, safe='')}" if cursor else "")
        with urllib.request.urlopen(base + path) as r:
            doc = json.loads(r.read())
        paths.append(path)
        cursor = doc["metadata"].get("nextCursor")
        if not cursor or not doc["servers"]:
            return paths


def reads(base: str, pid: int, names: list[str], duration: int, workdir: Path) -> dict[str, Any]:
    pages = page_paths(base)
    gets = [f"/v0.1/servers/{quote(n, safe='')}/versions/latest" for n in names[:: len(names) // 1000]]
    ours.wrk(base, pages, 2, workdir)  # warm-up
    order = list(range(ours.N_ENTRIES))
    import random

    random.Random(17).shuffle(order)
    searches = [f"/v0.1/servers?search=server-{i:05d}" for i in order]
    out = {
        "walk": ours.wrk(base, pages, duration, workdir),
        "get": ours.wrk(base, gets, duration, workdir),
        "search": ours.wrk(base, searches, duration, workdir),
    }
    out["rss_mb"] = ours.rss_mb(pid)
    return out


def official_round(
    official: Official, names: list[str], duration: int, workdir: Path, rep: int
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    result["start_s"], result["start_cpu_s"] = best_start(official.spawn)
    port = ours.free_port()
    base = f"http://127.0.0.1:{port}"
    proc = official.spawn(port)
    try:
        first_answer(port, proc, time.perf_counter())
        result.update(reads(base, proc.pid, names, duration, workdir))
        request = urllib.request.Request(base + "/v0.1/auth/none", data=b"{}", method="POST")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request) as r:
            token = json.loads(r.read())["registry_token"]
        template = ours.publish_template().replace(
            # Its database is kept between repetitions: new names each time.
            "com.example.bench/published-",
            f"io.modelcontextprotocol.anonymous/published-r{rep}-",
        )
        script = workdir / "official-publish.lua"
        script.write_text(ours.PUBLISH_LUA % (token, template))
        before = ours.cpu_seconds(proc.pid), ours.postgres_cpu_seconds(official.pg)
        with urllib.request.urlopen(base + "/v0.1/servers?limit=1") as r:
            r.read()
        publish = ours.run_wrk(base, script, duration, ours.PUBLISH_CONNECTIONS, "120s")
        count = int(publish["rps"] * duration)  # (wrk counts the answers: every one was a 200)
        publish["cpu_ms"] = 1000 * (ours.cpu_seconds(proc.pid) - before[0]) / max(1, count)
        publish["db_cpu_ms"] = 1000 * (ours.postgres_cpu_seconds(official.pg) - before[1]) / max(1, count)
        result["publish"] = publish
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    result["load"] = os.getloadavg()[0]
    return result


def ours_round(config: Path, data: Path, names: list[str], duration: int, workdir: Path) -> dict[str, Any]:
    result: dict[str, Any] = {}
    result["start_s"], result["start_cpu_s"] = best_start(lambda port: ours.serve(config, port))
    port = ours.free_port()
    base = f"http://127.0.0.1:{port}"
    proc = ours.serve(config, port)
    try:
        ours.wait_ready(base)
        result.update(reads(base, proc.pid, names, duration, workdir))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    result["publish"] = ours.run_publish("postgres", data, duration, workdir)
    result["load"] = os.getloadavg()[0]
    return result


def median(rounds: list[dict[str, Any]], *path: str) -> float:
    values = []
    for r in rounds:
        value: Any = r
        for key in path:
            value = value[key]
        values.append(float(value))
    return statistics.median(values)


def spread(rounds: list[dict[str, Any]], *path: str, fmt: str = "{:,.0f}") -> str:
    values = []
    for r in rounds:
        value: Any = r
        for key in path:
            value = value[key]
        values.append(float(value))
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))} to {fmt.format(max(values))})"


def render(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], duration: int) -> str:
    rows = [
        ("list walk `limit=100` req/s", ("walk", "rps"), "{:,.0f}", True),
        ("`versions/latest` req/s", ("get", "rps"), "{:,.0f}", True),
        ("unique uncached search req/s", ("search", "rps"), "{:,.0f}", True),
        ("RSS serving 10,000 (MB, after the reads)", ("rss_mb",), "{:.0f}", False),
        ("start on the existing database to first answer (s)", ("start_s",), "{:.3f}", False),
        ("its CPU time (s)", ("start_cpu_s",), "{:.3f}", False),
        (f"publishes/s (wrk, {ours.PUBLISH_CONNECTIONS} connections)", ("publish", "rps"), "{:,.0f}", True),
        ("publish p50 (ms)", ("publish", "p50"), "{:.2f}", False),
        ("publish p99 (ms)", ("publish", "p99"), "{:.2f}", False),
        ("registry CPU per publish (ms)", ("publish", "cpu_ms"), "{:.2f}", False),
        ("PostgreSQL CPU per publish (ms)", ("publish", "db_cpu_ms"), "{:.2f}", False),
    ]
    lines = [
        f"{len(mine)} alternated repetitions, wrk {duration} s per run, median (min to max); ratio = ours / official "
        "for rates, official / ours for sizes and times (above 1: ours is better).",
        "",
        "| figure | mcpfleet (PostgreSQL) | official v1.8.9 (PostgreSQL) | ratio |",
        "| --- | --- | --- | --- |",
    ]
    for label, path, fmt, higher_better in rows:
        a, b = median(mine, *path), median(theirs, *path)
        ratio = (a / b if higher_better else b / a) if a and b else float("nan")
        lines.append(
            f"| {label} | {spread(mine, *path, fmt=fmt)} | {spread(theirs, *path, fmt=fmt)} | {ratio:.2f}x |"
        )
    lines.append("")
    lines.append(
        "Load average (1 min) after each round: ours "
        + ", ".join(f"{r['load']:.1f}" for r in mine)
        + "; official "
        + ", ".join(f"{r['load']:.1f}" for r in theirs)
        + "."
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--official", type=Path, required=True, help="the official registry's binary")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--duration", type=int, default=5)
    parser.add_argument(
        "--publish-connections", type=int, default=ours.PUBLISH_CONNECTIONS, help="wrk connections publishing"
    )
    args = parser.parse_args()
    ours.PUBLISH_CONNECTIONS = args.publish_connections
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install -y wrk")
    if not args.official.is_file():
        raise SystemExit(f"{args.official}: not a file (build the official registry first)")
    workdir = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-official-"))
    try:
        data = workdir / "servers.json"
        names = ours.generate(data)
        seed = workdir / "seed.json"
        seed.write_text(json.dumps(json.loads(data.read_text())["data"]["servers"]))
        official = Official(args.official, seed)
        pg = ours.Postgres()
        try:
            config = workdir / "ours.yaml"
            config.write_text(
                json.dumps(
                    {
                        "registryName": "bench",
                        "sources": [
                            {"name": "gen", "file": {"path": str(data)}, "syncPolicy": {"interval": "1h"}}
                        ],
                        "database": {"url": pg.start()},
                    }
                )
            )
            import asyncio

            asyncio.run(ours.measure_sync(config))
            mine, theirs = [], []
            for rep in range(args.reps):
                mine.append(ours_round(config, data, names, args.duration, workdir))
                print(json.dumps({"rep": rep, "ours": mine[-1]}), flush=True)
                theirs.append(official_round(official, names, args.duration, workdir, rep))
                print(json.dumps({"rep": rep, "official": theirs[-1]}), flush=True)
        finally:
            pg.stop()
            official.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(render(mine, theirs, args.duration))


if __name__ == "__main__":
    main()
