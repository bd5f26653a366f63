"""Loading a manifests folder: valid documents load, each invalid one names file, document and field."""

from __future__ import annotations

from pathlib import Path

from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.platform.local.loader import load_dir
from tests.local.conftest import manifest, time_server


def test_valid_documents_still_load_next_to_invalid_ones(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        time_server("good")
        + "\n---\n"
        + manifest("MCPServer", "bad", {"image": "uvx://mcp-server-time", "transport": "carrier-pigeon"})
        + "\n---\n"
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yml").write_text(manifest("MCPGroup", "demo", {}))
    (tmp_path / "notes.txt").write_text("not a manifest")
    result = load_dir(tmp_path)
    assert sorted(o.resource.name for o in result.objects) == ["demo", "good"]
    assert isinstance(result.objects[0].resource, MCPServer)
    assert result.objects[0].source == "a.yaml#1"
    [error] = result.errors
    assert (error.file, error.document, error.kind, error.name) == ("a.yaml", 2, "MCPServer", "bad")
    assert error.problems[0][0] == "spec.transport"
    assert "a.yaml (document 2) MCPServer/bad: spec.transport:" in str(error)


def test_cross_field_rule_names_its_field(tmp_path: Path) -> None:
    spec = {"image": "uvx://mcp-server-time", "transport": "stdio", "replicas": 3}
    (tmp_path / "s.yaml").write_text(manifest("MCPServer", "wide", spec))
    [error] = load_dir(tmp_path).errors
    assert error.problems[0][0] == "spec.replicas"
    assert "at most 1 replica" in error.problems[0][1]


def test_yaml_syntax_error_and_non_mapping_and_duplicate(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("kind: [unclosed\n")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "one.yaml").write_text(manifest("MCPGroup", "demo", {}))
    (tmp_path / "two.yaml").write_text(manifest("MCPGroup", "demo", {}))
    result = load_dir(tmp_path)
    messages = {e.file: str(e) for e in result.errors}
    assert "not valid YAML" in messages["broken.yaml"]
    assert "expected a mapping" in messages["list.yaml"]
    assert "duplicate of one.yaml#1" in messages["two.yaml"]
    assert [o.source for o in result.objects] == ["one.yaml#1"]


def test_hidden_folders_are_skipped(tmp_path: Path) -> None:
    (tmp_path / ".mcpfleet").mkdir()
    (tmp_path / ".mcpfleet" / "x.yaml").write_text("kind: [unclosed\n")
    assert load_dir(tmp_path).errors == []


def test_only_manifest_changes_trigger_a_reload(tmp_path: Path) -> None:
    from mcpfleet.platform.local.watching import is_manifest_path

    assert is_manifest_path(tmp_path, str(tmp_path / "servers.yaml"))
    assert is_manifest_path(tmp_path, str(tmp_path / "team" / "a.yml"))
    assert is_manifest_path(tmp_path, str(tmp_path / "team"))  # a folder removed or renamed
    # The default state dir inside DIR: its writes must not trigger reloads of the manifests.
    assert not is_manifest_path(tmp_path, str(tmp_path / ".mcpfleet" / "state.db"))
    assert not is_manifest_path(tmp_path, str(tmp_path / ".mcpfleet" / "config" / "x" / "vmcp.yaml"))
    assert not is_manifest_path(tmp_path, str(tmp_path / "notes.txt"))


def test_limits_come_from_the_environment() -> None:
    from mcpfleet.yamlread import ManifestLimits

    assert ManifestLimits.from_env({}) == ManifestLimits()
    limits = ManifestLimits.from_env(
        {"MCPFLEET_MANIFEST_MAX_BYTES": "2048", "MCPFLEET_MANIFEST_MAX_NODES": "50"}
    )
    assert (limits.max_file_bytes, limits.max_nodes, limits.max_depth) == (2048, 50, 100)
    for name, value in (
        ("MCPFLEET_MANIFEST_MAX_FILES", "0"),
        ("MCPFLEET_MANIFEST_MAX_DEPTH", "500"),
        ("MCPFLEET_MANIFEST_MAX_BYTES", "1k"),
    ):
        try:
            ManifestLimits.from_env({name: value})
        except ValueError as exc:
            assert name in str(exc)
        else:
            raise AssertionError(f"{name}={value} accepted")


def test_up_refuses_a_bad_limit_before_starting(tmp_path: Path) -> None:
    import os
    import subprocess

    from tests.local.conftest import MCPFLEET

    env = {**os.environ, "MCPFLEET_MANIFEST_MAX_BYTES": "lots"}
    result = subprocess.run(
        [MCPFLEET, "up", str(tmp_path), "--state-dir", str(tmp_path / "state"), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "$MCPFLEET_MANIFEST_MAX_BYTES must be a positive integer" in result.stdout
    assert not (tmp_path / "state").exists()


def test_a_smaller_limit_applies(tmp_path: Path) -> None:
    from mcpfleet.yamlread import ManifestLimits

    (tmp_path / "g.yaml").write_text(manifest("MCPGroup", "demo", {"description": "x" * 200}))
    [error] = load_dir(tmp_path, ManifestLimits(max_file_bytes=100)).errors
    assert "larger than 100 bytes" in str(error) and "MCPFLEET_MANIFEST_MAX_BYTES" in str(error)
    assert load_dir(tmp_path).objects
