"""v1alpha1 and v1beta1: conversion functions (round trips, with hypothesis), the webhook's answers,
local validation of both versions, and the real API server converting through the dev webhook."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.api.conversion import convert_review
from mcpfleet.api.crdgen import crd
from mcpfleet.api.kinds import ALL_KINDS, KIND_BY_NAME, ManifestError, parse_manifest
from mcpfleet.api.versions import SERVED_VERSIONS, STORAGE_VERSION, ConversionError, convert
from mcpfleet.devcluster.handle import ClusterHandle
from tests.api.corpus import example_files

ALPHA = "mcpfleet.dev/v1alpha1"
BETA = "mcpfleet.dev/v1beta1"

names = st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)
leaf = st.one_of(st.text(max_size=10), st.integers(), st.booleans())
extra = st.dictionaries(st.sampled_from(["x", "image", "replicas", "note"]), leaf, max_size=3)


def _alpha_documents() -> st.SearchStrategy[dict[str, Any]]:
    """v1alpha1 objects of every kind, with the fields that differ between versions set or not."""

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        kind = draw(st.sampled_from([k.info.kind for k in ALL_KINDS]))
        spec: dict[str, Any] = dict(draw(extra))
        if draw(st.booleans()):
            spec["groupRef"] = draw(names)
        if kind == "MCPRemoteProxy" and draw(st.booleans()):
            spec["remoteURL"] = "https://" + draw(names)
        if kind == "VirtualMCPServer":
            config: dict[str, Any] = {"groupRef": draw(names)}
            spec.pop("groupRef", None)
            if draw(st.booleans()):
                config["aggregation"] = {"conflictResolution": "prefix"}
            spec["config"] = config
        status = draw(st.dictionaries(st.sampled_from(["phase", "url"]), st.text(max_size=5), max_size=2))
        return {
            "apiVersion": ALPHA,
            "kind": kind,
            "metadata": {"name": draw(names), "namespace": "default", "labels": {"a": "b"}},
            "spec": spec,
            "status": status,
        }

    return build()


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(_alpha_documents())
def test_alpha_to_beta_and_back_is_lossless(document: dict[str, Any]) -> None:
    changes = KIND_BY_NAME[document["kind"]].version_changes
    beta = convert(document, changes, "v1beta1")
    assert beta["apiVersion"] == BETA and beta["metadata"] == document["metadata"]
    assert beta["status"] == document["status"]
    assert convert(beta, changes, "v1alpha1") == document
    # And the beta form, converted down and up again, is the same beta form.
    assert convert(convert(beta, changes, "v1alpha1"), changes, "v1beta1") == beta


@settings(max_examples=200)
@given(_alpha_documents())
def test_conversion_does_not_touch_its_input(document: dict[str, Any]) -> None:
    before = copy.deepcopy(document)
    convert(document, KIND_BY_NAME[document["kind"]].version_changes, "v1beta1")
    assert document == before


def test_beta_shapes_are_toolhive_shapes() -> None:
    server = convert(
        {"apiVersion": ALPHA, "kind": "MCPServer", "metadata": {"name": "a"}, "spec": {"groupRef": "g"}},
        KIND_BY_NAME["MCPServer"].version_changes,
        "v1beta1",
    )
    assert server["spec"] == {"groupRef": {"name": "g"}}
    proxy = convert(
        {
            "apiVersion": ALPHA,
            "kind": "MCPRemoteProxy",
            "metadata": {"name": "a"},
            "spec": {"remoteURL": "u"},
        },
        KIND_BY_NAME["MCPRemoteProxy"].version_changes,
        "v1beta1",
    )
    assert proxy["spec"] == {"remoteUrl": "u"}
    gateway = convert(
        {
            "apiVersion": ALPHA,
            "kind": "VirtualMCPServer",
            "metadata": {"name": "a"},
            "spec": {"config": {"groupRef": "g"}},
        },
        KIND_BY_NAME["VirtualMCPServer"].version_changes,
        "v1beta1",
    )
    assert gateway["spec"] == {"groupRef": {"name": "g"}}


def test_kinds_without_changes_convert_by_api_version_only() -> None:
    plain = [k for k in ALL_KINDS if not k.version_changes]
    assert {k.info.kind for k in plain} >= {
        "MCPGroup",
        "MCPToolConfig",
        "MCPRegistry",
        "MCPExternalAuthConfig",
    }
    for kind in plain:
        document = {"apiVersion": ALPHA, "kind": kind.info.kind, "metadata": {"name": "a"}, "spec": {"x": 1}}
        assert convert(document, (), "v1beta1") == {**document, "apiVersion": BETA}
        definition = crd(kind)
        assert definition["spec"]["conversion"] == {"strategy": "None"}
        schemas = [v["schema"] for v in definition["spec"]["versions"]]
        assert schemas[0] == schemas[1]


def test_every_crd_serves_both_versions_and_stores_v1beta1() -> None:
    for kind in ALL_KINDS:
        versions = crd(kind)["spec"]["versions"]
        assert [v["name"] for v in versions] == list(SERVED_VERSIONS)
        assert [v["name"] for v in versions if v["storage"]] == [STORAGE_VERSION]
        assert all(v["served"] for v in versions)


def test_bad_beta_shape_is_refused_naming_the_field() -> None:
    changes = KIND_BY_NAME["MCPServer"].version_changes
    for ref, field in (
        ("g", "spec.groupRef"),
        ({"name": "g", "kind": "x"}, "spec.groupRef.kind"),
        ({}, "spec.groupRef.name"),
    ):
        with pytest.raises(ConversionError) as caught:
            convert({"apiVersion": BETA, "kind": "MCPServer", "spec": {"groupRef": ref}}, changes, "v1alpha1")
        assert caught.value.path == field
    with pytest.raises(ConversionError, match="apiVersion"):
        convert({"apiVersion": "mcpfleet.dev/v2", "kind": "MCPServer"}, changes, "v1alpha1")


def test_local_validation_names_beta_fields_in_beta_terms() -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(
            {
                "apiVersion": BETA,
                "kind": "MCPRemoteProxy",
                "metadata": {"name": "p"},
                "spec": {"remoteUrl": "ftp://nope", "groupRef": {"name": "g"}},
            }
        )
    assert [p for p, _ in caught.value.problems] == ["spec.remoteUrl"]
    with pytest.raises(ManifestError) as caught:
        parse_manifest(
            {
                "apiVersion": BETA,
                "kind": "VirtualMCPServer",
                "metadata": {"name": "v"},
                "spec": {"incomingAuth": {"type": "anonymous"}},
            }
        )
    assert ("spec.groupRef.name" in [p for p, _ in caught.value.problems]) or (
        "spec.groupRef" in [p for p, _ in caught.value.problems]
    )


def test_every_example_parses_the_same_in_both_versions() -> None:
    for path in example_files():
        for document in yaml.safe_load_all(path.read_text()):
            if not isinstance(document, dict):
                continue
            kind = KIND_BY_NAME[document["kind"]]
            beta = convert(document, kind.version_changes, "v1beta1")
            assert parse_manifest(beta) == parse_manifest(document), path


def test_webhook_review_converts_and_refuses_with_a_reason() -> None:
    obj = {"apiVersion": ALPHA, "kind": "MCPServer", "metadata": {"name": "a"}, "spec": {"groupRef": "g"}}
    answer = convert_review({"request": {"uid": "u1", "desiredAPIVersion": BETA, "objects": [obj]}})
    assert answer["response"]["uid"] == "u1" and answer["response"]["result"]["status"] == "Success"
    assert answer["response"]["convertedObjects"][0]["spec"] == {"groupRef": {"name": "g"}}
    for bad in (
        None,
        {},
        {"request": "x"},
        {"request": {"desiredAPIVersion": "v1", "objects": []}},
        {"request": {"uid": "u", "desiredAPIVersion": BETA, "objects": [{"kind": "Nope"}]}},
        {"request": {"uid": "u", "desiredAPIVersion": BETA, "objects": "x"}},
    ):
        response = convert_review(bad)["response"]
        assert response["result"]["status"] == "Failure" and response["result"]["message"], bad


def _get(dev_cluster: ClusterHandle, namespace: str, resource: str) -> dict[str, Any]:
    text = dev_cluster.kubectl("get", "-n", namespace, resource, "-o", "yaml").stdout
    document: dict[str, Any] = yaml.safe_load(text)
    return document


def test_cluster_converts_between_versions_without_loss(
    dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    alpha = {
        "apiVersion": ALPHA,
        "kind": "VirtualMCPServer",
        "metadata": {"name": "gw"},
        "spec": {"config": {"groupRef": "team"}, "incomingAuth": {"type": "anonymous"}},
    }
    proxy = {
        "apiVersion": ALPHA,
        "kind": "MCPRemoteProxy",
        "metadata": {"name": "rp"},
        "spec": {"remoteURL": "https://example.com/mcp", "groupRef": "team"},
    }
    dev_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump_all([alpha, proxy]))
    for plural, kind in (("virtualmcpservers", "VirtualMCPServer"), ("mcpremoteproxies", "MCPRemoteProxy")):
        name = "gw" if kind == "VirtualMCPServer" else "rp"
        as_beta = _get(dev_cluster, namespace, f"{plural}.v1beta1.mcpfleet.dev/{name}")
        as_alpha = _get(dev_cluster, namespace, f"{plural}.v1alpha1.mcpfleet.dev/{name}")
        changes = KIND_BY_NAME[kind].version_changes
        assert as_beta["apiVersion"] == BETA and as_alpha["apiVersion"] == ALPHA
        assert convert(as_alpha, changes, "v1beta1")["spec"] == as_beta["spec"]
        assert convert(as_beta, changes, "v1alpha1")["spec"] == as_alpha["spec"]
    beta_gw = _get(dev_cluster, namespace, "virtualmcpservers.v1beta1.mcpfleet.dev/gw")
    assert beta_gw["spec"]["groupRef"] == {"name": "team"} and "groupRef" not in beta_gw["spec"].get(
        "config", {}
    )
    beta_rp = _get(dev_cluster, namespace, "mcpremoteproxies.v1beta1.mcpfleet.dev/rp")
    assert beta_rp["spec"]["remoteUrl"] == "https://example.com/mcp" and beta_rp["spec"]["groupRef"] == {
        "name": "team"
    }
    # Created as v1beta1, read as v1alpha1.
    server = {
        "apiVersion": BETA,
        "kind": "MCPServer",
        "metadata": {"name": "srv"},
        "spec": {"image": "uvx://mcp-server-time", "groupRef": {"name": "team"}},
    }
    dev_cluster.kubectl(
        "apply", "--validate=strict", "-n", namespace, "-f", "-", input=yaml.safe_dump(server)
    )
    as_alpha = _get(dev_cluster, namespace, "mcpservers.v1alpha1.mcpfleet.dev/srv")
    assert as_alpha["spec"]["groupRef"] == "team"
    as_beta = _get(dev_cluster, namespace, "mcpservers.v1beta1.mcpfleet.dev/srv")
    assert as_beta["spec"]["groupRef"] == {"name": "team"}
    # A v1alpha1 update of a v1beta1 object keeps it whole.
    dev_cluster.kubectl("label", "-n", namespace, "mcpservers.v1alpha1.mcpfleet.dev/srv", "edited=yes")
    again = _get(dev_cluster, namespace, "mcpservers.v1beta1.mcpfleet.dev/srv")
    assert again["spec"] == as_beta["spec"] and again["metadata"]["labels"]["edited"] == "yes"
    # The API server refuses the old shape at v1beta1, naming the field.
    wrong = {**server, "metadata": {"name": "wrong"}, "spec": {"image": "uvx://x", "groupRef": "team"}}
    result = dev_cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(wrong), check=False
    )
    assert result.returncode != 0 and "spec.groupRef" in result.stderr


@st.composite
def _registry_documents(draw: st.DrawFn) -> dict[str, Any]:
    """MCPRegistry in either shape: typed `registries`, or ToolHive's configYAML with volumes."""
    version = draw(st.sampled_from([ALPHA, BETA]))
    name = draw(st.from_regex(r"[a-z]([a-z0-9-]{0,18}[a-z0-9])?", fullmatch=True))
    if draw(st.booleans()):
        spec: dict[str, Any] = {
            "registries": [{"name": name, "url": {"endpoint": "https://example.com/r.json"}}]
        }
    else:
        mount = "/data/" + name
        config = {
            "sources": [{"name": name, "file": {"path": f"{mount}/registry.json"}}],
            "registries": [{"name": "default", "sources": [name]}],
            "auth": {"mode": "anonymous"},
        }
        spec = {
            "configYAML": yaml.safe_dump(config),
            "volumes": [{"name": "v-" + name, "configMap": {"name": name}}],
            "volumeMounts": [{"name": "v-" + name, "mountPath": mount, "readOnly": draw(st.booleans())}],
        }
        if draw(st.booleans()):
            spec["pgpassSecretRef"] = {"name": name, "key": ".pgpass"}
        if draw(st.booleans()):
            spec["displayName"] = draw(st.text(max_size=20))
    return {"apiVersion": version, "kind": "MCPRegistry", "metadata": {"name": name}, "spec": spec}


