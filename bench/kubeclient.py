"""Benchmark of the operator's write path: client CPU per server-side apply, by client library.

Usage:
    .venv/bin/python -P bench/kubeclient.py [--n 400]

On a throwaway dev cluster, N Deployments (the shape the operator renders) are server-side applied,
32 at a time, by each client in turn into a fresh namespace:
  * lightkube over HTTP/2 (what the operator used before),
  * lightkube over HTTP/1.1,
  * `mcpfleet.platform.kubernetes.api.KubeApi` (aiohttp; what the operator uses).
Reported per request: client CPU (this process, user + system) and API server CPU, plus wall time.
The client CPU is what matters to the operator: it shares the cores with the API server it waits on.
"""

from __future__ import annotations

import os
import sys

# Run as a script, this file's folder would come first on sys.path (and bench/operator.py would
# shadow the standard library's `operator` module).
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import argparse
import asyncio
import resource
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcpfleet.devcluster.cluster import DevCluster
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.platform.kubernetes.api import KubeApi, login_from

CONCURRENCY = 32


def process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pid_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def deployment(name: str, namespace: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/instance": name, "app.kubernetes.io/managed-by": "mcpfleet"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": {"h": "0" * 64}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app.kubernetes.io/instance": name}},
            "template": {
                "metadata": {"labels": labels, "annotations": {"c": "0" * 64}},
                "spec": {
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "proxy",
                            "image": "ghcr.io/mcpfleet/mcpfleet:latest",
                            "command": ["mcpfleet", "proxy", "--port", "8080", "--", "uvx", "pkg"],
                            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                            "readinessProbe": {"httpGet": {"path": "/health", "port": 8080}},
                        }
                    ],
                },
            },
        },
    }


async def with_lightkube(kubeconfig: Path, namespace: str, n: int, http2: bool) -> None:
    from lightkube import AsyncClient, KubeConfig
    from lightkube.resources.apps_v1 import Deployment
    from lightkube.types import PatchType

    client = AsyncClient(config=KubeConfig.from_file(str(kubeconfig)), field_manager="bench", http2=http2)
    semaphore = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with semaphore:
            name = f"d{i:04d}"
            obj: Any = await client.patch(
                Deployment,
                name,
                deployment(name, namespace),
                namespace=namespace,
                patch_type=PatchType.APPLY,
                field_manager="bench",
                force=True,
            )
            obj.to_dict()

    try:
        await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await client.close()


async def with_kubeapi(kubeconfig: Path, namespace: str, n: int) -> None:
    api = KubeApi(login_from(str(kubeconfig)), field_manager="bench")
    semaphore = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with semaphore:
            await api.apply(deployment(f"d{i:04d}", namespace))

    try:
        await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await api.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=400)
    args = parser.parse_args()
    state = Path(tempfile.mkdtemp(prefix="bench-kubeclient-"))
    cluster = DevCluster(state)
    info = asyncio.run(cluster.up(nodes=1, progress=lambda m: print(f"[dev-cluster] {m}", file=sys.stderr)))
    handle = ClusterHandle(info)
    apiserver = next(r.pid for r in cluster.procs.records() if r.name == "kube-apiserver")
    runs: list[tuple[str, Callable[[str], Awaitable[None]]]] = [
        ("lightkube, HTTP/2", lambda ns: with_lightkube(info.kubeconfig, ns, args.n, True)),
        ("lightkube, HTTP/1.1", lambda ns: with_lightkube(info.kubeconfig, ns, args.n, False)),
        ("KubeApi (aiohttp)", lambda ns: with_kubeapi(info.kubeconfig, ns, args.n)),
    ]
    print("| client | N | wall s | client CPU ms / request | API server CPU ms / request |")
    print("|---|---|---|---|---|")
    try:
        for label, run in runs:
            namespace = handle.create_namespace("bench-kubeclient")
            client_before, server_before, started = process_cpu(), pid_cpu(apiserver), time.monotonic()
            asyncio.run(run(namespace))
            wall = time.monotonic() - started
            client_ms = (process_cpu() - client_before) * 1000 / args.n
            server_ms = (pid_cpu(apiserver) - server_before) * 1000 / args.n
            print(f"| {label} | {args.n} | {wall:.1f} | {client_ms:.2f} | {server_ms:.2f} |", flush=True)
    finally:
        asyncio.run(cluster.down(purge=True))
        shutil.rmtree(state, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
