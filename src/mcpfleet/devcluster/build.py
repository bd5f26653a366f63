"""Builds the dev cluster's binaries from the Go module proxy with the machine's Go.

Owns: the wrapper modules (their go.mod/main.go rendering), the `go build` invocations with
progress output, the kwok stage file, and the stamp files that make a second build a no-op.

Why wrapper modules: `go install k8s.io/kubernetes/cmd/...@vX` fails because Kubernetes' own go.mod
requires its staging modules at v0.0.0 and replaces them with local paths. Our wrapper requires
k8s.io/kubernetes and replaces every staging module (read from Kubernetes' own go.mod, so the list is
always right for the chosen version) with its published v0.Y.Z. etcd gets a second, tiny wrapper whose
main.go calls etcdmain.Main. Everything (module cache, build cache, binaries) lives under the user
cache directory, outside any work tree, keyed by version, so sessions and CI reuse it.

Helm (for the charts under deploy/helm/) needs no wrapper: its go.mod has no replace directives, so
`go install helm.sh/helm/v4/cmd/helm@vX` builds it, with the version stamped as Helm's Makefile does.
The official MCP registry's publisher CLI (`mcp-publisher`, for the registry's login and publish tests)
is built the same way from its module, `go install github.com/modelcontextprotocol/registry/cmd/publisher@vX`,
and named `mcp-publisher` as the registry's Makefile names it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

KUBE_VERSION = "v1.36.3"
KWOK_VERSION = "v0.8.0"
ETCD_VERSION = "v3.6.16"
HELM_VERSION = "v4.3.1"
HELM_MODULE = "helm.sh/helm/v4"
MCP_PUBLISHER_VERSION = "v1.8.9"
"""The official registry release the registry's paired comparison was recorded against (issue 32)."""
MCP_REGISTRY_MODULE = "github.com/modelcontextprotocol/registry"

WRAPPER_MODULE = "mcpfleet.dev/devcluster/kube"
ETCD_WRAPPER_MODULE = "mcpfleet.dev/devcluster/etcd"

# Import paths built into the kube bin dir; the binary name is the last path element.
KUBE_PACKAGES: tuple[str, ...] = (
    "k8s.io/kubernetes/cmd/kube-apiserver",
    "k8s.io/kubernetes/cmd/kube-controller-manager",
    "k8s.io/kubernetes/cmd/kube-scheduler",
    "k8s.io/kubernetes/cmd/kubectl",
    "sigs.k8s.io/kwok/cmd/kwok",
)

# kwok v0.8.0 applies no stages unless given some ("no stages found"): we concatenate its own "fast"
# node/pod stages plus lease heartbeats from the module source (never copied into this project).
KWOK_STAGE_DIRS: tuple[str, ...] = ("node/fast", "node/heartbeat-with-lease", "pod/fast")
KWOK_STAGES_FILE = "kwok-stages.yaml"
STAMP_FILE = ".mcpfleet-build-stamp.json"

Progress = Callable[[str], None]


class BuildError(RuntimeError):
    """A step of the binary build failed; the message names the step and shows the tool's output."""


