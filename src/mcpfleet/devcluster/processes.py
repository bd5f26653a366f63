"""Starting and stopping the dev cluster's daemons by pid, with pid files and log files in the state dir.

Owns: `<state>/run/<name>.pid` (JSON: pid, process start time, argv) and `<state>/logs/<name>.log`.
A daemon is started in its own session so it outlives the `mcpfleet` command that launched it and
never receives the terminal's Ctrl-C. It is identified by pid *and* kernel start time, so a recycled
pid is never mistaken for ours and never signalled.

Plain `subprocess.Popen` (not asyncio subprocesses) on purpose: asyncio kills a child whose transport
is closed, and these children must keep running after the event loop that started them is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessRecord:
    """What a pid file holds."""

    name: str
    pid: int
    start_time: int
    argv: tuple[str, ...]
    log: str


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) from /proc, or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces or ')': fields after the last ')' are fixed.
    rest = raw.rsplit(")", 1)[1].split()
    return rest[0], int(rest[19])


def _reap(pid: int) -> None:
    """Collects the exit status if the process is our own child (else it would linger as a zombie)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


class ProcessDir:
    """Pid and log files of one state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.run_dir = state_dir / "run"
        self.log_dir = state_dir / "logs"

    def pid_file(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def start(
        self, name: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> ProcessRecord:
        """Launches argv detached, stdout+stderr appended to the component's log; writes the pid file."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_file(name)
        with open(log_path, "ab") as log:
            log.write(f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting {name}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
            )
        stat = _proc_stat(proc.pid)
        record = ProcessRecord(name, proc.pid, stat[1] if stat else 0, tuple(argv), str(log_path))
        tmp = self.pid_file(name).with_suffix(".tmp")
        tmp.write_text(json.dumps(record.__dict__ | {"argv": list(record.argv)}))
        tmp.replace(self.pid_file(name))
        return record

    def read(self, name: str) -> ProcessRecord | None:
        try:
            data = json.loads(self.pid_file(name).read_text())
        except (FileNotFoundError, ValueError):
            return None
        return ProcessRecord(
            data["name"], int(data["pid"]), int(data["start_time"]), tuple(data["argv"]), data["log"]
        )

    def records(self) -> list[ProcessRecord]:
        if not self.run_dir.is_dir():
            return []
        out = [self.read(p.stem) for p in sorted(self.run_dir.glob("*.pid"))]
        return [r for r in out if r is not None]

    def log_tail(self, name: str, lines: int = 30) -> str:
        """The last lines of a component's log (what to show when it failed)."""
        try:
            with open(self.log_file(name), "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 64 * 1024))
                data = f.read().decode(errors="replace")
        except FileNotFoundError:
            return f"(no log file {self.log_file(name)})"
        return "\n".join(data.splitlines()[-lines:])


def is_running(record: ProcessRecord) -> bool:
    """True if the recorded process still exists (same pid and same start time) and is not a zombie."""
    stat = _proc_stat(record.pid)
    if stat is None:
        return False
    state, start = stat
    if record.start_time and start != record.start_time:
        return False
    if state in ("Z", "X"):
        _reap(record.pid)
        return False
    return True


async def stop(record: ProcessRecord, grace: float = 10.0) -> bool:
    """SIGTERM, then SIGKILL after `grace` seconds. Returns True if the process was running."""
    if not is_running(record):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not is_running(record):
            return True
        await asyncio.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signal.SIGKILL)
    for _ in range(100):
        if not is_running(record):
            break
        await asyncio.sleep(0.05)
    return True
