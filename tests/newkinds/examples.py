"""ToolHive's example documents of the seven kinds ToolHive added, with only apiVersion changed (its
group to ours, the version kept: `toolhive.stacklok.dev/v1beta1` -> `mcpfleet.dev/v1beta1`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mcpfleet.api.meta import GROUP
from tests.reference import TOOLHIVE, data_files

NEW_KINDS = (
    "MCPOIDCConfig",
    "MCPTelemetryConfig",
    "MCPAuthzConfig",
    "MCPWebhookConfig",
    "VirtualMCPCompositeToolDefinition",
    "MCPServerEntry",
    "EmbeddingServer",
)
EXAMPLE_FOLDERS = (TOOLHIVE / "examples-v1beta1", TOOLHIVE / "examples-misc", TOOLHIVE / "examples-v1alpha1")


@dataclass(frozen=True)
class ExampleDocument:
    path: Path
    index: int
    document: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(TOOLHIVE)}#{self.index}:{self.document['kind']}"


def new_kind_documents() -> list[ExampleDocument]:
    """Every document of a new kind in ToolHive's example folders, apiVersion set to ours."""
    found: list[ExampleDocument] = []
    for folder in EXAMPLE_FOLDERS:
        if not folder.is_dir():
            continue
        for path in data_files(folder, "*.yaml", recursive=True):
            for index, document in enumerate(yaml.safe_load_all(path.read_text())):
                if isinstance(document, dict) and document.get("kind") in NEW_KINDS:
                    version = str(document.get("apiVersion", "")).rpartition("/")[2]
                    ours = {**document, "apiVersion": f"{GROUP}/{version}"}
                    found.append(ExampleDocument(path, index, ours))
    assert found, "no example document of the new kinds found"
    return found
