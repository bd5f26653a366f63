"""`mcpfleet get all` shows every document `up` refused, with the reason (issue 27 item 15): before,
a document of an unknown kind (a typo such as `MCPServr`, or any other kind) was reported by `up`
and then shown nowhere, since no kind of `all` matched it.

The refusals are made as `up` makes them: the manifest loader (`load_dir`) reads a folder, and the
runner's record of them (the state file's meta entry) is written through `State`; `get` is the
real command (`mcpfleet.cli.main.app`) reading that file.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import asdict
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mcpfleet.cli.main import app
from mcpfleet.platform.local.loader import load_dir
from mcpfleet.platform.local.snapshot import META_LOAD_ERRORS
from mcpfleet.platform.local.state import State


def _record_as_up_does(manifests: Path, state_dir: Path) -> None:
    errors = load_dir(manifests).errors

    async def write() -> None:
        state = await State.open(state_dir)
        try:
            await state.set_meta(META_LOAD_ERRORS, json.dumps([asdict(e) for e in errors]))
        finally:
            await state.close()

    asyncio.run(write())


def _get(state_dir: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["get", *args, "--state-dir", str(state_dir)])
    return result.exit_code, result.output


def _document(kind: str, name: str, spec: dict[str, object]) -> str:
    return yaml.safe_dump(
        {"apiVersion": "mcpfleet.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}
    )


def test_get_all_lists_unknown_kinds_and_every_other_refusal(tmp_path: Path) -> None:
    manifests, state_dir = tmp_path / "fleet", tmp_path / "state"
    manifests.mkdir()
    (manifests / "typo-kind.yaml").write_text(_document("MCPServr", "time", {"image": "uvx://x"}))
    (manifests / "foreign.yaml").write_text(_document("Deployment", "web", {}))
    (manifests / "group.yaml").write_text(_document("MCPGroup", "team", {"colour": "red"}))
    (manifests / "server.yaml").write_text(_document("MCPServer", "bad", {"image": "uvx://--version"}))
    _record_as_up_does(manifests, state_dir)

    code, listing = _get(state_dir, "all")
    assert code == 0, listing
    assert "Invalid manifests" in listing, listing
    lines = [line.split() for line in listing.splitlines() if line.strip()]
    for file, shown in (
        ("typo-kind.yaml", "MCPServr/time"),
        ("foreign.yaml", "Deployment/web"),
        ("group.yaml", "MCPGroup/team"),
        ("server.yaml", "MCPServer/bad"),
    ):
        assert any(words[0] == file and shown in words for words in lines), (file, listing)
    assert "unknown kind 'MCPServr'" in listing, listing
    assert "must not start with '-'" in listing, listing

    # A kind asked by name still shows only its own refusals.
    code, servers = _get(state_dir, "mcps")
    assert code == 0 and "MCPServer/bad" in servers, servers
    assert "MCPServr" not in servers and "Deployment/web" not in servers, servers


KIND = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda k: k.strip() != ""
)


@settings(max_examples=25, deadline=None)
@given(kind=KIND)
def test_any_refused_kind_is_shown_by_get_all(kind: str) -> None:
    """Property: whatever the `kind` string of a refused document (unknown, hostile, control
    characters), `get all` shows a row for its file, and answers without a traceback."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        manifests, state_dir = root / "fleet", root / "state"
        manifests.mkdir()
        (manifests / "doc.yaml").write_text(_document(kind, "x", {}))
        _record_as_up_does(manifests, state_dir)
        errors = load_dir(manifests).errors
        code, listing = _get(state_dir, "all")
        assert code == 0, listing
        if errors:  # a kind mcpfleet knows, with an empty spec, may well be valid
            assert "Invalid manifests" in listing and "doc.yaml" in listing, (kind, listing)
        assert "Traceback" not in listing
