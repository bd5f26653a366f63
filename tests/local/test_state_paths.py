"""Issue 11, defect 1: names, namespaces and symlinks can never make `mcpfleet up` write, read or remove
outside its state dir.

The namespace is checked where Kubernetes checks it (a DNS-1123 label, at most 63 characters), by the
API models, so `kubectl apply` and `mcpfleet up` refuse the same values; and every path the local
platform builds goes through `paths.safe_join`, which also catches symlinks planted in the state dir.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.api.kinds import ManifestError, parse_manifest
from mcpfleet.platform.local.loader import load_dir
from mcpfleet.platform.local.paths import PathEscapeError, safe_join
from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from tests.local.conftest import MCPFLEET
from tests.local.sandbox import Sandbox, changes, make_sandbox

PORTS = (32100, 32199)
"""Inside the local tests' range, apart from the other in-process tests."""

# Kubernetes' own definitions (k8s.io/apimachinery/pkg/util/validation): the reference the models must match.
K8S_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
K8S_LABEL_MAX = 63

BAD_NAMESPACES = [
    "../../../outside",
    "../outside",
    "..",
    ".",
    "",
    "/abs/path",
    "a/b",
    "a\\b",
    "a.b",
    "A",
    "a_b",
    "-a",
    "a-",
    "a" * 64,
    "é",
    "\uff44\uff45\uff46\uff41\uff55\uff4c\uff54",  # full-width letters look like "default"
    "default\n",
    "default\x00",
    " default",
]
GOOD_NAMESPACES = ["default", "a", "0", "team-a", "a" * 63, "1-2-3"]
BAD_NAMES = ["..", "../x", "/etc", "a/b", "a.b", "A", "a_b", "-a", "a-", "", "x" * 254, "ü", "a\n", "[/]"]


def _doc(name: object = "ok", namespace: object = "default", kind: str = "MCPGroup") -> dict[str, object]:
    return {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {},
    }


def _problem_fields(document: dict[str, object]) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(document)
    return [path for path, _ in caught.value.problems]


@pytest.mark.parametrize("namespace", BAD_NAMESPACES, ids=repr)
def test_a_namespace_kubernetes_refuses_is_refused_naming_the_field(namespace: str) -> None:
    assert _problem_fields(_doc(namespace=namespace)) == ["metadata.namespace"]


@pytest.mark.parametrize("namespace", GOOD_NAMESPACES)
def test_a_namespace_kubernetes_accepts_is_accepted(namespace: str) -> None:
    assert parse_manifest(_doc(namespace=namespace)).namespace == namespace


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_a_name_that_could_climb_or_is_not_a_dns_name_is_refused(name: str) -> None:
    assert "metadata.name" in _problem_fields(_doc(name=name))


NAMESPACES = st.one_of(
    st.text(max_size=80),
    st.text(alphabet="abz09-./\\_A~é\x00\n", max_size=70),
    st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,70}[a-z0-9])?\Z"),
)
# Validated at collection, on the main thread: `from_regex` imports hypothesis' regex module lazily,
# and pytest rewrites that import with `ast.parse`. CPython 3.11's AST converter keeps its recursion
# counter per interpreter, not per thread, so a parse mid-suite while a test server's thread also
# parses failed once with "SystemError: AST constructor recursion depth mismatch".
NAMESPACES.validate()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(namespace=NAMESPACES)
def test_fuzzed_namespaces_match_kubernetes_and_stay_inside(namespace: str) -> None:
    """Accepted exactly when Kubernetes accepts it; and then every path built from it stays inside."""
    kubernetes_accepts = bool(K8S_DNS1123_LABEL.fullmatch(namespace)) and len(namespace) <= K8S_LABEL_MAX
    try:
        resource = parse_manifest(_doc(namespace=namespace))
    except ManifestError as exc:
        assert not kubernetes_accepts, f"{namespace!r} refused: {exc}"
        assert [p for p, _ in exc.problems] == ["metadata.namespace"]
        return
    assert kubernetes_accepts, f"{namespace!r} accepted but Kubernetes refuses it"
    root = Path("/nonexistent-state-root")
    path = safe_join(root, "config", "mcpgroup", resource.namespace, resource.name)
    assert path.is_relative_to(root) and path.name == resource.name


@settings(max_examples=300, deadline=None)
@given(name=st.one_of(st.text(max_size=300), st.text(alphabet="ab.-/\\_Z", max_size=300)))
def test_fuzzed_names_never_leave_the_state_dir(name: str) -> None:
    try:
        resource = parse_manifest(_doc(name=name))
    except ManifestError as exc:
        assert "metadata.name" in [p for p, _ in exc.problems]
        return
    assert K8S_DNS1123_LABEL.fullmatch(name) and len(name) <= 253
    root = Path("/nonexistent-state-root")
    assert (
        safe_join(root, "config", "mcpgroup", "default", resource.name).parent
        == root / "config/mcpgroup/default"
    )


@pytest.mark.parametrize("parts", [("..",), ("a", ".."), ("/etc",), ("a/b",), ("",), (".",), ("a\x00",)])
def test_safe_join_refuses_anything_but_single_components(tmp_path: Path, parts: tuple[str, ...]) -> None:
    with pytest.raises(PathEscapeError):
        safe_join(tmp_path, *parts)


