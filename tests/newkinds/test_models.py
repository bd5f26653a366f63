"""Model validation of the seven kinds ToolHive added: hostile input is refused naming the field, never
with anything but a ManifestError; valid objects round-trip through their wire form.

(The invalid-manifest corpus in tests/api/invalid also covers these kinds, locally and on the API
server; the checks here have no CEL twin, so only the local models and the reconcile status see them.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.api.kinds import ManifestError, parse_manifest
from mcpfleet.api.meta import API_VERSION
from tests.newkinds.examples import NEW_KINDS

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def doc(kind: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": "x"}, "spec": spec}


def problem_paths(kind: str, spec: Any) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(doc(kind, spec))
    return [path for path, _ in caught.value.problems]


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"policies": []}, "spec.config.policies"),
        ({"policies": ["permit(principal, action, resource);", ""]}, "spec.config.policies[1]"),
        ({"policies": ["p"], "entities_json": "{not json"}, "spec.config.entities_json"),
        ({"policies": ["p"], "entities_json": "{}"}, "spec.config.entities_json"),
        ({"policies": ["p"], "policy": "typo"}, "spec.config.policy"),
        ({"policies": ["p"] * 1001}, "spec.config.policies"),
        ({"policies": ["x" * (300 * 1024)]}, "spec.config"),
    ],
)
def test_cedar_config_is_checked_naming_the_field(config: dict[str, Any], field: str) -> None:
    assert field in problem_paths("MCPAuthzConfig", {"type": "cedarv1", "config": config})


def test_http_authorizer_needs_a_url() -> None:
    assert "spec.config.http.url" in problem_paths(
        "MCPAuthzConfig", {"type": "httpv1", "config": {"http": {}}}
    )
    ok = parse_manifest(
        doc("MCPAuthzConfig", {"type": "httpv1", "config": {"http": {"url": "https://pdp.example/decide"}}})
    )
    assert ok.kind == "MCPAuthzConfig"


def test_webhook_timeout_is_bounded_to_30s() -> None:
    spec = {"validating": [{"name": "a", "url": "https://v", "timeout": "45s"}]}
    assert "spec.validating[0].timeout" in problem_paths("MCPWebhookConfig", spec)
    spec["validating"][0]["timeout"] = "30s"
    assert parse_manifest(doc("MCPWebhookConfig", spec)).kind == "MCPWebhookConfig"


def test_mtls_needs_both_halves() -> None:
    spec = {
        "validating": [
            {
                "name": "a",
                "url": "https://v",
                "tlsConfig": {"clientCertSecretRef": {"name": "c", "key": "crt"}},
            }
        ]
    }
    assert "spec.validating[0].tlsConfig.clientKeySecretRef" in problem_paths("MCPWebhookConfig", spec)


def test_composite_definition_dag_rules() -> None:
    cycle = {
        "name": "t",
        "steps": [{"id": "a", "tool": "x", "dependsOn": ["b"]}, {"id": "b", "tool": "y", "dependsOn": ["a"]}],
    }
    assert "spec.steps" in problem_paths("VirtualMCPCompositeToolDefinition", cycle)
    unknown = {"name": "t", "steps": [{"id": "a", "tool": "x", "dependsOn": ["nope"]}]}
    assert "spec.steps" in problem_paths("VirtualMCPCompositeToolDefinition", unknown)
    on_tool = {"name": "t", "steps": [{"id": "a", "tool": "x", "onDecline": {"action": "continue"}}]}
    assert "spec.steps[0].onDecline" in problem_paths("VirtualMCPCompositeToolDefinition", on_tool)


HOSTILE_TEXT = st.one_of(
    st.text(max_size=300),
    st.sampled_from(["", " ", "\x00", "../../etc/passwd", "http://", "https://a b", "javascript:alert(1)"]),
)
HOSTILE_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), HOSTILE_TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(HOSTILE_TEXT, inner, max_size=4)),
    max_leaves=20,
)
KINDS = NEW_KINDS


@FUZZ
@given(kind=st.sampled_from(KINDS), spec=HOSTILE_VALUE)
def test_any_spec_is_a_model_or_a_manifest_error(kind: str, spec: Any) -> None:
    """Whatever the spec, parsing either gives the kind or a ManifestError naming fields (no crash)."""
    try:
        model = parse_manifest(doc(kind, spec))
    except ManifestError as exc:
        assert exc.problems and all(isinstance(path, str) for path, _ in exc.problems)
        return
    assert model.kind == kind


FIELDS = {
    "MCPServerEntry": ("remoteUrl", "transport", "groupRef", "headerForward", "caBundleRef"),
    "MCPTelemetryConfig": ("openTelemetry", "prometheus"),
    "EmbeddingServer": ("image", "model", "port", "replicas", "args", "env", "modelCache", "podTemplateSpec"),
}


@FUZZ
@given(data=st.data())
def test_hostile_field_values_are_refused_naming_that_field(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(sorted(FIELDS)))
    field = data.draw(st.sampled_from(FIELDS[kind]))
    base: dict[str, Any] = {
        "MCPServerEntry": {"remoteUrl": "https://a/mcp", "transport": "sse", "groupRef": {"name": "g"}},
        "MCPTelemetryConfig": {},
        "EmbeddingServer": {},
    }[kind]
    value = data.draw(HOSTILE_VALUE)
    try:
        parse_manifest(doc(kind, {**base, field: value}))
    except ManifestError as exc:
        assert any(path.startswith(f"spec.{field}") for path, _ in exc.problems), exc.problems


ENTRY = st.fixed_dictionaries(
    {
        "remoteUrl": st.from_regex(r"\Ahttps://[a-z]{1,20}\.example\.com/[a-z]{0,10}\Z"),
        "transport": st.sampled_from(["sse", "streamable-http"]),
        "groupRef": st.fixed_dictionaries({"name": st.from_regex(r"\A[a-z][a-z0-9-]{0,20}\Z")}),
        "allowPrivateEndpoint": st.booleans(),
        "headerForward": st.fixed_dictionaries(
            {
                "addPlaintextHeaders": st.dictionaries(
                    st.from_regex(r"\AX-[A-Za-z]{1,10}\Z"), st.text(max_size=20)
                )
            }
        ),
    }
)


@FUZZ
@given(spec=ENTRY)
def test_valid_entries_round_trip_through_the_wire_form(spec: dict[str, Any]) -> None:
    model = parse_manifest(doc("MCPServerEntry", spec))
    again = parse_manifest(json.loads(json.dumps(model.dump())))
    assert again == model
