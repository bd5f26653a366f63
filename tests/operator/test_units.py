"""Unit tests (no cluster) of the Kubernetes rendering, the skip rule, the store, the queue and settings."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Mapping
from typing import Any

import pytest

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.operator.queue import WorkQueue
from mcpfleet.operator.settings import from_environment
from mcpfleet.operator.store import Store
from mcpfleet.platform.kubernetes.apply import unchanged
from mcpfleet.platform.kubernetes.observe import observe
from mcpfleet.platform.kubernetes.render import ANNOTATION_APPLIED_HASH, Owner, render
from mcpfleet.reconcile import mcpserver
from mcpfleet.reconcile.model import Images, World


def _server(spec: dict[str, object], name: str = "time") -> object:
    return parse_manifest(
        {
            "apiVersion": "mcpfleet.dev/v1alpha1",
            "kind": "MCPServer",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": spec,
        }
    )


def _render(spec: dict[str, object]) -> dict[str, dict[str, object]]:
    plan = mcpserver.plan(_server(spec), World(platform="kubernetes", namespace="ns"))  # type: ignore[arg-type]
    manifests = render(plan, Owner("MCPServer", "time", "ns", "uid-1"), Images(runner="runner:1"))
    return {m["kind"]: m for m in manifests}


def test_render_children_owner_checksum_and_least_privilege() -> None:
    spec: dict[str, object] = {"image": "uvx://mcp-server-time", "secrets": [{"name": "s", "key": "k"}]}
    children = _render(spec)
    # No API access, so no ServiceAccount: the pod runs as the namespace default with no token.
    # The proxy reads its config (proxy.json): a ConfigMap, mounted; no secret in it.
    assert list(children) == ["ConfigMap", "Deployment", "Service"]
    assert '"k"' not in json.dumps(children["ConfigMap"]["data"]["proxy.json"])
    for child in children.values():
        meta = child["metadata"]
        assert meta["ownerReferences"] == [  # type: ignore[index]
            {
                "apiVersion": "mcpfleet.dev/v1beta1",  # the stored version: no conversion for the GC
                "kind": "MCPServer",
                "name": "time",
                "uid": "uid-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert len(meta["annotations"][ANNOTATION_APPLIED_HASH]) == 64  # type: ignore[index]
    deployment = children["Deployment"]
    template = deployment["spec"]["template"]  # type: ignore[index]
    # The run config still counts in the pod template's checksum: a change to it rolls the pods.
    plan = mcpserver.plan(_server(spec), World(platform="kubernetes", namespace="ns"))  # type: ignore[arg-type]
    checksum = template["metadata"]["annotations"]["mcpfleet.dev/config-checksum"]
    assert checksum == plan.rollout_checksum and len(checksum) == 64
    pod = template["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["config"]
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    (container,) = pod["containers"]
    assert (
        container["image"] == "runner:1"
        and "--port" in container["command"]
        and "8080" in container["command"]
    )
    assert {"name": "k", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}} in container["env"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert children["Service"]["spec"]["ports"][0]["port"] == 8080  # type: ignore[index]


def test_config_map_only_when_a_container_reads_it() -> None:
    """A server behind `mcpfleet proxy` gets the ConfigMap (its `proxy.json`, beside the run config
    when the proxy enforces it), mounted where `--config` says; an http server run directly reads
    no file and gets none, and its checksum still follows the run config."""
    world = World(platform="kubernetes", namespace="ns")
    spec: dict[str, object] = {
        "image": "uvx://mcp-server-time",
        "rateLimiting": {"shared": {"maxTokens": 60, "refillPeriod": "1m"}},
    }
    plan = mcpserver.plan(_server(spec), world)  # type: ignore[arg-type]
    children = {m["kind"]: m for m in render(plan, Owner("MCPServer", "time", "ns", "uid-1"), Images())}
    assert list(children) == ["ConfigMap", "Deployment", "Service"]
    data = children["ConfigMap"]["data"]
    assert "runconfig.json" in data and json.loads(data["proxy.json"])["runConfig"] == "runconfig.json"
    pod = children["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    path = container["command"][container["command"].index("--config") + 1]
    (mount,) = container["volumeMounts"]
    assert path == f"{mount['mountPath']}/proxy.json"
    assert {"name": mount["name"], "configMap": {"name": "mcp-time-config"}} in pod["volumes"]
    direct = {"image": "uvx://srv", "transport": "streamable-http", "mcpPort": 9000}
    plain: dict[str, Any] = _render(direct)
    other: dict[str, Any] = _render({**direct, "args": ["--x"]})
    assert "ConfigMap" not in plain
    checksums = [
        c["Deployment"]["spec"]["template"]["metadata"]["annotations"]["mcpfleet.dev/config-checksum"]
        for c in (plain, other)
    ]
    assert checksums[0] != checksums[1]


def test_unchanged_skips_identical_and_catches_drift() -> None:
    deployment = _render({"image": "uvx://mcp-server-time"})["Deployment"]
    live = copy.deepcopy(deployment)
    live["status"] = {"readyReplicas": 1}
    live["metadata"]["resourceVersion"] = "42"  # type: ignore[index]
    assert unchanged(deployment, live)
    drifted = copy.deepcopy(live)
    drifted["spec"]["replicas"] = 3  # type: ignore[index]
    assert not unchanged(deployment, drifted)
    other = _render({"image": "uvx://mcp-server-time", "args": ["x"]})["Deployment"]
    assert not unchanged(other, live)
    assert not unchanged(deployment, None)


def test_observe_counts_only_the_current_template() -> None:
    plan = mcpserver.plan(_server({"image": "uvx://x"}), World(platform="kubernetes", namespace="ns"))  # type: ignore[arg-type]
    rolling = {
        "metadata": {"generation": 2},
        "status": {"observedGeneration": 1, "readyReplicas": 1, "updatedReplicas": 1},
    }
    assert observe(plan, rolling, {"kind": "Service"}).ready_replicas == 0
    done = {
        "metadata": {"generation": 2},
        "status": {"observedGeneration": 2, "readyReplicas": 1, "updatedReplicas": 1},
    }
    observation = observe(plan, done, {"kind": "Service"})
    assert (
        observation.ready_replicas == 1 and observation.url == "http://mcp-time.ns.svc.cluster.local:8080/mcp"
    )
    assert observe(plan, done, None).url is None
    stuck = {
        "metadata": {"generation": 1},
        "status": {
            "observedGeneration": 1,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}],
        },
    }
    assert observe(plan, stuck, None).failed


def _raw(rv: str, uid: str = "u1", spec: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": "a", "namespace": "ns", "uid": uid, "resourceVersion": rv, "generation": 1},
        "spec": spec or {"image": "uvx://a"},
    }


def test_store_ignores_older_versions_and_tracks_children() -> None:
    store = Store()
    store.put(_raw("10"))
    previous, current = store.put(_raw("9", spec={"image": "uvx://old"}))
    assert previous is current  # older: ignored
    entry = store.get(("MCPServer", "ns", "a"))
    assert entry is not None and entry.raw["spec"] == {"image": "uvx://a"}
    previous, current = store.put(_raw("11", uid="u2"))
    assert previous is None  # same name, new uid: a different object
    bad = _raw("12", uid="u2", spec={"image": "not an image!"})
    _, invalid = store.put(bad)
    assert invalid.model is None and invalid.error and "image" in invalid.error
    child = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "mcp-a",
            "namespace": "ns",
            "resourceVersion": "5",
            "ownerReferences": [
                {"apiVersion": "mcpfleet.dev/v1alpha1", "kind": "MCPServer", "name": "a", "controller": True}
            ],
        },
    }
    assert store.put_child(child) == (("MCPServer", "ns", "a"), True)
    assert store.put_child(child) == (("MCPServer", "ns", "a"), False)
    assert store.owned(("MCPServer", "ns", "a"), "u2") == [("v1", "Service", "ns", "mcp-a")]
    store.remove_child(child)
    assert store.owned(("MCPServer", "ns", "a"), "u2") == []


def test_child_updates_that_no_reconcile_reads_do_not_wake_the_owner() -> None:
    store = Store()
    owner = {"apiVersion": "mcpfleet.dev/v1alpha1", "kind": "MCPServer", "name": "a", "controller": True}

    def deployment(version: int, **status: object) -> dict[str, object]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "mcp-a",
                "namespace": "ns",
                "resourceVersion": str(version),
                "generation": 1,
                "ownerReferences": [owner],
            },
            "spec": {"replicas": 1, "template": {"metadata": {"annotations": {}}}},
            "status": {"observedGeneration": 1, **status},
        }

    key = ("MCPServer", "ns", "a")
    assert store.put_child(deployment(1, replicas=1)) == (key, True)
    # The Deployment controller's bookkeeping (available / unavailable counts): stored, owner left alone.
    assert store.put_child(deployment(2, replicas=1, unavailableReplicas=1)) == (key, False)
    child = store.child(("apps/v1", "Deployment", "ns", "mcp-a"))
    assert child is not None and child["status"]["unavailableReplicas"] == 1
    # What the status is computed from: the owner is reconciled.
    assert store.put_child(deployment(3, readyReplicas=1, updatedReplicas=1)) == (key, True)
    stuck = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
    assert store.put_child(deployment(4, readyReplicas=1, updatedReplicas=1, conditions=[stuck])) == (
        key,
        True,
    )
    progressing = {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}
    assert store.put_child(deployment(5, readyReplicas=1, updatedReplicas=1, conditions=[progressing])) == (
        key,
        True,
    )  # the stuck condition went away
    assert store.put_child(
        deployment(6, readyReplicas=1, updatedReplicas=1, conditions=[{**progressing, "message": "x"}])
    ) == (key, False)


async def test_queue_deduplicates_and_reruns_a_key_changed_while_active() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    key = await queue.get()
    assert key == "a"
    queue.add("a")  # changed while being reconciled
    queue.done("a")
    assert [await queue.get(), await queue.get()] == ["b", "a"]
    queue.done("b")
    queue.done("a")
    assert queue.idle
    queue.add_after("c", 0.01)
    assert await asyncio.wait_for(queue.get(), 1) == "c"
    queue.done("c")
    # One delayed add per key: a later one replaces it, and a cancelled one never fires.
    queue.add_after("d", 30)
    queue.add_after("d", 0.01)
    assert await asyncio.wait_for(queue.get(), 1) == "d"
    queue.done("d")
    queue.add_after("e", 0.01)
    queue.cancel_after("e")
    await asyncio.sleep(0.05)
    assert queue.idle and len(queue) == 0
    queue.close()


def test_settings_flags_env_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPFLEET_NAMESPACES", "a, b")
    monkeypatch.setenv("MCPFLEET_IMAGE", "img:1")
    monkeypatch.setenv("MCPFLEET_VMCP_IMAGE", "vmcp:2")
    settings = from_environment()
    assert settings.namespaces == ("a", "b") and not settings.clusterwide
    assert settings.images.runner == "img:1" and settings.images.vmcp == "vmcp:2"
    assert from_environment(namespaces=["c"]).namespaces == ("c",)
    assert from_environment(all_namespaces=True).clusterwide
    with pytest.raises(ValueError, match="--resync-seconds / MCPFLEET_RESYNC_SECONDS"):
        from_environment(resync_seconds=-1)
    assert settings.pending_grace_seconds == 2.0 and settings.otlp_endpoint is None
    assert from_environment(otlp_endpoint="http://c:4318").otlp_endpoint == "http://c:4318"
    with pytest.raises(ValueError, match="--otlp-endpoint / MCPFLEET_OTLP_ENDPOINT"):
        from_environment(otlp_endpoint="c:4318")
    assert from_environment(pending_grace_seconds=0).pending_grace_seconds == 0
    with pytest.raises(ValueError, match="--pending-grace-seconds / MCPFLEET_PENDING_GRACE_SECONDS"):
        from_environment(pending_grace_seconds=-1)
    with pytest.raises(ValueError, match="--log-format"):
        from_environment(log_format="xml")


def _obj(
    kind: str, name: str, spec: Mapping[str, object], rv: str = "1", uid: str | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid or f"uid-{name}",
            "resourceVersion": rv,
            "generation": 1,
        },
        "spec": spec,
    }


def _drain(controller: object) -> set[tuple[str, str, str]]:
    queue = controller.queue  # type: ignore[attr-defined]
    keys = set(queue._pending)
    for key in keys:
        queue._pending.discard(key)
    while not queue._queue.empty():
        queue._queue.get_nowait()
    return keys


def test_dependents_a_change_reaches_only_the_objects_that_depend_on_it() -> None:
    from mcpfleet.operator.controller import Controller
    from mcpfleet.operator.settings import OperatorSettings

    controller = Controller(api=None, store=Store(), settings=OperatorSettings())  # type: ignore[arg-type]
    vmcp_spec = {"config": {"groupRef": "g"}, "incomingAuth": {"type": "anonymous"}}
    controller.on_object("ADDED", _obj("MCPGroup", "g", {}))
    controller.on_object("ADDED", _obj("VirtualMCPServer", "gw", vmcp_spec))
    controller.on_object(
        "ADDED", _obj("VirtualMCPServer", "other-gw", {**vmcp_spec, "config": {"groupRef": "h"}})
    )
    controller.on_object("ADDED", _obj("MCPServer", "member", {"image": "uvx://a", "groupRef": "g"}))
    controller.on_object("ADDED", _obj("MCPServer", "outsider", {"image": "uvx://b"}))
    controller.on_object("ADDED", _obj("MCPToolConfig", "tc", {"toolsFilter": ["x"]}))
    _drain(controller)

    controller.on_object(
        "MODIFIED", _obj("MCPServer", "outsider", {"image": "uvx://b", "args": ["1"]}, rv="2")
    )
    assert _drain(controller) == {("MCPServer", "ns", "outsider")}

    controller.on_object(
        "MODIFIED", _obj("MCPServer", "member", {"image": "uvx://a", "groupRef": "g", "args": ["1"]}, rv="2")
    )
    assert _drain(controller) == {("MCPServer", "ns", "member"), ("VirtualMCPServer", "ns", "gw")}

    # Our own status write on the member (url unchanged) wakes nobody.
    status_only = _obj("MCPServer", "member", {"image": "uvx://a", "groupRef": "g", "args": ["1"]}, rv="3")
    status_only["status"] = {"phase": "Pending"}
    controller.on_object("MODIFIED", status_only)
    assert _drain(controller) == set()
    # A new url reaches the gateway of its group.
    running = {**status_only, "metadata": {**status_only["metadata"], "resourceVersion": "4"}}
    running["status"] = {"phase": "Running", "url": "http://mcp-member.ns.svc.cluster.local:8080/mcp"}
    controller.on_object("MODIFIED", running)
    assert _drain(controller) == {("MCPServer", "ns", "member"), ("VirtualMCPServer", "ns", "gw")}

    # Joining another group: both groups recount, both gateways re-render.
    moved = _obj(
        "MCPServer", "member", {"image": "uvx://a", "groupRef": "h", "toolConfigRef": {"name": "tc"}}, rv="5"
    )
    controller.on_object("MODIFIED", moved)
    assert _drain(controller) == {
        ("MCPServer", "ns", "member"),
        ("MCPGroup", "ns", "g"),
        ("MCPGroup", "ns", "h"),
        ("VirtualMCPServer", "ns", "gw"),
        ("VirtualMCPServer", "ns", "other-gw"),
        ("MCPToolConfig", "ns", "tc"),
    }

    # A tool config change rolls the workloads that reference it (and re-renders gateways).
    controller.on_object("MODIFIED", _obj("MCPToolConfig", "tc", {"toolsFilter": ["y"]}, rv="6"))
    assert _drain(controller) == {
        ("MCPToolConfig", "ns", "tc"),
        ("MCPServer", "ns", "member"),
        ("VirtualMCPServer", "ns", "gw"),
        ("VirtualMCPServer", "ns", "other-gw"),
    }

    # Deleting a group reaches its members (GroupRefValidated) and its gateways.
    controller.on_object("DELETED", _obj("MCPGroup", "g", {}))
    assert _drain(controller) == {("VirtualMCPServer", "ns", "gw")}
