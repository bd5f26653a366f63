"""MCPRegistry `pvcRef` on Kubernetes: ToolHive's v1alpha1 examples `mcpregistry-pvc.yaml` and
`mcpregistry-multi-source.yaml` (with their PersistentVolumeClaims, ConfigMaps and populating Jobs)
applied to the dev cluster with `kubectl apply --validate=strict`, read back, planned and rendered; the
children are accepted by the API server (server-side dry run) and mount each claim read-only at
`/config/registry/<source>/`, where the rendered file source reads `<path>` (ToolHive's layout)."""

from __future__ import annotations

import json
from typing import Any

import yaml

from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.operator.store import parse
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.reconcile import mcpregistry
from mcpfleet.reconcile.model import World
from tests.reference import TOOLHIVE

EXAMPLES = TOOLHIVE / "examples-v1alpha1" / "mcp-registries"


def _ported(name: str, namespace: str) -> list[dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]
    for document in documents:
        document["apiVersion"] = document["apiVersion"].replace("toolhive.stacklok.dev", "mcpfleet.dev")
        document["metadata"]["namespace"] = namespace
    return documents


def _rendered(dev_cluster: ClusterHandle, namespace: str, name: str) -> dict[str, Any]:
    documents = _ported(name, namespace)
    dev_cluster.kubectl(
        "apply", "--validate=strict", "-n", namespace, "-f", "-", input=yaml.safe_dump_all(documents)
    )
    (source,) = [d for d in documents if d["kind"] == "MCPRegistry"]
    stored = json.loads(
        dev_cluster.kubectl(
            "get", "-n", namespace, f"mcpregistries.mcpfleet.dev/{source['metadata']['name']}", "-o", "json"
        ).stdout
    )
    entry = parse(stored)
    assert entry.error is None and isinstance(entry.model, MCPRegistry), entry.error
    world = World(platform="kubernetes", namespace=namespace)
    plan = mcpregistry.plan(entry.model, world)
    assert plan.problems == (), plan.problems
    manifests = render(
        plan, Owner("MCPRegistry", entry.model.name, namespace, stored["metadata"]["uid"]), world.images
    )
    dev_cluster.kubectl(
        "apply",
        "--dry-run=server",
        "--validate=strict",
        "-n",
        namespace,
        "-f",
        "-",
        input=yaml.safe_dump_all(manifests),
    )
    (config_map,) = [m for m in manifests if m["kind"] == "ConfigMap"]
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "registry"]
    return {
        "config": yaml.safe_load(config_map["data"]["registry.yaml"]),
        "volumes": {v["name"]: v for v in pod["volumes"]},
        "mounts": {m["name"]: m for m in container["volumeMounts"]},
    }


def test_pvc_examples_apply_strictly_and_mount_the_claims(
    dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    single = _rendered(dev_cluster, namespace, "mcpregistry-pvc.yaml")
    files = {s["name"]: s.get("file") for s in single["config"]["sources"]}
    assert files == {
        "production": {"path": "/config/registry/production/prod-data/registry.json"},
        "development": {"path": "/config/registry/development/dev-data/registry.json"},
    }
    for source in ("production", "development"):
        volume = single["volumes"][f"pvc-{source}"]
        assert volume["persistentVolumeClaim"] == {"claimName": "shared-registry-data", "readOnly": True}
        assert single["mounts"][f"pvc-{source}"] == {
            "name": f"pvc-{source}",
            "mountPath": f"/config/registry/{source}",
            "readOnly": True,
        }
    assert {"config"} <= set(single["volumes"]), "mcpfleet's own volumes are kept"

    mixed = _rendered(dev_cluster, namespace, "mcpregistry-multi-source.yaml")
    kinds = {s["name"]: s for s in mixed["config"]["sources"]}
    assert kinds["production-tools"]["configMap"]["name"] == "production-registry-data"
    assert kinds["monitoring"]["file"] == {"path": "/config/registry/monitoring/monitoring/registry.json"}
    assert kinds["ai-ml"]["file"] == {"path": "/config/registry/ai-ml/ai-ml/registry.json"}
    assert kinds["ai-ml"]["filter"]["names"]["include"] == ["*ai*", "*ml*"]
    assert set(mixed["volumes"]) >= {"pvc-monitoring", "pvc-ai-ml"}
