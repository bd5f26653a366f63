"""The user's own fleet: where `mcpfleet run` puts servers when no folder is named.

A person who runs servers by name (`mcpfleet run fetch`) has no manifest folder of their own; they
get one per user: `$MCPFLEET_HOME` (default `$XDG_DATA_HOME/mcpfleet`, else
`~/.local/share/mcpfleet`) holds `fleet/` (the manifests, plain files a person can read, edit and
later `kubectl apply`) and `state/` (what `mcpfleet up` keeps). The fleet starts with one MCPGroup
(`default`) and a VirtualMCPServer (`gateway`) over it, so every server run this way is reachable
through one MCP endpoint that AI clients are configured with once.

`stop`, `start` and `rm` edit the folder (`spec.replicas: 0`, back, or the file removed); the
running `up` follows the folder as it always does, so there is one way a fleet changes.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mcpfleet.api.kindnames import VIRTUAL_MCP_SERVER
from mcpfleet.platform.local.errors import LocalPlatformError
from mcpfleet.platform.local.paths import safe_join
from mcpfleet.yamlread import ManifestLimits, ManifestTooLarge, load_documents, read_text

HOME_ENV = "MCPFLEET_HOME"
DEFAULT_GROUP = "default"
GATEWAY_NAME = "gateway"
GATEWAY_FILE = "gateway.yaml"

GATEWAY_MANIFESTS = f"""# The user fleet's gateway: one MCP endpoint over every server `mcpfleet run` adds
# (written once by mcpfleet; edit it like any manifest, e.g. to require tokens).
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPGroup
metadata:
  name: {DEFAULT_GROUP}
spec:
  description: Servers run with `mcpfleet run`.
---
apiVersion: mcpfleet.dev/v1alpha1
kind: VirtualMCPServer
metadata:
  name: {GATEWAY_NAME}
spec:
  config:
    groupRef: {DEFAULT_GROUP}
    aggregation:
      conflictResolution: prefix
      conflictResolutionConfig:
        prefixFormat: "{{workload}}_"
  incomingAuth:
    type: anonymous
"""


@dataclass(frozen=True)
class Fleet:
    """A fleet on this machine: its manifest folder and its state folder."""

    manifests: Path
    state: Path


def user_fleet() -> Fleet:
    """The user-level fleet's folders (not created)."""
    home = os.environ.get(HOME_ENV)
    if not home:
        data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        home = str(Path(data) / "mcpfleet")
    root = Path(home).expanduser().resolve()
    return Fleet(manifests=root / "fleet", state=root / "state")


def ensure_user_fleet(fleet: Fleet) -> bool:
    """Creates the user fleet's folders and its gateway manifest if missing; True when created."""
    fleet.manifests.mkdir(parents=True, exist_ok=True)
    fleet.state.mkdir(parents=True, exist_ok=True, mode=0o700)
    gateway = fleet.manifests / GATEWAY_FILE
    if gateway.exists():
        return False
    gateway.write_text(GATEWAY_MANIFESTS)
    return True


class FleetEditError(LocalPlatformError, ValueError):
    """A `stop` / `start` / `rm` that cannot be done; the message says why."""


def manifest_file(fleet: Fleet, name: str) -> Path:
    """The file `mcpfleet add` wrote for object `name` (`NAME.yaml`)."""
    try:
        path = safe_join(fleet.manifests, f"{name}.yaml")
    except ValueError as exc:
        raise FleetEditError(f"{name!r} is not an object name: {exc}") from None
    if not path.is_file():
        raise FleetEditError(f"no manifest {path.name} in {fleet.manifests} (see `mcpfleet list`)")
    return path


def _one_document(path: Path) -> dict[str, Any]:
    limits = ManifestLimits.from_env()
    try:
        documents = load_documents(read_text(path, limits), limits)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ManifestTooLarge) as exc:
        raise FleetEditError(f"{path}: {exc}") from None
    if (
        len(documents) != 1
        or not isinstance(documents[0], dict)
        or not isinstance(documents[0].get("spec"), dict)
    ):
        raise FleetEditError(f"{path}: expected one manifest with a spec (edit it by hand)")
    document: dict[str, Any] = documents[0]
    return document


def set_running(fleet: Fleet, name: str, running: bool) -> Path:
    """`stop` (`spec.replicas: 0`) or `start` (the field removed) the object of `NAME.yaml`."""
    path = manifest_file(fleet, name)
    document = _one_document(path)
    spec = document["spec"]
    if running:
        if spec.get("replicas") != 0:
            return path
        del spec["replicas"]
    else:
        if spec.get("replicas") == 0:
            return path
        spec["replicas"] = 0
    header = "".join(line for line in path.read_text().splitlines(keepends=True) if line.startswith("#"))
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(header + yaml.safe_dump(document, sort_keys=False))
    os.replace(temporary, path)
    return path


def remove(fleet: Fleet, name: str) -> list[Path]:
    """Removes `NAME.yaml` and the local Secret `add` stored for it; the paths removed."""
    path = manifest_file(fleet, name)
    path.unlink()
    removed = [path]
    secrets = safe_join(fleet.state, "secrets", f"{name}-secrets")
    if secrets.is_dir():
        shutil.rmtree(secrets)
        removed.append(secrets)
    return removed


def set_gateway_auth(fleet: Fleet, oidc: dict[str, Any] | None) -> Path:
    """The user fleet's gateway (`gateway.yaml`) with `incomingAuth` oidc (these inline settings) or,
    with None, anonymous again. The file is mcpfleet's own, rewritten whole (its comment header kept)."""
    path = fleet.manifests / GATEWAY_FILE
    limits = ManifestLimits.from_env()
    try:
        documents = load_documents(read_text(path, limits), limits)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ManifestTooLarge) as exc:
        raise FleetEditError(f"{path}: {exc}") from None
    gateways = [d for d in documents if isinstance(d, dict) and d.get("kind") == VIRTUAL_MCP_SERVER]
    if len(gateways) != 1 or not isinstance(gateways[0].get("spec"), dict):
        raise FleetEditError(f"{path}: expected one VirtualMCPServer (edit its incomingAuth by hand)")
    spec = gateways[0]["spec"]
    if oidc is None:
        spec["incomingAuth"] = {"type": "anonymous"}
    else:
        spec["incomingAuth"] = {"type": "oidc", "oidcConfig": {"type": "inline", "inline": oidc}}
    header = "".join(line for line in path.read_text().splitlines(keepends=True) if line.startswith("#"))
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(header + yaml.safe_dump_all(documents, sort_keys=False))
    os.replace(temporary, path)
    return path
