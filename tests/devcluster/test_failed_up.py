"""Issue 35: a stale real-node marker never blocks `up --real-node`, and a failed `up` leaves no process.

The marker (the node bridge's alias) is simulated in a temporary folder standing for /sys/class/net,
so these tests change nothing on the host; whether a process is gone is read from /proc.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpfleet.devcluster import realnode
from mcpfleet.devcluster.cluster import ClusterInfo, DevCluster
from mcpfleet.devcluster.nodeowner import BridgeMarker
from mcpfleet.devcluster.processes import ProcessDir, _proc_stat
from mcpfleet.devcluster.realnode import BRIDGE, RealNode, RealNodeError
from tests.conftest import run_async


class FakeMarker(BridgeMarker):
    """The bridge alias under a temporary sys dir; removing it deletes the file, never a real link."""

    def remove(self) -> None:
        self.alias_file.unlink()


def _marker(tmp_path: Path, owner: Path) -> FakeMarker:
    marker = FakeMarker(BRIDGE, sys_dir=tmp_path / "sys")
    marker.alias_file.parent.mkdir(parents=True)
    marker.alias_file.write_text(f"{owner}\n")
    return marker


def _write_record(state: Path, name: str, pid: int, start_time: int) -> None:
    run = state / "run"
    run.mkdir(parents=True, exist_ok=True)
    record = {"name": name, "pid": pid, "start_time": start_time, "argv": ["containerd"], "log": "x.log"}
    (run / f"{name}.pid").write_text(json.dumps(record))


def _alive(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


def _claim(tmp_path: Path, other_state: Path) -> tuple[RealNode, FakeMarker, list[str]]:
    node = RealNode(DevCluster(tmp_path / "ours"))
    marker = _marker(tmp_path, other_state.resolve() / "realnode")
    node.marker = marker
    messages: list[str] = []
    run_async(node.claim_host(messages.append))
    return node, marker, messages


def test_a_marker_naming_a_dead_pid_is_stale_and_taken_over(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    other = tmp_path / "other"
    _write_record(other, "realnode-containerd", dead.pid, 12345)
    (other / ".lock").write_text("")  # a lock file nobody holds
    _node, marker, messages = _claim(tmp_path, other)
    assert any("stale real-node marker" in m and str(other.resolve()) in m for m in messages), messages
    assert not marker.alias_file.exists()


def test_a_marker_naming_a_reused_pid_is_stale(tmp_path: Path) -> None:
    """The pid runs (this test's own process) but started at another time: not the node's process."""
    stat = _proc_stat(os.getpid())
    assert stat is not None
    other = tmp_path / "other"
    _write_record(other, "realnode-kubelet", os.getpid(), stat[1] + 1)
    _node, marker, messages = _claim(tmp_path, other)
    assert any("taking the host over" in m for m in messages), messages
    assert not marker.alias_file.exists()


def test_a_marker_whose_state_dir_is_gone_is_stale(tmp_path: Path) -> None:
    _node, marker, messages = _claim(tmp_path, tmp_path / "deleted")
    assert any("stale" in m for m in messages) and not marker.alias_file.exists()


def test_a_live_node_of_another_cluster_still_refuses(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    stat = _proc_stat(sleeper.pid)
    assert stat is not None
    other = tmp_path / "other"
    _write_record(other, "realnode-containerd", sleeper.pid, stat[1])
    with pytest.raises(RealNodeError, match=rf"realnode-containerd \(pid {sleeper.pid}\).*stop it first"):
        _claim(tmp_path, other)
    assert (tmp_path / "sys" / BRIDGE / "ifalias").exists()
    assert _alive(sleeper.pid)


def test_an_up_under_way_in_the_other_state_dir_refuses(tmp_path: Path) -> None:
    """No process yet (between the bridge and containerd), but its `up` holds the state dir's lock."""
    other = tmp_path / "other"
    other.mkdir()
    with open(other / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(RealNodeError, match="holding"):
            _claim(tmp_path, other)


def test_our_own_marker_is_no_obstacle(tmp_path: Path) -> None:
    node = RealNode(DevCluster(tmp_path / "ours"))
    node.marker = _marker(tmp_path, node.dir)
    messages: list[str] = []
    run_async(node.claim_host(messages.append))
    assert messages == [] and node.marker.alias_file.exists()


def _fake_control_plane(monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]) -> list[int]:
    """`_up_locked` replaced by cheap processes recorded as the control plane's."""
    pids: list[int] = []

    async def up_locked(self: DevCluster, nodes: int, progress: object, ready_timeout: float) -> ClusterInfo:
        for name in names:
            pids.append(self.procs.start(name, ["sleep", "300"]).pid)
        return ClusterInfo.__new__(ClusterInfo)

    monkeypatch.setattr(DevCluster, "_up_locked", up_locked)
    monkeypatch.setattr(realnode, "require_root", lambda: None)
    monkeypatch.setattr(realnode, "check_tools", lambda: None)
    return pids


def _fail_real_node(monkeypatch: pytest.MonkeyPatch) -> None:
    async def fail(self: RealNode, progress: object, ready_timeout: float = 0) -> None:
        raise RealNodeError("forced failure after the control plane started")

    monkeypatch.setattr(RealNode, "up", fail)


def test_a_failed_up_stops_the_control_plane_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = _fake_control_plane(monkeypatch, ("etcd", "kube-apiserver"))
    _fail_real_node(monkeypatch)
    cluster = DevCluster(tmp_path / "state")
    messages: list[str] = []
    try:
        with pytest.raises(RealNodeError, match="forced failure"):
            run_async(cluster.up(nodes=1, progress=messages.append, real_node=True))
        assert len(pids) == 2 and not any(_alive(p) for p in pids), "a process of the failed up still runs"
        assert cluster.procs.records() == []
        assert any(
            "stopped what it had started" in m and "kube-apiserver" in m and "etcd" in m for m in messages
        )
    finally:
        run_async(cluster.down())  # a failing assertion leaves nothing running either


def test_a_failed_up_keeps_a_control_plane_that_ran_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = DevCluster(tmp_path / "state")
    kept = cluster.procs.start("kube-apiserver", ["sleep", "300"])
    started_by_up = _fake_control_plane(monkeypatch, ("extra-component",))
    _fail_real_node(monkeypatch)
    messages: list[str] = []
    try:
        with pytest.raises(RealNodeError):
            run_async(cluster.up(nodes=1, progress=messages.append, real_node=True))
        assert _alive(kept.pid), "the control plane that ran before the failed up was stopped"
        assert not _alive(started_by_up[0])
        assert any("stopped what it had started: extra-component" in m for m in messages), messages
    finally:
        run_async(cluster.down())
    assert not _alive(kept.pid)


def test_cli_up_that_fails_after_the_control_plane_started_leaves_no_process(tmp_path: Path) -> None:
    """The real control plane starts, then `--real-node` fails (forced in a child process): every
    process the command started is gone from /proc, and the command said what it stopped."""
    state = tmp_path / "state"
    script = f"""
import sys
from mcpfleet.devcluster import realnode
from mcpfleet.devcluster.realnode import RealNode, RealNodeError
realnode.require_root = lambda: None
realnode.check_tools = lambda: None
async def fail(self, progress, ready_timeout=0):
    raise RealNodeError("forced failure after the control plane started")
RealNode.up = fail
from mcpfleet.cli.main import main
sys.argv = ["mcpfleet", "dev-cluster", "up", "--real-node", "--nodes", "1", "--state-dir", {str(state)!r}]
main()
"""
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        survivors = _processes_naming(state)
    finally:
        run_async(DevCluster(state).down())  # a failing assertion leaves nothing running either
    assert survivors == [], survivors
    assert proc.returncode == 1, proc.stderr
    assert "forced failure" in proc.stderr and "kube-apiserver ready" in proc.stderr, proc.stderr
    assert "stopped what it had started:" in proc.stderr, proc.stderr
    assert ProcessDir(state).records() == [], "pid files left behind"


def _processes_naming(state: Path) -> list[bytes]:
    """Every live process whose argv names the state dir (etcd, the apiserver, kwok, the webhook...)."""
    survivors = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if str(state).encode() in argv and _alive(int(entry.name)):
                survivors.append(argv.replace(b"\0", b" ")[:200])
    return survivors
