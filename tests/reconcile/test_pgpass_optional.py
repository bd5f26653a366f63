"""MCPRegistry `pgpassSecretRef.optional` (ToolHive's SecretKeySelector field): an absent Secret is no
error. On Kubernetes the projected Secret source is optional and the init container's copy, run here
in a real shell, succeeds with or without the file (0600 when present); locally the file is simply
not written. Without `optional` both platforms still fail on a missing Secret."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcpfleet.api.kinds import parse_manifest
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.api.versions import convert
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.platform.local.processbuild import LocalRunError
from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from mcpfleet.reconcile import mcpregistry
from mcpfleet.reconcile.model import KUBERNETES_SECRET_DIR, LOCAL_SECRET_DIR, World
from mcpfleet.reconcile.registryconfig import PGPASS_DIR, PGPASS_FILE
from tests.reconcile.test_registry_configyaml import apply_and_render

CONFIG = """
sources:
  - name: production
    file: {path: /config/registry/production/registry.json}
registries:
  - name: default
    sources: [production]
database: {host: postgres, port: 5432, user: db_app, migrationUser: db_migrator, database: registry}
auth: {mode: anonymous}
"""


def _registry(optional: bool | None) -> MCPRegistry:
    ref: dict[str, Any] = {"name": "my-registry-pgpass", "key": ".pgpass"}
    if optional is not None:
        ref["optional"] = optional
    document = {
        "apiVersion": "mcpfleet.dev/v1beta1",
        "kind": "MCPRegistry",
        "metadata": {"name": "db", "namespace": "team"},
        "spec": {
            "configYAML": CONFIG,
            "pgpassSecretRef": ref,
            "volumes": [{"name": "registry-data", "configMap": {"name": "prod-registry"}}],
            "volumeMounts": [
                {"name": "registry-data", "mountPath": "/config/registry/production", "readOnly": True}
            ],
        },
    }
    parsed = parse_manifest(document)
    assert isinstance(parsed, MCPRegistry)
    return parsed


def _pod(optional: bool | None) -> dict[str, Any]:
    world = World(platform="kubernetes", namespace="team")
    plan = mcpregistry.plan(_registry(optional), world)
    assert plan.problems == (), plan.problems
    manifests = render(plan, Owner("MCPRegistry", "db", "team", "uid-1"), world.images)
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment"]
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def _run_init(pod: dict[str, Any], root: Path, with_file: bool) -> subprocess.CompletedProcess[str]:
    """The init container's command in a real shell, its two mounts moved under `root`."""
    (init,) = pod["initContainers"]
    script = init["command"][-1].replace(KUBERNETES_SECRET_DIR, str(root / "secrets"))
    script = script.replace(PGPASS_DIR, str(root / "pgpass"))
    (root / "secrets").mkdir(parents=True)
    (root / "pgpass").mkdir()
    if with_file:
        (root / "secrets" / PGPASS_FILE).write_text("postgres:5432:registry:db_app:pw\n")
    return subprocess.run([*init["command"][:-1], script], capture_output=True, text=True, check=False)


def test_optional_secret_source_and_init_copy(tmp_path: Path) -> None:
    pod = _pod(optional=True)
    sources = next(v for v in pod["volumes"] if v["name"] == "secrets")["projected"]["sources"]
    assert {
        "secret": {
            "name": "my-registry-pgpass",
            "items": [{"key": ".pgpass", "path": "pgpass"}],
            "optional": True,
        }
    } in sources
    present = _run_init(pod, tmp_path / "present", with_file=True)
    assert present.returncode == 0, present.stderr
    copied = tmp_path / "present" / "pgpass" / ".pgpass"
    assert copied.read_text().startswith("postgres:5432") and copied.stat().st_mode & 0o777 == 0o600
    absent = _run_init(pod, tmp_path / "absent", with_file=False)
    assert absent.returncode == 0, absent.stderr
    assert not (tmp_path / "absent" / "pgpass" / ".pgpass").exists()


@pytest.mark.parametrize("optional", [None, False])
def test_required_secret_is_still_required(tmp_path: Path, optional: bool | None) -> None:
    pod = _pod(optional)
    sources = next(v for v in pod["volumes"] if v["name"] == "secrets")["projected"]["sources"]
    assert all("optional" not in s.get("secret", {}) for s in sources)
    assert _run_init(pod, tmp_path, with_file=False).returncode != 0


async def test_local_optional_secret_is_not_written_when_absent(tmp_path: Path) -> None:
    state = await State.open(tmp_path / "state")
    runner = Runner(tmp_path, state)
    world = World(platform="local", namespace="team")
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    optional = mcpregistry.plan(_registry(optional=True), world)
    runner.build.write_secret_files(config_dir, optional)
    assert not (config_dir / LOCAL_SECRET_DIR / PGPASS_FILE).exists()
    with pytest.raises(LocalRunError, match=r"my-registry-pgpass key \.pgpass: not found locally"):
        runner.build.write_secret_files(config_dir, mcpregistry.plan(_registry(optional=False), world))
    # Once the Secret exists, the optional file is written like any other.
    secret = tmp_path / "state" / "secrets" / "my-registry-pgpass" / ".pgpass"
    secret.parent.mkdir(parents=True)
    secret.write_text("postgres:5432:registry:db_app:pw\n")
    runner.build.write_secret_files(config_dir, optional)
    written = config_dir / LOCAL_SECRET_DIR / PGPASS_FILE
    assert written.read_text().startswith("postgres") and written.stat().st_mode & 0o777 == 0o600


def test_optional_is_in_the_crd() -> None:
    crd = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "deploy/crds/mcpregistries.mcpfleet.dev.yaml").read_text()
    )
    beta = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta1")
    ref = beta["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["pgpassSecretRef"]
    assert ref["properties"]["optional"]["type"] == "boolean"


def test_optional_applies_and_renders_on_the_api_server(
    dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    """Applied strictly without the Secret; the rendered children pass a server-side dry run."""
    document = _registry(optional=True).dump()
    document["apiVersion"] = "mcpfleet.dev/v1beta1"
    document["metadata"] = {"name": "db", "namespace": namespace}
    document.pop("status", None)
    source = convert(document, MCPRegistry.version_changes, "v1beta1")
    objects = apply_and_render(dev_cluster, namespace, [source], "v1beta1")
    (deployment,) = [o for (kind, _), o in objects.items() if kind == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert any(
        s.get("secret", {}).get("optional")
        for v in pod["volumes"]
        for s in v.get("projected", {}).get("sources", [])
    )
