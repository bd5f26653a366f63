"""The charts without a cluster: `helm lint`, `helm template` for the default values and variants,
the schema rejecting bad values, and one source of truth: the CRD chart's files are the generated CRDs
(same bytes as deploy/crds/ and `mcpfleet crds`), and the operator chart with default values renders
the same RBAC and an equivalent Deployment and ServiceAccount as the kustomize install (deploy/)."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcpfleet.api.crdgen import render_crds
from mcpfleet.devcluster.build import BuildLayout, default_cache_root

from .conftest import CRDS_CHART, OPERATOR_CHART, REPO, Helm, HelmError, by_kind, one

DEPLOY = REPO / "deploy"
KEEP = "helm.sh/resource-policy"
Obj = dict[str, Any]


def kustomize_objects() -> list[Obj]:
    """`kubectl kustomize deploy/` with the built kubectl (the cluster need not run)."""
    kubectl = BuildLayout(default_cache_root()).binary("kubectl")
    if not kubectl.is_file():
        pytest.fail(f"{kubectl} is missing: build it with `mcpfleet dev-cluster build`", pytrace=False)
    out = subprocess.run(
        [str(kubectl), "kustomize", str(DEPLOY)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def env_of(deployment: Obj) -> dict[str, str]:
    return {
        e["name"]: e.get("value", "") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }


def container(deployment: Obj) -> Obj:
    result: Obj = deployment["spec"]["template"]["spec"]["containers"][0]
    return result


# --- lint ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("chart", [CRDS_CHART, OPERATOR_CHART], ids=lambda p: p.name)
def test_lint_strict_with_default_values(helm: Helm, chart: Path) -> None:
    result = helm.run("lint", "--strict", str(chart))
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout, result.stdout


def test_lint_reports_a_value_the_schema_rejects(helm: Helm) -> None:
    result = helm.run("lint", str(OPERATOR_CHART), "--set", "logLevel=verbose", check=False)
    assert result.returncode != 0
    assert "logLevel" in result.stdout + result.stderr


# --- the CRDs chart -----------------------------------------------------------------------------


def test_crd_chart_files_are_the_generated_crds() -> None:
    """Same file set and bytes as deploy/crds and as the generator's output (`make crds` writes all)."""
    generated = render_crds()
    for directory in (DEPLOY / "crds", CRDS_CHART / "files" / "crds"):
        on_disk = {p.name: p.read_text() for p in directory.glob("*.yaml")}
        assert sorted(on_disk) == sorted(generated), f"{directory}: run `make crds`"
        for name, text in generated.items():
            assert on_disk[name] == text, f"{directory / name} differs from the models: run `make crds`"


def test_crd_chart_renders_every_crd_unchanged_and_kept(helm: Helm) -> None:
    rendered = helm.template("mcpfleet-crds", CRDS_CHART)
    assert {o["kind"] for o in rendered} == {"CustomResourceDefinition"}
    expected = {
        d["metadata"]["name"]: d
        for d in (yaml.safe_load(p.read_text()) for p in (DEPLOY / "crds").glob("*.yaml"))
    }
    assert sorted(o["metadata"]["name"] for o in rendered) == sorted(expected)
    for crd in rendered:
        name = crd["metadata"]["name"]
        source = expected[name]
        assert crd["metadata"]["annotations"][KEEP] == "keep", name
        # The chart adds labels and the keep annotation; everything else is the generated CRD.
        assert source["metadata"]["labels"].items() <= crd["metadata"]["labels"].items(), name
        assert crd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        stripped = copy.deepcopy(crd)
        stripped["metadata"] = {
            k: v for k, v in crd["metadata"].items() if k not in ("labels", "annotations")
        }
        plain = copy.deepcopy(source)
        plain["metadata"] = {
            k: v for k, v in source["metadata"].items() if k not in ("labels", "annotations")
        }
        assert stripped == plain, f"{name}: the chart changed the CRD"


def test_crd_chart_keep_false_and_extra_metadata(helm: Helm) -> None:
    rendered = helm.template(
        "crds",
        CRDS_CHART,
        values=["keep=false", "labels.team=platform", "annotations.example\\.com/owner=platform"],
    )
    for crd in rendered:
        annotations = crd["metadata"].get("annotations", {})
        assert KEEP not in annotations
        assert annotations["example.com/owner"] == "platform"
        assert crd["metadata"]["labels"]["team"] == "platform"


def test_crd_chart_schema_rejects_unknown_values(helm: Helm) -> None:
    with pytest.raises(HelmError, match="install"):
        helm.template("crds", CRDS_CHART, values=["install=false"])


