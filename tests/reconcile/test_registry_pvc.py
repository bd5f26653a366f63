"""MCPRegistry `pvcRef` on Kubernetes: ToolHive's v1alpha1 examples `mcpregistry-pvc.yaml` and
`mcpregistry-multi-source.yaml` (with their PersistentVolumeClaims, ConfigMaps and populating Jobs)
applied to the dev cluster with `kubectl apply --validate=strict`, read back, planned and rendered; the
children are accepted by the API server (server-side dry run) and mount each claim read-only at
`/config/registry/<source>/`, where the rendered file source reads `<path>` (ToolHive's layout)."""

from __future__ import annotations

from typing import Any

import yaml

from mcpfleet.devcluster.handle import ClusterHandle
from tests.reconcile.test_registry_configyaml import _ported, apply_and_render
from tests.reference import TOOLHIVE

EXAMPLES = TOOLHIVE / "examples-v1alpha1" / "mcp-registries"


def _rendered(dev_cluster: ClusterHandle, namespace: str, name: str) -> dict[str, Any]:
    documents = _ported(name, namespace, EXAMPLES)
    manifests = list(apply_and_render(dev_cluster, namespace, documents, "v1alpha1").values())
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
