"""`up`/`down`/`status` of the dev cluster, the CLI, and what a start failure reports."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpfleet.devcluster.build import STAMP_FILE, BuildLayout, default_cache_root
from mcpfleet.devcluster.cluster import COMPONENTS, ClusterError, DevCluster
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.devcluster.processes import is_running
from tests.conftest import cluster_state_dir, run_async

MCPFLEET = [sys.executable, "-m", "mcpfleet.cli.main"]


def _pids(cluster: DevCluster) -> dict[str, int]:
    return {r.name: r.pid for r in cluster.procs.records()}


def test_up_on_a_running_cluster_is_a_noop(dev_cluster: ClusterHandle) -> None:
    cluster = DevCluster(cluster_state_dir())
    before = _pids(cluster)
    started = time.monotonic()
    info = run_async(cluster.up(nodes=3))
    assert time.monotonic() - started < 5
    assert _pids(cluster) == before
    assert info.server == dev_cluster.server and info.kubeconfig == dev_cluster.kubeconfig


def test_cli_status_and_env(dev_cluster: ClusterHandle) -> None:
    state = str(cluster_state_dir())
    status = subprocess.run(
        [*MCPFLEET, "dev-cluster", "status", "--state-dir", state], capture_output=True, text=True, timeout=60
    )
    assert status.returncode == 0, status.stdout + status.stderr
    for component in COMPONENTS:
        assert component in status.stdout
    assert "readyz ok" in status.stdout and "3 Ready" in status.stdout

    env = subprocess.run(
        [*MCPFLEET, "dev-cluster", "env", "--state-dir", state], capture_output=True, text=True, timeout=60
    )
    assert env.returncode == 0
    assert f"export KUBECONFIG={dev_cluster.kubeconfig}" in env.stdout
    # The printed lines are valid shell: evaluating them puts the built kubectl on PATH.
    out = subprocess.run(
        ["bash", "-c", f'{env.stdout}\nkubectl get nodes -o name && echo "$KUBECONFIG"'],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("node/") >= 3 and str(dev_cluster.kubeconfig) in out.stdout


def test_cli_up_status_down_purge_on_its_own_state_dir(tmp_path: Path) -> None:
    """A second, independent cluster: data survives down/up; --purge removes it; status tracks it."""
    state = tmp_path / "cluster"
    up = subprocess.run(
        [*MCPFLEET, "dev-cluster", "up", "--state-dir", str(state), "--nodes", "1"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert up.returncode == 0, up.stderr
    kubeconfig = Path(up.stdout.strip())
    assert kubeconfig == state / "kubeconfig" and kubeconfig.is_file()
    assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
    cluster = DevCluster(state)
    handle = ClusterHandle(cluster.info())
    assert handle.kubectl("get", "nodes", "-o", "name").stdout.split() == ["node/kwok-node-0"]
    handle.kubectl("create", "configmap", "survivor", "--from-literal=k=v")
    records = cluster.procs.records()
    assert sorted(r.name for r in records) == sorted(COMPONENTS)

    down = subprocess.run(
        [*MCPFLEET, "dev-cluster", "down", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert down.returncode == 0, down.stderr
    assert not any(is_running(r) for r in records)
    status = subprocess.run(
        [*MCPFLEET, "dev-cluster", "status", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 1 and "stopped" in status.stdout

    # Restart on the kept data: same server URL (ports reused while free), the object is still there.
    info = run_async(cluster.up(nodes=1))
    assert info.server == handle.server
    assert handle.kubectl("get", "configmap", "survivor", "-o", "jsonpath={.data.k}").stdout == "v"

    purge = subprocess.run(
        [*MCPFLEET, "dev-cluster", "down", "--state-dir", str(state), "--purge"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert purge.returncode == 0, purge.stderr
    assert [p.name for p in state.iterdir()] == [".lock"]
    assert not any(is_running(r) for r in cluster.procs.records())


def _layout_with_broken_etcd(tmp_path: Path) -> BuildLayout:
    """The real kube binaries next to an `etcd` that exits at once, in a throwaway cache root."""
    real = BuildLayout(default_cache_root())
    layout = BuildLayout(tmp_path / "cache")
    layout.kube_bin.mkdir(parents=True)
    layout.etcd_bin.mkdir(parents=True)
    for p in real.kube_bin.iterdir():
        (layout.kube_bin / p.name).symlink_to(p)
    etcd = layout.etcd_bin / "etcd"
    etcd.write_text("#!/bin/sh\necho 'etcd: simulated fatal error: data dir is corrupt' >&2\nexit 3\n")
    etcd.chmod(0o755)
    (layout.etcd_bin / STAMP_FILE).write_text("{}")
    return layout


def test_a_component_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    layout = _layout_with_broken_etcd(tmp_path)
    cluster = DevCluster(tmp_path / "state", layout)
    with pytest.raises(ClusterError) as err:
        run_async(cluster.up(nodes=1, ready_timeout=20))
    assert err.value.component == "etcd"
    assert "simulated fatal error" in str(err.value)
    # Nothing is left running or recorded after a failed start.
    assert cluster.procs.records() == []


def test_bad_node_count_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nodes"):
        run_async(DevCluster(tmp_path).up(nodes=0))


def test_down_refuses_to_purge_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(ClusterError, match="refusing to purge"):
        run_async(DevCluster(tmp_path).down(purge=True))
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_state_file_records_ports_and_binaries(dev_cluster: ClusterHandle) -> None:
    state = json.loads((cluster_state_dir() / "state.json").read_text())
    assert set(state["ports"]) >= {"etcd", "apiserver", "controller-manager", "scheduler", "kwok"}
    assert dev_cluster.server.endswith(f":{state['ports']['apiserver']}")
    for path in state["bin"].values():
        assert os.access(path, os.X_OK)


def test_fixture_fails_loudly_when_the_cluster_cannot_start(tmp_path: Path) -> None:
    """A run whose cluster cannot start errors out with the component's log, never skips."""
    layout = _layout_with_broken_etcd(tmp_path)
    test_file = tmp_path / "test_needs_cluster.py"
    test_file.write_text("def test_uses_cluster(dev_cluster):\n    assert dev_cluster.server\n")
    env = dict(os.environ)
    env |= {"MCPFLEET_CACHE_DIR": str(layout.cache_root), "MCPFLEET_TEST_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.conftest",
            "-q",
            str(test_file),
            "--rootdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "could not start" in out and "simulated fatal error" in out, out
    assert "skipped" not in out and "1 error" in out, out


def test_a_port_taken_between_choice_and_bind_is_retried(tmp_path: Path) -> None:
    cluster = DevCluster(tmp_path / "state")
    real_choose = cluster._choose_ports
    with socket.socket() as thief:
        thief.bind(("127.0.0.1", 0))
        thief.listen()
        stolen = thief.getsockname()[1]
        calls: list[int] = []

        def choose(previous: dict[str, int]) -> dict[str, int]:
            ports = real_choose(previous)
            if not calls:
                ports["apiserver"] = stolen  # as if another program bound it right after our check
            calls.append(1)
            return ports

        cluster._choose_ports = choose  # type: ignore[method-assign]
        messages: list[str] = []
        try:
            info = run_async(cluster.up(nodes=1, progress=messages.append))
            assert len(calls) == 2
            assert any("retrying on new ports" in m for m in messages)
            assert not info.server.endswith(f":{stolen}")
            assert (
                ClusterHandle(info).kubectl("get", "nodes", "-o", "name").stdout.strip() == "node/kwok-node-0"
            )
        finally:
            run_async(cluster.down(purge=True))
