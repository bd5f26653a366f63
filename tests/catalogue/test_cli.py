"""`mcpfleet search`, `show` and `add` as a person runs them (the real command, in a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"


def mcpfleet(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "XDG_CONFIG_HOME": str(cwd / "config"), "COLUMNS": "200", **(env or {})}
    environ.pop("MCPFLEET_STATE_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "mcpfleet.cli.main", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_search_and_show_fit_a_terminal_and_speak_json(tmp_path: Path) -> None:
    found = mcpfleet("search", "time", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    header = found.stdout.splitlines()[0].split()
    assert header == ["NAME", "VERSION", "TRANSPORT", "PACKAGE", "DESCRIPTION"]
    assert "mcp-server-time" in found.stdout
    as_json = json.loads(mcpfleet("search", "fetch", "-o", "json", cwd=tmp_path).stdout)
    assert as_json["name"] == "io.github.modelcontextprotocol/fetch"
    shown = mcpfleet("show", "filesystem", cwd=tmp_path)
    assert "argument directory (required, repeatable)" in shown.stdout
    assert mcpfleet("search", "no-such-thing-anywhere", cwd=tmp_path).returncode == 1
    assert "no catalogue entry" in mcpfleet("show", "nope", cwd=tmp_path).stderr


def test_add_writes_a_manifest_that_up_accepts_and_keeps_secrets_out(tmp_path: Path) -> None:
    catalogue = tmp_path / "team.json"
    catalogue.write_text(
        json.dumps(
            [
                {
                    "$schema": SCHEMA,
                    "name": "io.example/clock",
                    "description": "A clock.",
                    "version": "2026.10.19",
                    "packages": [
                        {
                            "registryType": "pypi",
                            "identifier": "mcp-server-time",
                            "version": "2026.10.19",
                            "transport": {"type": "stdio"},
                            "packageArguments": [
                                {"type": "named", "name": "--local-timezone", "isRequired": True}
                            ],
                            "environmentVariables": [
                                {"name": "CLOCK_TOKEN", "isRequired": True, "isSecret": True}
                            ],
                        }
                    ],
                }
            ]
        )
    )
    fleet = tmp_path / "fleet"
    refused = mcpfleet("add", "clock", "--catalogue", str(catalogue), "--dir", str(fleet), cwd=tmp_path)
    assert refused.returncode == 2 and "packageArguments[0]" in refused.stderr
    assert not fleet.exists(), "nothing is written when a required value is missing"
    added = mcpfleet(
        "add",
        "clock",
        "--catalogue",
        str(catalogue),
        "--dir",
        str(fleet),
        "--group",
        "tools",
        "--arg",
        "local-timezone=Europe/Paris",
        "--env",
        "CLOCK_TOKEN=tok-7f3a",
        cwd=tmp_path,
    )
    assert added.returncode == 0, added.stderr
    assert "tok-7f3a" not in added.stdout + added.stderr
    manifest = yaml.safe_load((fleet / "clock.yaml").read_text())
    assert manifest["spec"]["args"] == ["--local-timezone=Europe/Paris"]
    assert manifest["spec"]["secrets"] == [
        {"name": "clock-secrets", "key": "CLOCK_TOKEN", "targetEnvName": "CLOCK_TOKEN"}
    ]
    secret = tmp_path / ".mcpfleet" / "secrets" / "clock-secrets" / "CLOCK_TOKEN"
    assert secret.read_text() == "tok-7f3a" and secret.stat().st_mode & 0o777 == 0o600
    assert (secret.parent.stat().st_mode & 0o777) == 0o700
    assert "tok-7f3a" not in "".join(p.read_text() for p in fleet.iterdir())
    assert yaml.safe_load((fleet / "group-tools.yaml").read_text())["kind"] == "MCPGroup"
    again = mcpfleet(
        "add",
        "clock",
        "--catalogue",
        str(catalogue),
        "--dir",
        str(fleet),
        "--arg",
        "local-timezone=UTC",
        "--env",
        "CLOCK_TOKEN=x",
        cwd=tmp_path,
    )
    assert again.returncode == 2 and "--force" in again.stderr
    listed = mcpfleet("get", "all", "--dir", str(fleet), cwd=tmp_path)
    assert "tok-7f3a" not in listed.stdout + listed.stderr


def test_add_dry_run_writes_nothing(tmp_path: Path) -> None:
    shown = mcpfleet("add", "filesystem", "--arg", "directory=/srv/docs", "--dry-run", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert yaml.safe_load(shown.stdout)["spec"]["args"] == ["/srv/docs"]
    assert list(tmp_path.iterdir()) == []
