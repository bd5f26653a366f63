"""A sandbox folder for hostile-input tests of `mcpfleet up`: bait files outside the state dir and a
snapshot of everything outside it, so a test can assert that nothing there changed."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

Entry = tuple[str, int, int, str]
"""(type, mode, mtime_ns, content digest or link target) of one path."""


def snapshot(root: Path, exclude: tuple[Path, ...] = ()) -> dict[str, Entry]:
    """Every path under `root` except the `exclude`d subtrees: type, mode, mtime and content.

    Symlinks are recorded as links (never followed), so a write through one shows up at its target
    if the target is inside `root`, and as a changed link otherwise.
    """
    skipped = {p.resolve() for p in exclude}
    entries: dict[str, Entry] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        here = Path(folder)
        dirs[:] = [d for d in dirs if (here / d).resolve() not in skipped or (here / d).is_symlink()]
        for name in [*dirs, *files]:
            path = here / name
            if path.resolve() in skipped and not path.is_symlink():
                continue
            info = path.lstat()
            relative = str(path.relative_to(root))
            if path.is_symlink():
                entries[relative] = ("link", info.st_mode, info.st_mtime_ns, os.readlink(path))
            elif path.is_dir():
                entries[relative] = ("dir", info.st_mode, info.st_mtime_ns, "")
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "special"
                entries[relative] = ("file", info.st_mode, info.st_mtime_ns, digest)
    return entries


def changes(before: dict[str, Entry], after: dict[str, Entry]) -> list[str]:
    """Human-readable differences between two snapshots (empty when nothing changed)."""
    found = [f"created {p}" for p in sorted(after.keys() - before.keys())]
    found += [f"removed {p}" for p in sorted(before.keys() - after.keys())]
    found += [f"changed {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return found


@dataclass(frozen=True)
class Sandbox:
    """root/manifests (input), root/state (the only place `up` may write), root/outside (bait)."""

    root: Path

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    def snapshot(self) -> dict[str, Entry]:
        """Everything but the state dir, the manifests (the test edits them) and `up`'s own output."""
        return snapshot(self.root, (self.state, self.manifests, self.root / "up.log"))


def make_sandbox(root: Path) -> Sandbox:
    """Bait laid where the known traversals would land: a secret a stale-secret clean-up would
    delete, a runconfig.json a render would overwrite, a file a symlinked manifest would read."""
    box = Sandbox(root)
    box.manifests.mkdir(parents=True, exist_ok=True)
    for name in ("upstream", "victim", "x"):
        secrets = box.outside / name / "secrets"
        secrets.mkdir(parents=True, exist_ok=True)
        (secrets / "keep-me").write_text("precious\n")
        (box.outside / name / "runconfig.json").write_text('{"mine": true}\n')
    (box.outside / "private.env").write_text("MCPFLEET_SECRET_DB_PASSWORD=hunter2\n")
    # A manifest a symlinked folder would bring in: it must never load.
    (box.outside / "evil.yaml").write_text(
        '{"apiVersion": "mcpfleet.dev/v1alpha1", "kind": "MCPGroup", "metadata": {"name": "from-outside"}, "spec": {}}\n'
    )
    return box
