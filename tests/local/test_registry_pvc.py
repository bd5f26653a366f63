"""MCPRegistry `pvcRef` sources served by `mcpfleet up`: ToolHive's v1alpha1 example
`mcpregistry-pvc.yaml` (two sources on one claim, each with its own path and tag filter) with only
apiVersion changed. Locally a claim is the folder `STATE/persistentvolumeclaims/<claimName>/`; the data
is what the example's populating Job writes there."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.local.conftest import Up
from tests.reference import TOOLHIVE
from tests.waiting import wait_until

EXAMPLE = TOOLHIVE / "examples-v1alpha1" / "mcp-registries" / "mcpregistry-pvc.yaml"


def _job_files(job: dict[str, Any]) -> dict[str, str]:
    """The files the example's Job writes into the claim (`cat > /data/<path> <<'EOF' ... EOF`)."""
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    return {
        path: body
        for path, body in re.findall(r"cat > /data/(\S+) <<'EOF'\n(.*?)\n\s*EOF", script, flags=re.S)
    }


async def _names(url: str) -> set[str]:
    async with httpx.AsyncClient(trust_env=False) as http:
        response = await http.get(url, timeout=10)
    response.raise_for_status()
    return {item["server"]["name"].rsplit("/", 1)[-1] for item in response.json()["servers"]}


@pytest.mark.timeout(240)
async def test_pvc_sources_read_the_claims_folder(running_up: Any, tmp_path: Path) -> None:
    claim, registry, job = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    files = _job_files(job)
    assert set(files) == {"prod-data/registry.json", "dev-data/registry.json"}
    folder = tmp_path / "state" / "persistentvolumeclaims" / claim["metadata"]["name"]
    for path, body in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(body)
    registry["apiVersion"] = "mcpfleet.dev/v1alpha1"
    registry["metadata"].pop("namespace")
    up: Up = running_up({"registry.yaml": json.dumps(registry)})
    status = await up.wait_phase("MCPRegistry", "pvc-multi-registry", {"Running"})
    # production: tags production/stable; development: tags development/testing.
    wanted = {"prod-filesystem", "github-api", "dev-filesystem", "test-runner"}

    async def listed() -> bool | None:
        return (await _names(f"{status['url']}/v0.1/servers")) == wanted or None

    await wait_until(
        listed,
        f"both claim files listed: {sorted(wanted)}",
        within=90,
        interval=0.5,
        tolerate=(httpx.HTTPError,),
    )
    # The claim is linked into the registry's config folder, not copied: a new file is served.
    dev = json.loads(files["dev-data/registry.json"])
    dev["servers"]["lint-runner"] = {**dev["servers"]["test-runner"], "image": "testing/lint:1"}
    (folder / "dev-data" / "registry.json").write_text(json.dumps(dev))
    wanted.add("lint-runner")
    await wait_until(
        listed, "the edited claim file is served", within=90, interval=0.5, tolerate=(httpx.HTTPError,)
    )
