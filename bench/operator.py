"""Benchmark of the operator: N MCPServers applied at once -> all Running (Ready through kwok).

Usage:
    .venv/bin/python bench/operator.py [--sizes 100 1000] [--workers 16]

For each N, on a throwaway dev cluster with a /16 Service range and one kwok node per 100 servers
(`--cluster shared` uses the test cluster instead, whose /24 Service range holds ~250 Services and
whose 3 nodes hold 330 pods):
  * a fresh namespace and a fresh `mcpfleet operator run` subprocess watching it,
  * N MCPServer objects created concurrently through the API (the clock starts before the first),
  * seconds until every one shows phase Running (a status list every 0.5 s),
  * API requests and writes per object, counted at the operator's client (its /stats endpoint:
    applies, status patches, events; kopf's list+watch streams are not included),
  * writes during an idle resync (every object reconciled again; expected 0),
  * writes by a restarted operator (stopped, then started again with another PYTHONHASHSEED, as an
    upgrade, a crash or a leader hand-over would; expected 0), and its seconds until synced and idle,
  * the operator's RSS (VmRSS) once converged.
Targets (issue 3): 1,000 Running in <= 60 s, <= 4 writes per object, 0 writes per idle resync, RSS <= 150 MB;
(issue 20): 0 writes per restart.
"""

from __future__ import annotations

import os
import sys

# Run as a script, this file's folder comes first on sys.path and the file itself would shadow the
# standard library's `operator` module (imported by asyncio): drop the folder before anything else.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import argparse
import asyncio
import json
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from mcpfleet.devcluster.cluster import DevCluster, acquire_for_tests, release_for_tests
from mcpfleet.devcluster.handle import ClusterHandle

REPO = Path(__file__).resolve().parent.parent
STATE_DIR = Path(
    os.environ.get("MCPFLEET_TEST_STATE_DIR") or Path.home() / ".cache" / "mcpfleet" / "test-cluster"
)
MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"