# --- the operator chart: one source with the kustomize install ----------------------------------


def comparable(obj: Obj) -> tuple[Obj, dict[str, str]]:
    """The object without its labels (Helm adds its conventional ones), and the labels."""
    body = copy.deepcopy(obj)
    labels: dict[str, str] = body["metadata"].pop("labels", {})
    return body, labels


def test_default_values_render_the_kustomize_rbac_and_service_account(helm: Helm) -> None:
    chart = helm.template("mcpfleet-operator", OPERATOR_CHART)
    kustomize = kustomize_objects()
    kinds = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    for kind in kinds:
        ours = {(o["metadata"]["name"], o["metadata"].get("namespace")): o for o in by_kind(chart, kind)}
        theirs = {
            (o["metadata"]["name"], o["metadata"].get("namespace")): o for o in by_kind(kustomize, kind)
        }
        assert sorted(ours, key=str) == sorted(theirs, key=str), kind
        for key, obj in theirs.items():
            expected, expected_labels = comparable(obj)
            got, got_labels = comparable(ours[key])
            assert got == expected, f"{kind} {key} differs from deploy/operator"
            assert expected_labels.items() <= got_labels.items(), f"{kind} {key} labels"


def test_default_values_render_an_equivalent_deployment(helm: Helm) -> None:
    ours = one(helm.template("mcpfleet-operator", OPERATOR_CHART), "Deployment")
    theirs = one(kustomize_objects(), "Deployment")
    assert (ours["metadata"]["name"], ours["metadata"]["namespace"]) == (
        theirs["metadata"]["name"],
        theirs["metadata"]["namespace"],
    )
    # Labels: the kustomize ones, plus Helm's (the selector adds the release: several can coexist).
    assert theirs["metadata"]["labels"].items() <= ours["metadata"]["labels"].items()
    assert (
        theirs["spec"]["selector"]["matchLabels"].items() <= ours["spec"]["selector"]["matchLabels"].items()
    )
    assert set(ours["spec"]["selector"]["matchLabels"]) - set(theirs["spec"]["selector"]["matchLabels"]) == {
        "app.kubernetes.io/instance"
    }
    pod_labels = theirs["spec"]["template"]["metadata"]["labels"]
    assert pod_labels.items() <= ours["spec"]["template"]["metadata"]["labels"].items()
    # The environment: kustomize's, plus the Lease name the chart's Role grants (same default name).
    extra = {k: v for k, v in env_of(ours).items() if k not in env_of(theirs)}
    assert extra == {"MCPFLEET_LEADER_ELECTION_ID": "mcpfleet-operator"}
    assert env_of(theirs).items() <= env_of(ours).items()
    # Everything else is the same: replicas, strategy, pod spec, image, command, probes, resources,
    # security contexts.
    for deployment in (ours, theirs):
        deployment["spec"]["selector"] = deployment["spec"]["template"]["metadata"] = None
        container(deployment)["env"] = None
    assert ours["spec"] == theirs["spec"]


def test_kustomize_leader_election_lease_is_the_default_lease_name() -> None:
    """The kustomize Role grants the operator's default Lease name, which the chart passes explicitly."""
    from mcpfleet.operator.settings import DEFAULT_LEASE_NAME

    (role,) = [
        o for o in by_kind(kustomize_objects(), "Role") if o["metadata"]["name"].endswith("-leader-election")
    ]
    assert role["rules"][1]["resourceNames"] == [DEFAULT_LEASE_NAME]


# --- the operator chart: variants ---------------------------------------------------------------


