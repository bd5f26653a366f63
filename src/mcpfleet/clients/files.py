"""Reading and writing an AI client's configuration file without ever clobbering it.

A file we cannot read safely is refused with a message naming it, and left as it was: a symlink
(its target may be anywhere; we would write through it or replace it), anything but a regular
file (a FIFO would block the read), more than `MAX_BYTES`, or not UTF-8. A write goes to a
temporary file in the same folder, gets the original's mode (0600 for a new file: it may hold a
token), is flushed to disk and renamed over the original, so a reader sees the old file or the new
one, never half of one. Before the first change mcpfleet makes to a file, the original is copied
to `FILE.mcpfleet-backup` (never overwritten afterwards: it keeps the file as it was before
mcpfleet). A file that changed between our read and our write is not replaced.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

MAX_BYTES = 4 * 1024 * 1024
BACKUP_SUFFIX = ".mcpfleet-backup"
NEW_FILE_MODE = 0o600


class ConfigFileError(ValueError):
    """A client file that mcpfleet will not touch; the message names the file and the problem."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}; left unchanged")
        self.path, self.problem = path, problem


def read(path: Path) -> str | None:
    """The file's text; None when it does not exist. Refuses symlinks, non-files, huge files."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigFileError(path, f"cannot be read ({exc.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        raise ConfigFileError(
            path,
            "is a symbolic link; mcpfleet does not edit through links (edit the target, or replace the link with a file)",
        )
    if not stat.S_ISREG(info.st_mode):
        raise ConfigFileError(path, "is not a regular file")
    if info.st_size > MAX_BYTES:
        raise ConfigFileError(path, f"is {info.st_size} bytes, more than the {MAX_BYTES} mcpfleet edits")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigFileError(path, f"cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ConfigFileError(path, f"is more than the {MAX_BYTES} bytes mcpfleet edits")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(path, f"is not UTF-8 text (byte {exc.start})") from None


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".mcpfleet-tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write(path: Path, before: str | None, after: str) -> Path | None:
    """Replaces `path` (last read as `before`) with `after`; the backup written, if one was."""
    current = read(path)
    if current != before:
        raise ConfigFileError(path, "changed while mcpfleet was editing it; run the command again")
    try:
        return _replace(path, before, after)
    except OSError as exc:
        raise ConfigFileError(path, f"cannot be written ({exc.strerror or exc})") from None


def _replace(path: Path, before: str | None, after: str) -> Path | None:
    backup: Path | None = None
    if before is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = NEW_FILE_MODE
    else:
        mode = stat.S_IMODE(path.lstat().st_mode)
        candidate = path.with_name(path.name + BACKUP_SUFFIX)
        if not os.path.lexists(candidate):
            _atomic_write(candidate, before.encode("utf-8"), mode)
            backup = candidate
    _atomic_write(path, after.encode("utf-8"), mode)
    return backup
