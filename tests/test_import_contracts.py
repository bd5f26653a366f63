"""The import contracts (pyproject.toml [tool.importlinter], run by `make lint`) hold, and catch a break.

`lint-imports` runs on a copy of the package with one import added that runs back up a layer: the
contracts must report it, so a contract that silently checks nothing (a renamed package, a typo in a
module name) fails here rather than passing forever.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(src: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ) | {"PYTHONPATH": str(src)}  # this copy of mcpfleet, before the installed one
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=workdir,
        env=env,
    )


def test_contracts_name_the_layers_of_the_architecture() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    ids = {c["id"] for c in config["contracts"]}
    assert {"layers", "data-plane", "api", "platforms"} <= ids
    for contract in config["contracts"]:
        for key in ("layers", "source_modules", "forbidden_modules", "modules"):
            for entry in contract.get(key, []):
                for module in entry.split(" : "):
                    # Every module a contract names exists: a typo would make it check nothing.
                    path = ROOT / "src" / Path(*module.strip().split("."))
                    assert path.is_dir() or path.with_suffix(".py").is_file(), f"{contract['id']}: {module}"


def test_the_code_keeps_the_contracts(tmp_path: Path) -> None:
    proc = _lint(ROOT / "src", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("module", "bad_import", "contract"),
    [
        ("proxy/_upward.py", "from mcpfleet.operator import app", "The data plane runs anywhere"),
        ("reconcile/_upward.py", "import mcpfleet.platform.local", "Layers:"),
        ("api/_upward.py", "from mcpfleet import redact", "The resource models stand alone"),
        ("clients/_upward.py", "import mcpfleet.platform.local", "The AI clients' files"),
    ],
)
def test_an_import_up_a_layer_breaks_a_contract(
    tmp_path: Path, module: str, bad_import: str, contract: str
) -> None:
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "mcpfleet", src / "mcpfleet", ignore=shutil.ignore_patterns("__pycache__"))
    (src / "mcpfleet" / module).write_text(f'"""A deliberate layering break."""\n\n{bad_import}\n')
    proc = _lint(src, tmp_path)
    out = proc.stdout.replace("\n", " ")
    assert proc.returncode != 0, out
    name = "mcpfleet." + module.removesuffix(".py").replace("/", ".")
    assert "BROKEN" in out and name in out and contract in out, out
