"""Leader election on the real control plane: two `mcpfleet operator run --leader-elect` processes
against one namespace, with short durations (lease 4 s, renew deadline 3 s, retry 0.5 s).

Exactly one leads; only the leader reconciles (the standby's client makes no request at all, its
elector only GETs the Lease); SIGKILL of the leader hands over once the lease expired; SIGTERM hands
over at once (the lease is released); a leader whose lease names someone else exits non-zero.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx

from mcpfleet.devcluster.handle import ClusterHandle

from .conftest import Kube, OperatorProcess

LEASE_SECONDS = 4.0
LEADERSHIP_LOST_EXIT = 3


def server(name: str) -> str:
    return f"""
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {{name: {name}}}
spec: {{image: "uvx://mcp-server-time"}}
"""


def _get(process: OperatorProcess, path: str) -> httpx.Response:
    assert process.port is not None
    return httpx.get(f"http://127.0.0.1:{process.port}{path}", timeout=10)


def _leader_gauge(process: OperatorProcess) -> float:
    for line in _get(process, "/metrics").text.splitlines():
        if line.startswith("mcpfleet_operator_leader "):
            return float(line.split()[1])
    raise AssertionError("no mcpfleet_operator_leader in /metrics")


def _leading(process: OperatorProcess) -> dict[str, Any]:
    return process.wait(lambda s: s["leader"] and s["synced"], "the operator to lead and sync", 30)


def test_one_leader_reconciles_and_the_standby_takes_over(
    dev_cluster: ClusterHandle, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    args = (
        "--leader-elect",
        "--leader-election-namespace",
        namespace,
        "--leader-election-lease-duration",
        str(LEASE_SECONDS),
        "--leader-election-renew-deadline",
        "3",
        "--leader-election-retry-period",
        "0.5",
    )
    first = OperatorProcess(dev_cluster, [namespace], tmp_path / "first.log", extra_args=args)
    second = OperatorProcess(dev_cluster, [namespace], tmp_path / "second.log", extra_args=args)
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/mcpfleet-operator"

    def lease() -> dict[str, Any]:
        found = dev_cluster.get_json(lease_path)
        assert found is not None, "no Lease"
        spec: dict[str, Any] = found["spec"]
        return spec

    try:
        first.start(wait=False)
        second.start(wait=False)
        first.wait_listening()
        second.wait_listening()
        # Both answer /healthz at once; exactly one leads.
        assert _get(first, "/healthz").status_code == 200 and _get(second, "/healthz").status_code == 200
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            leaders = [p for p in (first, second) if p.stats()["leader"]]
            if leaders:
                break
            time.sleep(0.2)
        assert len(leaders) == 1, "not exactly one leader"
        leader = leaders[0]
        standby = second if leader is first else first
        leader_stats = _leading(leader)
        time.sleep(1.0)  # several retry periods: the standby stays a standby
        standby_stats = standby.stats()
        assert (
            not standby_stats["leader"]
            and standby_stats["leaderElection"]["holder"] == (leader_stats["leaderElection"]["identity"])
        )
        assert lease()["holderIdentity"] == leader_stats["leaderElection"]["identity"]
        assert lease()["leaseDurationSeconds"] == 4
        assert _leader_gauge(leader) == 1.0 and _leader_gauge(standby) == 0.0
        assert _get(leader, "/readyz").status_code == 200
        assert _get(standby, "/readyz").status_code == 503

        # Only the leader reconciles; the standby's client makes no request, its elector only reads.
        kube.apply(server("one"))
        kube.wait_phase("MCPServer", "one", "Running")
        leader.wait(lambda s: s["reconciles"].get(f"MCPServer/{namespace}/one", 0) > 0, "a reconcile")
        standby_stats = standby.stats()
        assert standby_stats["total"] == 0 and standby_stats["writes"] == 0, standby_stats["requests"]
        assert standby_stats["reconciles"] == {} and standby_stats["objects"] == 0
        # Reads only (a "create Lease" refused with 409 is possible when both started at once).
        election_requests = standby_stats["leaderElection"]["requests"]
        assert "update Lease" not in election_requests and election_requests.get("create Lease", 0) <= 1
        transitions = lease()["leaseTransitions"]

        # SIGKILL: no release, so the standby waits for the lease to expire, then leads.
        killed = time.monotonic()
        leader.kill()
        _leading(standby)
        took_over = time.monotonic() - killed
        assert LEASE_SECONDS - 1.0 <= took_over < LEASE_SECONDS + 10, took_over
        assert lease()["holderIdentity"] == standby.stats()["leaderElection"]["identity"]
        assert lease()["leaseTransitions"] == transitions + 1
        kube.apply(server("two"))
        kube.wait_phase("MCPServer", "two", "Running")
        standby.wait(lambda s: s["reconciles"].get(f"MCPServer/{namespace}/two", 0) > 0, "a reconcile")
        leader, standby = standby, leader

        # The killed one comes back as a standby; SIGTERM to the leader hands over at once.
        standby.start(wait=False)
        standby.wait_listening()
        standby.wait(lambda s: s["leaderElection"]["holder"] != "", "the standby to read the lease")
        assert not standby.stats()["leader"]
        assert leader.proc is not None
        leaving = leader.stats()["leaderElection"]["identity"]
        stopped = time.monotonic()
        leader.proc.send_signal(signal.SIGTERM)
        assert leader.proc.wait(15) == 0, leader.log_tail()
        # Released, not left to expire: by the time the leader has exited, the lease no longer names
        # it (an expiring lease would still hold its identity until the standby takes it over).
        # Checked on the lease itself rather than by timing, which a loaded machine stretches.
        assert lease()["holderIdentity"] != leaving, "the leader exited without releasing its lease"
        assert "released" in leader.log_path.read_text()
        standby.wait(lambda s: s["leader"], "the standby to lead", 30)
        handed_over = time.monotonic() - stopped
        assert handed_over < LEASE_SECONDS + 10, f"handover took {handed_over:.1f}s"
        _leading(standby)
        kube.apply(server("three"))
        kube.wait_phase("MCPServer", "three", "Running")
        leader, standby = standby, leader

        # A leader that finds another holder in its lease stops leading and exits non-zero.
        dev_cluster.kubectl(
            "patch", "lease", "mcpfleet-operator", "-n", namespace, "--type=merge",
            "-p", '{"spec": {"holderIdentity": "intruder"}}',
        )  # fmt: skip
        assert leader.proc is not None
        assert leader.proc.wait(15) == LEADERSHIP_LOST_EXIT, leader.log_tail()
        assert "leadership lost" in leader.log_path.read_text()
    finally:
        for process in (first, second):
            process.stop()
