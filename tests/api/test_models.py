"""The resource models: local validation names the bad field, examples validate, generated files are fresh."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mcpfleet.api.crdgen import render_crds, render_reference
from mcpfleet.api.kinds import ALL_KINDS, ManifestError, lookup_kind, parse_manifest
from mcpfleet.api.mcpserver import MCPServer
from tests.api.corpus import ROOT, InvalidCase, example_files, invalid_cases

CASES = invalid_cases()


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_manifest_is_rejected_locally_naming_the_field(case: InvalidCase) -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(case.document)
    paths = [path for path, _ in caught.value.problems]
    assert any(path.startswith(case.expected_field) for path in paths), (paths, str(caught.value))


@pytest.mark.parametrize("path", example_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_validate(path: Path) -> None:
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert documents
    for document in documents:
        parse_manifest(document)


def test_generated_crds_are_fresh() -> None:
    crd_dir = ROOT / "deploy" / "crds"
    expected = render_crds()
    actual = {p.name: p.read_text() for p in crd_dir.glob("*.yaml")}
    assert actual == expected, "deploy/crds is stale: run `mcpfleet crds`"
    assert (ROOT / "docs" / "reference" / "api.md").read_text() == render_reference(), (
        "docs/reference/api.md is stale: run `mcpfleet crds`"
    )


def test_crds_use_only_what_the_api_server_accepts() -> None:
    """A structural schema has no patternProperties (a pattern on a map's keys must be a CEL rule):
    the API server refuses the whole CRD otherwise."""
    for name, text in render_crds().items():
        assert "patternProperties" not in text, name
        # propertyNames is dropped by the API server: applied again by another manager (the Helm chart)
        # it conflicts with what the server stored.
        assert "propertyNames" not in text, name


def test_every_kind_has_one_crd_with_status_subresource_and_category() -> None:
    crds = [yaml.safe_load(text) for text in render_crds().values()]
    assert sorted(c["spec"]["names"]["kind"] for c in crds) == sorted(k.info.kind for k in ALL_KINDS)
    for crd in crds:
        version = crd["spec"]["versions"][0]
        assert crd["spec"]["group"] == "mcpfleet.dev" and version["name"] == "v1alpha1"
        assert crd["spec"]["scope"] == "Namespaced"
        assert version["subresources"] == {"status": {}}
        assert crd["spec"]["names"]["categories"] == ["mcpfleet"]
        assert crd["spec"]["names"]["shortNames"]


def test_workload_kinds_share_the_flat_status_and_columns() -> None:
    for kind in ALL_KINDS:
        if not kind.info.workload:
            continue
        status = kind.model_fields["status"].annotation
        assert status is not None
        fields = {f.alias or name for name, f in status.model_fields.items()}
        assert {"phase", "message", "url", "readyReplicas", "observedGeneration", "conditions"} <= fields
        names = [c.name for c in kind.info.columns]
        assert names[:4] == ["Status", "Ready", "Replicas", "URL"] and names[-1] == "Age"
    vmcp = lookup_kind("vmcp")
    assert vmcp is not None and "Backends" in [c.name for c in vmcp.info.columns]


def test_cross_field_rules_are_emitted_as_cel() -> None:
    crd = yaml.safe_load(render_crds()["mcpservers.mcpfleet.dev.yaml"])
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = [r["rule"] for r in spec["x-kubernetes-validations"]]
    assert any("self.replicas <= 1" in r for r in rules)


def test_defaults_apply_locally_like_on_the_server() -> None:
    server = parse_manifest(
        {
            "apiVersion": "mcpfleet.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": "t"},
            "spec": {"image": "uvx://x"},
        }
    )
    assert isinstance(server, MCPServer)
    assert (server.spec.transport, server.spec.proxy_mode, server.spec.proxy_port) == (
        "stdio",
        "streamable-http",
        8080,
    )
    assert server.spec.effective_replicas == 1


def test_unknown_kind_and_api_version_are_named() -> None:
    with pytest.raises(ManifestError, match="kind"):
        parse_manifest({"apiVersion": "mcpfleet.dev/v1alpha1", "kind": "Nope", "metadata": {"name": "x"}})
    with pytest.raises(ManifestError, match="apiVersion"):
        parse_manifest(
            {"apiVersion": "toolhive.stacklok.dev/v1alpha1", "kind": "MCPServer", "metadata": {"name": "x"}}
        )
