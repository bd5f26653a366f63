"""The README's Kubernetes quickstart, run as written in a fresh shell, on the tier's real node.

Every ```sh block of "Quickstart: Kubernetes" up to the Helm one runs in one `bash -lc` with a clean
environment (HOME, a basic PATH, the machine's network settings) plus `MCPFLEET_DEV_CLUSTER_DIR`,
which points `mcpfleet dev-cluster` at the tier's cluster (so `up --real-node` finds its node
running, `make image` is the cached image and `install-operator` re-applies the same overlay). The
block ends with a tool call through the in-cluster gateway over `kubectl port-forward`; its answer
must be the current time in UTC. Then, on the same objects (namespace `default`, as the README
applies them): each server by its Service DNS name from the client pod, the gateway's prefixed
tools, the registry's kubernetes source, and the gateway's Deployment rolled out exactly once.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import REPO_ROOT
from tests.realnode.conftest import PodClient
from tests.test_readme_quickstart import CLEAN_ENV

from mcpfleet.devcluster.handle import ClusterHandle

NS = "default"


def _blocks() -> list[str]:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Quickstart: Kubernetes", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def _status(k: ClusterHandle, kind: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(k.kubectl("-n", NS, "get", kind, name, "-o", "json").stdout).get(
        "status", {}
    )
    return status


def _replicasets(k: ClusterHandle, deployment: str) -> list[str]:
    """The ReplicaSets a Deployment owns (each one is a rollout of a new pod template)."""
    items = json.loads(k.kubectl("-n", NS, "get", "replicasets", "-o", "json").stdout)["items"]
    return [
        rs["metadata"]["name"]
        for rs in items
        if any(
            o.get("kind") == "Deployment" and o.get("name") == deployment
            for o in rs["metadata"].get("ownerReferences", [])
        )
    ]


@pytest.mark.timeout(1200)
def test_readme_kubernetes_quickstart_as_written(
    real_cluster: ClusterHandle,
    operator_installed: str,
    client: PodClient,
    started: dict[str, str],
    tmp_path: Path,
) -> None:
    # `started`: the other tests' workloads start in parallel with this one (see workloads.py).
    k = real_cluster
    blocks = _blocks()
    (quickstart,) = [b for b in blocks if "dev-cluster up --real-node" in b]
    env = {**CLEAN_ENV, "MCPFLEET_DEV_CLUSTER_DIR": str(k.info.state_dir)}
    # A first apply (left-overs of an interrupted run would make the rollout count meaningless).
    k.kubectl(
        "-n", NS, "delete", "--ignore-not-found", "--wait=true", "--timeout=120s",
        "-f", str(REPO_ROOT / "examples" / "quickstart"), timeout=150,
    )  # fmt: skip
    t0 = time.monotonic()
    # Output to files, not pipes: the block's backgrounded `kubectl port-forward` keeps a pipe open
    # after the shell exits, so reading to EOF would never end.
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    with out_path.open("w") as out_file, err_path.open("w") as err_file:
        shell = subprocess.Popen(
            ["bash", "-lc", f"set -e\ncd {REPO_ROOT}\n{quickstart}"],
            env=env,
            stdout=out_file,
            stderr=err_file,
            text=True,
            start_new_session=True,  # the port-forward it leaves running is killed with the group
        )
        try:
            shell.wait(timeout=900)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGTERM)
    out, err = out_path.read_text(), err_path.read_text()
    first_call_after = time.monotonic() - t0
    try:
        assert shell.returncode == 0, f"exit {shell.returncode}\n{out[-3000:]}\n{err[-5000:]}"
        # The Inspector prints the result as indented JSON; port-forward's own lines may interleave.
        lines = [
            line
            for line in out.splitlines()
            if not line.startswith(("Handling connection", "Forwarding from"))
        ]
        answer = json.loads("\n".join(lines[lines.index("{") :]))
        text = "".join(part.get("text", "") for part in answer["content"])
        assert json.loads(text)["timezone"] == "UTC", out[-2000:]
        print(
            f"README Kubernetes quickstart: tool call answered {first_call_after:.1f}s after the block started"
        )

        # Each server by its own Service DNS name, from a pod.
        time_url = _status(k, "mcpserver", "time")["url"]
        assert time_url.startswith(f"http://mcp-time.{NS}.svc.cluster.local:"), time_url
        now = client.mcp(time_url, "get_current_time", {"timezone": "UTC"})
        assert "get_current_time" in now["tools"] and not now["is_error"]
        assert json.loads(now["result"])["timezone"] == "UTC"
        everything = client.mcp(
            _status(k, "mcpserver", "everything")["url"], "echo", {"message": "real pods"}
        )
        assert "real pods" in everything["result"]

        # The gateway discovered its group in-cluster and prefixes each server's tools. The README
        # waited for the time backend only; the everything backend's health check may come later.
        k.kubectl(
            "-n", NS, "wait", "virtualmcpserver/gateway", "--timeout=120s",
            "--for=jsonpath={.status.discoveredBackends[?(@.name==\"everything\")].status}=healthy",
            timeout=150,
        )  # fmt: skip
        gateway = _status(k, "virtualmcpserver", "gateway")["url"]
        assert {"time_get_current_time", "everything_echo"} <= set(client.mcp(gateway)["tools"])
        assert "7" in client.mcp(gateway, "everything_get-sum", {"a": 3, "b": 4})["result"]

        # The registry with a kubernetes source lists the labelled servers.
        k.kubectl("-n", NS, "wait", "--for=condition=Ready", "mcpregistry/catalogue", "--timeout=180s")
        registry = _status(k, "mcpregistry", "catalogue")["url"]
        deadline = time.monotonic() + 90
        while True:
            servers = client.get(f"{registry}/v0.1/servers")
            names = [s["server"]["name"] for s in servers["body"].get("servers", [])]
            if len(names) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert servers["status"] == 200
        assert any(n.endswith("time") for n in names) and any(n.endswith("everything") for n in names), names

        # A new VirtualMCPServer rolls out once: its backends turning Ready (and the gateway
        # learning them) changed no pod template, so its Deployment has exactly one ReplicaSet.
        rollouts = _replicasets(k, "vmcp-gateway")
        assert len(rollouts) == 1, f"the gateway rolled out {len(rollouts)} times: {rollouts}"
    finally:
        k.kubectl(
            "-n", NS, "delete", "-f", str(REPO_ROOT / "examples" / "quickstart"), "--wait=false", check=False
        )
