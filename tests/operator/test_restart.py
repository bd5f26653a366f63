"""An operator restart writes nothing (issue 20).

A few dozen objects of every kind converge under one `mcpfleet operator run`; the operator is then
restarted several times, each time with a different PYTHONHASHSEED (what an upgrade, a crash or a leader
hand-over does). Each new process must make 0 writes (its own client counters), leave every child
untouched (resourceVersions, Deployment generations and pod templates unchanged), write no status and
post no Event. Before the fix, the new process reconciled objects whose children's watch listing had not
arrived yet (kopf starts its watches in hash order), re-applied those children and posted `Created`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcpfleet.devcluster.handle import ClusterHandle

from .conftest import PLURALS, Kube, OperatorProcess

CHILD_KINDS = ("Deployment", "Service", "ConfigMap", "ServiceAccount", "Role", "RoleBinding")
WORKLOADS = ("MCPServer", "MCPRemoteProxy", "VirtualMCPServer", "MCPRegistry")
SEEDS = ("101", "202", "303")


def manifests() -> str:
    """36 objects: groups, both config kinds, servers of every shape, remote proxies, gateways, registries."""
    docs: list[str] = []
    for g in range(3):
        docs.append(f"kind: MCPGroup\nmetadata: {{name: g{g}}}\nspec: {{description: group {g}}}")
        docs.append(f"kind: MCPToolConfig\nmetadata: {{name: tc{g}}}\nspec: {{toolsFilter: [a{g}, b{g}, c]}}")
        docs.append(
            f"kind: MCPExternalAuthConfig\nmetadata: {{name: ea{g}}}\nspec:\n  type: headerInjection\n"
            f"  headerInjection: {{headerName: X-Key-{g}, valueSecretRef: {{name: key{g}, key: k}}}}"
        )
    shapes = (
        "{{image: 'uvx://mcp-server-time@2025.1', args: [--local-timezone, UTC], groupRef: g{g},"
        " toolConfigRef: {{name: tc{g}}}}}",
        "{{image: 'npx://@scope/pkg@1.2.3', proxyMode: sse, groupRef: g{g},"
        " env: [{{name: B, value: '2'}}, {{name: A, value: '1'}}]}}",
        "{{image: 'ghcr.io/acme/git-mcp:1.0', args: [--repo, /data], groupRef: g{g}}}",
        "{{image: 'npx://@scope/http@1.0', transport: streamable-http, mcpPort: 3001, groupRef: g{g},"
        " externalAuthConfigRef: {{name: ea{g}}}, toolConfigRef: {{name: tc{g}}}}}",
        "{{image: 'ghcr.io/acme/web:2', transport: sse, mcpPort: 9000,"
        " secrets: [{{name: key{g}, key: k, targetEnvName: TOKEN}}]}}",
    )
    for i in range(15):
        spec = shapes[i % len(shapes)].format(g=i % 3)
        docs.append(f"kind: MCPServer\nmetadata: {{name: s{i:02d}}}\nspec: {spec}")
    for i in range(6):
        docs.append(
            f"kind: MCPRemoteProxy\nmetadata: {{name: rp{i}}}\nspec: {{remoteURL: 'https://mcp{i}.example.com/mcp',"
            f" groupRef: g{i % 3}, toolConfigRef: {{name: tc{i % 3}}}}}"
        )
    for g in range(3):
        docs.append(
            f"kind: VirtualMCPServer\nmetadata: {{name: gw{g}}}\nspec:\n"
            f"  config: {{groupRef: g{g}, aggregation: {{conflictResolution: prefix}}}}\n"
            "  incomingAuth: {type: anonymous}"
        )
        docs.append(
            f"kind: MCPRegistry\nmetadata: {{name: reg{g}}}\nspec:\n  registries:\n"
            f"    - {{name: local, configMapRef: {{name: catalogue{g}, key: registry.json}}}}\n"
            "    - {name: cluster, kubernetes: {}}"
        )
    return "\n---\n".join(f"apiVersion: mcpfleet.dev/v1alpha1\n{d}" for d in docs)


def snapshot(kube: Kube) -> dict[str, Any]:
    """What a write would change: resourceVersions of every object and child, pod templates, events."""
    state: dict[str, Any] = {}
    for kind in (*PLURALS, *CHILD_KINDS):
        for obj in kube.items(kind):
            meta = obj["metadata"]
            state[f"{kind}/{meta['name']}"] = meta["resourceVersion"]
            if kind == "Deployment":
                state[f"{kind}/{meta['name']} generation"] = meta["generation"]
                state[f"{kind}/{meta['name']} template"] = obj["spec"]["template"]
    state["events"] = sorted(
        e["metadata"]["name"]
        for e in kube.items("Event")
        if e.get("reportingComponent") == "mcpfleet-operator"
    )
    replicasets = kube.cluster.get_json(f"/apis/apps/v1/namespaces/{kube.ns}/replicasets") or {}
    state["replicasets"] = sorted(r["metadata"]["name"] for r in replicasets.get("items", []))
    return state


def converged(kube: Kube) -> bool:
    for kind in WORKLOADS:
        for obj in kube.items(kind):
            status = obj.get("status") or {}
            if status.get("observedGeneration") != obj["metadata"]["generation"] or not status.get("phase"):
                return False
    return True


def test_restart_with_another_hash_seed_writes_nothing(
    dev_cluster: ClusterHandle, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    for g in range(3):
        dev_cluster.kubectl(
            "create", "configmap", f"catalogue{g}", "-n", namespace, "--from-literal=registry.json=[]"
        )
        dev_cluster.kubectl("create", "secret", "generic", f"key{g}", "-n", namespace, "--from-literal=k=v")
    log = tmp_path / "operator.log"
    operator = OperatorProcess(dev_cluster, [namespace], log, env={"PYTHONHASHSEED": "1"})
    operator.start()
    try:
        kube.apply(manifests())
        dev_cluster.wait_for("every workload to converge", lambda: converged(kube), timeout=180)
        operator.wait_idle(settle=2.0, timeout=120)
        counts = {kind: len(kube.items(kind)) for kind in (*PLURALS, *CHILD_KINDS)}
        assert counts["MCPServer"] == 15 and counts["Deployment"] == 27, counts
        operator.stop()
        before = snapshot(kube)
        for seed in SEEDS:
            operator = OperatorProcess(dev_cluster, [namespace], log, env={"PYTHONHASHSEED": seed})
            operator.start()
            stats = operator.wait_idle(settle=2.0, timeout=120)
            writes = {k: v for k, v in stats["requests"].items() if not k.startswith(("list ", "get "))}
            assert stats["writes"] == 0, f"PYTHONHASHSEED={seed}: the restart wrote {writes}"
            assert stats["errors"] == 0, operator.log_tail()
            after = snapshot(kube)
            changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            assert not changed, f"PYTHONHASHSEED={seed}: changed by the restart: {changed}"
            operator.stop()
        operator = OperatorProcess(dev_cluster, [namespace], log, env={"PYTHONHASHSEED": "1"})
        operator.start()
    finally:
        dev_cluster.kubectl(
            "delete", "-n", namespace, ",".join(PLURALS.values()), "--all", "--wait=false", check=False
        )
        try:
            dev_cluster.wait_for(
                "config objects to go",
                lambda: not any(kube.items(k) for k in ("MCPToolConfig", "MCPExternalAuthConfig")),
                timeout=60,
            )
        finally:
            operator.stop()
