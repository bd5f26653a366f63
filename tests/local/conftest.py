"""Fixtures for the local platform tests: manifest folders and a running `mcpfleet up` subprocess."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from mcpfleet.platform.local.runner import Runner
from tests.waiting import wait_until

T = TypeVar("T")

VENV_BIN = Path(sys.executable).parent
MCPFLEET = str(VENV_BIN / "mcpfleet")
TEST_PORT_RANGE = "30000-32700"
"""Away from the default range (a developer's own `make run`) and below the kernel's ephemeral ports."""


def manifest(kind: str, name: str, spec: dict[str, Any], labels: dict[str, str] | None = None) -> str:
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = labels
    return json.dumps(
        {"apiVersion": "mcpfleet.dev/v1alpha1", "kind": kind, "metadata": metadata, "spec": spec}
    )


def gateway_fleet(backend_url: str, config: dict[str, Any]) -> str:
    """Manifests of a gateway `gw` over group `team` holding one remote proxy `alpha` to `backend_url`;
    `config` is added to the gateway's `spec.config`."""
    return "\n---\n".join(
        [
            manifest("MCPGroup", "team", {}),
            manifest("MCPRemoteProxy", "alpha", {"remoteURL": backend_url, "groupRef": "team"}),
            manifest(
                "VirtualMCPServer",
                "gw",
                {"config": {"groupRef": "team", **config}, "incomingAuth": {"type": "anonymous"}},
            ),
        ]
    )


async def reconcile_until(
    runner: Runner,
    what: str,
    check: Callable[[], Awaitable[T | None]],
    within: float = 60.0,
    interval: float = 0.25,
) -> T:
    """`wait_until` for tests that drive the in-process reconcile loop: one pass before each check."""

    async def reconciled() -> T | None:
        await runner.reconcile()
        return await check()

    return await wait_until(reconciled, what, within=within, interval=interval)


def time_server(name: str, group: str | None = "demo", args: list[str] | None = None) -> str:
    """mcp-server-time from PyPI through uvx (in the uv cache after the first run)."""
    spec: dict[str, Any] = {
        "image": "uvx://mcp-server-time",
        "transport": "stdio",
        "args": args or ["--local-timezone=UTC"],
    }
    if group is not None:
        spec["groupRef"] = group
    return manifest("MCPServer", name, spec, labels={"mcpfleet.dev/registry": "catalogue"})


@dataclass
class Up:
    """A running `mcpfleet up` and the ways to look at it."""

    process: subprocess.Popen[str]
    manifests: Path
    state_dir: Path
    output: Path

    def get(self, *args: str) -> str:
        """`mcpfleet get|logs ARGS` through the CLI app in-process (the quick commands are synchronous)."""
        from typer.testing import CliRunner

        from mcpfleet.cli.main import app

        result = CliRunner().invoke(app, [*args, "--state-dir", str(self.state_dir)])
        assert result.exit_code in (0, 1), result.output
        return result.output

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [MCPFLEET, *args, "--state-dir", str(self.state_dir)], capture_output=True, text=True, timeout=60
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"mcpfleet {' '.join(args)} failed ({result.returncode}): {result.stderr}{result.stdout}"
            )
        return result

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        """name -> status, read straight from the state file (what `get` reads too)."""
        with sqlite3.connect(self.state_dir / "state.db", timeout=5) as db:
            rows = db.execute("select name, status from objects where kind = ?", (kind,)).fetchall()
        return {name: json.loads(status) for name, status in rows}

    def processes(self) -> dict[str, int]:
        with sqlite3.connect(self.state_dir / "state.db", timeout=5) as db:
            rows = db.execute("select key, pid from processes").fetchall()
        return {key: pid for key, pid in rows if pid is not None}

    async def wait_for(
        self, what: str, check: Callable[[], Any], limit: float = 90.0, interval: float = 0.25
    ) -> Any:
        def alive_check() -> Any:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"mcpfleet up exited ({self.process.returncode}):\n{self.output.read_text()}"
                )
            return check()

        return await wait_until(
            alive_check,
            what,
            within=limit,
            interval=interval,
            tolerate=(sqlite3.Error, KeyError, OSError),  # the state file is still being created
            context=lambda: f"--- up output:\n{self.output.read_text()}",
        )

    async def wait_phase(self, kind: str, name: str, phases: set[str], limit: float = 90.0) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            status = self.objects(kind).get(name) or {}
            return status if status.get("phase") in phases else None

        result: dict[str, Any] = await self.wait_for(f"{kind}/{name} in {phases}", check, limit)
        return result


def start_up(manifests: Path, state_dir: Path, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    with log.open("w") as out:
        return subprocess.Popen(
            [
                MCPFLEET,
                "up",
                str(manifests),
                "--state-dir",
                str(state_dir),
                "--port-range",
                TEST_PORT_RANGE,
                "--no-progress",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=state_dir.parent,
        )


def stop_process(process: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL after 30 s: how the tests end an `up` they started."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (it is only waiting for its parent to reap it).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
async def running_up(tmp_path: Path) -> AsyncIterator[Callable[[dict[str, str]], Up]]:
    """A factory: write these files, start `mcpfleet up` on them; stopped (and checked) at the end."""
    started: list[Up] = []

    def start(files: dict[str, str]) -> Up:
        manifests = tmp_path / "manifests"
        manifests.mkdir(exist_ok=True)
        for name, content in files.items():
            (manifests / name).write_text(content)
        state_dir = tmp_path / "state"
        output = tmp_path / "up.log"
        up = Up(start_up(manifests, state_dir, output), manifests, state_dir, output)
        started.append(up)
        return up

    yield start
    for up in started:
        stop_process(up.process)
