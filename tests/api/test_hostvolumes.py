"""MCPServer `spec.volumes` (ToolHive's host-path volumes) refuse hostile paths on both sides: the
model (local validation, naming the field) and the CRD (its pattern and CEL, checked on a real API
server by the invalid corpus in `test_crds_cluster.py`). Here: hypothesis over the paths an attacker
would write, and the CRD's rules read back from the generated CRD."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.api.kinds import ManifestError, parse_manifest
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.reconcile import mcpserver
from mcpfleet.reconcile.model import Images, World
from tests.api.corpus import ROOT

SEGMENT = st.text(alphabet="abcxyz-_09", min_size=1, max_size=8)


def _server(volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": "vols"},
        "spec": {"image": "uvx://mcp-server-time", "volumes": volumes},
    }


def _problems(volumes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(_server(volumes))
    return list(caught.value.problems)


@functools.cache
def _crd_volume_schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "deploy" / "crds" / "mcpservers.mcpfleet.dev.yaml").read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["spec"]["properties"]["volumes"]


HOSTILE = st.one_of(
    # a `..` or `.` segment anywhere in an absolute path
    st.tuples(st.lists(SEGMENT, max_size=3), st.sampled_from(["..", "."]), st.lists(SEGMENT, max_size=3)).map(
        lambda t: "/" + "/".join([*t[0], t[1], *t[2]])
    ),
    # kernel interfaces
    st.tuples(st.sampled_from(["/proc", "/sys", "/dev"]), st.lists(SEGMENT, max_size=3)).map(
        lambda t: "/".join([t[0], *t[1]])
    ),
    # relative, empty segments, the root, control characters
    st.lists(SEGMENT, min_size=1, max_size=3).map("/".join),
    st.lists(SEGMENT, min_size=2, max_size=3).map(lambda s: "/" + "//".join(s)),
    st.just("/"),
    st.tuples(SEGMENT, st.sampled_from(["\x00", "\n", "\x1b"])).map(lambda t: f"/{t[0]}{t[1]}x"),
)


@settings(max_examples=80, deadline=None)
@given(path=HOSTILE, field=st.sampled_from(["hostPath", "mountPath"]))
def test_hostile_paths_are_refused_naming_the_field(path: str, field: str) -> None:
    volume = {"name": "data", "hostPath": "/srv/data", "mountPath": "/data", field: path}
    problems = _problems([volume])
    assert any(where == f"spec.volumes[0].{field}" for where, _ in problems), problems


@settings(max_examples=80, deadline=None)
@given(path=HOSTILE)
def test_the_crd_rules_refuse_the_same_paths(path: str) -> None:
    """The CRD's pattern and the regular expressions of its CEL (RE2 syntax, read by `re` alike)."""
    item = _crd_volume_schema()["items"]
    pattern = re.compile(item["properties"]["hostPath"]["pattern"])
    rule = next(r["rule"] for r in item["x-kubernetes-validations"] if r["fieldPath"] == ".hostPath")
    segments, kernel = re.findall(r"matches\('([^']*)'\)", rule)
    refused = (
        not pattern.match(path)
        or re.search(segments, path) is not None
        or "//" in path
        or path == "/"
        or re.search(kernel, path) is not None
    )
    assert refused, (path, rule)


def test_ordinary_volumes_validate_and_keep_toolhive_shape() -> None:
    server = parse_manifest(
        _server(
            [
                {"name": "data", "hostPath": "/srv/data", "mountPath": "/data", "readOnly": True},
                {"name": "cache", "hostPath": "/var/cache/x.db", "mountPath": "/cache/x.db"},
            ]
        )
    )
    volumes = server.spec.volumes  # type: ignore[union-attr]
    assert [v.name for v in volumes] == ["data", "cache"]
    assert volumes[0].local_read_only() and volumes[1].local_read_only()
    schema = _crd_volume_schema()
    assert schema["x-kubernetes-list-type"] == "map" and schema["x-kubernetes-list-map-keys"] == ["name"]
    assert set(schema["items"]["required"]) == {"name", "hostPath", "mountPath"}


def test_duplicate_names_and_mount_paths_are_refused() -> None:
    twice = [
        {"name": "a", "hostPath": "/srv/a", "mountPath": "/a"},
        {"name": "a", "hostPath": "/srv/b", "mountPath": "/b"},
    ]
    assert any("each name at most once" in message for _, message in _problems(twice))
    same = [
        {"name": "a", "hostPath": "/srv/a", "mountPath": "/d"},
        {"name": "b", "hostPath": "/srv/b", "mountPath": "/d"},
    ]
    assert any("each mountPath at most once" in message for _, message in _problems(same))


def test_rendered_pod_with_volumes_is_accepted_by_the_api_server(
    dev_cluster: ClusterHandle, namespace: str
) -> None:
    """The Deployment rendered for an MCPServer with volumes passes the real API server's validation
    of pods (server-side dry run: kwok would not run a hostPath anyway)."""
    server = parse_manifest(
        {
            **_server([{"name": "notes", "hostPath": "/srv/notes", "mountPath": "/notes", "readOnly": True}]),
            "metadata": {"name": "vols", "namespace": namespace},
        }
    )
    plan = mcpserver.plan(server, World(platform="kubernetes", namespace=namespace))  # type: ignore[arg-type]
    assert not plan.problems
    objects = render(plan, Owner("MCPServer", "vols", namespace, "uid-1"), Images(runner="runner:1"))
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    deployment["metadata"].pop("ownerReferences", None)
    result = dev_cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-o", "json", "-f", "-", input=json.dumps(deployment)
    )
    pod = json.loads(result.stdout)["spec"]["template"]["spec"]
    assert {"name": "host-notes", "hostPath": {"path": "/srv/notes", "type": ""}} in pod["volumes"]
    mounts = [m for c in pod["containers"] for m in c.get("volumeMounts", [])]
    assert {"name": "host-notes", "mountPath": "/notes", "readOnly": True} in mounts
