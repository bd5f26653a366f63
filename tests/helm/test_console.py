"""The console workload without a cluster: the operator chart's `console.enabled` and the kustomize
install in deploy/console render the same read-only account, a restricted pod and a ClusterIP
Service; the schema refuses bad console values naming the field. (On the dev cluster, the rendered
RBAC is applied and proven read-only by tests/console/test_kubernetes.py.)"""

from __future__ import annotations

import copy
import subprocess
from typing import Any

import pytest
import yaml

from mcpfleet.api.kinds import ALL_KINDS
from mcpfleet.devcluster.build import BuildLayout, default_cache_root

from .conftest import OPERATOR_CHART, REPO, Helm, by_kind, one

Obj = dict[str, Any]
ENABLED = ["console.enabled=true"]
CONSOLE_NAME = "mcpfleet-operator-console"


def console_objects(objects: list[Obj]) -> list[Obj]:
    return [o for o in objects if o["metadata"]["name"].endswith("-console")]


def kustomize_console() -> list[Obj]:
    kubectl = BuildLayout(default_cache_root()).binary("kubectl")
    if not kubectl.is_file():
        pytest.fail(f"{kubectl} is missing: build it with `mcpfleet dev-cluster build`", pytrace=False)
    out = subprocess.run(
        [str(kubectl), "kustomize", str(REPO / "deploy" / "console")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_lint_strict_with_the_console(helm: Helm) -> None:
    result = helm.run("lint", "--strict", str(OPERATOR_CHART), "--set", "console.enabled=true")
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout, result.stdout


def test_the_console_is_off_by_default(helm: Helm) -> None:
    assert console_objects(helm.template("mcpfleet-operator", OPERATOR_CHART)) == []


def test_the_console_account_is_read_only_and_bound_in_the_shown_namespace(helm: Helm) -> None:
    objects = console_objects(
        helm.template("mcpfleet-operator", OPERATOR_CHART, values=[*ENABLED, "console.namespace=team-a"])
    )
    assert sorted(o["kind"] for o in objects) == [
        "ClusterRole",
        "Deployment",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    role = one(objects, "ClusterRole")
    plurals = {k.info.plural for k in ALL_KINDS}
    granted: dict[str, set[str]] = {}
    for rule in role["rules"]:
        assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            granted.setdefault(group, set()).update(rule["resources"])
    assert granted == {"mcpfleet.dev": plurals, "": {"events", "pods"}}
    binding = one(objects, "RoleBinding")
    assert binding["metadata"]["namespace"] == "team-a"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": CONSOLE_NAME,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": CONSOLE_NAME, "namespace": "mcpfleet-system"}
    ]
    assert by_kind(objects, "ClusterRoleBinding") == []


def test_the_console_pod_is_restricted_and_answers_its_service_names(helm: Helm) -> None:
    objects = helm.template(
        "mcpfleet-operator", OPERATOR_CHART, values=[*ENABLED, "console.allowedHosts={console.example.com}"]
    )
    deployment = one(console_objects(objects), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == CONSOLE_NAME
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    command = container["command"]
    assert command[:6] == [
        "mcpfleet",
        "console",
        "serve",
        "--kubernetes",
        "--namespace=mcpfleet-system",
        "--listen=0.0.0.0",
    ]
    hosts = {a.removeprefix("--allowed-host=") for a in command if a.startswith("--allowed-host=")}
    for name in (
        CONSOLE_NAME,
        f"{CONSOLE_NAME}.mcpfleet-system.svc",
        f"{CONSOLE_NAME}.mcpfleet-system.svc.cluster.local",
    ):
        assert {name, f"{name}:*"} <= hosts
    assert "console.example.com" in hosts
    # The probes name a loopback Host (the console refuses others: DNS-rebinding guard).
    assert container["readinessProbe"]["httpGet"]["httpHeaders"] == [
        {"name": "Host", "value": "localhost:8765"}
    ]
    service = one(console_objects(objects), "Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    # The operator's Deployment and Services never select the console's pods.
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    operator = [o for o in objects if not o["metadata"]["name"].endswith("-console")]
    selectors = [one(operator, "Deployment")["spec"]["selector"]["matchLabels"]]
    selectors += [s["spec"]["selector"] for s in by_kind(operator, "Service")]
    for selector in selectors:
        assert not selector.items() <= pod_labels.items(), selector


def _without_helm(obj: Obj) -> Obj:
    body = copy.deepcopy(obj)
    body["metadata"].pop("labels", None)
    if body["kind"] == "Deployment":
        body["spec"]["selector"] = body["spec"]["template"]["metadata"] = None
    if body["kind"] == "Service":
        body["spec"]["selector"] = None
    return body


def test_kustomize_console_is_the_charts(helm: Helm) -> None:
    chart = {
        (o["kind"], o["metadata"]["name"]): o
        for o in console_objects(helm.template("mcpfleet-operator", OPERATOR_CHART, values=ENABLED))
    }
    kustomize = {(o["kind"], o["metadata"]["name"]): o for o in kustomize_console()}
    assert sorted(chart) == sorted(kustomize)
    for key, theirs in kustomize.items():
        assert _without_helm(chart[key]) == _without_helm(theirs), f"{key} differs from deploy/console"
        labels = theirs["metadata"]["labels"]
        assert labels["app.kubernetes.io/component"] == "console"


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("console.namespace=Team_A", "console.namespace"),
        ("console.allowedHosts={evil/path}", "console.allowedHosts"),
        ("console.port=80", "console.port"),
        ("console.replicas=2", "console"),
    ],
)
def test_schema_rejects_a_bad_console_value_naming_the_field(helm: Helm, value: str, field: str) -> None:
    result = helm.run("template", "x", str(OPERATOR_CHART), "--set", value, check=False)
    assert result.returncode != 0
    assert field.split(".")[-1] in result.stderr, result.stderr
