"""OCI images without an image registry or a Docker engine: pack a directory with umoci, import with ctr.

Owns: turning a root filesystem directory (plus entrypoint, user, env) into an OCI archive whose
index names the image, and importing such an archive into the real node's containerd (`k8s.io`
namespace, where the kubelet looks). Image names are `localhost/<name>:<content hash>`: a tag that is
not `latest` makes Kubernetes' default pull policy IfNotPresent, so a pod uses the imported image and
never tries a registry.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path


class ImageError(RuntimeError):
    """Packing or importing an image failed; the message names the step and the tool's output."""


def _run(args: Sequence[str], step: str, **kw: object) -> str:
    proc = subprocess.run(list(args), capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise ImageError(f"{step} failed (exit {proc.returncode}): {' '.join(args)}\n{proc.stderr[-3000:]}")
    out: str = proc.stdout
    return out


def require_tools(names: Iterable[str]) -> None:
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        raise ImageError(
            f"missing tools: {', '.join(missing)} (Debian: apt-get install umoci containerd debootstrap)"
        )


def tree_digest(root: Path, extra: str = "") -> str:
    """A content hash of a directory tree (paths, modes, symlink targets, file bytes): the cache key."""
    h = hashlib.sha256(extra.encode())
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if "__pycache__" in path.parts or path.suffix == ".pyc":
            continue  # written by every import: not content
        st = path.lstat()
        h.update(f"{rel}\0{st.st_mode:o}\0".encode())
        if path.is_symlink():
            h.update(str(path.readlink()).encode())
        elif path.is_file():
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def pack_rootfs(
    rootfs: Path,
    out_archive: Path,
    ref: str,
    *,
    entrypoint: Sequence[str],
    cmd: Sequence[str] = (),
    user: str = "0",
    env: Mapping[str, str] | None = None,
    workdir: str = "/",
) -> Path:
    """Packs `rootfs` as a one-layer OCI image named `ref` into the tar archive `out_archive`."""
    require_tools(["umoci"])
    work = out_archive.with_suffix(".layout")
    shutil.rmtree(work, ignore_errors=True)
    tag = ref.rsplit(":", 1)[1]
    _run(["umoci", "init", "--layout", str(work)], "umoci init")
    _run(["umoci", "new", "--image", f"{work}:{tag}"], "umoci new")
    # `insert` adds the directory as one layer at / without an unpack/repack round trip.
    _run(["umoci", "insert", "--image", f"{work}:{tag}", str(rootfs), "/"], "umoci insert")
    config = [
        "umoci",
        "config",
        "--image",
        f"{work}:{tag}",
        "--config.user",
        user,
        "--config.workingdir",
        workdir,
        "--clear=config.entrypoint",
        "--clear=config.cmd",
        "--clear=config.env",
    ]
    for part in entrypoint:
        config += ["--config.entrypoint", part]
    for part in cmd:
        config += ["--config.cmd", part]
    for k, v in (env or {}).items():
        config += ["--config.env", f"{k}={v}"]
    _run(config, "umoci config")
    _name_index(work, tag, ref)
    tmp = out_archive.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:
        for child in sorted(work.iterdir()):
            tar.add(child, arcname=child.name)
    tmp.replace(out_archive)
    shutil.rmtree(work, ignore_errors=True)
    return out_archive


def _name_index(layout: Path, tag: str, ref: str) -> None:
    """Keeps only `tag` in index.json and names it with the full reference (what ctr import reads)."""
    import json

    index_path = layout / "index.json"
    index = json.loads(index_path.read_text())
    manifests = [
        m
        for m in index.get("manifests", [])
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag
    ]
    for m in manifests:
        m["annotations"]["org.opencontainers.image.ref.name"] = ref
        m["annotations"]["io.containerd.image.name"] = ref
    index["manifests"] = manifests
    index_path.write_text(json.dumps(index))


def import_archive(archive: Path, containerd_address: str) -> str:
    """Imports an OCI archive into containerd's `k8s.io` namespace; returns ctr's output."""
    require_tools(["ctr"])
    return _run(
        ["ctr", "--address", containerd_address, "-n", "k8s.io", "images", "import", str(archive)],
        "ctr images import",
    )


def image_present(ref: str, containerd_address: str) -> bool:
    proc = subprocess.run(
        ["ctr", "--address", containerd_address, "-n", "k8s.io", "images", "ls", "-q"],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode == 0 and ref in proc.stdout.split()
