"""The namespace and name rules of the models against the real API server of the dev cluster.

`mcpfleet up` must refuse what `kubectl apply` refuses (issue 11, defect 1). The namespace rule is
Kubernetes' own, so the verdicts must be equal; for names mcpfleet is stricter in one documented way
only (no dots: a workload's children are DNS labels named after it).
"""

from __future__ import annotations

import json

import pytest

from mcpfleet.api.kinds import ManifestError, parse_manifest
from mcpfleet.devcluster.handle import ClusterHandle
from tests.local.attack_corpus import HOSTILE_NAMES, HOSTILE_NAMESPACES

GOOD = ("default", "a", "team-a", "0", "a" * 63)
NAME_ONLY = ("a.b", "x" * 253, "a" * 64)


def _we_accept(name: str = "ok", namespace: str = "default") -> bool:
    document = {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": "MCPGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {},
    }
    try:
        parse_manifest(document)
    except ManifestError:
        return False
    return True


@pytest.mark.timeout(600)
def test_namespace_verdicts_equal_the_api_servers(dev_cluster: ClusterHandle) -> None:
    differences = []
    for value in (*HOSTILE_NAMESPACES, *GOOD):
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": value}}
        result = dev_cluster.kubectl(
            "apply", "--dry-run=server", "-f", "-", input=json.dumps(namespace), check=False
        )
        if (result.returncode == 0) != _we_accept(namespace=value):
            differences.append((value, result.returncode, result.stderr.strip()[:200]))
    assert differences == []


@pytest.mark.timeout(600)
def test_every_name_the_api_server_refuses_is_refused(
    dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    kubernetes_refuses, we_refuse = set(), set()
    for value in (*HOSTILE_NAMES, *GOOD, *NAME_ONLY):
        group = {
            "apiVersion": "mcpfleet.dev/v1alpha1",
            "kind": "MCPGroup",
            "metadata": {"name": value},
            "spec": {},
        }
        result = dev_cluster.kubectl(
            "apply", "--dry-run=server", "-n", namespace, "-f", "-", input=json.dumps(group), check=False
        )
        if result.returncode != 0:
            kubernetes_refuses.add(value)
        if not _we_accept(name=value):
            we_refuse.add(value)
    assert kubernetes_refuses <= we_refuse, kubernetes_refuses - we_refuse
    # The one documented difference: dots (a DNS subdomain is a valid custom-resource name).
    assert we_refuse - kubernetes_refuses == {"a.b"}
