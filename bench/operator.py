"""Benchmark of the operator: N MCPServers applied at once -> all Running (Ready through kwok).

Usage:
    .venv/bin/python bench/operator.py [--sizes 100 1000] [--workers 16] [--modes floor operator]

For each N, on a throwaway dev cluster with a /16 Service range and one kwok node per 100 servers
(`--cluster shared` uses the test cluster instead, whose /24 Service range holds ~250 Services and
whose 3 nodes hold 330 pods):
  * a fresh namespace and a fresh `mcpfleet operator run` subprocess watching it,
  * N MCPServer objects created concurrently through the API (the clock starts before the first),
  * seconds until every pod is Ready and every server shows phase Running (two watches),
  * API requests and writes per object, counted at the operator's client (its /stats endpoint:
    applies, status patches, events; kopf's list+watch streams are not included),
  * writes during an idle resync (every object reconciled again; expected 0),
  * writes by a restarted operator (stopped, then started again with another PYTHONHASHSEED, as an
    upgrade, a crash or a leader hand-over would; expected 0), and its seconds until synced and idle,
  * the operator's RSS (VmRSS) once converged.
Targets (issue 3): 1,000 Running in <= 60 s, <= 4 writes per object, 0 writes per idle resync, RSS <= 150 MB;
(issue 20): 0 writes per restart; (issue 19): <= 15 s to all Running, <= 4 writes per object with the event.

The `floor` mode runs on the same cluster, one namespace after the other: no operator; a bare client
(the operator's own `KubeApi`, 32 passes at a time) renders each created server's children with the
operator's own renderer (`kinds.plan` + `render`) and applies them at once, posts the same `Created`
event, and patches the same status the moment a pod watch sees the server's pod Ready. It is what
the API server, etcd, the controller manager, the scheduler and kwok cost for the same objects with
the least possible client in front of them: the operator's wall time minus the floor's is the
operator's own. Both modes report CPU seconds per process (/proc/<pid>/stat deltas from the first
create to all Running) and their sum / 2 cores: a lower bound of the wall time on this machine,
whatever else runs on it.
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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from mcpfleet.api.meta import LABEL_INSTANCE
from mcpfleet.api.versions import STORAGE_API_VERSION
from mcpfleet.devcluster.cluster import DevCluster, acquire_for_tests, release_for_tests
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.operator.settings import from_environment
from mcpfleet.operator.store import parse
from mcpfleet.platform.kubernetes.api import KubeApi, login_from
from mcpfleet.platform.kubernetes.apply import apply_children, describe
from mcpfleet.platform.kubernetes.render import Owner, manifest_key, render, url_of
from mcpfleet.reconcile import kinds
from mcpfleet.reconcile.model import WorkloadObservation, WorkloadPlan, World

REPO = Path(__file__).resolve().parent.parent
STATE_DIR = Path(
    os.environ.get("MCPFLEET_TEST_STATE_DIR") or Path.home() / ".cache" / "mcpfleet" / "test-cluster"
)
MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"


CLIENT_VERSION = "v1alpha1"
"""The version the benchmark's client (the user) creates and watches servers in (`--api-version`)."""