def test_safe_join_refuses_a_symlink_that_leads_outside(tmp_path: Path) -> None:
    root, outside = tmp_path / "state", tmp_path / "outside"
    (root / "config").mkdir(parents=True)
    outside.mkdir()
    (root / "config" / "evil").symlink_to(outside)
    (root / "config" / "fine").symlink_to(root / "config")  # a link that stays inside is fine
    with pytest.raises(PathEscapeError, match="outside"):
        safe_join(root, "config", "evil", "runconfig.json")
    assert safe_join(root, "config", "fine", "x") == (root / "config" / "x").resolve()
    assert safe_join(root, "config", "new", "deeper") == (root / "config" / "new" / "deeper").resolve()
    (root / "config" / "loop-a").symlink_to(root / "config" / "loop-b")
    (root / "config" / "loop-b").symlink_to(root / "config" / "loop-a")
    with pytest.raises(PathEscapeError):
        safe_join(root, "config", "loop-a", "x")


def _remote_proxy(namespace: str, name: str = "upstream") -> str:
    return json.dumps(
        {
            "apiVersion": "mcpfleet.dev/v1alpha1",
            "kind": "MCPRemoteProxy",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"remoteURL": "http://127.0.0.1:9/mcp"},
        }
    )


async def _one_pass(box: Sandbox) -> dict[str, Any]:
    """One reconcile pass over the sandbox's manifests; the remote proxy's status. Nothing may start."""
    state = await State.open(box.state)
    runner = Runner(box.manifests, state, port_range=PORTS)
    try:
        await runner.reconcile()
        obj = await state.get_object("MCPRemoteProxy", "default", "upstream")
        assert obj is not None
        assert not runner.supervisor.keys()
        return dict(obj.status)
    finally:
        await runner.shutdown()
        await state.close()


@pytest.mark.timeout(60)
async def test_traversing_namespaces_never_reach_outside(tmp_path: Path) -> None:
    """Today's main wrote runconfig.json to outside/upstream/ and deleted outside/*/secrets/*."""
    box = make_sandbox(tmp_path)
    (box.manifests / "relative.yaml").write_text(_remote_proxy("../../../outside"))
    (box.manifests / "absolute.yaml").write_text(_remote_proxy(str(box.outside), name="victim"))
    before = box.snapshot()
    state = await State.open(box.state)
    runner = Runner(box.manifests, state, port_range=PORTS)
    try:
        for _ in range(3):
            await runner.reconcile()
        runner.manifests_changed()  # a second load: the clean-up of objects that went away
        (box.manifests / "relative.yaml").unlink()
        await runner.reconcile()
        messages = [str(e) for e in runner.load_errors]
        assert any("absolute.yaml" in m and "metadata.namespace" in m for m in messages), messages
        assert await state.objects() == []
        assert not runner.supervisor.keys()
    finally:
        await runner.shutdown()
        await state.close()
    assert changes(before, box.snapshot()) == []


@pytest.mark.timeout(60)
async def test_a_symlink_planted_in_the_state_dir_is_not_followed(tmp_path: Path) -> None:
    """A valid manifest, but state/config/mcpremoteproxy/default points outside: nothing is written
    there, nothing is started, and the workload says why."""
    box = make_sandbox(tmp_path)
    (box.manifests / "remote.yaml").write_text(_remote_proxy("default"))
    (box.state / "config" / "mcpremoteproxy").mkdir(parents=True)
    (box.state / "config" / "mcpremoteproxy" / "default").symlink_to(box.outside)
    (box.state / "logs").mkdir()
    (box.state / "logs" / "mcpremoteproxy-upstream.log").symlink_to(box.outside / "private.env")
    before = box.snapshot()
    status = await _one_pass(box)
    assert status["phase"] == "Failed", status
    assert "outside the state dir" in status["message"]
    assert changes(before, box.snapshot()) == []


@pytest.mark.timeout(60)
async def test_a_secret_reference_cannot_read_a_file_outside(tmp_path: Path) -> None:
    """`valueSecretRef: {name: ../../outside, key: private.env}` must not read outside/private.env
    into a header of the proxy (today's main did: the secret lookup joined the names unchecked)."""
    box = make_sandbox(tmp_path)
    spec = {
        "remoteURL": "http://127.0.0.1:9/mcp",
        "headerForward": {
            "addHeadersFromSecret": [
                {"headerName": "X-Key", "valueSecretRef": {"name": "../../outside", "key": "private.env"}}
            ]
        },
    }
    document = json.loads(_remote_proxy("default"))
    document["spec"] = spec
    (box.manifests / "remote.yaml").write_text(json.dumps(document))
    (box.state / "secrets").mkdir(parents=True)
    status = await _one_pass(box)
    assert status["phase"] == "Failed", status
    assert "not a usable file name" in status["message"]
    assert "hunter2" not in json.dumps(status)


def test_loader_rejects_traversal_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(_remote_proxy("../../etc") + "\n---\n" + _remote_proxy(os.sep + "tmp"))
    result = load_dir(tmp_path)
    assert result.objects == []
    assert [e.problems[0][0] for e in result.errors] == ["metadata.namespace", "metadata.namespace"]


@pytest.mark.parametrize("entry", ["state.db", "up.lock", "config"])
def test_up_refuses_a_state_dir_whose_entries_lead_outside(tmp_path: Path, entry: str) -> None:
    """A `.mcpfleet/` shipped inside a cloned manifests folder, with `state.db` (or the lock, or
    `config/`) linked outside: `up` refuses to start and creates nothing there."""
    box = make_sandbox(tmp_path)
    (box.manifests / "remote.yaml").write_text(_remote_proxy("default"))
    box.state.mkdir()
    (box.state / entry).symlink_to(box.outside / "created-by-up")
    before = box.snapshot()
    result = subprocess.run(
        [MCPFLEET, "up", str(box.manifests), "--state-dir", str(box.state), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "unsafe state dir" in result.stdout and "outside" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert changes(before, box.snapshot()) == []
