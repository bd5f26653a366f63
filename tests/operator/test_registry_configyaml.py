"""The operator reconciles a configYAML MCPRegistry (ToolHive's pgpass example, apiVersion changed):
Running, the translated config in its ConfigMap, the pgpass init container; a configYAML the model
refuses turns the object Failed / InvalidSpec naming the key inside configYAML; fixed, Running again."""

from __future__ import annotations

import yaml

from mcpfleet.registry.config import RegistryConfig
from tests.operator.conftest import Kube, OperatorProcess
from tests.reference import TOOLHIVE_EXAMPLES_V1BETA1

EXAMPLE = TOOLHIVE_EXAMPLES_V1BETA1 / "mcp-registries" / "mcpregistry-configyaml-pgpass.yaml"


def _ported() -> str:
    text = EXAMPLE.read_text().replace("toolhive.stacklok.dev/", "mcpfleet.dev/")
    return text.replace("  namespace: toolhive-system\n", "")


def test_configyaml_registry_runs_and_a_bad_config_is_refused(kube: Kube, operator: OperatorProcess) -> None:
    kube.apply(_ported())
    status = kube.wait_phase("MCPRegistry", "pgpass-configyaml", "Running", generation=1)
    assert status["url"] == f"http://mcpreg-pgpass-configyaml.{kube.ns}.svc.cluster.local:8080"
    config_map = kube.get("ConfigMap", "mcpreg-pgpass-configyaml-config")
    assert config_map is not None
    assert "mymigrationpassword" not in yaml.safe_dump(config_map)
    config = RegistryConfig.model_validate(yaml.safe_load(config_map["data"]["registry.yaml"]))
    assert config.database.migrationUser == "db_migrator" and config.aliases == ["default"]
    assert config.sources[0].file is not None
    assert config.sources[0].file.path == "/config/registry/production/registry.json"
    deployment = kube.get("Deployment", "mcpreg-pgpass-configyaml")
    assert deployment is not None
    pod = deployment["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["pgpass"]
    assert {"registry-data-production", "pgpass", "secrets", "config"} <= {v["name"] for v in pod["volumes"]}

    bad = _ported().replace("sslMode: require", "sslMode: sometimes")
    kube.apply(bad)
    failed = kube.wait_phase("MCPRegistry", "pgpass-configyaml", "Failed", generation=2)
    assert "spec.configYAML" in failed["message"] and "database.sslMode" in failed["message"], failed
    ready = next(c for c in failed["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "InvalidSpec" and ready["status"] == "False"
    kube.apply(_ported())
    kube.wait_phase("MCPRegistry", "pgpass-configyaml", "Running", generation=3)