def server(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"mcpfleet.dev/{CLIENT_VERSION}",
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


class Progress:
    """What the benchmark's two watches have seen: servers Running, servers whose pod is Ready."""

    def __init__(self, n: int, on_ready: Callable[[str], None] | None) -> None:
        self.n = n
        self.on_ready = on_ready
        self.running: set[str] = set()
        self.ready_pods: set[str] = set()
        self.pods_ready_at = 0.0

    def server_running(self, obj: dict[str, Any]) -> str | None:
        if (obj.get("status") or {}).get("phase") != "Running":
            return None
        self.running.add(obj["metadata"]["name"])
        return str(obj["metadata"]["name"])

    def pod_ready(self, obj: dict[str, Any]) -> str | None:
        conditions = (obj.get("status") or {}).get("conditions") or ()
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            return None
        name = (obj["metadata"].get("labels") or {}).get(LABEL_INSTANCE)
        if name is None or name in self.ready_pods:
            return None if name is None else str(name)
        self.ready_pods.add(name)
        if self.on_ready is not None:
            self.on_ready(name)
        if len(self.ready_pods) >= self.n:
            self.pods_ready_at = time.monotonic()
        return str(name)


Converge = Callable[[dict[str, Any]], Awaitable[None]]
"""What the floor client does with a server just created (None in operator mode: the operator acts)."""


async def follow(
    api: aiohttp.ClientSession,
    url: str,
    version: str,
    n: int,
    limit_s: float,
    seen: Callable[[dict[str, Any]], str | None],
    done: asyncio.Event,
) -> None:
    """Watch `url` from `version` until `seen` has named n distinct objects, then set `done`."""
    found: set[str] = set()

    def note(obj: dict[str, Any]) -> bool:
        name = seen(obj)
        if name is not None and name not in found:
            found.add(name)
            if len(found) >= n:
                done.set()
        return done.is_set()

    while True:
        params = {"watch": "1", "resourceVersion": version, "timeoutSeconds": str(int(limit_s))}
        async with api.get(url, params=params, timeout=aiohttp.ClientTimeout(total=None)) as stream:
            async for line in stream.content:
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    break  # e.g. 410 Gone: list again below
                if note(event["object"]):
                    return
        # The API server ended the watch (a timeout, a slow client's closed stream, an
        # ERROR): list what exists now and watch on from there, missing nothing.
        listing = await (await api.get(url)).json()
        for obj in listing.get("items", ()):
            if note(obj):
                return
        version = listing["metadata"]["resourceVersion"]


async def create_and_wait(
    handle: ClusterHandle,
    namespace: str,
    n: int,
    limit_s: float,
    converge: Converge | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Create N servers (32 at a time) while watches count their pods Ready and the servers Running.

    Returns seconds from the first create: `create_s` (all created), `pods_ready_s` (every server's
    pod Ready), `ready_s` (every server's status.phase Running). `converge` runs for each created
    server (32 at a time, like the operator's workers); `on_ready` once per server whose pod turned
    Ready. The client is kept light on purpose (aiohttp, watches instead of polling LISTs): it
    shares the two cores with the cluster it measures.
    """
    path = f"/apis/mcpfleet.dev/{CLIENT_VERSION}/namespaces/{namespace}/mcpservers"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    connector = aiohttp.TCPConnector(ssl=handle.info.ssl_context(), limit=40)
    async with aiohttp.ClientSession(base_url=handle.server, connector=connector) as api:
        versions = {}
        for url in (path, pods):
            listing = await (await api.get(url, params={"limit": "1"})).json()
            versions[url] = listing["metadata"]["resourceVersion"]
        progress = Progress(n, on_ready)
        all_running, all_pods_ready = asyncio.Event(), asyncio.Event()

        watchers = [
            asyncio.create_task(
                follow(api, path, versions[path], n, limit_s, progress.server_running, all_running)
            ),
            asyncio.create_task(
                follow(api, pods, versions[pods], n, limit_s, progress.pod_ready, all_pods_ready)
            ),
        ]
        started = time.monotonic()
        semaphore, workers = asyncio.Semaphore(32), asyncio.Semaphore(32)
        passes: list[asyncio.Task[None]] = []

        async def work(created: dict[str, Any]) -> None:
            assert converge is not None
            async with workers:
                await converge(created)

        async def one(i: int) -> None:
            async with semaphore:
                async with api.post(path, json=server(f"s{i:04d}")) as response:
                    if response.status != 201:
                        raise SystemExit(
                            f"create s{i:04d}: HTTP {response.status} {(await response.text())[:600]}"
                        )
                    if converge is not None:
                        passes.append(asyncio.create_task(work(await response.json())))

        await asyncio.gather(*(one(i) for i in range(n)))
        created = time.monotonic() - started
        try:
            await asyncio.wait_for(all_running.wait(), limit_s)
            await asyncio.gather(*passes)  # every pass has ended: raises what one raised
        except TimeoutError:
            raise SystemExit(
                f"N={n}: only {len(progress.running)} Running ({len(progress.ready_pods)} pods Ready) "
                f"after {limit_s}s"
            ) from None
        finally:
            for task in watchers:
                task.cancel()
        return {
            "create_s": created,
            "pods_ready_s": progress.pods_ready_at - started if progress.pods_ready_at else float("nan"),
            "ready_s": time.monotonic() - started,
        }


class FloorClient:
    """The least a client must do for the objects the operator makes: render and apply each server's
    children (the operator's renderer and applier), post its `Created` event, and patch its status
    once its pod is Ready. No watch of its own (the benchmark's pod watch calls `ready`), no cache,
    no reconcile: what remains of the wall time is the cluster's."""

    def __init__(self, handle: ClusterHandle, namespace: str) -> None:
        self.api = KubeApi(login_from(str(handle.kubeconfig)))
        self.images = from_environment(namespaces=[namespace]).images
        self.world = World(platform="kubernetes", namespace=namespace, images=self.images)
        self.namespace = namespace
        self.plans: dict[str, tuple[Any, WorkloadPlan]] = {}
        self.ready_names: set[str] = set()
        self.patches: set[asyncio.Task[None]] = set()

    async def converge(self, created: dict[str, Any]) -> None:
        entry = parse({**created, "kind": "MCPServer"})
        model = entry.model
        assert model is not None, entry.error
        plan = kinds.plan(model, self.world)
        name = created["metadata"]["name"]
        desired = render(plan, Owner("MCPServer", name, self.namespace, entry.uid), self.images)
        message = "created " + ", ".join(describe(manifest_key(m)) for m in desired)
        # The children and the event together, as one operator pass sends them.
        await asyncio.gather(
            apply_children(self.api, desired, lambda _key: None, ()),
            self.api.event(entry.raw, reason="Created", message=message),
        )
        self.plans[name] = (model, plan)
        if name in self.ready_names:  # its pod was Ready before this pass ended
            self._patch(name)

    def ready(self, name: str) -> None:
        self.ready_names.add(name)
        if name in self.plans:
            self._patch(name)

    def _patch(self, name: str) -> None:
        model, plan = self.plans.pop(name)
        observation = WorkloadObservation(plan.replicas, plan.replicas, url_of(plan))
        status = kinds.status(model.status, model, plan, observation, self.world)
        body = {"status": status.dump()}
        patch = self.api.patch(
            STORAGE_API_VERSION, "MCPServer", self.namespace, name, body, subresource="status"
        )

        async def send() -> None:
            await patch

        task = asyncio.create_task(send())
        self.patches.add(task)
        task.add_done_callback(self.patches.discard)


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


CORES = os.cpu_count() or 1


def measured(
    handle: ClusterHandle, n: int, components: dict[str, int], run: Callable[[], dict[str, float]]
) -> dict[str, Any]:
    """Run one creation (`run`) and add what it cost: CPU seconds per process (this process is
    `client`: the creates, the watches and, in floor mode, the floor client), their sum / cores (a
    lower bound of the wall time), and the API server's requests per object by verb and resource."""
    components = {**components, "client": os.getpid()}
    cpu_before = {name: cpu_seconds(pid) for name, pid in components.items()}
    served_before = apiserver_requests(handle)
    converted_before = handle.conversion_counts()
    result: dict[str, Any] = dict(run())
    converted = handle.conversion_counts()
    cpu = {name: round(cpu_seconds(pid) - cpu_before[name], 1) for name, pid in components.items()}
    served = apiserver_requests(handle)
    result["cpu_s_until_running"] = dict(sorted(cpu.items(), key=lambda kv: -kv[1]))
    result["cpu_s_total"] = round(sum(cpu.values()), 1)
    result["cpu_bound_s"] = round(sum(cpu.values()) / CORES, 1)
    result["load_average"] = os.getloadavg()
    by_request = {
        f"{verb} {resource}": round((count - served_before.get((verb, resource), (0, 0))[0]) / n, 2)
        for (verb, resource), (count, _) in served.items()
        if count - served_before.get((verb, resource), (0, 0))[0] >= n / 10
    }
    result["apiserver_requests_per_object"] = dict(sorted(by_request.items(), key=lambda kv: -kv[1]))
    # The conversion webhook's work until all Running (every caller: user, operator, collector).
    result["conversion_webhook"] = {
        k: v - converted_before.get(k, 0.0) for k, v in converted.items() if v != converted_before.get(k, 0.0)
    }
    return result


def wait_gone(handle: ClusterHandle, namespace: str, timeout: float = 600) -> None:
    """Wait for a deleted namespace to be gone: the next run must not share the cores with its deletion."""
    deadline = time.monotonic() + timeout
    with handle.api(timeout=60) as api:
        while time.monotonic() < deadline:
            if api.get(f"/api/v1/namespaces/{namespace}").status_code == 404:
                return
            time.sleep(1)
    print(f"namespace {namespace} still there after {timeout}s", file=sys.stderr)


def run_floor(handle: ClusterHandle, n: int, timeout: float, components: dict[str, int]) -> dict[str, Any]:
    """The floor: the same objects applied by a bare client (`FloorClient`), no operator."""
    namespace = handle.create_namespace(f"bench-floor-{n}")
    writes: dict[str, int] = {}

    async def floor() -> dict[str, float]:
        client = FloorClient(handle, namespace)
        try:
            return await create_and_wait(handle, namespace, n, timeout, client.converge, client.ready)
        finally:
            writes.update({f"{verb} {kind}": count for (verb, kind), count in client.api.requests.items()})
            await client.api.close()

    try:
        result = measured(handle, n, components, lambda: asyncio.run(floor()))
        events = sum(v for k, v in writes.items() if k.endswith(" Event"))
        return {
            "mode": "floor",
            "n": n,
            **result,
            "writes_per_obj": sum(writes.values()) / n,
            "object_writes_per_obj": (sum(writes.values()) - events) / n,
            "requests_by_kind": {k: round(v / n, 2) for k, v in writes.items()},
        }
    finally:
        handle.delete_namespace(namespace)
        wait_gone(handle, namespace)


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
        timing = measured(
            handle, n, components, lambda: asyncio.run(create_and_wait(handle, namespace, n, timeout))
        )
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
            "mode": "operator",
            "n": n,
            **timing,
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
            "requests_by_kind": {
                k: round((v - base["requests"].get(k, 0)) / n, 2)
                for k, v in converged["requests"].items()
                if v != base["requests"].get(k, 0)
            },
        }
    finally:
        operator.stop()
        handle.delete_namespace(namespace)
        wait_gone(handle, namespace)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=("floor", "operator"),
        default=["floor", "operator"],
        help="floor: a bare client applies the operator's rendered objects, no operator; operator: "
        "`mcpfleet operator run` does (both by default, one after the other on the same cluster).",
    )
    parser.add_argument(
        "--cluster",
        choices=("private", "shared"),
        default="private",
        help="private: a throwaway dev cluster whose Service range and node count hold 1,000+ servers "
        "(default); shared: the test cluster (3 nodes x 110 pods and a /24 Service range cap N near 250).",
    )
    parser.add_argument(
        "--api-version",
        choices=("v1alpha1", "v1beta1"),
        default="v1alpha1",
        help="the version the benchmark's client (the user) creates and watches MCPServers in; the "
        "operator always speaks the stored version, v1beta1",
    )
    args = parser.parse_args()
    global CLIENT_VERSION
    CLIENT_VERSION = args.api_version
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
            for mode in args.modes:
                if mode == "floor":
                    results.append(run_floor(handle, n, args.timeout, components))
                else:
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
        "| mode | N | create s | pods Ready s | all Running s | writes / object (of which Events) "
        "| CPU s (sum / cores) | load average | writes per idle resync | writes per restart | operator RSS MB "
        "| objects converted by the webhook / server |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        events = r["writes_per_obj"] - r["object_writes_per_obj"]
        cpu = ", ".join(f"{k} {v}" for k, v in r["cpu_s_until_running"].items())
        load = " ".join(f"{x:.1f}" for x in r["load_average"])
        converted = sum(v for k, v in r["conversion_webhook"].items() if k != "reviews")
        operator_only = (
            f"{r['idle_resync_writes']} ({r['idle_resync_reconciles']} reconciles) | {r['restart_writes']} "
            f"({max(x['seconds_to_idle'] for x in r['restarts'])} s to idle) | {r['rss_mb']:.0f}"
            if r["mode"] == "operator"
            else "- | - | -"
        )
        print(
            f"| {r['mode']} | {r['n']} | {r['create_s']:.1f} | {r['pods_ready_s']:.1f} | {r['ready_s']:.1f} | "
            f"{r['writes_per_obj']:.2f} ({events:.2f}) | {r['cpu_s_total']} ({r['cpu_bound_s']} s): {cpu} "
            f"| {load} | {operator_only} | {converted / r['n']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
