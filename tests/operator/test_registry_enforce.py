"""enforceServers through the operator on the dev cluster, with ToolHive's v1alpha1 example
`mcpregistry-enforcing.yaml` (its ConfigMap and MCPRegistry, apiVersion changed): an MCPServer whose
image the registry lists runs (ImageValidated True); one whose image it does not list is Failed with
ImageValidated False naming the image and gets no Deployment; listing the image in the ConfigMap and
editing the registry lets it run; the registry-name label restricts the check to one registry."""

from __future__ import annotations

import json

import yaml

from tests.operator.conftest import Kube, OperatorProcess
from tests.reference import TOOLHIVE

EXAMPLE = TOOLHIVE / "examples-v1alpha1" / "mcp-registries" / "mcpregistry-enforcing.yaml"


def _server(name: str, image: str, labels: dict[str, str] | None = None) -> str:
    metadata: dict[str, object] = {"name": name, "labels": labels or {}}
    return json.dumps(
        {
            "apiVersion": "mcpfleet.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": metadata,
            "spec": {"image": image, "transport": "stdio"},
        }
    )


def _condition(status: dict[str, object]) -> dict[str, str]:
    conditions = status.get("conditions") or []
    assert isinstance(conditions, list)
    found: dict[str, str] = next(c for c in conditions if c["type"] == "ImageValidated")
    return found


def test_enforcing_registry_admits_listed_images_only(kube: Kube, operator: OperatorProcess) -> None:
    text = EXAMPLE.read_text().replace("toolhive.stacklok.dev/", "mcpfleet.dev/")
    config_map, registry = [d for d in yaml.safe_load_all(text) if d]
    for document in (config_map, registry):
        document["metadata"].pop("namespace")
    kube.apply(yaml.safe_dump_all([config_map, registry]))
    kube.apply(_server("listed", "ghcr.io/github/github-mcp-server:latest"))
    kube.apply(_server("grouped", "docker.io/mcp/code-analyzer:v2.1.0"))  # from the example's group
    kube.apply(_server("unlisted", "docker.io/mcp/fetch:latest"))

    listed = kube.wait_phase("MCPServer", "listed", "Running")
    assert _condition(listed)["status"] == "True" and _condition(listed)["reason"] == "ImageValidationSuccess"
    kube.wait_phase("MCPServer", "grouped", "Running")
    failed = kube.wait_phase("MCPServer", "unlisted", "Failed")
    condition = _condition(failed)
    assert condition["status"] == "False" and condition["reason"] == "ImageValidationFailed"
    assert "docker.io/mcp/fetch:latest" in failed["message"] and "enforcing-registry" in failed["message"]
    assert kube.get("Deployment", "mcp-unlisted") is None

    # The approved list grows: the servers are checked again when an MCPRegistry changes (and at
    # the periodic resync): here the registry's display name is edited.
    data = json.loads(config_map["data"]["registry.json"])
    data["servers"]["fetch"] = {**data["servers"]["filesystem"], "image": "docker.io/mcp/fetch:latest"}
    config_map["data"]["registry.json"] = json.dumps(data)
    kube.apply(yaml.safe_dump(config_map))
    registry["spec"]["displayName"] = "Approved MCP Servers (fetch added)"
    kube.apply(yaml.safe_dump(registry))
    kube.wait_phase("MCPServer", "unlisted", "Running")

    # The label names one registry: a missing one refuses, whatever the others list.
    label = {"toolhive.stacklok.io/registry-name": "no-such-registry"}
    kube.apply(_server("labelled", "ghcr.io/github/github-mcp-server:latest", label))
    refused = kube.wait_phase("MCPServer", "labelled", "Failed")
    assert "no-such-registry" in refused["message"], refused
