"""`mcpfleet up --detach`: `up` as a background process that outlives the terminal, and waiting for
what it runs to settle.

The detached `up` runs in a session of its own (closing the terminal sends it no SIGHUP), with its
output in `STATE/up.log`; it is stopped with `mcpfleet down` like any `up`. Whether it is running is
the state folder's lock (`lock.holder_pid`), so a second `run` never starts a second `up`.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from mcpfleet.platform.local.lock import holder_pid
from mcpfleet.platform.local.snapshot import StoredObject, read_objects

UP_LOG = "up.log"
SETTLED_PHASES = ("Running", "Ready", "Failed", "Stopped")


def start_detached(
    manifests: Path, state_dir: Path, extra_args: list[str] | None = None, timeout: float = 30.0
) -> int:
    """Starts `mcpfleet up MANIFESTS` in the background for `state_dir` (unless one runs already)
    and returns its pid once it holds the state folder's lock. Raises RuntimeError (with the end of
    its log) if it exits or does not take the lock in time."""
    running = holder_pid(state_dir)
    if running is not None:
        return running
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = state_dir / UP_LOG
    command = [
        sys.executable,
        "-m",
        "mcpfleet.cli.main",
        "up",
        str(manifests),
        "--state-dir",
        str(state_dir),
        "--no-progress",
        *(extra_args or []),
    ]
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, start_new_session=True, close_fds=True
        )
    finally:
        os.close(fd)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"mcpfleet up exited with code {process.returncode}:\n{_tail(log_path)}")
        pid = holder_pid(state_dir)
        if pid is not None:
            return pid
        time.sleep(0.1)
    raise RuntimeError(f"mcpfleet up did not start within {timeout:.0f} s:\n{_tail(log_path)}")


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_for(state_dir: Path, kind: str, name: str, timeout: float) -> StoredObject | None:
    """The object once its status settled for its current generation (Running, Failed, …), or the
    last seen state of it (None if never seen) when `timeout` passes or `up` is gone."""
    deadline = time.monotonic() + timeout
    last: StoredObject | None = None
    while True:
        try:
            found = [o for o in read_objects(state_dir, kind) if o.name == name]
        except (sqlite3.Error, OSError, ValueError):  # the starting `up` is creating the state file
            found = []
        if found:
            last = found[0]
            status = last.status
            if status.get("phase") in SETTLED_PHASES and status.get("observedGeneration") == last.generation:
                return last
        if time.monotonic() >= deadline or holder_pid(state_dir) is None:
            return last
        time.sleep(0.25)
