"""The generated CRDs on the real API server: they install, reject bad input naming the field, accept
every example, and explain themselves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from mcpfleet.devcluster.handle import ClusterHandle
from tests.api.corpus import ROOT, InvalidCase, example_files, invalid_cases

CASES = invalid_cases()


def test_every_crd_is_established(crds_installed: list[str]) -> None:
    assert sorted(crds_installed) == sorted(
        f"{plural}.mcpfleet.dev"
        for plural in (
            "mcpservers",
            "mcpgroups",
            "mcpregistries",
            "virtualmcpservers",
            "mcptoolconfigs",
            "mcpexternalauthconfigs",
            "mcpremoteproxies",
            "mcpoidcconfigs",
            "mcptelemetryconfigs",
            "mcpauthzconfigs",
            "mcpwebhookconfigs",
            "virtualmcpcompositetooldefinitions",
            "mcpserverentries",
            "embeddingservers",
        )
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_manifest_is_rejected_naming_the_field(
    case: InvalidCase, dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    result = dev_cluster.kubectl(
        "apply",
        "--validate=strict",
        "-n",
        namespace,
        "-f",
        "-",
        input=yaml.safe_dump(case.document),
        check=False,
    )
    assert result.returncode != 0, f"accepted: {result.stdout}"
    # The API server writes map keys as [key]; the corpus (and local validation) as .key.
    named = re.sub(r"\[([A-Za-z_][^\]]*)\]", r".\1", result.stderr)
    assert case.expected_field in named, result.stderr


@pytest.mark.parametrize("path", example_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_example_is_accepted(
    path: Path, dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    result = dev_cluster.kubectl("apply", "--validate=strict", "-n", namespace, "-f", str(path), check=False)
    assert result.returncode == 0, result.stderr


def test_server_defaults_match_the_models(
    dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    manifest = {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": "defaults"},
        "spec": {"image": "uvx://mcp-server-time"},
    }
    dev_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(manifest))
    spec = yaml.safe_load(
        dev_cluster.kubectl("get", "-n", namespace, "mcpserver", "defaults", "-o", "yaml").stdout
    )["spec"]
    assert (
        spec["transport"] == "stdio" and spec["proxyMode"] == "streamable-http" and spec["proxyPort"] == 8080
    )


def test_kubectl_explain_shows_field_descriptions(
    dev_cluster: ClusterHandle, crds_installed: list[str]
) -> None:
    out = dev_cluster.kubectl("explain", "mcpserver.spec").stdout
    assert "How the server speaks MCP" in out
    assert "groupRef" in out and "toolConfigRef" in out


def test_short_names_and_category_work(
    dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    examples = ROOT / "examples" / "quickstart"
    dev_cluster.kubectl("apply", "-n", namespace, "-f", str(examples))
    listing = dev_cluster.kubectl("get", "mcpfleet", "-n", namespace).stdout
    for name in ("time", "everything", "quickstart", "gateway", "catalogue"):
        assert name in listing
    header = dev_cluster.kubectl("get", "vmcp", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "STATUS", "READY", "REPLICAS", "URL", "BACKENDS", "AGE"]
    header = dev_cluster.kubectl("get", "mcps", "-n", namespace).stdout.splitlines()[0].split()
    assert header == ["NAME", "STATUS", "READY", "REPLICAS", "URL", "AGE"]
