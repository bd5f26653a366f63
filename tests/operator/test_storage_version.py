"""The operator speaks the stored version (v1beta1): its own requests never reach the conversion webhook.

Counted at the dev control plane's conversion webhook (its GET /metrics): while the operator lists,
watches, reconciles, patches status and finalizers of objects created as v1beta1, and while the
garbage collector follows the children's owner references to deleted owners, nothing is converted
up to v1beta1 and nothing is read as v1alpha1. What remains is the API server's own floor: it keeps a
watch cache per served version and fills the v1alpha1 one by converting every write once, whether
or not anyone reads v1alpha1 (kubernetes/kubernetes#129979) — so at most one conversion per write.
Objects created by a v1alpha1 client cost that client's own requests (one conversion up each) and,
on each later write, the field manager's conversions of that client's v1alpha1 managed fields, but
nothing converts up for the operator; they still read back as v1alpha1 with the operator's status.
"""

from __future__ import annotations

import time
from typing import Any

from mcpfleet.api.versions import STORAGE_API_VERSION
from mcpfleet.devcluster.handle import ClusterHandle

from .conftest import Kube, OperatorProcess

N = 12
ALPHA = "mcpfleet.dev/v1alpha1"


def _url(ns: str, plural: str, name: str = "", version: str = STORAGE_API_VERSION) -> str:
    return f"/apis/{version}/namespaces/{ns}/{plural}" + (f"/{name}" if name else "")


def _create(k: ClusterHandle, ns: str, plural: str, body: dict[str, Any]) -> None:
    with k.api() as api:
        response = api.post(_url(ns, plural, version=body["apiVersion"]), json=body)
        assert response.status_code == 201, response.text


def _workloads(api_version: str, prefix: str) -> list[tuple[str, dict[str, Any]]]:
    """A group, N servers in it, a remote proxy and a gateway: the three kinds whose versions differ."""
    beta = api_version == STORAGE_API_VERSION
    group_ref: Any = {"name": f"{prefix}g"} if beta else f"{prefix}g"
    proxy_spec = {"groupRef": group_ref, "remoteUrl" if beta else "remoteURL": "https://mcp.example.com/mcp"}
    gateway_spec: dict[str, Any] = {"incomingAuth": {"type": "anonymous"}}
    if beta:
        gateway_spec["groupRef"] = group_ref
    else:
        gateway_spec["config"] = {"groupRef": group_ref}
    objects: list[tuple[str, dict[str, Any]]] = [
        ("mcpgroups", {"apiVersion": api_version, "kind": "MCPGroup", "metadata": {"name": f"{prefix}g"}})
    ]
    for i in range(N):
        spec = {"image": "uvx://mcp-server-time@2025.1", "groupRef": group_ref}
        objects.append(
            ("mcpservers", {"apiVersion": api_version, "kind": "MCPServer", "metadata": {"name": f"{prefix}s{i:02d}"}, "spec": spec})
        )  # fmt: skip
    objects.append(
        ("mcpremoteproxies", {"apiVersion": api_version, "kind": "MCPRemoteProxy", "metadata": {"name": f"{prefix}p"}, "spec": proxy_spec})
    )  # fmt: skip
    objects.append(
        ("virtualmcpservers", {"apiVersion": api_version, "kind": "VirtualMCPServer", "metadata": {"name": f"{prefix}gw"}, "spec": gateway_spec})
    )  # fmt: skip
    return objects


def _wait_reconciled(k: ClusterHandle, ns: str, objects: list[tuple[str, dict[str, Any]]]) -> None:
    """Every workload's status observed its generation (read in the stored version: no conversion)."""

    def done() -> bool:
        for plural, body in objects:
            if plural == "mcpgroups":
                continue
            obj = k.get_json(_url(ns, plural, body["metadata"]["name"])) or {}
            status = obj.get("status") or {}
            if status.get("observedGeneration") != obj.get("metadata", {}).get("generation"):
                return False
            if plural == "mcpservers" and status.get("phase") != "Running":
                return False
        return True

    k.wait_for("every workload reconciled", done, timeout=240)


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {
        key: value - before.get(key, 0.0) for key, value in after.items() if value != before.get(key, 0.0)
    }


def _settled(k: ClusterHandle) -> dict[str, float]:
    """The webhook's counts once they stop moving: the API server converts for its watch cache
    after a write returns, and an earlier test's namespace may still be being emptied."""
    k.wait_for(
        "no namespace being emptied (its objects' deletions are writes too)",
        lambda: (
            not [
                n
                for n in (k.get_json("/api/v1/namespaces") or {}).get("items", [])
                if n["status"]["phase"] == "Terminating"
            ]
        ),
        timeout=120,
    )
    previous = k.conversion_counts()
    for _ in range(30):
        time.sleep(2)
        current = k.conversion_counts()
        if current == previous:
            return current
        previous = current
    raise AssertionError(f"the conversion webhook never went quiet: {previous}")