@given(_registry_documents())
def test_registry_shapes_round_trip_and_parse_alike(document: dict[str, Any]) -> None:
    changes = KIND_BY_NAME["MCPRegistry"].version_changes
    other = "v1alpha1" if document["apiVersion"] == BETA else "v1beta1"
    here = document["apiVersion"].rsplit("/", 1)[1]
    there = convert(document, changes, other)
    assert convert(there, changes, here) == document
    assert parse_manifest(document).dump() == parse_manifest(there).dump()


def test_cluster_keeps_both_registry_shapes_in_both_versions(
    dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    typed = {
        "apiVersion": ALPHA,
        "kind": "MCPRegistry",
        "metadata": {"name": "typed"},
        "spec": {"registries": [{"name": "k8s", "format": "upstream", "kubernetes": {}}]},
    }
    config = {
        "sources": [{"name": "k8s", "kubernetes": {}}],
        "registries": [{"name": "default", "sources": ["k8s"]}],
        "auth": {"mode": "anonymous"},
    }
    shaped = {
        "apiVersion": BETA,
        "kind": "MCPRegistry",
        "metadata": {"name": "shaped"},
        "spec": {
            "configYAML": yaml.safe_dump(config),
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
            "pgpassSecretRef": {"name": "pg", "key": ".pgpass"},
        },
    }
    dev_cluster.kubectl(
        "apply", "--validate=strict", "-n", namespace, "-f", "-", input=yaml.safe_dump_all([typed, shaped])
    )
    for name, source in (("typed", typed), ("shaped", shaped)):
        for version in ("v1alpha1", "v1beta1"):
            read = _get(dev_cluster, namespace, f"mcpregistries.{version}.mcpfleet.dev/{name}")
            assert read["spec"] == source["spec"], (name, version)
