"""Who owns this host's real node, and when that owner is gone (a stale marker).

Owns: reading and removing the marker a real node leaves on the host (the node bridge's alias names
the `realnode/` dir of the state dir that attached it; realnode.py sets it) and the rule that tells a
live owner from a stale one. One real node per host, so `up --real-node` of another state dir must
refuse while the owner lives and take over once it is gone; the bridge outlives its processes (a
killed `mcpfleet`, a restarted container, a cleared process table), so the marker alone proves nothing.

An owner is live while either holds:
- one of its real node's processes runs: the pid of its pid file exists with the same kernel start
  time (processes.is_running), so a pid reused after a restart is not taken for it;
- a process holds its state dir's lock (DevCluster.lock): an `up` or `down` of it is under way, maybe
  between creating the bridge and starting the first process.
"""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mcpfleet.devcluster.processes import ProcessDir, is_running

LOCK_FILE = ".lock"
"""The state dir's lock file (DevCluster.lock)."""


@dataclass(frozen=True)
class BridgeMarker:
    """The node bridge and its alias: the `realnode/` dir of the state dir that attached it."""

    bridge: str
    sys_dir: Path = Path("/sys/class/net")

    @property
    def alias_file(self) -> Path:
        return self.sys_dir / self.bridge / "ifalias"

    def owner(self) -> Path | None:
        """The owner's realnode dir, or None when there is no bridge or it carries no alias."""
        try:
            alias = self.alias_file.read_text().strip()
        except OSError:
            return None
        return Path(alias) if alias else None

    def remove(self) -> None:
        """Deletes the bridge (its alias goes with it); an address or route on it goes too."""
        proc = subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, text=True, check=False)
        if proc.returncode != 0 and self.alias_file.exists():
            raise OSError(f"ip link del {self.bridge} failed: {proc.stderr.strip()}")


def _live_processes(state_dir: Path, names: Iterable[str]) -> list[str]:
    procs = ProcessDir(state_dir)
    out = []
    for name in names:
        rec = procs.read(name)
        if rec is not None and is_running(rec):
            out.append(f"{name} (pid {rec.pid})")
    return out


@contextlib.contextmanager
def hold_if_stale(state_dir: Path, process_names: Iterable[str]) -> Iterator[list[str]]:
    """Yields what still lives of the real node of `state_dir` (its processes, a lock holder).

    An empty list means stale: the state dir's lock is then held (without waiting for it) until the
    block ends, so its own `up` cannot start while the caller takes the host over.
    """
    live = _live_processes(state_dir, process_names)
    lock_path = state_dir / LOCK_FILE
    if live or not lock_path.is_file():
        yield live
        return
    with open(lock_path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield [f"a process holding {lock_path} (an `up` or `down` of it under way)"]
            return
        try:
            # Checked again under the lock: a process may have started between the first look and it.
            yield _live_processes(state_dir, process_names)
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
