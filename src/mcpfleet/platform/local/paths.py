"""Paths the local platform builds inside its state folder, and the one check that keeps them there.

Every file `mcpfleet up` writes, reads as a secret or removes is named from manifest values
(kind, namespace, name, Secret name and key). The API models already refuse names that are not
DNS labels, but a path is only safe once it is *resolved*: a symlink planted inside the state
folder (`config/mcpserver/default -> /etc`) would otherwise carry a write or an `rmtree`
outside. `safe_join` is the single gate: it joins, resolves (following symlinks) and refuses any
result that is not inside the resolved root.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcpfleet.platform.local.errors import LocalPlatformError


class PathEscapeError(LocalPlatformError, ValueError):
    """A path built from manifest values would leave the state folder."""


def safe_join(root: Path, *parts: str) -> Path:
    """`root/part/...`, guaranteed to stay inside `root` after resolving `..` and symlinks.

    Each part must be one non-empty path component (no separator, not `.` or `..`, no NUL), so
    the caller's intent ("one folder per namespace") is checked, not only the outcome. The
    returned path is the resolved one: what is written is exactly what was checked. Parts that do
    not exist yet are fine (`resolve` keeps them); a symlink among them that exists is followed.
    """
    base = root.resolve()
    for part in parts:
        if (
            not part
            or part in (".", "..")
            or "\0" in part
            or os.sep in part
            or (os.altsep is not None and os.altsep in part)
        ):
            raise PathEscapeError(f"{part!r} is not a single path component (under {base})")
    try:
        candidate = base.joinpath(*parts).resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13)
        raise PathEscapeError(f"{base.joinpath(*parts)} cannot be resolved: {exc}") from exc
    if candidate != base and not candidate.is_relative_to(base):
        raise PathEscapeError(f"{base.joinpath(*parts)} resolves to {candidate}, outside {base}")
    return candidate


def write_file(path: Path, content: str, mode: int = 0o644) -> None:
    """Replace `path` with `content` atomically, never following a symlink planted at the temp name.

    `os.replace` renames over `path` itself (a symlink there is replaced, not followed); the temp file
    is created with O_EXCL | O_NOFOLLOW so a link waiting at `NAME.tmp` cannot redirect the write.
    The file is created with `mode` (0600 for secrets: never readable by others, not even briefly).
    """
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "w") as out:
        out.write(content)
    os.replace(tmp, path)


STATE_ENTRIES = ("state.db", "state.db-wal", "state.db-shm", "up.lock", "logs", "config", "data", "secrets")
"""What `up` creates at the top of its state dir."""


def check_state_dir(state_dir: Path) -> None:
    """Refuse a state dir whose own entries lead outside it (PathEscapeError).

    The state dir may come with the manifests (`.mcpfleet/` inside a cloned folder): a `state.db`
    linked to `~/.bashrc` would make SQLite write there before any other check runs.
    """
    for entry in STATE_ENTRIES:
        safe_join(state_dir, entry)


def file_signature(path: Path) -> tuple[int, int, int] | None:
    """Identity, size and modification time of a file (None: missing): changes on every rewrite,
    including an atomic replace. The cheap way to notice another writer's change (one `stat`)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