def server(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": name},
        "spec": {"image": "uvx://mcp-server-time@2025.1", "args": ["--local-timezone", "UTC"]},
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Operator:
    def __init__(
        self, handle: ClusterHandle, namespace: str, workers: int, log: Path, seed: str = "random"
    ) -> None:
        args = [
            str(MCPFLEET), "operator", "run", "--kubeconfig", str(handle.kubeconfig), "--namespace", namespace,
            "--metrics-port", "0", "--metrics-host", "127.0.0.1", "--workers", str(workers),
            "--resync-seconds", "3600", "--log-level", "warning",
        ]  # fmt: skip
        self.log = log.open("ab")
        env = {**handle.env(), "PYTHONHASHSEED": seed}
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.PIPE, env=env)
        self.port: int | None = None
        found = threading.Event()

        def pump() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log.write(line)
                match = re.search(rb"metrics on http://127\.0\.0\.1:(\d+)/", line)
                if match:
                    self.port = int(match.group(1))
                    found.set()

        threading.Thread(target=pump, daemon=True).start()
        if not found.wait(60):
            raise SystemExit(f"operator did not start; see {log}")

    def stats(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=30).json()
        return data

    def wait(self, check: Any, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            stats = self.stats()
            if check(stats):
                return stats
            time.sleep(0.2)
        raise SystemExit(f"operator: condition not reached in {timeout}s: {self.stats()}")

    def idle(self, settle: float = 2.0) -> dict[str, Any]:
        previous = None
        while True:
            stats = self.wait(lambda s: s["idle"], 300)
            if previous is not None and previous["total"] == stats["total"]:
                return stats
            previous = stats
            time.sleep(settle)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


async def create_and_wait(
    handle: ClusterHandle, namespace: str, n: int, limit_s: float
) -> tuple[float, float]:
    """Create N servers (32 at a time) while a watch counts them Running; returns (created, all Running)
    in seconds from the first create.

    The client is kept light on purpose (aiohttp, one watch instead of polling LISTs): it shares the
    two cores with the cluster it measures.
    """
    path = f"/apis/mcpfleet.dev/v1alpha1/namespaces/{namespace}/mcpservers"
    connector = aiohttp.TCPConnector(ssl=handle.info.ssl_context(), limit=40)
    async with aiohttp.ClientSession(base_url=handle.server, connector=connector) as api:
        listing = await (await api.get(path, params={"limit": "1"})).json()
        version = listing["metadata"]["resourceVersion"]
        running: set[str] = set()
        all_running = asyncio.Event()

        async def watch() -> None:
            params = {"watch": "1", "resourceVersion": version, "timeoutSeconds": str(int(limit_s))}
            async with api.get(path, params=params, timeout=aiohttp.ClientTimeout(total=None)) as stream:
                async for line in stream.content:
                    event = json.loads(line)
                    obj = event["object"]
                    if (obj.get("status") or {}).get("phase") == "Running":
                        running.add(obj["metadata"]["name"])
                    if len(running) >= n:
                        all_running.set()
                        return

        watcher = asyncio.create_task(watch())
        started = time.monotonic()
        semaphore = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            async with semaphore:
                async with api.post(path, json=server(f"s{i:04d}")) as response:
                    if response.status != 201:
                        raise SystemExit(
                            f"create s{i:04d}: HTTP {response.status} {(await response.text())[:200]}"
                        )

        await asyncio.gather(*(one(i) for i in range(n)))
        created = time.monotonic() - started
        try:
            await asyncio.wait_for(all_running.wait(), limit_s)
        except TimeoutError:
            raise SystemExit(f"N={n}: only {len(running)} Running after {limit_s}s") from None
        finally:
            watcher.cancel()
        return created, time.monotonic() - started


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def apiserver_requests(handle: ClusterHandle) -> dict[tuple[str, str], tuple[float, float]]:
    """(verb, resource) -> (requests, seconds spent) served by the API server so far."""
    with handle.api(timeout=60) as api:
        text = api.get("/metrics").text
    found: dict[tuple[str, str], list[float]] = {}
    for line in text.splitlines():
        for metric, slot in (("apiserver_request_total{", 0), ("apiserver_request_duration_seconds_sum{", 1)):
            if line.startswith(metric):
                labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
                if labels.get("verb") in ("WATCH", "CONNECT"):
                    continue
                key = (
                    labels.get("verb", ""),
                    labels.get("resource", "")
                    + ("/" + labels["subresource"] if labels.get("subresource") else ""),
                )
                found.setdefault(key, [0.0, 0.0])[slot] += float(line.rsplit(" ", 1)[1])
    return {k: (v[0], v[1]) for k, v in found.items()}


def run_one(
    handle: ClusterHandle, n: int, workers: int, timeout: float, components: dict[str, int]
) -> dict[str, Any]:
    namespace = handle.create_namespace(f"bench-operator-{n}")
    log = Path(f"/tmp/bench-operator-{n}.log")
    log.unlink(missing_ok=True)
    operator = Operator(handle, namespace, workers, log)
    try:
        operator.wait(lambda s: s["synced"], 60)
        base = operator.stats()
        components = {**components, "operator": operator.proc.pid}
        cpu_before = {name: cpu_seconds(pid) for name, pid in components.items()}
        served_before = apiserver_requests(handle)
        created, elapsed = asyncio.run(create_and_wait(handle, namespace, n, timeout))
        cpu = {name: round(cpu_seconds(pid) - cpu_before[name], 1) for name, pid in components.items()}
        served = apiserver_requests(handle)
        by_request = {
            f"{verb} {resource}": (round((count - served_before.get((verb, resource), (0, 0))[0]) / n, 2))
            for (verb, resource), (count, _) in served.items()
            if count - served_before.get((verb, resource), (0, 0))[0] >= n / 10
        }
        converged = operator.idle()
        writes = converged["writes"] - base["writes"]
        total = converged["total"] - base["total"]
        events = sum(v for k, v in converged["requests"].items() if k.endswith(" Event"))
        operator.stats()
        rss = rss_mb(operator.proc.pid)
        httpx.post(f"http://127.0.0.1:{operator.port}/resync", timeout=30)
        after = operator.idle()
        idle_writes = after["writes"] - converged["writes"]
        resync_reconciles = sum(after["reconcilesByKind"].values()) - sum(
            converged["reconcilesByKind"].values()
        )
        restarts = []
        for seed in ("1", "2"):
            # A restart: the old process goes, a new one (another hash seed) lists everything again.
            operator.stop()
            started = time.monotonic()
            operator = Operator(handle, namespace, workers, log, seed=seed)
            operator.wait(lambda s: s["synced"], 120)
            restarted = operator.idle()
            restarts.append(
                {
                    "seed": seed,
                    "writes": restarted["writes"],
                    "requests": restarted["requests"],
                    "seconds_to_idle": round(time.monotonic() - started, 1),
                }
            )
        return {
            "n": n,
            "create_s": created,
            "ready_s": elapsed,
            "requests_per_obj": total / n,
            "writes_per_obj": writes / n,
            "object_writes_per_obj": (writes - events) / n,
            "idle_resync_writes": idle_writes,
            "idle_resync_reconciles": resync_reconciles,
            "restart_writes": max(r["writes"] for r in restarts),
            "restarts": restarts,
            "rss_mb": rss,
            "errors": after["errors"],
            "conflicts": after["conflicts"],
            "cpu_s_until_running": cpu,
            "apiserver_requests_per_object": dict(sorted(by_request.items(), key=lambda kv: -kv[1])),
            "requests_by_kind": {
                k: round((v - base["requests"].get(k, 0)) / n, 2)
                for k, v in converged["requests"].items()
                if v != base["requests"].get(k, 0)
            },
        }
    finally:
        operator.stop()
        handle.delete_namespace(namespace)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument(
        "--cluster",
        choices=("private", "shared"),
        default="private",
        help="private: a throwaway dev cluster whose Service range and node count hold 1,000+ servers "
        "(default); shared: the test cluster (3 nodes x 110 pods and a /24 Service range cap N near 250).",
    )
    args = parser.parse_args()
    progress = lambda m: print(f"[dev-cluster] {m}", file=sys.stderr)  # noqa: E731
    private_dir: Path | None = None
    if args.cluster == "private":
        import tempfile

        from mcpfleet.devcluster import cluster as cluster_module

        # One Service per MCPServer: the dev cluster's default /24 range has ~250 addresses.
        cluster_module.SERVICE_CIDR = "10.96.0.0/16"
        private_dir = Path(tempfile.mkdtemp(prefix="bench-operator-cluster-"))
        cluster = DevCluster(private_dir)
        # kwok nodes hold 110 pods each (the kubelet default): one node per 100 servers.
        info = asyncio.run(cluster.up(nodes=max(3, max(args.sizes) // 100 + 1), progress=progress))
    else:
        cluster = DevCluster(STATE_DIR)
        info = asyncio.run(acquire_for_tests(cluster, nodes=3, progress=progress))
    handle = ClusterHandle(info)
    handle.apply_crds(REPO / "deploy" / "crds")
    results = []
    try:
        for n in args.sizes:
            components = {r.name: r.pid for r in cluster.procs.records()}
            results.append(run_one(handle, n, args.workers, args.timeout, components))
            print(results[-1], flush=True)
    finally:
        if private_dir is not None:
            import shutil

            asyncio.run(cluster.down(purge=True))
            shutil.rmtree(private_dir, ignore_errors=True)
        else:
            keep = os.environ.get("MCPFLEET_KEEP_CLUSTER", "") not in ("", "0", "false")
            asyncio.run(release_for_tests(cluster, keep=keep))
    print()
    print(
        "| N | create s | all Running s | API requests / object | writes / object (of which Events) "
        "| writes per idle resync | writes per restart | operator RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        events = r["writes_per_obj"] - r["object_writes_per_obj"]
        print(
            f"| {r['n']} | {r['create_s']:.1f} | {r['ready_s']:.1f} | {r['requests_per_obj']:.2f} | "
            f"{r['writes_per_obj']:.2f} ({events:.2f}) | {r['idle_resync_writes']} "
            f"({r['idle_resync_reconciles']} reconciles) | {r['restart_writes']} "
            f"({max(x['seconds_to_idle'] for x in r['restarts'])} s to idle) | {r['rss_mb']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
