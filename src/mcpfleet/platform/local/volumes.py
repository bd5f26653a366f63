"""The local twin of a pod's configMap / secret / emptyDir volumes: files in the workload's config folder.

A plan's `VolumeFiles` (MCPRegistry `spec.volumes` with configYAML) become
`<config dir>/volumes/<volume>/<path>`. ConfigMap keys are read from `STATE/configmaps/<name>/<key>`
(the local ConfigMap source: there is no API server); Secret keys from the local Secret source
(`$MCPFLEET_SECRET_<NAME>_<KEY>` or `STATE/secrets/<name>/<key>`), written mode 0600. Without
`items`, every file in the source folder is a key (a variable cannot be listed: name the items
then). Every path goes through `safe_join`: a key or item path cannot write outside the folder.
Files and volumes that are no longer wanted are removed; changed files are replaced atomically, as a
kubelet updates a mounted volume. A PersistentVolumeClaim volume is a link to the claim's folder
`STATE/persistentvolumeclaims/<claim>/` (the user's data, read where it is).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from mcpfleet.platform.local.errors import LocalPlatformError
from mcpfleet.platform.local.paths import PathEscapeError, safe_join, write_file
from mcpfleet.reconcile.model import LOCAL_VOLUME_DIR, VolumeFiles

MAX_KEYS = 100
MAX_KEY_BYTES = 1024 * 1024


class VolumeError(LocalPlatformError):
    """A volume cannot be written; the message names the volume and the missing key."""


def _listed(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    keys = sorted(p.name for p in folder.iterdir() if p.is_file() and not p.is_symlink())
    return keys[:MAX_KEYS]


def _contents(
    volume: VolumeFiles, state_dir: Path, secret: Callable[[str, str], str]
) -> list[tuple[str, str, int]]:
    """(relative path, content, mode) of every file of the volume."""
    if volume.config_map is None and volume.secret is None:
        return []  # an emptyDir: an empty folder
    kind, name = ("configMap", volume.config_map) if volume.config_map else ("secret", volume.secret)
    assert name is not None
    folder = safe_join(state_dir, "configmaps" if kind == "configMap" else "secrets", name)
    items = volume.items if volume.items is not None else tuple((k, k) for k in _listed(folder))
    if not items and not volume.optional:
        raise VolumeError(
            f"volume {volume.volume}: {kind} {name} has no keys locally; write {folder}/<key>"
            + (" (or list the volume's items)" if kind == "secret" else "")
        )
    out: list[tuple[str, str, int]] = []
    for key, path in items:
        try:
            if kind == "secret":
                content = secret(name, key)
            else:
                source = safe_join(folder, key)
                if source.stat().st_size > MAX_KEY_BYTES:
                    raise VolumeError(
                        f"volume {volume.volume}: {source} is larger than {MAX_KEY_BYTES} bytes"
                    )
                content = source.read_text()
        except (OSError, ValueError) as exc:
            if volume.optional:
                continue
            raise VolumeError(
                f"volume {volume.volume}: {kind} {name} key {key}: not found locally ({exc})"
            ) from None
        except Exception as exc:  # the secret reader's own error names the variable and file
            if volume.optional:
                continue
            raise VolumeError(f"volume {volume.volume}: {exc}") from None
        out.append((path, content, 0o600 if kind == "secret" else 0o644))
    return out


CLAIMS_DIR = "persistentvolumeclaims"
"""`STATE/persistentvolumeclaims/<claim>/`: the local twin of a PersistentVolumeClaim."""


def _link_claim(root: Path, state_dir: Path, volume: VolumeFiles) -> None:
    """`<config dir>/volumes/<volume>` -> `STATE/persistentvolumeclaims/<claim>/` (created empty if
    missing, as a fresh claim is). A link, not a copy: the claim is the user's live data."""
    assert volume.claim is not None
    claim = safe_join(state_dir, CLAIMS_DIR, volume.claim)
    claim.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The name must be one path component; not checked with safe_join, which follows the existing
    # link out of `root` (the link's target is checked above instead).
    if volume.volume in ("", ".", "..") or "/" in volume.volume or "\0" in volume.volume:
        raise PathEscapeError(f"{volume.volume!r} is not a single path component")
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    link = root.resolve() / volume.volume
    if link.is_symlink():
        if link.readlink() == claim:
            return
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    elif link.exists():
        link.unlink()
    link.symlink_to(claim, target_is_directory=True)


def write_volumes(
    config_dir: Path, state_dir: Path, volumes: tuple[VolumeFiles, ...], secret: Callable[[str, str], str]
) -> None:
    """Write the plan's volumes under `config_dir/volumes/`; remove what is no longer wanted."""
    try:
        root = safe_join(config_dir, LOCAL_VOLUME_DIR)
        if root.is_dir():
            wanted = {v.volume for v in volumes}
            for stale in root.iterdir():
                if stale.name in wanted:
                    continue
                if stale.is_dir() and not stale.is_symlink():
                    shutil.rmtree(stale)
                else:
                    stale.unlink(missing_ok=True)
        for volume in volumes:
            if volume.claim is not None:
                _link_claim(root, state_dir, volume)
                continue
            target = safe_join(root, volume.volume)
            files = _contents(volume, state_dir, secret)
            target.mkdir(mode=0o700, parents=True, exist_ok=True)
            written: set[Path] = set()
            for relative, content, mode in files:
                path = safe_join(target, relative)
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                written.add(path)
                if not path.is_symlink() and path.is_file() and path.read_text() == content:
                    continue
                write_file(path, content, mode)
            for old in [p for p in target.rglob("*") if p.is_file() or p.is_symlink()]:
                if old not in written:
                    old.unlink(missing_ok=True)
    except PathEscapeError as exc:
        raise VolumeError(f"refused to write a volume outside the state dir: {exc}") from exc
