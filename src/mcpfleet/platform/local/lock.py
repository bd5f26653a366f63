"""The one-`up`-per-state-dir lock: an OS file lock held for the life of the `up` process.

A row in the state ("pid of up") cannot be a lock: checking it and setting it are two steps, and a
refused second `up` that cleans up on its way out would erase the first one's row. `flock` on
`STATE/up.lock` is atomic, is released by the kernel when the holder dies (even by SIGKILL), and
belongs to the open file description, so only the process that took it can release it. The pid
written into the file is information for `down` and error messages, never the lock itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from mcpfleet.platform.local.errors import LocalPlatformError

LOCK_FILENAME = "up.lock"


class LockHeld(LocalPlatformError):
    """Another live process holds the lock; `pid` is what it wrote (None if unreadable)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        self.path = path
        self.pid = pid
        super().__init__(f"{path} is held by pid {pid if pid is not None else '?'}")


class UpLock:
    """`acquire()` or LockHeld; `release()` (only by the holder). The fd never leaks into children."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / LOCK_FILENAME
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a planted symlink must not make us create or truncate a file elsewhere.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockHeld(self.path, holder_pid(self.path.parent)) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock (a no-op unless this object holds it). The file stays: removing it would
        let a waiter lock a file that a third process then re-creates beside it."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the only descriptor releases the flock


def holder_pid(state_dir: Path) -> int | None:
    """The pid of the live `up` holding the lock of `state_dir`, else None.

    Tries the lock itself (shared, non-blocking): if it can be taken, nobody holds it and any pid
    in the file is stale. Never creates the file.
    """
    path = state_dir / LOCK_FILENAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 32).decode(errors="replace").strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
