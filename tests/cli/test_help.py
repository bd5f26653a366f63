"""Every command's --help: placeholders name the value, environment variables in full, examples.

Runs the real `mcpfleet` entry (`mcpfleet.cli.main.command`, what the console script runs), one
command at a time, and reads what a user would read.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.cli.main import command

SOURCE = Path(__file__).resolve().parents[2] / "src" / "mcpfleet"
TYPE_PLACEHOLDER = re.compile(r"<(bool|str|int|float|path|list\[[^\]]*\]|file|dir)>", re.I)


def _leaves(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    subs = getattr(cmd, "commands", None) or {}
    if not subs:
        return [path]
    return [leaf for name, sub in sorted(subs.items()) for leaf in _leaves(sub, (*path, name))]


LEAVES = _leaves(command())


def _help(args: tuple[str, ...], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")  # narrow on purpose: nothing may be cut
    command().main(args=[*args, "--help"], prog_name="mcpfleet", standalone_mode=False)
    return capsys.readouterr().out


def test_every_command_is_covered() -> None:
    assert {" ".join(leaf) for leaf in LEAVES} >= {
        "up",
        "down",
        "get",
        "describe",
        "logs",
        "proxy",
        "crds",
        "operator run",
        "vmcp serve",
        "registry serve",
        "dev-cluster up",
        "dev-cluster down",
    }


@pytest.mark.parametrize("args", LEAVES, ids=[" ".join(leaf) for leaf in LEAVES])
def test_help_reads_well(args: tuple[str, ...], capsys: Any, monkeypatch: Any) -> None:
    text = _help(args, capsys, monkeypatch)
    assert text.startswith(f"Usage: mcpfleet {' '.join(args)}"), text
    assert not TYPE_PLACEHOLDER.search(text), TYPE_PLACEHOLDER.search(text)
    assert "…\n" not in text and "╭" not in text, text  # plain text: no boxes, nothing cut
    examples = text.split("Examples:", 1)
    assert len(examples) == 2, f"no examples in `mcpfleet {' '.join(args)} --help`"
    assert "mcpfleet " in examples[1].split("Options:")[0]
    # Each environment variable named is a whole name the code reads.
    source = "\n".join(p.read_text() for p in SOURCE.rglob("*.py"))
    for name in re.findall(r"\$?(MCPFLEET_[A-Z0-9_]*)", text.replace("\n", " ")):
        assert not name.endswith("_") and f'"{name}' in source, f"{name} in {args} help"
