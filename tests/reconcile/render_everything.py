"""Render every manifest the repository holds through both platforms; print the result as JSON.

Run as a script by `test_determinism.py`, once per hash seed: the output must be the same bytes in every
process. Manifests come from `examples/**.yaml` and from every string literal in the test tree that
parses as YAML documents of our kinds (the snippets the tests feed to `obj()`, `kube.apply()`, …).
The documents of one file form one namespace, so references (groups, tool configs, auth configs)
resolve as they do in the tests.

For each workload it prints, per platform:
* Kubernetes: the children exactly as `render()` produces them (key order kept, as sent on the wire);
* local: the config files `mcpfleet up` writes, the argv of every container and `restart_checksum`.
With `--reverse` the world's objects are handed over in reverse order: a restarted operator fills its
store in LIST order, not in the order the objects were created, and must render the same.
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from mcpfleet.api.kinds import KIND_BY_NAME, parse_manifest
from mcpfleet.api.mcpexternalauthconfig import MCPExternalAuthConfig
from mcpfleet.api.mcpgroup import MCPGroup
from mcpfleet.api.mcpremoteproxy import MCPRemoteProxy
from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.mcptoolconfig import MCPToolConfig
from mcpfleet.api.resource import Resource
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.platform.kubernetes.render import Owner, render
from mcpfleet.platform.local import rules
from mcpfleet.platform.local.processbuild import restart_checksum
from mcpfleet.reconcile.model import Platform, World

ROOT = Path(__file__).resolve().parents[2]
KINDS = set(KIND_BY_NAME)
NAMESPACE = "team"


def _documents(text: str) -> list[dict[str, Any]]:
    try:
        loaded = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return []
    return [d for d in loaded if isinstance(d, dict) and d.get("kind") in KINDS]


def sources() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(label, documents) per file: every example, and every test file's YAML string literals."""
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        yield str(path.relative_to(ROOT)), _documents(path.read_text())
    for path in sorted((ROOT / "tests").rglob("*.py")):
        found: list[dict[str, Any]] = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "kind:" in node.value:
                found.extend(_documents(node.value))
        if found:
            yield str(path.relative_to(ROOT)), found


def resources(documents: list[dict[str, Any]]) -> list[Resource]:
    """The valid documents as models (first of a kind/name wins), in the namespace of the test."""
    out: dict[tuple[str, str], Resource] = {}
    for document in documents:
        document = json.loads(json.dumps(document))
        document.setdefault("apiVersion", "mcpfleet.dev/v1alpha1")
        metadata = document.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            continue
        metadata["namespace"] = NAMESPACE
        try:
            resource = parse_manifest(document)
        except Exception:  # invalid on purpose (the tests' rejection cases): nothing to render
            continue
        out.setdefault((resource.kind, resource.name), resource)
    return list(out.values())


def world(platform: Platform, objects: list[Resource], reverse: bool) -> World:
    ordered = list(reversed(objects)) if reverse else objects

    def of(kind: type[Any]) -> list[Any]:
        return [r for r in ordered if isinstance(r, kind)]

    members = of(MCPServer) + of(MCPRemoteProxy)
    return World(
        platform=platform,
        namespace=NAMESPACE,
        groups={g.name: g for g in of(MCPGroup)},
        servers=tuple(of(MCPServer)),
        remote_proxies=tuple(of(MCPRemoteProxy)),
        tool_configs={t.name: t for t in of(MCPToolConfig)},
        external_auth_configs={e.name: e for e in of(MCPExternalAuthConfig)},
        backend_urls={m.name: f"http://{m.name}.{NAMESPACE}.svc:8080/mcp" for m in members},
        virtual_servers=tuple(of(VirtualMCPServer)),
    )


def rendered(reverse: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, documents in sources():
        objects = resources(documents)
        for platform in ("kubernetes", "local"):
            w = world(platform, objects, reverse)
            for resource in objects:
                try:
                    plan = rules.plan(resource, w)
                except TypeError:
                    continue  # not a workload kind
                key = f"{label} {resource.kind}/{resource.name} {platform}"
                if platform == "kubernetes":
                    out[key] = render(plan, Owner(resource.kind, resource.name, NAMESPACE, "uid"), w.images)
                else:
                    out[key] = {
                        "files": [[f.filename, f.content] for f in plan.config_files],
                        "argv": [list(c.command) for c in plan.containers],
                        "env": [list(c.env) for c in plan.containers],
                        "restartChecksum": restart_checksum(replace(plan)),
                        "problems": list(plan.problems),
                    }
    return out


if __name__ == "__main__":
    # Not sort_keys: the key order of a rendered object is part of what goes on the wire.
    sys.stdout.write(json.dumps(rendered("--reverse" in sys.argv), indent=1))
