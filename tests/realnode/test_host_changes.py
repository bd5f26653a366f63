"""`up --real-node` changes the host; `down` puts every change back (the proof asked by the issue).

Runs first in the tier (file order), before the session's real node starts: it drives the tier's own
state dir through down -> snapshot -> up --real-node -> down -> snapshot and compares the snapshots
(sysctls, iptables/ip6tables rules, network links, host directories, cgroups, mounts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_async
from tests.realnode.conftest import _progress, realnode_state_dir

from mcpfleet.devcluster.cluster import DevCluster
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.devcluster.hostchanges import snapshot_for_proof
from mcpfleet.devcluster.realnode import BRIDGE, RealNode


def test_down_restores_every_host_change(tier_lock: None) -> None:
    cluster = DevCluster(realnode_state_dir())
    run_async(cluster.down(purge=True))
    prefixes = [str(cluster.state_dir), "/var/lib/kubelet"]
    before = snapshot_for_proof(prefixes)
    assert not Path(f"/sys/class/net/{BRIDGE}").exists(), "a real node is attached already"

    run_async(cluster.up(nodes=3, progress=_progress, real_node=True))
    try:
        # One real pod (the pause image is already in the node), so the CNI plugin, netns mounts,
        # shims and pod cgroups are part of what must be undone.
        handle = ClusterHandle(cluster.info())
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "sleeper", "namespace": "default"},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "pause", "image": RealNode(cluster).pause_ref()}],
            },
        }
        handle.kubectl("apply", "-f", "-", input=json.dumps(pod))
        handle.kubectl("wait", "--for=condition=Ready", "pod/sleeper", "--timeout=60s")
        during = snapshot_for_proof(prefixes)
        # The changes really happen (else the comparison below would prove nothing).
        assert BRIDGE in during["links"]
        assert any(r.startswith(":KUBE-") for r in during["iptables"]["iptables"].get("nat", []))
        assert during["sysctls"]["net.ipv4.ip_forward"] == "1"
        assert during["sysctls"]["vm.overcommit_memory"] == "1"
        assert any("kubepods" in children for children in during["cgroups"].values())
        assert during["dirs"]["/run/containerd"] and during["dirs"]["/run/netns"]
        assert during["mounts"], "pod volumes and the network namespace are mounted"
        status = subprocess.run(
            [
                str(Path(sys.executable).parent / "mcpfleet"),
                "dev-cluster",
                "status",
                "--state-dir",
                str(cluster.state_dir),
            ],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ},
        )
        assert "mcpfleet-real-node (10.88.0.1) Ready" in status.stdout, status.stdout + status.stderr
    finally:
        actions = run_async(RealNode(cluster).down(_progress))
        run_async(cluster.down(purge=True))
    after = snapshot_for_proof(prefixes)
    print("down:", *actions, sep="\n  ")
    for key in before:
        assert after[key] == before[key], (
            f"{key} differs after down:\nbefore {before[key]}\nafter  {after[key]}"
        )
