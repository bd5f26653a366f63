"""MCPServer on the real control plane: children, owner references, status, checksum rollouts, events,
runtime add / delete / re-create, and zero writes on an idle resync."""

from __future__ import annotations

import json
from pathlib import Path

from mcpfleet.devcluster.handle import ClusterHandle

from .conftest import Kube, OperatorProcess

SERVER = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: time}
spec:
  image: uvx://mcp-server-time@2025.1
  args: ["--local-timezone", "UTC"]
  env: [{name: LOG, value: info}]
"""


def test_server_children_status_and_idle_resync(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(SERVER)
    status = kube.wait_phase("MCPServer", "time", "Running")
    assert status["url"] == f"http://mcp-time.{kube.ns}.svc.cluster.local:8080/mcp"
    assert status["readyReplicas"] == 1 and status["observedGeneration"] == 1
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["observedGeneration"] == 1

    server = kube.get("MCPServer", "time")
    assert server is not None
    uid = server["metadata"]["uid"]
    for kind, name in (("Deployment", "mcp-time"), ("Service", "mcp-time")):
        child = kube.get(kind, name)
        assert child is not None, f"{kind} {name} missing"
        (ref,) = child["metadata"]["ownerReferences"]
        assert ref["uid"] == uid and ref["kind"] == "MCPServer" and ref["controller"] is True
    deployment = kube.get("Deployment", "mcp-time")
    assert deployment is not None
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "mcpfleet-test/runner:1"
    assert container["command"][-5:] == ["uvx", "--", "mcp-server-time@2025.1", "--local-timezone", "UTC"]
    # The proxy reads its typed config (issue 28's ProxyConfig: `proxy.json`, naming the run config)
    # from the server's ConfigMap, mounted as the config volume; no option of it is on the command line.
    # This is a fifth write per plain server (docs/benchmarks.md, operator row).
    config_map = kube.get("ConfigMap", "mcp-time-config")
    assert config_map is not None and "proxy.json" in config_map["data"]
    assert container["command"][:3] == ["mcpfleet", "proxy", "--config"]
    assert "--run-config" not in container["command"]
    assert "config" in [v["name"] for v in deployment["spec"]["template"]["spec"]["volumes"]]
    assert (
        len(deployment["spec"]["template"]["metadata"]["annotations"]["mcpfleet.dev/config-checksum"]) == 64
    )
    # A package server needs no API access: no account of its own, no Role, no token in the pod.
    assert kube.get("Role", "mcp-time") is None and kube.get("ServiceAccount", "mcp-time") is None
    pod_spec = deployment["spec"]["template"]["spec"]
    assert pod_spec["automountServiceAccountToken"] is False and "serviceAccountName" not in pod_spec

    reasons = {e["reason"] for e in kube.events("time")}
    assert "Created" in reasons

    # An idle resync re-lists (reads only), reconciles every object and writes nothing.
    before = operator.wait_idle()
    operator.resync_now()
    after = operator.wait_idle()
    assert after["reconcilesByKind"]["MCPServer"] > before["reconcilesByKind"]["MCPServer"]
    assert after["writes"] == before["writes"], (before["requests"], after["requests"])
    changed = {k for k in after["requests"] if after["requests"][k] != before["requests"].get(k)}
    assert changed and all(k.startswith("list ") for k in changed), changed
    # Children are never read back during a pass: the only GETs would be re-reads after a 409.
    assert not [k for k in after["requests"] if k.startswith("get ")], after["requests"]


def test_config_change_rolls_pods_and_unchanged_does_not(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(SERVER)
    kube.wait_phase("MCPServer", "time", "Running")

    def template_checksum() -> str:
        deployment = kube.get("Deployment", "mcp-time")
        assert deployment is not None
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["mcpfleet.dev/config-checksum"])

    first = template_checksum()
    generation = kube.get("Deployment", "mcp-time")["metadata"]["generation"]  # type: ignore[index]
    # A label change touches metadata only: same config, no rollout.
    kube.cluster.kubectl("label", "-n", kube.ns, "mcpservers", "time", "team=blue")
    operator.wait_idle()
    assert template_checksum() == first
    assert kube.get("Deployment", "mcp-time")["metadata"]["generation"] == generation  # type: ignore[index]
    # An args change changes the run config: the checksum moves and the pods roll.
    kube.apply(SERVER.replace('"UTC"', '"Europe/Paris"'))
    kube.cluster.wait_for("a new checksum", lambda: template_checksum() != first, timeout=30)
    status = kube.wait_phase("MCPServer", "time", "Running", generation=2)
    assert status["url"]
    # Scaled to zero: Stopped, no url; back to one: Running again.
    kube.cluster.kubectl(
        "patch", "-n", kube.ns, "mcpservers", "time", "--type=merge", "-p", '{"spec":{"replicas":0}}'
    )
    stopped = kube.wait_phase("MCPServer", "time", "Stopped", generation=3)
    assert "url" not in stopped and kube.get("Deployment", "mcp-time")["spec"]["replicas"] == 0  # type: ignore[index]
    kube.cluster.kubectl(
        "patch", "-n", kube.ns, "mcpservers", "time", "--type=merge", "-p", '{"spec":{"replicas":1}}'
    )
    assert kube.wait_phase("MCPServer", "time", "Running", generation=4)["url"]
    assert "Updated" in {e["reason"] for e in kube.events("time")}


def test_runtime_add_delete_recreate(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(SERVER)
    kube.wait_phase("MCPServer", "time", "Running")
    first_uid = kube.get("MCPServer", "time")["metadata"]["uid"]  # type: ignore[index]
    # Held by someone else's finalizer, a deleted server shows Terminating without a url.
    kube.cluster.kubectl(
        "patch", "-n", kube.ns, "mcpservers", "time", "--type=merge",
        "-p", '{"metadata":{"finalizers":["test.mcpfleet.dev/hold"]}}',
    )  # fmt: skip
    kube.delete("MCPServer", "time")
    terminating = kube.wait_phase("MCPServer", "time", "Terminating")
    assert "url" not in terminating
    kube.cluster.kubectl(
        "patch", "-n", kube.ns, "mcpservers", "time", "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )
    kube.wait_gone("MCPServer", "time")
    # Garbage collection (kube-controller-manager) removes every child through owner references.
    for kind, name in (("Deployment", "mcp-time"), ("Service", "mcp-time")):
        kube.wait_gone(kind, name)
    kube.apply(SERVER)
    status = kube.wait_phase("MCPServer", "time", "Running")
    assert status["url"]
    server = kube.get("MCPServer", "time")
    assert server is not None and server["metadata"]["uid"] != first_uid
    deployment = kube.get("Deployment", "mcp-time")
    assert deployment is not None
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == server["metadata"]["uid"]


def test_several_namespaces_and_json_logs(
    dev_cluster: ClusterHandle, crds_installed: list[str], tmp_path: Path
) -> None:
    watched = [dev_cluster.create_namespace("op-watch-a"), dev_cluster.create_namespace("op-watch-b")]
    ignored = dev_cluster.create_namespace("op-ignored")
    operator = OperatorProcess(dev_cluster, watched, tmp_path / "operator.log")
    operator.start()
    try:
        for ns in (*watched, ignored):
            Kube(dev_cluster, ns).apply(SERVER)
        for ns in watched:
            assert (
                Kube(dev_cluster, ns)
                .wait_phase("MCPServer", "time", "Running")["url"]
                .startswith(f"http://mcp-time.{ns}.svc")
            )
        operator.wait_idle()
        assert Kube(dev_cluster, ignored).status("MCPServer", "time") == {}
        assert Kube(dev_cluster, ignored).get("Deployment", "mcp-time") is None
    finally:
        operator.stop()
        for ns in (*watched, ignored):
            dev_cluster.delete_namespace(ns)
    lines = [line for line in (tmp_path / "operator.log").read_text().splitlines() if line.startswith("{")]
    assert lines, "no log lines"
    for line in lines:
        entry = json.loads(line)
        assert {"time", "level", "logger", "message"} <= set(entry)


def test_first_status_waits_out_the_grace_period_for_running(
    kube: Kube, namespace: str, tmp_path: Path
) -> None:
    """A server Running within the grace period gets one status write (no Pending first); one that
    cannot start shows Pending once the grace period is over."""
    operator = OperatorProcess(
        kube.cluster, [namespace], tmp_path / "operator.log", extra_args=("--pending-grace-seconds", "8")
    )
    operator.start()
    try:
        before = operator.stats()["requests"].get("patch MCPServer/status", 0)
        kube.apply(
            """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: quick}
spec: {image: "uvx://quick"}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: stuck}
spec:
  image: "uvx://stuck"
  resources: {requests: {cpu: "100000"}}
"""
        )
        kube.wait_phase("MCPServer", "quick", "Running")
        stuck = kube.wait_phase("MCPServer", "stuck", "Pending")
        assert stuck["message"] == "0/1 replicas ready" and stuck["observedGeneration"] == 1
        ready = next(c for c in stuck["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "False" and ready["reason"] == "NotReady"
        # One status write each: quick straight to Running, stuck to Pending after the grace period.
        assert operator.stats()["requests"]["patch MCPServer/status"] - before == 2
    finally:
        kube.cluster.kubectl("delete", "-n", namespace, "mcpservers", "--all", "--wait=false", check=False)
        operator.stop()
