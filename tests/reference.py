"""Where the tests find the vendored third-party reference data (`reference/` at the repository root).

One place names every file and folder the tests read from `reference/` (sources, commits and licences
in `reference/README.md`), so no test reaches outside the checkout. `data_files` is the only way a
test should list a data folder: a missing or empty folder fails the test instead of letting a loop
over nothing pass.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "reference"

TOOLHIVE = REFERENCE / "toolhive"
TOOLHIVE_FILE = TOOLHIVE / "registry.json"
TOOLHIVE_EXAMPLES = TOOLHIVE / "examples-v1alpha1"
TOOLHIVE_EXAMPLES_V1BETA1 = TOOLHIVE / "examples-v1beta1"
TOOLHIVE_EXAMPLES_MISC = TOOLHIVE / "examples-misc"

MCP_REGISTRY = REFERENCE / "mcp-registry"
OPENAPI_FILE = MCP_REGISTRY / "openapi.yaml"
SERVER_SCHEMA_FILE = MCP_REGISTRY / "server.schema.json"
SERVER_EXAMPLES = MCP_REGISTRY / "examples"


def data_files(folder: Path, pattern: str, *, recursive: bool = False) -> list[Path]:
    """The files in `folder` matching `pattern`, sorted; fails if the folder is missing or holds none."""
    assert folder.is_dir(), f"data folder {folder} is missing (see reference/README.md)"
    found = sorted(folder.rglob(pattern) if recursive else folder.glob(pattern))
    assert found, f"data folder {folder} holds no {pattern} files: a loop over it would test nothing"
    return found