def default_cache_root() -> Path:
    """The cache root: $MCPFLEET_CACHE_DIR, else $XDG_CACHE_HOME/mcpfleet, else ~/.cache/mcpfleet."""
    explicit = os.environ.get("MCPFLEET_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "mcpfleet"


@dataclass(frozen=True)
class BuildLayout:
    """Where sources, caches and binaries live for one cache root and versions."""

    cache_root: Path
    kube_version: str = KUBE_VERSION
    kwok_version: str = KWOK_VERSION
    etcd_version: str = ETCD_VERSION
    helm_version: str = HELM_VERSION
    mcp_publisher_version: str = MCP_PUBLISHER_VERSION

    @property
    def gomodcache(self) -> Path:
        return self.cache_root / "go" / "mod"

    @property
    def gocache(self) -> Path:
        return self.cache_root / "go" / "build"

    @property
    def kube_dir(self) -> Path:
        return self.cache_root / "k8s" / self.kube_version

    @property
    def kube_src(self) -> Path:
        return self.kube_dir / "src"

    @property
    def kube_bin(self) -> Path:
        return self.kube_dir / "bin"

    @property
    def etcd_dir(self) -> Path:
        return self.cache_root / "k8s" / f"etcd-{self.etcd_version}"

    @property
    def etcd_src(self) -> Path:
        return self.etcd_dir / "src"

    @property
    def etcd_bin(self) -> Path:
        return self.etcd_dir / "bin"

    @property
    def helm_bin(self) -> Path:
        return self.cache_root / "helm" / self.helm_version / "bin"

    @property
    def mcp_publisher_bin(self) -> Path:
        return self.cache_root / "mcp-publisher" / self.mcp_publisher_version / "bin"

    def binary(self, name: str) -> Path:
        """Path of one built binary: etcd, kube-apiserver, ..., kubectl, kwok, helm, mcp-publisher."""
        if name == "etcd":
            return self.etcd_bin / "etcd"
        if name == "helm":
            return self.helm_bin / "helm"
        if name == "mcp-publisher":
            return self.mcp_publisher_bin / "mcp-publisher"
        return self.kube_bin / name

    @property
    def kwok_stages(self) -> Path:
        return self.kube_bin / KWOK_STAGES_FILE


def go_env(layout: BuildLayout, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for every go invocation: caches outside the work tree, static, local toolchain."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "GOMODCACHE": str(layout.gomodcache),
            "GOCACHE": str(layout.gocache),
            # Never let go download another toolchain: the machine's Go is the one we build with.
            "GOTOOLCHAIN": "local",
            "GOFLAGS": "-mod=mod",
            "CGO_ENABLED": "0",
        }
    )
    return env


def kube_ldflags(kube_version: str) -> str:
    """Stamp the version into the binaries, or /version reports v0.0.0-master."""
    m = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)", kube_version)
    if m is None:
        raise BuildError(f"kube_version: expected vX.Y.Z, got {kube_version!r}")
    major, minor = m.group(1), m.group(2)
    return (
        f"-s -w -X k8s.io/component-base/version.gitVersion={kube_version}"
        f" -X k8s.io/component-base/version.gitMajor={major}"
        f" -X k8s.io/component-base/version.gitMinor={minor}"
        f" -X k8s.io/client-go/pkg/version.gitVersion={kube_version}"
    )


@dataclass(frozen=True)
class KubeModInfo:
    """What the wrapper needs from Kubernetes' own go.mod."""

    go_line: str
    godebug_lines: tuple[str, ...]
    staging_modules: tuple[str, ...]


_REPLACE_STAGING = re.compile(r"^\s*(k8s\.io/[A-Za-z0-9._-]+)\s+=>\s+\./staging/src/\1\s*$")


def parse_kube_gomod(text: str) -> KubeModInfo:
    """Reads the go line, godebug lines and staging replace targets from Kubernetes' go.mod."""
    go_line = ""
    godebug: list[str] = []
    staging: list[str] = []
    in_replace = False
    for raw in text.splitlines():
        # Module paths never contain "//", so this only drops comments.
        stripped = raw.split("//", 1)[0].strip()
        if stripped.startswith("go ") and not go_line:
            go_line = stripped
        elif stripped.startswith("godebug "):
            godebug.append(stripped)
        elif stripped == "replace (":
            in_replace = True
        elif in_replace and stripped == ")":
            in_replace = False
        elif in_replace or stripped.startswith("replace "):
            m = _REPLACE_STAGING.match(stripped.removeprefix("replace "))
            if m:
                staging.append(m.group(1))
    if not go_line:
        raise BuildError("k8s.io/kubernetes go.mod has no go line")
    if not staging:
        raise BuildError("k8s.io/kubernetes go.mod has no ./staging replace entries")
    return KubeModInfo(go_line, tuple(godebug), tuple(sorted(staging)))


def staging_version(kube_version: str) -> str:
    """Kubernetes vX.Y.Z publishes its staging modules as v0.Y.Z."""
    parts = kube_version.lstrip("v").split(".")
    return f"v0.{parts[1]}.{parts[2]}"


