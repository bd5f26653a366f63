"""Helm built from the Go module proxy: the stamped version, a second build being a no-op, and
`mcpfleet dev-cluster env` putting it on PATH."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from mcpfleet.devcluster import build

from .conftest import REPO

MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"


def test_helm_reports_the_version_it_was_built_as(helm_binary: Path) -> None:
    layout = build.BuildLayout(build.default_cache_root())
    assert helm_binary == layout.helm_bin / "helm"
    out = subprocess.run(
        [str(helm_binary), "version", "--template", "{{ .Version }} {{ .KubeClientVersion }}"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout.split()  # fmt: skip
    assert out[0] == build.HELM_VERSION
    assert out[1].startswith("v1.")
    stamp = json.loads((layout.helm_bin / build.STAMP_FILE).read_text())
    assert stamp["what"] == f"helm {build.HELM_VERSION}"
    assert f"version.version={build.HELM_VERSION}" in " ".join(stamp["build"])


def test_a_second_helm_build_is_a_no_op(helm_binary: Path) -> None:
    started = time.monotonic()
    result = subprocess.run(
        [str(MCPFLEET), "dev-cluster", "build", "--helm", "--no-cluster"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "already built" in result.stderr and "go install" not in result.stderr
    assert result.stdout.strip() == str(helm_binary.parent)
    assert time.monotonic() - started < 30


def test_dev_cluster_env_puts_helm_on_path(helm_binary: Path, tmp_path: Path) -> None:
    env_lines = subprocess.run(
        [str(MCPFLEET), "dev-cluster", "env", "--state-dir", str(tmp_path)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    found = subprocess.run(
        ["bash", "-c", f"{env_lines}\ncommand -v helm kubectl"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert found[0] == str(helm_binary)
    assert found[1] == str(build.BuildLayout(build.default_cache_root()).binary("kubectl"))


def test_helm_ldflags_stamp_the_version() -> None:
    assert build.helm_ldflags("v4.3.1") == "-s -w -X helm.sh/helm/v4/internal/version.version=v4.3.1"