def _operator_writes(operator: OperatorProcess) -> dict[str, int]:
    """Writes the operator made, by mcpfleet kind (status and finalizer patches, ...)."""
    writes: dict[str, int] = {}
    for key, count in operator.stats()["requests"].items():
        verb, kind = key.split(" ", 1)
        if verb in ("apply", "patch", "create", "update", "delete"):
            kind = kind.split("/", 1)[0]
            writes[kind] = writes.get(kind, 0) + count
    return writes


def _assert_watch_cache_only(converted: dict[str, float], writes: dict[str, int]) -> None:
    """Nothing converted but the API server's v1alpha1 watch cache: down only, at most once a write."""
    for key, count in converted.items():
        if key == "reviews":
            continue
        kind, direction = key.split(" ")
        assert direction == "v1beta1->v1alpha1", f"{count:.0f} x {key}: someone spoke v1alpha1 ({converted})"
        assert count <= writes.get(kind, 0), (
            f"{count:.0f} x {key} for {writes.get(kind, 0)} writes ({converted})"
        )


def test_operator_and_collector_need_no_conversion(kube: Kube, operator: OperatorProcess) -> None:
    k, ns = kube.cluster, kube.ns
    before = _settled(k)
    objects = _workloads(STORAGE_API_VERSION, "b")
    for plural, body in objects:
        _create(k, ns, plural, body)
    _wait_reconciled(k, ns, objects)
    operator.wait_idle()

    # The children name their owner in the stored version: the garbage collector's owner look-ups
    # (and its deletions below) read it as stored.
    server = k.get_json(_url(ns, "mcpservers", "bs00"))
    assert server is not None
    deployment = k.get_json(f"/apis/apps/v1/namespaces/{ns}/deployments/mcp-bs00")
    assert deployment is not None
    (owner,) = deployment["metadata"]["ownerReferences"]
    assert owner["apiVersion"] == STORAGE_API_VERSION and owner["uid"] == server["metadata"]["uid"]

    # A spec change, a full resync and deletions: status patches, applies, children collected.
    with k.api() as api:
        patched = api.patch(
            _url(ns, "mcpservers", "bs01"),
            json={"spec": {"env": [{"name": "LOG", "value": "debug"}]}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert patched.status_code == 200, patched.text
        for i in range(N // 2, N):
            gone = api.delete(_url(ns, "mcpservers", f"bs{i:02d}"))
            assert gone.status_code == 200, gone.text
    _wait_reconciled(k, ns, objects[: 1 + N // 2])
    operator.resync_now()
    operator.wait_idle()
    k.wait_for(
        "the deleted servers' Deployments collected",
        lambda: all(
            k.get_json(f"/apis/apps/v1/namespaces/{ns}/deployments/mcp-bs{i:02d}") is None
            for i in range(N // 2, N)
        ),
        timeout=120,
    )
    stats = operator.stats()
    assert stats["reconcilesByKind"].get("MCPServer", 0) >= N

    # The test's own writes: the creates, one spec patch, N/2 deletes; and the operator's.
    writes = _operator_writes(operator)
    for kind, count in (("MCPServer", N + 1 + N // 2), ("MCPRemoteProxy", 1), ("VirtualMCPServer", 1)):
        writes[kind] = writes.get(kind, 0) + count
    _assert_watch_cache_only(_delta(before, _settled(k)), writes)


def test_v1alpha1_clients_cost_only_their_own_conversions(kube: Kube, operator: OperatorProcess) -> None:
    k, ns = kube.cluster, kube.ns
    objects = _workloads(ALPHA, "a")
    before = _settled(k)
    for plural, body in objects:
        _create(k, ns, plural, body)
    _wait_reconciled(k, ns, objects)
    operator.wait_idle()
    converted = _delta(before, _settled(k))
    # Each create converts the client's object up to the stored version, once; nothing else goes up.
    up = {key: n for key, n in converted.items() if key.endswith("v1alpha1->v1beta1")}
    assert up == {"MCPServer v1alpha1->v1beta1": N, "MCPRemoteProxy v1alpha1->v1beta1": 1, "VirtualMCPServer v1alpha1->v1beta1": 1}  # fmt: skip
    # Down conversions are the API server's own here: each create's answer, its v1alpha1 watch cache
    # and the field manager, which keeps the v1alpha1 client's managed fields in v1alpha1 and converts
    # the object on every later write (the operator's status patches too): not requests of the
    # operator's, and not bounded by it.
    assert all(key in up or key == "reviews" or key.endswith("v1beta1->v1alpha1") for key in converted)

    # The v1alpha1 client still reads its shape, with the status the operator wrote in v1beta1.
    server = k.get_json(_url(ns, "mcpservers", "as00", version=ALPHA))
    assert server is not None
    assert server["apiVersion"] == ALPHA and server["spec"]["groupRef"] == "ag"
    assert server["status"]["phase"] == "Running"
    gateway = k.get_json(_url(ns, "virtualmcpservers", "agw", version=ALPHA))
    assert gateway is not None and gateway["spec"]["config"]["groupRef"] == "ag"
    proxy = k.get_json(_url(ns, "mcpremoteproxies", "ap", version=ALPHA))
    assert proxy is not None and proxy["spec"]["remoteURL"] == "https://mcp.example.com/mcp"
