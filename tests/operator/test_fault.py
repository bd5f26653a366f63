"""Fault test: the operator is killed (SIGKILL) at random points while MCPServers are created, updated
and deleted; after a last restart everything converges, with no orphan and no lost object.

200 server names and 20 kills, as the issue names them.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from mcpfleet.api.meta import API_VERSION
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.operator.store import parse
from mcpfleet.reconcile import mcpserver
from mcpfleet.reconcile.model import World

from .conftest import Kube, OperatorProcess

NAMES = 200
KILLS = 20
SEED = 20261129


def server(name: str, args: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": name},
        "spec": {"image": "uvx://mcp-server-time", "args": args},
    }


def test_operator_killed_at_random_points_converges(
    dev_cluster: ClusterHandle, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    operator = OperatorProcess(dev_cluster, [namespace], tmp_path / "operator.log", resync=600)
    base = f"/apis/mcpfleet.dev/v1alpha1/namespaces/{namespace}/mcpservers"
    desired: dict[str, list[str]] = {}
    names = [f"s{i:03d}" for i in range(NAMES)]

    def operate(api: Any, count: int) -> None:
        for _ in range(count):
            name = rng.choice(names)
            if name not in desired:
                args = [f"--v={rng.randrange(1000)}"]
                response = api.post(base, json=server(name, args))
                if response.status_code == 201:
                    desired[name] = args
                elif response.status_code == 409:
                    continue  # the previous incarnation is still being deleted
                else:
                    raise AssertionError(f"create {name}: {response.status_code} {response.text[:200]}")
            elif rng.random() < 0.6:
                args = [f"--v={rng.randrange(1000)}"]
                response = api.patch(
                    f"{base}/{name}",
                    json={"spec": {"args": args}},
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                assert response.status_code == 200, response.text[:200]
                desired[name] = args
            else:
                response = api.delete(f"{base}/{name}")
                assert response.status_code in (200, 202), response.text[:200]
                del desired[name]

    with dev_cluster.api(timeout=30) as api:
        operate(api, 60)  # some objects exist before the first start
        for _ in range(KILLS):
            operator.start(wait=False)
            deadline = time.monotonic() + rng.uniform(0.3, 3.5)
            while time.monotonic() < deadline:
                operate(api, rng.randrange(1, 6))
                time.sleep(rng.uniform(0.0, 0.3))
            operator.kill()
            operate(api, rng.randrange(0, 8))  # changes while no operator runs
    assert operator.starts == KILLS

    operator.start()
    try:
        _assert_converged(kube, desired, operator)
    finally:
        operator.stop()


def _children_match(
    kube: Kube, desired: dict[str, list[str]], found: dict[str, dict[str, Any]]
) -> bool | str:
    """True when every object has its children at its latest spec and no child is orphaned; else why not."""
    deployments = {d["metadata"]["name"]: d for d in kube.items("Deployment")}
    world = World(platform="kubernetes", namespace=kube.ns)
    for name, args in desired.items():
        uid = found[name]["metadata"]["uid"]
        deployment = deployments.get(f"mcp-{name}")
        if deployment is None:
            return f"{name}: children missing"
        if deployment["metadata"]["ownerReferences"][0]["uid"] != uid:
            return f"{name}: Deployment owned by an old incarnation"
        template = deployment["spec"]["template"]
        if template["spec"]["containers"][0]["command"][-len(args) :] != args:
            return f"{name}: Deployment not at the latest spec"
        # The checksum of the run config the latest spec renders (no ConfigMap: nothing reads it).
        model = parse({**found[name], "apiVersion": API_VERSION, "kind": "MCPServer"}).model
        assert model is not None
        if template["metadata"]["annotations"]["mcpfleet.dev/config-checksum"] != (
            mcpserver.plan(model, world).rollout_checksum  # type: ignore[arg-type]
        ):
            return f"{name}: pods not rolled to the latest config"
    # No orphans: every managed child belongs to a live object (garbage collection included).
    for kind in ("Deployment", "Service", "ConfigMap"):  # (a ConfigMap would be an orphan: none is rendered)
        for child in kube.items(kind, "app.kubernetes.io/managed-by=mcpfleet"):
            (ref,) = child["metadata"]["ownerReferences"]
            owner = found.get(ref["name"])
            if owner is None or owner["metadata"]["uid"] != ref["uid"]:
                return f"orphan {kind} {child['metadata']['name']}"
    return True


def _assert_converged(kube: Kube, desired: dict[str, list[str]], operator: OperatorProcess) -> None:
    def servers() -> dict[str, dict[str, Any]]:
        return {s["metadata"]["name"]: s for s in kube.items("MCPServer")}

    def all_running() -> bool:
        found = servers()
        if set(found) != set(desired):
            return False
        return all(
            (s.get("status") or {}).get("phase") == "Running"
            and s["status"].get("observedGeneration") == s["metadata"]["generation"]
            for s in found.values()
        )

    kube.cluster.wait_for(f"{len(desired)} servers Running at their generation", all_running, timeout=120)
    found = servers()
    assert set(found) == set(desired), "lost or extra objects"

    last: list[bool | str] = []

    def check() -> bool:
        last[:] = [_children_match(kube, desired, found)]
        return last[0] is True

    try:
        kube.cluster.wait_for("children to match the objects", check, timeout=90, interval=1.0)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {last}\n{operator.log_tail()}") from None
    operator.wait_idle()
