"""MCPRegistry `configYAML` (ToolHive's v1beta1 registry shape) served by `mcpfleet up`: real HTTP reads.

A file source reads ToolHive's own example ConfigMap through a `configMap` volume (the local ConfigMap
source `STATE/configmaps/<name>/<key>`), with its tag filter applied; a kubernetes source lists a running
MCPServer labelled for the registry. Both answer at `/v0.1/servers` and, as ToolHive's server does, at
`/registry/<registry name>/v0.1/servers`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.local.conftest import Up, time_server
from tests.reference import TOOLHIVE
from tests.waiting import wait_until

EXAMPLES = TOOLHIVE / "examples-v1beta1" / "mcp-registries"


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def _ported(document: dict[str, Any]) -> dict[str, Any]:
    """ToolHive's example with only apiVersion changed and no namespace (and, locally, no PostgreSQL:
    the example's `database` names a host `postgres` that does not exist on this machine)."""
    document = json.loads(json.dumps(document))
    document["apiVersion"] = document["apiVersion"].replace("toolhive.stacklok.dev", "mcpfleet.dev")
    document["metadata"].pop("namespace", None)
    config = yaml.safe_load(document["spec"]["configYAML"])
    config.pop("database")
    document["spec"]["configYAML"] = yaml.safe_dump(config)
    return document


async def _names(url: str) -> set[str]:
    async with httpx.AsyncClient(trust_env=False) as http:
        response = await http.get(url, timeout=10)
    response.raise_for_status()
    return {item["server"]["name"] for item in response.json()["servers"]}


async def _wait_names(url: str, wanted: set[str]) -> None:
    async def listed() -> bool | None:
        return (await _names(url)) == wanted or None

    await wait_until(
        listed, f"{url} lists {sorted(wanted)}", within=90, interval=0.5, tolerate=(httpx.HTTPError,)
    )


@pytest.mark.timeout(240)
async def test_configyaml_file_and_kubernetes_sources_serve(running_up: Any, tmp_path: Path) -> None:
    config_map, registry = _documents("mcpregistry-configyaml-configmap.yaml")
    # The local ConfigMap source: the example's ConfigMap key as a file of the state dir.
    data = tmp_path / "state" / "configmaps" / config_map["metadata"]["name"]
    data.mkdir(parents=True)
    (data / "registry.json").write_text(config_map["data"]["registry.json"])
    labelled = json.loads(time_server("time", group=None))
    labelled["metadata"]["labels"] = {"mcpfleet.dev/registry": "minimal-configyaml"}
    watcher = _ported(_documents("mcpregistry-configyaml-minimal.yaml")[0])
    up: Up = running_up(
        {
            "file.yaml": yaml.safe_dump(_ported(registry)),
            "kube.yaml": yaml.safe_dump(watcher),
            "time.yaml": json.dumps(labelled),
        }
    )
    file_status = await up.wait_phase("MCPRegistry", "configmap-configyaml", {"Running"})
    # The example's filter: tags include production, exclude experimental.
    wanted = {"io.github.example/filesystem", "io.github.example/github"}
    await _wait_names(f"{file_status['url']}/v0.1/servers", wanted)
    await _wait_names(f"{file_status['url']}/registry/default/v0.1/servers", wanted)
    # The mounted file is in the registry's own state folder.
    mounted = (
        tmp_path
        / "state"
        / "config"
        / "mcpregistry"
        / "default"
        / "configmap-configyaml"
        / "volumes"
        / "registry-data-production"
        / "registry.json"
    )
    assert mounted.read_text() == config_map["data"]["registry.json"]

    kube_status = await up.wait_phase("MCPRegistry", "minimal-configyaml", {"Running"})
    await up.wait_phase("MCPServer", "time", {"Running"})

    async def time_listed() -> bool | None:
        names = await _names(f"{kube_status['url']}/v0.1/servers")
        return any(n.endswith("time") for n in names) or None

    await wait_until(time_listed, "the kubernetes source lists the time server", within=90, interval=0.5)


@pytest.mark.timeout(120)
async def test_configyaml_volume_without_local_meaning_fails_naming_it(running_up: Any) -> None:
    registry = _ported(_documents("mcpregistry-configyaml-configmap.yaml")[1])
    registry["spec"]["volumes"][0] = {
        "name": "registry-data-production",
        "csi": {"driver": "secrets-store.csi.k8s.io"},
    }
    up: Up = running_up({"file.yaml": yaml.safe_dump(registry)})
    status = await up.wait_phase("MCPRegistry", "configmap-configyaml", {"Failed"})
    assert "spec.volumes[0].csi" in status["message"], status["message"]
    assert "sources[0].file.path" in status["message"], status["message"]
