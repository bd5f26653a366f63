"""Real-node benchmark: warm `up --real-node`, quickstart apply -> first tool call through the in-cluster
gateway (port-forward), and the RSS of the node's components and of each mcpfleet pod.

Usage (root; binaries and image built first: `make node-binaries image`):
    python bench/realnode.py [--state-dir DIR] [--keep]
Prints one JSON document. Cold build times are printed by the builds themselves
(`mcpfleet dev-cluster build --real-node`, `make image`); docs/benchmarks.md records them.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
# bench/mcpwire.py; appended (not prepended), so bench/operator.py does not shadow the stdlib.
sys.path.append(str(REPO / "bench"))

from mcpwire import initialize_request  # noqa: E402

from mcpfleet.devcluster.build import default_cache_root  # noqa: E402
from mcpfleet.devcluster.cluster import DevCluster  # noqa: E402
from mcpfleet.devcluster.image import build_image  # noqa: E402
from mcpfleet.devcluster.ociimage import import_archive  # noqa: E402
from mcpfleet.devcluster.operator_install import DEPLOYMENT, NAMESPACE, write_overlay  # noqa: E402
from mcpfleet.devcluster.processes import is_running  # noqa: E402
from mcpfleet.devcluster.realnode import COMPONENTS, RealNode  # noqa: E402


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pod_rss_mib(pod_uid: str) -> float:
    """Sum of the RSS of every process in the pod's cgroup (memory controller, v1 or v2)."""
    total = 0.0
    seen: set[int] = set()
    for procs in Path("/sys/fs/cgroup").glob(f"**/*pod{pod_uid}*/**/cgroup.procs"):
        for pid in procs.read_text().split():
            if int(pid) not in seen:
                seen.add(int(pid))
                try:
                    total += rss_mib(int(pid))
                except OSError:
                    pass
    return total


def kubectl(cluster: DevCluster, *args: str, **kw: Any) -> str:
    proc = subprocess.run(
        [str(cluster.layout.binary("kubectl")), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=False,
        **kw,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr}")
    out: str = proc.stdout
    return out


def first_tool_call(cluster: DevCluster, ns: str) -> float:
    """Seconds from `kubectl apply` of examples/quickstart to a successful tools/call via port-forward."""
    started = time.monotonic()
    kubectl(cluster, "-n", ns, "apply", "-f", str(REPO / "examples/quickstart"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pf: subprocess.Popen[str] | None = None
    deadline = started + 600
    headers = {"accept": "application/json, text/event-stream"}
    init = initialize_request("2025-06-18", "b")
    while time.monotonic() < deadline:
        if pf is None or pf.poll() is not None:
            pf = subprocess.Popen(
                [
                    str(cluster.layout.binary("kubectl")),
                    f"--kubeconfig={cluster.kubeconfig}",
                    "-n",
                    ns,
                    "port-forward",
                    "service/vmcp-gateway",
                    f"{port}:4483",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
                r = c.post("/mcp", json=init, headers=headers)
                sid = r.headers.get("mcp-session-id")
                h = {**headers, **({"mcp-session-id": sid} if sid else {})}
                c.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h)
                call = {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "time_get_current_time", "arguments": {"timezone": "UTC"}},
                }
                r = c.post("/mcp", json=call, headers=h)
                if (
                    r.status_code == 200
                    and '"timezone' in r.text
                    and '"isError":true' not in r.text.replace(" ", "")
                ):
                    elapsed = time.monotonic() - started
                    pf.terminate()
                    return elapsed
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    if pf is not None:
        pf.terminate()
    raise RuntimeError("no successful tool call through the gateway within 600 s")


def _exclusive_host() -> Any:
    """The real-node test tier's lock (tests/realnode/conftest.py): one real node per host."""
    path = default_cache_root() / "realnode-tier.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.open("a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("waiting for the real-node test tier to finish", file=sys.stderr, flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    lock.seek(0)
    lock.truncate()
    lock.write(f"pid {os.getpid()}, bench/realnode.py")
    lock.flush()
    return lock


async def main() -> None:
    _lock = _exclusive_host()  # held until the process exits
    parser = argparse.ArgumentParser()
    parser.add_argument("--state-dir", type=Path, default=Path.home() / ".cache/mcpfleet/realnode-bench")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = parser.parse_args()
    cluster = DevCluster(args.state_dir)
    out: dict[str, Any] = {}
    await cluster.down(purge=True)
    # Warm start: binaries built, image cached; control plane + real node from nothing running.
    t0 = time.monotonic()
    await cluster.up(nodes=1, real_node=True)
    out["warm_up_real_node_s"] = round(time.monotonic() - t0, 1)
    node = RealNode(cluster)
    t0 = time.monotonic()
    ref, archive = build_image(REPO, lambda m: None)
    out["image_cached_build_s"] = round(time.monotonic() - t0, 1)
    t0 = time.monotonic()
    import_archive(archive, str(node.containerd_socket))
    out["image_import_s"] = round(time.monotonic() - t0, 1)
    t0 = time.monotonic()
    overlay = write_overlay(REPO / "deploy", cluster.state_dir / "operator-overlay", ref)
    kubectl(cluster, "apply", "--server-side", "-k", str(overlay))
    kubectl(cluster, "-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=300s")
    out["operator_install_s"] = round(time.monotonic() - t0, 1)
    out["quickstart_apply_to_first_tool_call_s"] = round(first_tool_call(cluster, "default"), 1)
    comps = {}
    for name in COMPONENTS:
        rec = cluster.procs.read(f"realnode-{name}")
        if rec is not None and is_running(rec):
            comps[name] = round(rss_mib(rec.pid), 1)
    out["node_rss_mib"] = comps
    pods = json.loads(kubectl(cluster, "get", "pods", "-A", "-o", "json"))["items"]
    out["pod_rss_mib"] = {
        f"{p['metadata']['namespace']}/{p['metadata']['name']}": round(
            pod_rss_mib(p["metadata"]["uid"].replace("-", "_")) or pod_rss_mib(p["metadata"]["uid"]), 1
        )
        for p in pods
        if p["spec"].get("nodeName") == "mcpfleet-real-node"
    }
    print(json.dumps(out, indent=2))
    if not args.keep:
        t0 = time.monotonic()
        await cluster.down(purge=True)
        out["down_s"] = round(time.monotonic() - t0, 1)
        print(json.dumps({"down_s": out["down_s"]}))


if __name__ == "__main__":
    asyncio.run(main())
