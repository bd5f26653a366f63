"""The manifests the API tests walk: the invalid corpus, the examples, ToolHive's examples."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.reference import TOOLHIVE_EXAMPLES, data_files

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


def toolhive_documents() -> list[tuple[str, dict[str, Any]]]:
    """(label, document) for every ToolHive example of one of our kinds, apiVersion switched to ours."""
    documents = []
    for path in data_files(TOOLHIVE_EXAMPLES, "*.yaml", recursive=True):
        for index, document in enumerate(yaml.safe_load_all(path.read_text())):
            if not isinstance(document, dict) or document.get("kind") not in OUR_KINDS:
                continue
            document = dict(document)
            document["apiVersion"] = "mcpfleet.dev/v1alpha1"
            metadata = dict(document.get("metadata") or {})
            metadata.pop("namespace", None)
            document["metadata"] = metadata
            label = f"{path.relative_to(TOOLHIVE_EXAMPLES)}#{index} {document['kind']}/{metadata.get('name')}"
            documents.append((label, document))
    return documents
