"""Issue 11, defect 2: one `mcpfleet up` per state dir, enforced by an OS file lock, with real processes.

Today's main kept the lock as a row in the state: a refused second `up` cleared it on its way out,
after which `mcpfleet down` said everything was stopped while the first `up` kept running.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.local.conftest import MCPFLEET, manifest, pid_alive, start_up, stop_process
from tests.waiting import wait_until


def _up_pid_row(state_dir: Path) -> str | None:
    with sqlite3.connect(state_dir / "state.db", timeout=5) as db:
        row = db.execute("select value from meta where key = 'up_pid'").fetchone()
    return None if row is None else str(row[0])


async def _wait_serving(process: subprocess.Popen[str], log: Path, limit: float = 60.0) -> None:
    """Until `up` printed its summary (it holds the lock and its first pass is done)."""

    async def serving() -> bool:
        output = await asyncio.to_thread(log.read_text)
        if process.poll() is not None:
            raise AssertionError(f"up exited ({process.returncode}):\n{output}")
        return "watching" in output

    await wait_until(
        serving, "up to settle", within=limit, interval=0.2, context=lambda: asyncio.to_thread(log.read_text)
    )


@pytest.mark.timeout(150)
async def test_a_refused_second_up_leaves_the_first_one_in_charge(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "group.yaml").write_text(manifest("MCPGroup", "demo", {}))
    state_dir = tmp_path / "state"
    first = start_up(manifests, state_dir, tmp_path / "first.log")
    started = [first]
    try:
        await _wait_serving(first, tmp_path / "first.log")
        assert _up_pid_row(state_dir) == str(first.pid)

        second = start_up(manifests, state_dir, tmp_path / "second.log")
        started.append(second)
        assert second.wait(60) == 1
        assert "already running" in (tmp_path / "second.log").read_text()
        assert f"pid {first.pid}" in (tmp_path / "second.log").read_text()
        # The refusal changed nothing of the first `up`.
        assert first.poll() is None
        assert _up_pid_row(state_dir) == str(first.pid)

        down = await asyncio.to_thread(
            subprocess.run,
            [MCPFLEET, "down", "--state-dir", str(state_dir)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert down.returncode == 0, down.stderr
        assert f"asked mcpfleet up (pid {first.pid}) to stop" in down.stdout, down.stdout
        assert first.wait(30) == 0
        assert not pid_alive(first.pid)

        # Killed without a chance to clean up: the kernel releases the lock, the next `up` starts.
        third = start_up(manifests, state_dir, tmp_path / "third.log")
        started.append(third)
        await _wait_serving(third, tmp_path / "third.log")
        third.kill()
        third.wait(10)
        fourth = start_up(manifests, state_dir, tmp_path / "fourth.log")
        started.append(fourth)
        await _wait_serving(fourth, tmp_path / "fourth.log")
    finally:
        for process in started:
            stop_process(process)


def test_lock_is_exclusive_and_only_its_holder_releases_it(tmp_path: Path) -> None:
    from mcpfleet.platform.local.lock import LockHeld, UpLock, holder_pid

    first, second = UpLock(tmp_path), UpLock(tmp_path)
    first.acquire()
    with pytest.raises(LockHeld) as held:
        second.acquire()
    assert held.value.pid is not None
    second.release()  # a refused one releasing is a no-op: the lock stays with its holder
    assert holder_pid(tmp_path) is not None
    with pytest.raises(LockHeld):
        UpLock(tmp_path).acquire()
    first.release()
    assert holder_pid(tmp_path) is None
    second.acquire()
    second.release()
