"""The enforceServers rule (`reconcile/enforce.py`): image lists of both registry formats, ToolHive's
label semantics, what a refusal names, and hostile registry files (never an exception but ValueError)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.reconcile import embeddingserver, enforce, mcpserver
from mcpfleet.reconcile.enforce import RegistryImages
from mcpfleet.reconcile.model import World
from tests.reconcile.conftest import obj

TOOLHIVE_FILE = {
    "servers": {"a": {"image": "docker.io/a:1"}, "remote": {"url": "https://x"}},
    "groups": [{"name": "g", "servers": {"b": {"image": "docker.io/b:2"}}}],
}
UPSTREAM_FILE = {
    "servers": [
        {"server": {"name": "io.x/c", "packages": [{"registryType": "oci", "identifier": "ghcr.io/c:3"}]}},
        {"name": "io.x/d", "packages": [{"registryType": "oci", "identifier": "ghcr.io/d", "version": "4"}]},
        {"name": "io.x/e", "packages": [{"registryType": "pypi", "identifier": "e"}]},
    ]
}


def test_images_of_both_formats() -> None:
    assert enforce.images_of("toolhive", json.dumps(TOOLHIVE_FILE).encode()) == {
        "docker.io/a:1",
        "docker.io/b:2",
    }
    assert enforce.images_of("upstream", json.dumps(UPSTREAM_FILE).encode()) == {
        "ghcr.io/c:3",
        "ghcr.io/d",
        "ghcr.io/d:4",
    }


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json",
        b"[]",
        b'{"servers": 7}',
        b'{"servers": {"a": 1}}',
        b'{"groups": [1, {"servers": []}]}',
    ],
)
def test_hostile_files_list_nothing_or_raise_value_error(content: bytes) -> None:
    try:
        assert enforce.images_of("toolhive", content) == frozenset()
    except ValueError:
        pass
    try:
        assert enforce.images_of("upstream", content) == frozenset()
    except ValueError:
        pass


def test_oversized_file_is_refused() -> None:
    with pytest.raises(ValueError, match="larger than"):
        enforce.images_of("toolhive", b" " * (enforce.MAX_REGISTRY_BYTES + 1))


ENFORCING = {
    "approved": RegistryImages(enforce=True, images=frozenset({"img:1"})),
    "other": RegistryImages(False),
}


def test_check_follows_toolhives_rule() -> None:
    assert enforce.check("img:1", {}, {}) == enforce.Verdict()  # no registry enforces
    assert enforce.check("img:1", {}, ENFORCING).condition == (
        "ImageValidated",
        "True",
        "ImageValidationSuccess",
        "image img:1 is listed by MCPRegistry approved",
    )
    refused = enforce.check("img:2", {}, ENFORCING)
    assert refused.problem is not None and "img:2" in refused.problem and "approved" in refused.problem
    # The label restricts the check to one registry: not enforcing means not checked; missing refuses.
    assert (
        enforce.check("img:2", {"toolhive.stacklok.io/registry-name": "other"}, ENFORCING)
        == enforce.Verdict()
    )
    missing = enforce.check("img:1", {"mcpfleet.dev/registry-name": "gone"}, ENFORCING)
    assert missing.problem is not None and "'gone'" in missing.problem


def _registry(spec: str) -> MCPRegistry:
    model = obj(f"kind: MCPRegistry\nmetadata: {{name: r}}\nspec: {spec}\n")
    assert isinstance(model, MCPRegistry)
    return model


def test_gather_names_unread_sources_and_read_errors() -> None:
    registry = _registry(
        "{enforceServers: true, registries: ["
        "{name: cm, configMapRef: {name: c, key: k}},"
        "{name: g, git: {repository: 'https://example.com/r.git'}},"
        "{name: p, pvcRef: {claimName: claim}}]}"
    )
    assert [i for _, i, _ in enforce.to_read([registry], local=False)] == [0]
    assert [i for _, i, _ in enforce.to_read([registry], local=True)] == [0, 2]
    found = enforce.gather([registry], {("r", 0): b"not json"}, local=False)["r"]
    assert found.unread == ("spec.registries[1] (git)", "spec.registries[2] (pvcRef)")
    assert found.errors and found.errors[0].startswith("spec.registries[0]: not JSON")
    verdict = enforce.check("x", {}, {"r": found})
    assert verdict.problem is not None and "spec.registries[1] (git)" in verdict.problem
    assert (
        enforce.gather([_registry("{registries: [{name: g, url: {endpoint: 'https://x'}}]}")], {}, False)
        == {}
    )


def _plan_world(images: dict[str, RegistryImages]) -> World:
    return World(platform="kubernetes", namespace="team", registry_images=images)


@pytest.mark.parametrize("kind", ["MCPServer", "EmbeddingServer"])
def test_refused_workloads_are_planned_with_a_problem_and_the_condition(kind: str) -> None:
    spec: dict[str, Any] = {"image": "img:2"}
    if kind == "EmbeddingServer":
        spec["model"] = "m"
    model = obj(json.dumps({"kind": kind, "metadata": {"name": "s"}, "spec": spec}))
    planner = mcpserver.plan if kind == "MCPServer" else embeddingserver.plan
    plan = planner(model, _plan_world(ENFORCING))  # type: ignore[arg-type]
    assert any("enforceServers" in p for p in plan.problems)
    assert ("ImageValidated", "False") in [c[:2] for c in plan.conditions]
