"""Benchmark of the dev cluster: start times, control-plane RSS, time to a ready Deployment.

Usage:
    .venv/bin/python bench/devcluster.py [--runs 3] [--cold-build]

Measures, on a throwaway state dir:
  * fresh start   - `up` on an empty state dir (new certificates, empty etcd), binaries built
  * restart       - `down` (data kept) then `up` again
  * no-op up      - `up` while running
  * RSS           - sum of VmRSS of etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
                    kwok, 10 s after start (idle) and after a 30-replica Deployment became ready
  * deployment    - seconds from `kubectl apply` of 30 replicas to readyReplicas == 30
With --cold-build also a build with an empty Go build cache (module cache shared, so no download):
minutes of full CPU on both cores; run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcpfleet.devcluster.build import BuildLayout, build_all, default_cache_root
from mcpfleet.devcluster.cluster import DevCluster
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.devcluster.processes import is_running


def rss_mib(cluster: DevCluster) -> tuple[float, dict[str, float]]:
    per: dict[str, float] = {}
    for rec in cluster.procs.records():
        if not is_running(rec):
            continue
        for line in Path(f"/proc/{rec.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                per[rec.name] = int(line.split()[1]) / 1024
    return sum(per.values()), per


def deployment(replicas: int) -> str:
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "bench"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "bench"}},
                "template": {
                    "metadata": {"labels": {"app": "bench"}},
                    "spec": {"containers": [{"name": "c", "image": "example.invalid/x:1"}]},
                },
            },
        }
    )


def timed(fn: object) -> float:
    started = time.monotonic()
    asyncio.run(fn)  # type: ignore[arg-type]
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cold-build", action="store_true")
    args = parser.parse_args()

    results: dict[str, object] = {}
    if args.cold_build:
        with tempfile.TemporaryDirectory() as tmp:
            real = BuildLayout(default_cache_root())
            root = Path(tmp)
            (root / "go").mkdir()
            (root / "go" / "mod").symlink_to(real.gomodcache)
            started = time.monotonic()
            asyncio.run(build_all(BuildLayout(root), lambda m: print(m, file=sys.stderr)))
            results["cold_build_s"] = round(time.monotonic() - started, 1)

    fresh: list[float] = []
    restart: list[float] = []
    noop: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        cluster = DevCluster(state)
        try:
            for _ in range(args.runs):
                fresh.append(timed(cluster.up(nodes=3)))
                noop.append(timed(cluster.up(nodes=3)))
                asyncio.run(cluster.down())
                restart.append(timed(cluster.up(nodes=3)))
                asyncio.run(cluster.down(purge=True))
            asyncio.run(cluster.up(nodes=3))
            time.sleep(10)
            idle_total, idle_per = rss_mib(cluster)
            handle = ClusterHandle(cluster.info())
            started = time.monotonic()
            handle.kubectl("apply", "-f", "-", input=deployment(30))

            def ready() -> bool:
                dep = handle.get_json("/apis/apps/v1/namespaces/default/deployments/bench") or {}
                return bool(dep.get("status", {}).get("readyReplicas", 0) == 30)

            handle.wait_for("30 ready replicas", ready, timeout=120, interval=0.1)
            deploy_s = time.monotonic() - started
            busy_total, busy_per = rss_mib(cluster)
        finally:
            asyncio.run(cluster.down(purge=True))

    results |= {
        "fresh_start_s": {"median": round(statistics.median(fresh), 2), "runs": [round(x, 2) for x in fresh]},
        "restart_kept_data_s": {
            "median": round(statistics.median(restart), 2),
            "runs": [round(x, 2) for x in restart],
        },
        "noop_up_s": {"median": round(statistics.median(noop), 3)},
        "rss_idle_mib": {"total": round(idle_total), **{k: round(v) for k, v in idle_per.items()}},
        "deployment_30_replicas_ready_s": round(deploy_s, 2),
        "rss_after_30_pods_mib": {"total": round(busy_total), **{k: round(v) for k, v in busy_per.items()}},
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
