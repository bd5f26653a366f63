"""MCPServer `permissionProfile`: the reference's rules (CEL and local) and the profile document's
hostile suite (a corpus of bad documents, each refused naming its key, and a property test)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.api.permissions import BUILTIN, ProfileError, parse_profile
from tests.reference import ROOT


def _server(profile: Any) -> Any:
    return parse_manifest(
        {
            "apiVersion": "mcpfleet.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": "s", "namespace": "ns"},
            "spec": {"image": "uvx://mcp-server-time", "permissionProfile": profile},
        }
    )


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (
            {"type": "builtin", "name": "all"},
            "permissionProfile.name: a builtin permission profile is 'none'",
        ),
        ({"type": "builtin", "name": "none", "key": "k"}, "permissionProfile.key: key names a ConfigMap key"),
        (
            {"type": "configmap", "name": "cm"},
            "permissionProfile.key: a configmap permission profile needs key",
        ),
        ({"type": "docker", "name": "none"}, "permissionProfile.type"),
        ({"type": "builtin", "name": "none", "read": ["/x"]}, "permissionProfile.read"),
        ({"type": "configmap", "name": "cm", "key": "../x"}, "permissionProfile.key"),
    ],
)
def test_reference_refused_naming_the_field(profile: dict[str, Any], expected: str) -> None:
    with pytest.raises(Exception) as caught:
        _server(profile)
    assert expected in str(caught.value)


def test_reference_accepted_and_type_defaults_to_builtin() -> None:
    assert _server({"name": "none"}).spec.permission_profile.label == "builtin none"
    ref = _server({"type": "configmap", "name": "cm", "key": "profile.json"}).spec.permission_profile
    assert ref.label == "configmap cm/profile.json"


def test_crd_carries_toolhive_shape_and_cel_rules() -> None:
    crd = yaml.safe_load((ROOT / "deploy/crds/mcpservers.mcpfleet.dev.yaml").read_text())
    for version in crd["spec"]["versions"]:
        field = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["permissionProfile"]
        assert set(field["properties"]) == {"type", "name", "key"}
        assert field["properties"]["type"]["enum"] == ["builtin", "configmap"]
        rules = " ".join(r["rule"] for r in field["x-kubernetes-validations"])
        assert "['none', 'network']" in rules and "has(self.key)" in rules


CORPUS: list[tuple[str, str]] = [
    ("[]", "a profile is a JSON object"),
    ("{", "not JSON"),
    ('{"reed": []}', "reed: unknown key"),
    (
        '{"network": {"outbound": {"insecureAllowAll": true}}}',
        "network.outbound.insecureAllowAll: unknown key",
    ),
    ('{"network": {"inbound": {}}}', "network.inbound: unknown key"),
    (
        '{"network": {"outbound": {"insecure_allow_all": true, "allow_port": [443]}}}',
        "network.outbound: insecure_allow_all opens every host and port",
    ),
    (
        '{"network": {"outbound": {"insecure_allow_all": true, "allow_host": ["a.b"]}}}',
        "network.outbound: insecure_allow_all",
    ),
    ('{"read": ["relative/path"]}', "read: [0] 'relative/path' is not an absolute path"),
    ('{"write": ["/ok", "/a/../etc"]}', "write: [1] '/a/../etc': not a normal path"),
    ('{"read": ["/a//b"]}', "read: [0] '/a//b': not a normal path"),
    ('{"read": ["/a/./b"]}', "read: [0]"),
    ('{"write": ["/"]}', "write: [0] '/' would show the whole filesystem"),
    ('{"read": ["/proc/self"]}', "kernel interfaces"),
    ('{"write": ["/dev"]}', "kernel interfaces"),
    ('{"read": ["/a\\u0000b"]}', "control characters"),
    ('{"read": "/etc"}', "read"),
    ('{"network": {"outbound": {"allow_port": [0]}}}', "network.outbound.allow_port"),
    ('{"network": {"outbound": {"allow_port": [65536]}}}', "network.outbound.allow_port"),
    ('{"network": {"outbound": {"allow_port": [true]}}}', "network.outbound.allow_port"),
    ('{"network": {"outbound": {"allow_host": ["http://x"]}}}', "network.outbound.allow_host: [0]"),
    ('{"network": {"outbound": {"allow_host": ["a b"]}}}', "network.outbound.allow_host"),
    ('{"privileged": true}', "privileged: a privileged server"),
    (json.dumps({"read": [f"/p{i}" for i in range(65)]}), "read"),
    (" " * 70_000, "over 65536 bytes"),
]


@pytest.mark.parametrize(("document", "expected"), CORPUS)
def test_hostile_profiles_refused_naming_the_key(document: str, expected: str) -> None:
    with pytest.raises(ProfileError) as caught:
        parse_profile(document)
    assert expected in str(caught.value)


def test_toolhive_documents_accepted() -> None:
    profile = parse_profile(
        '{"read": ["/data/in/"], "write": ["/data/out"], "network": {"outbound":'
        ' {"allow_host": [".github.com", "api.example.com"], "allow_port": [443]}}, "privileged": false}'
    )
    assert profile.read == ("/data/in",) and profile.network_mode == "restricted"
    assert parse_profile("{}").network_mode == "none"
    assert parse_profile('{"network": {"outbound": {"insecure_allow_all": true}}}') == BUILTIN["network"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 70000) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
KEYS = st.sampled_from(["read", "write", "network", "privileged", "outbound", "allow_port", "x"])


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(KEYS, JSON, max_size=4))
def test_any_document_is_accepted_or_refused_clearly(document: dict[str, Any]) -> None:
    try:
        profile = parse_profile(json.dumps(document))
    except ProfileError as exc:
        assert str(exc) and "Traceback" not in str(exc)
        return
    for path in (*profile.read, *profile.write):
        assert path.startswith("/") and ".." not in path.split("/") and path != "/"
