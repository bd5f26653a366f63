"""The manifests the API tests walk: the invalid corpus, the examples, ToolHive's examples."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.reference import (
    TOOLHIVE,
    TOOLHIVE_EXAMPLES,
    TOOLHIVE_EXAMPLES_MISC,
    TOOLHIVE_EXAMPLES_V1BETA1,
    data_files,
)

ROOT = Path(__file__).resolve().parents[2]
INVALID_DIR = Path(__file__).parent / "invalid"
EXAMPLES_DIR = ROOT / "examples"
OUR_KINDS = {
    "MCPServer",
    "MCPGroup",
    "MCPRegistry",
    "VirtualMCPServer",
    "MCPToolConfig",
    "MCPExternalAuthConfig",
    "MCPRemoteProxy",
}
TOOLHIVE_KINDS = frozenset(
    yaml.safe_load(path.read_text())["spec"]["names"]["kind"]
    for path in data_files(TOOLHIVE / "crds-v1beta1", "*.yaml")
)
"""Every kind of ToolHive's current API, read from its CRDs (reference/toolhive/crds-v1beta1)."""


@dataclass(frozen=True)
class InvalidCase:
    path: Path
    expected_field: str
    document: dict[str, Any]

    @property
    def id(self) -> str:
        return self.path.stem


def invalid_cases() -> list[InvalidCase]:
    cases = []
    for path in sorted(INVALID_DIR.glob("*.yaml")):
        text = path.read_text()
        first = text.splitlines()[0]
        assert first.startswith("# expect: "), f"{path} must start with '# expect: FIELD'"
        cases.append(InvalidCase(path, first.removeprefix("# expect: ").strip(), yaml.safe_load(text)))
    return cases


def example_files() -> list[Path]:
    return sorted(EXAMPLES_DIR.rglob("*.yaml"))


def toolhive_documents(version: str = "v1alpha1") -> list[tuple[str, dict[str, Any]]]:
    """(label, document) for every ToolHive example manifest of a ToolHive kind at `version`, with
    only apiVersion changed (`toolhive.stacklok.dev/X` -> `mcpfleet.dev/X`; the namespace is dropped
    so the test's namespace applies).

    v1alpha1: examples-v1alpha1/. v1beta1: examples-v1beta1/ and the manifests of examples-misc/
    (its other files are data-plane configuration, not manifests).
    """
    folders = (
        [TOOLHIVE_EXAMPLES] if version == "v1alpha1" else [TOOLHIVE_EXAMPLES_V1BETA1, TOOLHIVE_EXAMPLES_MISC]
    )
    documents = []
    for folder in folders:
        for path in data_files(folder, "*.yaml", recursive=True):
            for index, document in enumerate(yaml.safe_load_all(path.read_text())):
                if not isinstance(document, dict) or document.get("kind") not in TOOLHIVE_KINDS:
                    continue
                if not str(document.get("apiVersion", "")).startswith("toolhive.stacklok.dev/"):
                    continue
                document = dict(document)
                source_version = str(document["apiVersion"]).rsplit("/", 1)[1]
                assert source_version == version, f"{path}#{index} is {source_version}, expected {version}"
                document["apiVersion"] = f"mcpfleet.dev/{version}"
                metadata = dict(document.get("metadata") or {})
                metadata.pop("namespace", None)
                document["metadata"] = metadata
                label = f"{path.relative_to(TOOLHIVE)}#{index} {document['kind']}/{metadata.get('name')}"
                documents.append((label, document))
    return documents