def test_variant_release_name_watch_namespaces_images_otlp(helm: Helm) -> None:
    objects = helm.template(
        "prod",
        OPERATOR_CHART,
        namespace="ops",
        values=[
            "watchNamespaces={team-a,team-*}",
            "image.repository=registry.example/mcpfleet",
            "image.tag=0.1.0",
            "images.runner=registry.example/runner:2",
            "otlpEndpoint=http://otel.ops:4318",
            "logLevel=debug",
            "workers=8",
            "replicaCount=3",
        ],
    )
    deployment = one(objects, "Deployment")
    name = "prod-mcpfleet-operator"
    assert deployment["metadata"]["name"] == name and deployment["metadata"]["namespace"] == "ops"
    assert deployment["spec"]["replicas"] == 3
    c = container(deployment)
    assert c["image"] == "registry.example/mcpfleet:0.1.0"
    assert c["command"] == [
        "mcpfleet", "operator", "run", "--namespace", "team-a", "--namespace", "team-*", "--leader-elect"
    ]  # fmt: skip
    env = env_of(deployment)
    assert env["MCPFLEET_RUNNER_IMAGE"] == "registry.example/runner:2"
    assert env["MCPFLEET_VMCP_IMAGE"] == env["MCPFLEET_REGISTRY_IMAGE"] == "registry.example/mcpfleet:0.1.0"
    assert env["MCPFLEET_OTLP_ENDPOINT"] == "http://otel.ops:4318"
    assert env["MCPFLEET_LOG_LEVEL"] == "debug" and env["MCPFLEET_WORKERS"] == "8"
    assert env["MCPFLEET_LEADER_ELECTION_ID"] == name
    # Every reference follows the release's names.
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == name
    binding = one(objects, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == one(objects, "ClusterRole")["metadata"]["name"] == name
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "ops"}]
    roles = {o["metadata"]["name"]: o for o in by_kind(objects, "Role")}
    assert sorted(roles) == [f"{name}-conversion", f"{name}-leader-election"]
    role = roles[f"{name}-leader-election"]
    assert all(r["metadata"]["namespace"] == "ops" for r in roles.values())
    assert role["rules"][1]["resourceNames"] == [name]
    assert sorted(b["roleRef"]["name"] for b in by_kind(objects, "RoleBinding")) == sorted(roles)
    services = {o["metadata"]["name"]: o for o in by_kind(objects, "Service")}
    for service in services.values():
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert services[f"{name}-metrics"]["spec"]["ports"][0]["targetPort"] == "metrics"
    assert services["mcpfleet-conversion"]["spec"]["ports"][0]["targetPort"] == "conversion"


def test_variant_single_replica_without_leader_election(helm: Helm) -> None:
    objects = helm.template(
        "mcpfleet-operator",
        OPERATOR_CHART,
        values=["replicaCount=1", "leaderElection.enabled=false", "metrics.service.enabled=false"],
    )
    # Only the conversion webhook's Role, RoleBinding and Service remain (it serves without a Lease).
    assert [o["metadata"]["name"] for o in by_kind(objects, "Role")] == ["mcpfleet-operator-conversion"]
    assert [o["metadata"]["name"] for o in by_kind(objects, "RoleBinding")] == [
        "mcpfleet-operator-conversion"
    ]
    assert [o["metadata"]["name"] for o in by_kind(objects, "Service")] == ["mcpfleet-conversion"]
    deployment = one(objects, "Deployment")
    assert "--leader-elect" not in container(deployment)["command"]
    assert "MCPFLEET_LEADER_ELECTION_ID" not in env_of(deployment)


def test_variant_digest_pull_policy_and_existing_service_account(helm: Helm) -> None:
    digest = "sha256:" + "a" * 64
    objects = helm.template(
        "mcpfleet-operator",
        OPERATOR_CHART,
        values=[f"image.digest={digest}", "image.pullPolicy=IfNotPresent", "serviceAccount.create=false",
                "serviceAccount.name=existing", "rbac.create=false"],
    )  # fmt: skip
    assert {o["kind"] for o in objects} == {"Deployment", "Service"}
    deployment = one(objects, "Deployment")
    assert container(deployment)["image"] == f"ghcr.io/mcpfleet/mcpfleet@{digest}"
    assert container(deployment)["imagePullPolicy"] == "IfNotPresent"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "existing"


def test_several_replicas_without_leader_election_are_refused(helm: Helm) -> None:
    with pytest.raises(HelmError, match=r"leaderElection\.enabled"):
        helm.template("mcpfleet-operator", OPERATOR_CHART, values=["leaderElection.enabled=false"])


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("logLevel=verbose", "logLevel"),
        ("logFormat=xml", "logFormat"),
        ("otlpEndpoint=ftp://collector:4318", "otlpEndpoint"),
        ("image.tag=latest version", "tag"),
        ("image.digest=md5:abc", "digest"),
        ("replicas=2", "replicas"),
        ("metrics.port=70000", "port"),
        ("resyncSeconds=0", "resyncSeconds"),
        ("watchNamespaces={Team_A}", "watchNamespaces"),
        ("leaderElection.leaseName=Not_A_Name", "leaseName"),
        ("replicaCount=two", "replicaCount"),
    ],
)
def test_schema_rejects_a_bad_value_naming_the_field(helm: Helm, value: str, field: str) -> None:
    with pytest.raises(HelmError) as failure:
        helm.template("mcpfleet-operator", OPERATOR_CHART, values=[value])
    message = str(failure.value)
    assert "values don't meet the specifications of the schema" in message, message
    assert field in message, message
