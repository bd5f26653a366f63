"""Superseded VirtualMCPServer fields (ToolHive's v1beta1 `spec.config.groupRef` and `spec.config.name`):
accepted, read as the current field, refused naming both when the two differ, and warned about."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.api.crdgen import crd
from mcpfleet.api.kinds import ManifestError, parse_manifest
from mcpfleet.api.superseded import warnings
from mcpfleet.api.versions import convert
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.platform.local.loader import load_dir

BETA = "mcpfleet.dev/v1beta1"
CHANGES = VirtualMCPServer.version_changes


def _gateway(spec: dict[str, Any], name: str = "gw", api_version: str = BETA) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "VirtualMCPServer",
        "metadata": {"name": name},
        "spec": {"incomingAuth": {"type": "anonymous"}, **spec},
    }


def _refusal(document: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(document)
    return caught.value.problems


def test_toolhive_config_group_ref_alone_is_read_as_spec_group_ref() -> None:
    document = _gateway({"config": {"groupRef": "team"}})
    parsed = parse_manifest(document)
    assert isinstance(parsed, VirtualMCPServer) and parsed.spec.config.group_ref == "team"
    assert warnings(document, CHANGES, "v1beta1") == [
        "spec.config.groupRef is superseded: read as spec.groupRef.name; set spec.groupRef.name instead"
    ]
    # Converted down and up again, the object has only the current field.
    stored = convert(convert(document, CHANGES, "v1alpha1"), CHANGES, "v1beta1")
    assert stored["spec"]["groupRef"] == {"name": "team"} and "config" not in stored["spec"]


def test_both_places_agreeing_apply_with_a_warning() -> None:
    document = _gateway({"groupRef": {"name": "team"}, "config": {"groupRef": "team", "name": "gw"}})
    parsed = parse_manifest(document)
    assert isinstance(parsed, VirtualMCPServer) and parsed.spec.config.group_ref == "team"
    assert [w.split(" ")[0] for w in warnings(document, CHANGES, "v1beta1")] == [
        "spec.config.groupRef",
        "spec.config.name",
    ]


def test_a_conflict_is_refused_naming_both_fields() -> None:
    problems = _refusal(_gateway({"groupRef": {"name": "team"}, "config": {"groupRef": "other"}}))
    assert problems[0][0] == "spec.config.groupRef"
    assert "spec.groupRef.name" in problems[0][1] and "set only spec.groupRef.name" in problems[0][1]
    problems = _refusal(_gateway({"groupRef": {"name": "team"}, "config": {"name": "other"}}))
    assert problems[0][0] == "spec.config.name" and "metadata.name" in problems[0][1]


def test_config_session_storage_is_read_as_spec_session_storage() -> None:
    redis = {"provider": "redis", "address": "redis:6379", "keyPrefix": "gw"}
    alone = parse_manifest(_gateway({"groupRef": {"name": "team"}, "config": {"sessionStorage": redis}}))
    assert isinstance(alone, VirtualMCPServer) and alone.spec.session_storage is not None
    assert alone.spec.session_storage.address == "redis:6379" and alone.spec.session_storage.db == 0
    # Agreeing with spec.sessionStorage, which may hold more (the password reference).
    current = {**redis, "db": 0, "passwordRef": {"name": "redis", "key": "password"}}
    both = _gateway(
        {"groupRef": {"name": "team"}, "config": {"sessionStorage": redis}, "sessionStorage": current}
    )
    parsed = parse_manifest(both)
    assert isinstance(parsed, VirtualMCPServer) and parsed.spec.session_storage is not None
    assert parsed.spec.session_storage.password_ref is not None
    assert "spec.config.sessionStorage is superseded" in warnings(both, CHANGES, "v1beta1")[0]
    for key, value in (("address", "other:6379"), ("db", 3), ("keyPrefix", "x"), ("provider", "memory")):
        conflicting = _gateway(
            {
                "groupRef": {"name": "team"},
                "config": {"sessionStorage": {**redis, key: value}},
                "sessionStorage": current,
            }
        )
        problems = _refusal(conflicting)
        assert problems[0][0] == "spec.config.sessionStorage" and "spec.sessionStorage" in problems[0][1], key


def test_neither_place_is_refused_naming_the_current_field() -> None:
    problems = _refusal(_gateway({"config": {"aggregation": {"conflictResolution": "prefix"}}}))
    assert problems[0][0] == "spec.groupRef.name"


def test_v1alpha1_has_no_superseded_fields() -> None:
    document = _gateway({"config": {"groupRef": "team", "name": "gw"}}, api_version="mcpfleet.dev/v1alpha1")
    assert _refusal(document)[0][0] == "spec.config.name"
    assert warnings(document, CHANGES, "v1alpha1") == []


def test_config_metadata_is_kept_in_both_versions() -> None:
    document = _gateway({"groupRef": {"name": "team"}, "config": {"metadata": {"owner": "platform"}}})
    parsed = parse_manifest(document)
    assert isinstance(parsed, VirtualMCPServer) and parsed.spec.config.metadata == {"owner": "platform"}
    assert convert(convert(document, CHANGES, "v1alpha1"), CHANGES, "v1beta1") == document
    assert warnings(document, CHANGES, "v1beta1") == []
    too_many = {f"k{i}": "v" for i in range(51)}
    problems = _refusal(_gateway({"groupRef": {"name": "team"}, "config": {"metadata": too_many}}))
    assert problems[0][0] == "spec.config.metadata"


def test_crd_carries_the_rules_of_both_platforms() -> None:
    beta = next(v for v in crd(VirtualMCPServer)["spec"]["versions"] if v["name"] == "v1beta1")
    root = beta["schema"]["openAPIV3Schema"]
    spec = root["properties"]["spec"]
    assert spec["properties"]["config"]["properties"]["groupRef"]["type"] == "string"
    assert "groupRef" not in spec.get("required", [])
    messages = [r["message"] for r in spec["x-kubernetes-validations"]]
    assert "spec.groupRef.name is required" in messages
    assert any(m.startswith("spec.config.groupRef and spec.groupRef.name differ") for m in messages)
    assert any("self.metadata.name" in r["rule"] for r in root["x-kubernetes-validations"])


names = st.sampled_from(["a", "b", "team"])


@settings(max_examples=100)
@given(old=st.none() | names, current=st.none() | names)
def test_any_pair_is_read_or_refused_never_both(old: str | None, current: str | None) -> None:
    spec: dict[str, Any] = {"config": {"groupRef": old} if old else {}}
    if current:
        spec["groupRef"] = {"name": current}
    document = _gateway(spec)
    if old and current and old != current:
        assert _refusal(document)[0][0] == "spec.config.groupRef"
    elif not (old or current):
        assert _refusal(document)[0][0] == "spec.groupRef.name"
    else:
        parsed = parse_manifest(document)
        assert isinstance(parsed, VirtualMCPServer) and parsed.spec.config.group_ref == (current or old)


def test_up_loader_reports_the_warning_with_the_document(tmp_path: Path) -> None:
    (tmp_path / "gw.yaml").write_text(yaml.safe_dump(_gateway({"config": {"groupRef": "team"}})))
    result = load_dir(tmp_path)
    assert not result.errors and len(result.objects) == 1
    assert result.warnings == [
        "gw.yaml (document 1) VirtualMCPServer/gw: spec.config.groupRef is superseded: read as"
        " spec.groupRef.name; set spec.groupRef.name instead"
    ]