def render_kube_gomod(info: KubeModInfo, kube_version: str, kwok_version: str) -> str:
    """The wrapper go.mod before `go mod tidy` (one statement a line, like `go mod edit` writes)."""
    sv = staging_version(kube_version)
    out = [f"module {WRAPPER_MODULE}", "", info.go_line, ""]
    for g in info.godebug_lines:
        out += [g, ""]
    out += [f"require k8s.io/kubernetes {kube_version}", "", f"require sigs.k8s.io/kwok {kwok_version}", ""]
    for mod in info.staging_modules:
        out += [f"replace {mod} => {mod} {sv}", ""]
    for pkg in KUBE_PACKAGES:
        out += [f"tool {pkg}", ""]
    return "\n".join(out[:-1]) + "\n"


ETCD_MAIN_GO = """\
// Command etcd: wrapper built by `mcpfleet dev-cluster build` (etcd cannot be `go install`ed:
// its main module uses replace directives).
package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
\tetcdmain.Main(os.Args)
}
"""


def render_etcd_gomod(go_line: str, etcd_version: str) -> str:
    return f"module {ETCD_WRAPPER_MODULE}\n\n{go_line}\n\nrequire go.etcd.io/etcd/server/v3 {etcd_version}\n"


async def _run(
    args: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    step: str,
    progress: Progress,
    line_label: Callable[[str], str | None] | None = None,
) -> str:
    """Runs a go command, reporting progress every 15 s; raises BuildError with its output tail."""
    proc = await asyncio.create_subprocess_exec(
        *args,
        cwd=cwd,
        env=dict(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    counted = 0
    started = time.monotonic()

    async def report() -> None:
        # On a timer, not per output line: module downloads and links print nothing for minutes.
        while True:
            await asyncio.sleep(15)
            progress(f"  {step}: {counted} packages so far, {time.monotonic() - started:.0f}s elapsed")

    reporter = asyncio.create_task(report())
    try:
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                break
            line = raw.decode(errors="replace").rstrip()
            lines.append(line)
            if line_label is not None and line_label(line) is not None:
                counted += 1
        rc = await proc.wait()
    finally:
        reporter.cancel()
    if rc != 0:
        tail = "\n".join(lines[-40:])
        raise BuildError(f"{step} failed (exit {rc}): {' '.join(args)}\n{tail}")
    return "\n".join(lines)


def _go_binary() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError("the `go` command is not on PATH; install Go >= 1.26 to build the dev cluster")
    return go


def _stamp(layout: BuildLayout, which: str, gomod_in: str, build_args: list[str], go_version: str) -> str:
    digest = hashlib.sha256(gomod_in.encode()).hexdigest()
    return json.dumps(
        {"what": which, "gomod_sha256": digest, "build": build_args, "go": go_version}, indent=2
    )


def _is_built(bin_dir: Path, names: list[str], stamp: str) -> bool:
    stamp_path = bin_dir / STAMP_FILE
    if not stamp_path.is_file() or stamp_path.read_text() != stamp:
        return False
    return all((bin_dir / n).is_file() for n in names)


def binaries_present(layout: BuildLayout) -> bool:
    """True when every binary, the kwok stages and both stamp files exist (no version check)."""
    names = ["etcd", *(p.rsplit("/", 1)[1] for p in KUBE_PACKAGES)]
    return (
        all(layout.binary(n).is_file() for n in names)
        and layout.kwok_stages.is_file()
        and (layout.kube_bin / STAMP_FILE).is_file()
        and (layout.etcd_bin / STAMP_FILE).is_file()
    )


async def _go_version(go: str, env: Mapping[str, str]) -> str:
    proc = await asyncio.create_subprocess_exec(
        go, "env", "GOVERSION", env=dict(env), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    return out.decode().strip()


async def _download_kube_gomod(go: str, layout: BuildLayout, env: Mapping[str, str]) -> str:
    """Fetches (or finds in the module cache) Kubernetes' own go.mod text via `go mod download`."""
    layout.kube_dir.mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        go,
        "mod",
        "download",
        "-json",
        f"k8s.io/kubernetes@{layout.kube_version}",
        cwd=layout.kube_dir,
        env=dict(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise BuildError(f"go mod download k8s.io/kubernetes@{layout.kube_version} failed: {err.decode()}")
    info = json.loads(out)
    if info.get("Error"):
        raise BuildError(f"go mod download k8s.io/kubernetes: {info['Error']}")
    return await asyncio.to_thread(Path(info["GoMod"]).read_text)


def _compiled_package(line: str) -> str | None:
    # `go build -v` prints one import path per compiled package; skip go's own messages.
    return None if line.startswith(("go:", "#")) or not line else line


def _module_is_tidy(src: Path, gomod_in: str) -> bool:
    marker = src / "go.mod.in"
    return marker.is_file() and marker.read_text() == gomod_in and (src / "go.sum").is_file()


def _write_files(src: Path, files: dict[str, str]) -> None:
    src.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (src / name).write_text(content)


async def _prepare_module(
    src: Path, files: dict[str, str], go: str, env: Mapping[str, str], step: str, progress: Progress
) -> None:
    """Writes the wrapper (go.mod.in + go.mod + extra files) and tidies it unless already tidied."""
    gomod_in = files["go.mod"]
    if _module_is_tidy(src, gomod_in):
        return
    _write_files(src, files)
    progress(f"{step}: go mod tidy (downloads modules the first time)")
    await _run([go, "mod", "tidy"], cwd=src, env=env, step=f"{step} go mod tidy", progress=progress)
    # Written last: its presence means go.mod/go.sum are the tidied form of exactly this input.
    _write_files(src, {"go.mod.in": gomod_in})


def _write_kwok_stages(layout: BuildLayout) -> None:
    """Concatenates kwok's own stage YAMLs (listed by each kustomization) into one --config file."""
    root = layout.gomodcache / f"sigs.k8s.io/kwok@{layout.kwok_version}" / "kustomize" / "stage"
    docs: list[str] = []
    for d in KWOK_STAGE_DIRS:
        kust = root / d / "kustomization.yaml"
        if not kust.is_file():
            raise BuildError(f"kwok stage dir missing from module cache: {kust}")
        resources: list[str] = []
        in_resources = False
        for line in kust.read_text().splitlines():
            if line.startswith("resources:"):
                in_resources = True
            elif in_resources and line.startswith("- "):
                resources.append(line[2:].strip())
            elif in_resources and line and not line.startswith(" "):
                in_resources = False
        for r in resources:
            docs.append((root / d / r).read_text().strip())
    tmp = layout.kwok_stages.with_suffix(".tmp")
    tmp.write_text("\n---\n".join(docs) + "\n")
    tmp.replace(layout.kwok_stages)


async def build_etcd(
    layout: BuildLayout, progress: Progress, jobs: int | None = None, go_line: str = "go 1.26.0"
) -> bool:
    """Builds etcd into layout.etcd_bin; returns False when the stamp says it is already built."""
    go = _go_binary()
    env = go_env(layout)
    gomod_in = render_etcd_gomod(go_line, layout.etcd_version)
    args = ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", "../bin/etcd", "."]
    stamp = _stamp(
        layout, f"etcd {layout.etcd_version}", gomod_in + ETCD_MAIN_GO, args, await _go_version(go, env)
    )
    if _is_built(layout.etcd_bin, ["etcd"], stamp):
        progress(f"etcd {layout.etcd_version}: already built ({layout.etcd_bin})")
        return False
    started = time.monotonic()
    await _prepare_module(
        layout.etcd_src, {"go.mod": gomod_in, "main.go": ETCD_MAIN_GO}, go, env, "etcd", progress
    )
    layout.etcd_bin.mkdir(parents=True, exist_ok=True)
    (layout.etcd_bin / STAMP_FILE).unlink(missing_ok=True)
    cmd = [go, "build", "-v", *(["-p", str(jobs)] if jobs else []), *args[2:]]
    progress(f"etcd {layout.etcd_version}: go build")
    await _run(
        cmd, cwd=layout.etcd_src, env=env, step="etcd build", progress=progress, line_label=_compiled_package
    )
    (layout.etcd_bin / STAMP_FILE).write_text(stamp)
    progress(f"etcd {layout.etcd_version}: built in {time.monotonic() - started:.0f}s")
    return True


async def build_kube(layout: BuildLayout, progress: Progress, jobs: int | None = None) -> bool:
    """Builds apiserver, controller-manager, scheduler, kubectl and kwok; False when already built."""
    go = _go_binary()
    env = go_env(layout)
    info = parse_kube_gomod(await _download_kube_gomod(go, layout, env))
    gomod_in = render_kube_gomod(info, layout.kube_version, layout.kwok_version)
    args = [
        "go",
        "build",
        "-trimpath",
        "-ldflags",
        kube_ldflags(layout.kube_version),
        "-o",
        "../bin/",
        *KUBE_PACKAGES,
    ]
    names = [p.rsplit("/", 1)[1] for p in KUBE_PACKAGES]
    stamp = _stamp(
        layout,
        f"kube {layout.kube_version} kwok {layout.kwok_version}",
        gomod_in,
        args,
        await _go_version(go, env),
    )
    if _is_built(layout.kube_bin, names, stamp) and layout.kwok_stages.is_file():
        progress(f"kubernetes {layout.kube_version}: already built ({layout.kube_bin})")
        return False
    started = time.monotonic()
    await _prepare_module(layout.kube_src, {"go.mod": gomod_in}, go, env, "kubernetes", progress)
    layout.kube_bin.mkdir(parents=True, exist_ok=True)
    (layout.kube_bin / STAMP_FILE).unlink(missing_ok=True)
    cmd = [go, "build", "-v", *(["-p", str(jobs)] if jobs else []), *args[2:]]
    progress(f"kubernetes {layout.kube_version}: go build {' '.join(names)} (minutes on a cold cache)")
    await _run(
        cmd,
        cwd=layout.kube_src,
        env=env,
        step="kubernetes build",
        progress=progress,
        line_label=_compiled_package,
    )
    _write_kwok_stages(layout)
    (layout.kube_bin / STAMP_FILE).write_text(stamp)
    progress(f"kubernetes {layout.kube_version}: built in {time.monotonic() - started:.0f}s")
    return True


def _open_lock(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)


def helm_ldflags(helm_version: str) -> str:
    """As Helm's Makefile: without the version, `helm version` says only the minor (v4.3)."""
    return f"-s -w -X {HELM_MODULE}/internal/version.version={helm_version}"


def helm_present(layout: BuildLayout) -> bool:
    """True when the helm binary and its stamp exist (no version check)."""
    return layout.binary("helm").is_file() and (layout.helm_bin / STAMP_FILE).is_file()


async def build_helm(layout: BuildLayout, progress: Progress, jobs: int | None = None) -> bool:
    """Builds helm into layout.helm_bin; returns False when the stamp says it is already built.

    Callers hold the build lock (build_tools does): use that rather than calling this directly.
    """
    go = _go_binary()
    # `go install pkg@version` builds outside any module: -mod=mod would be refused there.
    env = {**go_env(layout), "GOFLAGS": "", "GOBIN": str(layout.helm_bin)}
    target = f"{HELM_MODULE}/cmd/helm@{layout.helm_version}"
    args = ["go", "install", "-trimpath", "-ldflags", helm_ldflags(layout.helm_version), target]
    stamp = _stamp(layout, f"helm {layout.helm_version}", target, args, await _go_version(go, env))
    if _is_built(layout.helm_bin, ["helm"], stamp):
        progress(f"helm {layout.helm_version}: already built ({layout.helm_bin})")
        return False
    started = time.monotonic()
    layout.helm_bin.mkdir(parents=True, exist_ok=True)
    (layout.helm_bin / STAMP_FILE).unlink(missing_ok=True)
    cmd = [go, "install", "-v", *(["-p", str(jobs)] if jobs else []), *args[2:]]
    progress(f"helm {layout.helm_version}: go install {target} (a few minutes on a cold cache)")
    # go install runs outside any module; the cache root is a harmless working directory.
    await _run(
        cmd,
        cwd=layout.cache_root,
        env=env,
        step="helm build",
        progress=progress,
        line_label=_compiled_package,
    )
    (layout.helm_bin / STAMP_FILE).write_text(stamp)
    progress(f"helm {layout.helm_version}: built in {time.monotonic() - started:.0f}s")
    return True


def mcp_publisher_present(layout: BuildLayout) -> bool:
    """True when the mcp-publisher binary and its stamp exist (no version check)."""
    return layout.binary("mcp-publisher").is_file() and (layout.mcp_publisher_bin / STAMP_FILE).is_file()


async def build_mcp_publisher(layout: BuildLayout, progress: Progress, jobs: int | None = None) -> bool:
    """Builds mcp-publisher into layout.mcp_publisher_bin; False when the stamp says it is built.

    Callers hold the build lock (build_tools does). `go install` names the binary after its package
    (`publisher`); it is renamed `mcp-publisher`, the name the registry's own Makefile gives it.
    """
    go = _go_binary()
    env = {**go_env(layout), "GOFLAGS": "", "GOBIN": str(layout.mcp_publisher_bin)}
    version = layout.mcp_publisher_version
    target = f"{MCP_REGISTRY_MODULE}/cmd/publisher@{version}"
    args = ["go", "install", "-trimpath", "-ldflags", f"-s -w -X main.Version={version}", target]
    stamp = _stamp(layout, f"mcp-publisher {version}", target, args, await _go_version(go, env))
    if _is_built(layout.mcp_publisher_bin, ["mcp-publisher"], stamp):
        progress(f"mcp-publisher {version}: already built ({layout.mcp_publisher_bin})")
        return False
    started = time.monotonic()
    layout.mcp_publisher_bin.mkdir(parents=True, exist_ok=True)
    (layout.mcp_publisher_bin / STAMP_FILE).unlink(missing_ok=True)
    cmd = [go, "install", "-v", *(["-p", str(jobs)] if jobs else []), *args[2:]]
    progress(f"mcp-publisher {version}: go install {target}")
    await _run(
        cmd,
        cwd=layout.cache_root,
        env=env,
        step="mcp-publisher build",
        progress=progress,
        line_label=_compiled_package,
    )
    os.replace(layout.mcp_publisher_bin / "publisher", layout.binary("mcp-publisher"))
    (layout.mcp_publisher_bin / STAMP_FILE).write_text(stamp)
    progress(f"mcp-publisher {version}: built in {time.monotonic() - started:.0f}s")
    return True


@contextlib.asynccontextmanager
async def build_lock(layout: BuildLayout, progress: Progress) -> AsyncIterator[None]:
    """The machine-wide build lock: one Go build at a time (each link needs ~2 GiB, and two
    concurrent kube builds would thrash 2 cores). A second holder waits, saying so."""
    lock_path = layout.cache_root / "k8s" / ".build.lock"
    fd = _open_lock(lock_path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"another build holds {lock_path}; waiting for it")
            await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


async def build_tools(
    layout: BuildLayout,
    progress: Progress,
    jobs: int | None = None,
    *,
    cluster: bool = True,
    helm: bool = False,
    mcp_publisher: bool = False,
) -> bool:
    """Builds, under the build lock, the cluster binaries and/or helm. True if anything was built.

    Sequential (each link needs ~2 GiB); the stamps make every part a no-op once built.
    """
    built = False
    async with build_lock(layout, progress):
        if cluster:
            built = await build_etcd(layout, progress, jobs) or built
            built = await build_kube(layout, progress, jobs) or built
        if helm:
            built = await build_helm(layout, progress, jobs) or built
        if mcp_publisher:
            built = await build_mcp_publisher(layout, progress, jobs) or built
    return built


async def build_all(layout: BuildLayout, progress: Progress, jobs: int | None = None) -> bool:
    """Builds etcd then Kubernetes (the dev cluster's binaries). True if anything was built."""
    return await build_tools(layout, progress, jobs)


async def ensure_helm(layout: BuildLayout, progress: Progress) -> Path:
    """The helm binary, built first (under the build lock) when missing; for the chart tests."""
    if not helm_present(layout):
        await build_tools(layout, progress, cluster=False, helm=True)
    return layout.binary("helm")


async def ensure_mcp_publisher(layout: BuildLayout, progress: Progress) -> Path:
    """The mcp-publisher binary, built first (under the build lock) when missing; for the registry's
    login and publish tests."""
    if not mcp_publisher_present(layout):
        await build_tools(layout, progress, cluster=False, mcp_publisher=True)
    return layout.binary("mcp-publisher")
