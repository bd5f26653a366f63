"""The real-node test tier: a dev cluster with one real node, the operator installed in-cluster.

Session fixtures
----------------
``real_cluster`` -> ``ClusterHandle``: its own state dir (``$MCPFLEET_REALNODE_STATE_DIR`` or
    ``~/.cache/mcpfleet/realnode-cluster``, never the kwok tier's), 1 kwok node plus the real node
    (``mcpfleet dev-cluster up --real-node``). Needs root; if the node cannot start the tests FAIL
    with the reason (never skip). Stopped, with every host change undone, at session end unless
    ``MCPFLEET_KEEP_CLUSTER=1``.
``mcpfleet_image`` -> str: ``make image``'s reference, built (cached by content) and imported.
``operator_installed`` -> str: the operator applied from ``deploy/`` (``kubectl apply -k`` of an
    overlay that only swaps the image) and rolled out, 2 replicas under its own ServiceAccount.
``client`` -> ``PodClient``: a pod running the mcpfleet image from which tests call Services by
    their cluster DNS names (``kubectl exec`` + ``pod_client.py``).
``echo_image`` -> str: a small image (Debian minbase + python3 + a stdio MCP server) for the
    OCI-image stdio test.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import REPO_ROOT, run_async

from mcpfleet.devcluster.handle import ClusterHandle

HERE = Path(__file__).resolve().parent
CLIENT_NAMESPACE = "realnode-client"


def _progress(message: str) -> None:
    print(f"[real-node] {message}", file=sys.stderr, flush=True)


def realnode_state_dir() -> Path:
    default = Path.home() / ".cache" / "mcpfleet" / "realnode-cluster"
    return Path(os.environ.get("MCPFLEET_REALNODE_STATE_DIR") or default).expanduser()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.realnode)


@pytest.fixture(scope="session")
def tier_lock() -> Iterator[None]:
    """One real-node tier at a time on this host (one bridge, one node IP, one kubelet port): a
    second test session (another checkout's `make test`, CI) waits here for the first to finish
    instead of tearing down a node it is using."""
    from mcpfleet.devcluster.build import default_cache_root

    path = default_cache_root() / "realnode-tier.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            _progress(f"another test session runs the real-node tier ({lock.read().strip()}): waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}, {' '.join(sys.argv)[:200]}")
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def real_cluster(tier_lock: None) -> Iterator[ClusterHandle]:
    from mcpfleet.devcluster.build import BuildError
    from mcpfleet.devcluster.cluster import ClusterError, DevCluster, acquire_for_tests, release_for_tests
    from mcpfleet.devcluster.ociimage import ImageError
    from mcpfleet.devcluster.realnode import RealNode, RealNodeError, check_tools, require_root

    cluster = DevCluster(realnode_state_dir())
    try:
        require_root()
        check_tools()
        # nodes=3: what `mcpfleet dev-cluster up` defaults to, so the README's `up --real-node`
        # (test_readme_kubernetes.py) finds this cluster as it wants it.
        info = run_async(acquire_for_tests(cluster, nodes=3, progress=_progress))
        run_async(RealNode(cluster).up(_progress))
    except (ClusterError, BuildError, RealNodeError, ImageError, OSError) as exc:
        with_cleanup = ""
        try:
            run_async(release_for_tests(cluster, keep=False))
        except Exception as cleanup_exc:  # report both: the cause first
            with_cleanup = f"\n(cleanup also failed: {cleanup_exc!r})"
        pytest.fail(
            f"the real node could not start (state dir {cluster.state_dir}):\n{exc}{with_cleanup}",
            pytrace=False,
        )
    try:
        yield ClusterHandle(info)
    finally:
        keep = os.environ.get("MCPFLEET_KEEP_CLUSTER", "") not in ("", "0", "false")
        run_async(release_for_tests(cluster, keep=keep))


def _import(real_cluster: ClusterHandle, ref: str, archive: Path) -> None:
    from mcpfleet.devcluster.cluster import DevCluster
    from mcpfleet.devcluster.ociimage import image_present, import_archive
    from mcpfleet.devcluster.realnode import RealNode

    node = RealNode(DevCluster(real_cluster.info.state_dir))
    if not image_present(ref, str(node.containerd_socket)):
        import_archive(archive, str(node.containerd_socket))


@pytest.fixture(scope="session")
def mcpfleet_image(real_cluster: ClusterHandle) -> str:
    from mcpfleet.devcluster.image import ImageBuildError, build_image
    from mcpfleet.devcluster.ociimage import ImageError

    try:
        ref, archive = build_image(REPO_ROOT, _progress)
        _import(real_cluster, ref, archive)
    except (ImageBuildError, ImageError) as exc:
        pytest.fail(f"the mcpfleet image could not be built or imported:\n{exc}", pytrace=False)
    return ref


@pytest.fixture(scope="session")
def echo_image(real_cluster: ClusterHandle) -> str:
    from mcpfleet.devcluster.image import build_small_image

    ref, archive = build_small_image(
        "mcp-echo-stdio",
        {"/usr/local/bin/echo-server": HERE / "echo_stdio_server.py"},
        ["/usr/local/bin/echo-server"],
        _progress,
    )
    _import(real_cluster, ref, archive)
    return ref


@pytest.fixture(scope="session")
def operator_installed(real_cluster: ClusterHandle, mcpfleet_image: str) -> str:
    from mcpfleet.devcluster.operator_install import DEPLOYMENT, NAMESPACE, write_overlay

    overlay = write_overlay(
        REPO_ROOT / "deploy", real_cluster.info.state_dir / "operator-overlay", mcpfleet_image
    )
    # deploy/'s CRDs convert through the operator's Service; here the dev control plane serves that
    # webhook (the overlay turns the operator's off): swap the client to the Service for the apply
    # (server-side apply would otherwise keep both), then back to the dev webhook.
    crds = REPO_ROOT / "deploy" / "crds"
    real_cluster.use_shipped_conversion_clients(crds)
    real_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(overlay), timeout=180)
    real_cluster.apply_crds(crds)
    proc = real_cluster.kubectl(
        "-n",
        NAMESPACE,
        "rollout",
        "status",
        f"deployment/{DEPLOYMENT}",
        "--timeout=240s",
        check=False,
        timeout=260,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"the operator did not roll out:\n{proc.stdout}{proc.stderr}\n{real_cluster.describe(NAMESPACE)}",
            pytrace=False,
        )
    return mcpfleet_image


@dataclass(frozen=True)
class PodClient:
    """Calls in-cluster URLs from a pod (so Service DNS, kube-proxy and pod networking are exercised)."""

    cluster: ClusterHandle
    namespace: str
    pod: str

    def run(self, *args: str, timeout: float = 90.0) -> dict[str, Any]:
        proc = self.cluster.kubectl(
            "-n",
            self.namespace,
            "exec",
            "-i",
            self.pod,
            "--",
            "/opt/mcpfleet/bin/python",
            "-",
            *args,
            input=(HERE / "pod_client.py").read_text(),
            check=False,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise AssertionError(
                f"client pod call {args} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
            )
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result

    def mcp(
        self, url: str, tool: str | None = None, arguments: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        args = [url] + ([tool, json.dumps(arguments or {})] if tool else [])
        return self.run("mcp", *args)

    def session(
        self,
        url: str,
        calls: Sequence[tuple[str, dict[str, Any]]] = (),
        mode: str = "legacy",
        timeout: float = 150.0,
    ) -> dict[str, Any]:
        """One MCP client session (protocol era `mode`): tools/list, then each (tool, arguments) call
        in order. The answer (pod_client.py's `session`) has the listed tools with their schemas and,
        per call, its text, structuredContent, isError and duration, or its JSON-RPC error."""
        plan = {"mode": mode, "calls": [{"tool": tool, "arguments": args} for tool, args in calls]}
        return self.run("session", url, json.dumps(plan), timeout=timeout)

    def get(self, url: str) -> dict[str, Any]:
        return self.run("get", url)


@pytest.fixture(scope="session")
def client(real_cluster: ClusterHandle, mcpfleet_image: str) -> PodClient:
    k = real_cluster
    k.kubectl("create", "namespace", CLIENT_NAMESPACE, check=False)
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "client", "namespace": CLIENT_NAMESPACE},
        "spec": {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "client", "image": mcpfleet_image, "command": ["/bin/sleep", "infinity"]}
            ],
        },
    }
    k.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    proc = k.kubectl(
        "-n", CLIENT_NAMESPACE, "wait", "--for=condition=Ready", "pod/client", "--timeout=120s", check=False
    )
    if proc.returncode != 0:
        pytest.fail(
            f"the client pod is not Ready:\n{proc.stderr}\n{k.describe(CLIENT_NAMESPACE)}", pytrace=False
        )
    return PodClient(k, CLIENT_NAMESPACE, "client")


@pytest.fixture
def rn_namespace(real_cluster: ClusterHandle, request: pytest.FixtureRequest) -> Iterator[str]:
    name = real_cluster.create_namespace(request.node.name)
    try:
        yield name
    finally:
        real_cluster.delete_namespace(name)


def wait_ready(k: ClusterHandle, namespace: str, *objects: str, timeout: int = 180) -> None:
    """kubectl wait --for=condition=Ready; on timeout the failure shows objects, pods and events."""
    started = time.monotonic()
    proc = k.kubectl(
        "-n",
        namespace,
        "wait",
        "--for=condition=Ready",
        *objects,
        f"--timeout={timeout}s",
        check=False,
        timeout=timeout + 30,
    )
    if proc.returncode != 0:
        status = k.kubectl("-n", namespace, "get", *objects, "-o", "yaml", check=False).stdout
        raise AssertionError(
            f"{objects} not Ready after {time.monotonic() - started:.0f}s:\n{proc.stderr}\n{status[-4000:]}\n"
            + k.describe(namespace)
        )


@pytest.fixture(scope="session")
def started(
    real_cluster: ClusterHandle, operator_installed: str, echo_image: str
) -> Iterator[dict[str, str]]:
    """Every workload of tests/realnode/workloads.py applied at once, each in its own namespace;
    key -> namespace. The namespaces are deleted at the end of the session."""
    from tests.realnode import workloads

    k = real_cluster
    namespaces = {key: k.create_namespace(f"rn-{key}") for key in workloads.KEYS}
    started_at = time.monotonic()
    try:
        for key, manifest in workloads.manifests(namespaces, echo_image).items():
            k.kubectl("-n", namespaces[key], "apply", "-f", "-", input=manifest)
        _progress(
            f"applied the tier's workloads in {time.monotonic() - started_at:.1f}s: {sorted(namespaces)}"
        )
        yield namespaces
    finally:
        for name in namespaces.values():
            k.delete_namespace(name)
