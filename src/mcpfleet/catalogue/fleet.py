"""Writing what `mcpfleet add` planned into a fleet: the manifest file and the local Secret values.

The manifest goes to `DIR/NAME.yaml` (never over an existing file unless asked; written to a
temporary file and renamed, so a running `mcpfleet up` never reads half a manifest). Secret values go
to `STATE/secrets/NAME-secrets/KEY`, mode 0600 in 0700 folders — where `mcpfleet up` reads Secret
keys — so they appear in no manifest, log or `mcpfleet get` output.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from mcpfleet.api.kindnames import MCP_GROUP
from mcpfleet.catalogue.manifest import ENTRY_ANNOTATION, AddError, AddPlan
from mcpfleet.platform.local.paths import safe_join
from mcpfleet.yamlread import ManifestLimits, ManifestTooLarge, load_documents, read_text


def _write_private(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(temporary, path)


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)


def manifest_text(plan: AddPlan) -> str:
    entry = plan.manifest["metadata"]["annotations"][ENTRY_ANNOTATION]
    header = f"# Written by `mcpfleet add` from the catalogue entry {entry}\n"
    return header + yaml.safe_dump(plan.manifest, sort_keys=False, default_flow_style=False)


def defined_groups(directory: Path) -> set[str]:
    """Names of the MCPGroups the manifests of `directory` define (unreadable files are skipped:
    `mcpfleet up` reports them)."""
    limits = ManifestLimits.from_env()
    names: set[str] = set()
    if not directory.is_dir():
        return names
    for path in sorted(directory.glob("*.y*ml"))[: limits.max_files]:
        try:
            documents = load_documents(read_text(path, limits), limits)
        except (OSError, UnicodeDecodeError, yaml.YAMLError, ManifestTooLarge):
            continue
        for document in documents:
            if isinstance(document, dict) and document.get("kind") == MCP_GROUP:
                name = (document.get("metadata") or {}).get("name")
                if isinstance(name, str):
                    names.add(name)
    return names


def group_manifest(name: str) -> str:
    document = {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": MCP_GROUP,
        "metadata": {"name": name},
        "spec": {"description": "Servers added with mcpfleet add --group."},
    }
    return "# Written by `mcpfleet add --group`\n" + yaml.safe_dump(document, sort_keys=False)


def write(plan: AddPlan, directory: Path, state_dir: Path, force: bool = False) -> list[Path]:
    """Writes the plan; returns the files written. Refuses (AddError) before writing anything when
    the manifest exists and `force` is not set."""
    directory.mkdir(parents=True, exist_ok=True)
    target = safe_join(directory, f"{plan.name}.yaml")
    if target.exists() and not force:
        raise AddError("--name", f"{target} exists (choose another --name, or --force to replace it)")
    written: list[Path] = []
    if plan.secrets:
        folder = safe_join(state_dir, "secrets", plan.secret_name)
        _private_dir(folder.parent)
        _private_dir(folder)
        for key, value in plan.secrets.items():
            path = safe_join(folder, key)
            _write_private(path, value)
            written.append(path)
    group = plan.manifest["spec"].get("groupRef")
    if isinstance(group, str) and group not in defined_groups(directory):
        group_path = safe_join(directory, f"group-{group}.yaml")
        if not group_path.exists():
            group_path.write_text(group_manifest(group))
            written.append(group_path)
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.write_text(manifest_text(plan))
    os.replace(temporary, target)
    written.insert(0, target)
    return written
