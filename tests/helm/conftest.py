"""Fixtures for the Helm chart tests: the helm binary (built from the Go module proxy on first use,
cached under ~/.cache/mcpfleet like the dev cluster's binaries) and helpers to run it.

`helm` runs with private HELM_CONFIG_HOME / HELM_CACHE_HOME / HELM_DATA_HOME (never the user's
repositories or plugins); `helm_on_cluster` adds the dev cluster's KUBECONFIG.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcpfleet.devcluster.build import BuildError, BuildLayout, default_cache_root, ensure_helm
from mcpfleet.devcluster.handle import ClusterHandle
from tests.conftest import run_async

REPO = Path(__file__).resolve().parents[2]
CHARTS = REPO / "deploy" / "helm"
CRDS_CHART = CHARTS / "mcpfleet-crds"
OPERATOR_CHART = CHARTS / "mcpfleet-operator"


class HelmError(AssertionError):
    """helm exited non-zero; the message holds the command and its stderr."""


class Helm:
    """Runs the built helm with private state directories and, optionally, a kubeconfig."""

    def __init__(self, binary: Path, home: Path, kubeconfig: Path | None = None) -> None:
        self.binary = binary
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        if kubeconfig is not None:
            self.env["KUBECONFIG"] = str(kubeconfig)

    def run(self, *args: str, check: bool = True, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, env=self.env, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise HelmError(f"helm {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}")
        return proc

    def template(
        self, release: str, chart: Path, *, namespace: str = "mcpfleet-system", values: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """`helm template` (with --set values) parsed into objects."""
        args = ["template", release, str(chart), "--namespace", namespace]
        for value in values:
            args += ["--set", value]
        return [d for d in yaml.safe_load_all(self.run(*args).stdout) if d]


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    def progress(message: str) -> None:
        print(f"[helm] {message}", file=sys.stderr, flush=True)

    try:
        return run_async(ensure_helm(BuildLayout(default_cache_root()), progress))
    except (BuildError, OSError) as exc:
        pytest.fail(f"helm could not be built from the Go module proxy:\n{exc}", pytrace=False)


@pytest.fixture
def helm(helm_binary: Path, tmp_path: Path) -> Helm:
    return Helm(helm_binary, tmp_path / "helm-home")


@pytest.fixture
def helm_on_cluster(helm_binary: Path, tmp_path: Path, dev_cluster: ClusterHandle) -> Helm:
    return Helm(helm_binary, tmp_path / "helm-home", dev_cluster.kubeconfig)


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
    return found[0]
