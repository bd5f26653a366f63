"""Where `client setup` finds the URL: the fleet's state (its gateway, or `--server NAME`), with a
clear error saying how to start the fleet when there is none."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from mcpfleet.cli.app import command
from mcpfleet.platform.local.state import State

GATEWAY = "http://127.0.0.1:23967/mcp"
TIME = "http://127.0.0.1:24111/mcp"


async def _state(folder: Path, objects: list[tuple[str, str, str | None]]) -> None:
    state = await State.open(folder)
    try:
        for kind, name, url in objects:
            await state.upsert_object(
                kind, "default", name, {"kind": kind, "metadata": {"name": name}}, "test"
            )
            await state.set_status(
                kind, "default", name, {"phase": "Running", **({"url": url} if url else {})}
            )
    finally:
        await state.close()


def _setup(home: Path, *args: str) -> tuple[int, str]:
    environ = {"HOME": str(home), "XDG_CONFIG_HOME": "", "MCPFLEET_HOME": str(home / "fleet")}
    result = CliRunner().invoke(command(), ["client", "setup", "cursor", *args], env=environ)
    return result.exit_code, result.output


def _cursor_url(home: Path) -> str:
    url: str = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["mcpfleet"]["url"]
    return url


def test_the_user_fleet_gateway_and_a_named_server(tmp_path: Path) -> None:
    asyncio.run(
        _state(
            tmp_path / "fleet" / "state",
            [
                ("VirtualMCPServer", "gateway", GATEWAY),
                ("MCPServer", "time", TIME),
                ("MCPServer", "idle", None),
            ],
        )
    )
    code, output = _setup(tmp_path)
    assert code == 0 and GATEWAY in output and _cursor_url(tmp_path) == GATEWAY
    code, output = _setup(tmp_path, "--server", "time")
    assert code == 0 and _cursor_url(tmp_path) == TIME
    code, output = _setup(tmp_path, "--server", "idle")
    assert code == 1 and "mcpserver/idle has no URL yet" in output
    code, output = _setup(tmp_path, "--server", "nope")
    assert code == 1 and "no server 'nope'" in output and "known: gateway, idle, time" in output
    assert _cursor_url(tmp_path) == TIME  # refusals wrote nothing


def test_another_fleet_by_state_dir_and_a_fleet_without_a_gateway(tmp_path: Path) -> None:
    other = tmp_path / "other-state"
    asyncio.run(_state(other, [("VirtualMCPServer", "edge", GATEWAY)]))
    code, output = _setup(tmp_path, "--state-dir", str(other))
    assert code == 0 and _cursor_url(tmp_path) == GATEWAY  # the only gateway of that fleet
    empty = tmp_path / "empty-state"
    asyncio.run(_state(empty, [("MCPServer", "time", TIME)]))
    code, output = _setup(tmp_path, "--state-dir", str(empty))
    assert code == 1 and "no a gateway" not in output and "name one with --server" in output
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "state.db").write_bytes(b"not a database" * 100)
    code, output = _setup(tmp_path, "--state-dir", str(corrupt))
    assert code == 1 and "cannot be read" in output and "Traceback" not in output


def test_a_folder_fleet_reads_its_state_where_up_keeps_it(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCPFLEET_STATE_DIR", raising=False)
    code, output = _setup(tmp_path, "--dir", "examples/quickstart")
    assert code == 1 and "mcpfleet up examples/quickstart --detach" in output
    asyncio.run(_state(tmp_path / ".mcpfleet", [("VirtualMCPServer", "gateway", GATEWAY)]))
    code, output = _setup(tmp_path, "--dir", "examples/quickstart")
    assert code == 0 and _cursor_url(tmp_path) == GATEWAY
