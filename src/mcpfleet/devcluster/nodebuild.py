"""Builds the real node's binaries from the Go module proxy: kubelet, kube-proxy, CoreDNS and pause.

Owns: three more wrapper modules next to the control plane's (see build.py for why wrappers):
- `k8s/<version>/node-src`: requires k8s.io/kubernetes like the control-plane wrapper (same staging
  replaces, same ldflags) and builds `cmd/kubelet` and `cmd/kube-proxy`. A module of its own so that
  adding the node does not invalidate the control plane's stamp; the Go build cache is shared, so
  every package the two have in common is compiled once.
- `coredns-<version>/src`: a main.go that links CoreDNS with only the plugins the dev cluster uses
  (Service DNS for `*.svc.cluster.local`), not its ~60 default plugins.
- `pause/src`: a tiny static program, the sandbox ("pause") image's only file: it sleeps until
  SIGTERM/SIGINT and reaps children, which is all a pod sandbox needs.

Same conventions as build.py: caches under the user cache dir, stamp files make a second build a
no-op, one lock shared with the control-plane build (two Go links at once would not fit 2 cores).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from mcpfleet.devcluster.build import (
    STAMP_FILE,
    BuildLayout,
    Progress,
    _compiled_package,
    _download_kube_gomod,
    _go_binary,
    _go_version,
    _is_built,
    _prepare_module,
    _run,
    _stamp,
    _write_files,
    build_lock,
    go_env,
    kube_ldflags,
    parse_kube_gomod,
    staging_version,
)

COREDNS_VERSION = "v1.14.7"
NODE_WRAPPER_MODULE = "mcpfleet.dev/devcluster/node"
COREDNS_WRAPPER_MODULE = "mcpfleet.dev/devcluster/coredns"
PAUSE_MODULE = "mcpfleet.dev/devcluster/pause"

NODE_PACKAGES: tuple[str, ...] = ("k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy")

# CoreDNS plugins linked in, in CoreDNS's own execution order (plugin.cfg): a plugin's place in
# this list decides where it sits in the chain, so it must follow upstream's order.
COREDNS_PLUGINS: tuple[str, ...] = ("bind", "ready", "health", "errors", "cache", "kubernetes")

COREDNS_MAIN_GO = (
    """\
// Command coredns: CoreDNS with a minimal plugin set, built by `mcpfleet dev-cluster build --real-node`.
package main

import (
\t"github.com/coredns/coredns/core/dnsserver"
\t"github.com/coredns/coredns/coremain"
"""
    + "".join(f'\t_ "github.com/coredns/coredns/plugin/{p}"\n' for p in COREDNS_PLUGINS)
    + """)

func init() {
\tdnsserver.Directives = []string{"""
    + ", ".join(f'"{p}"' for p in COREDNS_PLUGINS)
    + """}
}

func main() {
\tcoremain.Run()
}
"""
)

PAUSE_MAIN_GO = """\
// Command pause: the pod sandbox process. Sleeps until SIGTERM or SIGINT; as PID 1 of the pod it also
// reaps any orphaned child.
package main

import (
\t"os"
\t"os/signal"
\t"syscall"
)

func main() {
\tsigs := make(chan os.Signal, 8)
\tsignal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
\tfor s := range sigs {
\t\tif s == syscall.SIGCHLD {
\t\t\tfor {
\t\t\t\tvar status syscall.WaitStatus
\t\t\t\tpid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
\t\t\t\tif pid <= 0 || err != nil {
\t\t\t\t\tbreak
\t\t\t\t}
\t\t\t}
\t\t\tcontinue
\t\t}
\t\tos.Exit(0)
\t}
}
"""


@dataclass(frozen=True)
class NodeLayout:
    """Where the real node's wrapper sources and binaries live (beside the control plane's)."""

    build: BuildLayout
    coredns_version: str = COREDNS_VERSION

    @property
    def node_src(self) -> Path:
        return self.build.kube_dir / "node-src"

    @property
    def node_bin(self) -> Path:
        return self.build.kube_dir / "node-bin"

    @property
    def coredns_dir(self) -> Path:
        return self.build.cache_root / "k8s" / f"coredns-{self.coredns_version}"

    @property
    def pause_dir(self) -> Path:
        return self.build.cache_root / "k8s" / "pause"

    def binary(self, name: str) -> Path:
        """kubelet, kube-proxy, coredns or pause."""
        if name == "coredns":
            return self.coredns_dir / "bin" / "coredns"
        if name == "pause":
            return self.pause_dir / "bin" / "pause"
        return self.node_bin / name


NODE_BINARIES: tuple[str, ...] = ("kubelet", "kube-proxy", "coredns", "pause")


def node_binaries_present(layout: NodeLayout) -> bool:
    return all(layout.binary(n).is_file() for n in NODE_BINARIES) and all(
        (layout.binary(n).parent / STAMP_FILE).is_file() for n in NODE_BINARIES
    )


def render_node_gomod(go_line: str, godebug: tuple[str, ...], staging: tuple[str, ...], kube: str) -> str:
    sv = staging_version(kube)
    out = [f"module {NODE_WRAPPER_MODULE}", "", go_line, ""]
    for g in godebug:
        out += [g, ""]
    out += [f"require k8s.io/kubernetes {kube}", ""]
    for mod in staging:
        out += [f"replace {mod} => {mod} {sv}", ""]
    for pkg in NODE_PACKAGES:
        out += [f"tool {pkg}", ""]
    return "\n".join(out[:-1]) + "\n"


def _clear_stamp(bin_dir: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / STAMP_FILE).unlink(missing_ok=True)


async def _build_module(
    *,
    what: str,
    src: Path,
    bin_dir: Path,
    names: list[str],
    files: dict[str, str],
    build_args: list[str],
    progress: Progress,
    layout: BuildLayout,
    jobs: int | None,
) -> bool:
    go = _go_binary()
    env = go_env(layout)
    stamp = _stamp(layout, what, "".join(files.values()), build_args, await _go_version(go, env))
    if _is_built(bin_dir, names, stamp):
        progress(f"{what}: already built ({bin_dir})")
        return False
    started = time.monotonic()
    # Sources other than go.mod are (re)written every time: the tidy marker only covers go.mod.
    _write_files(src, {k: v for k, v in files.items() if k != "go.mod"})
    await _prepare_module(src, files, go, env, what, progress)
    _clear_stamp(bin_dir)
    cmd = [go, "build", "-v", *(["-p", str(jobs)] if jobs else []), *build_args]
    progress(f"{what}: go build {' '.join(names)}")
    await _run(cmd, cwd=src, env=env, step=f"{what} build", progress=progress, line_label=_compiled_package)
    _write_files(bin_dir, {STAMP_FILE: stamp})
    progress(f"{what}: built in {time.monotonic() - started:.0f}s")
    return True


async def build_node(layout: NodeLayout, progress: Progress, jobs: int | None = None) -> bool:
    """Builds kubelet, kube-proxy, CoreDNS and pause (each only if its stamp is stale)."""
    b = layout.build
    go = _go_binary()
    info = parse_kube_gomod(await _download_kube_gomod(go, b, go_env(b)))
    built = await _build_module(
        what=f"kubelet+kube-proxy {b.kube_version}",
        src=layout.node_src,
        bin_dir=layout.node_bin,
        names=["kubelet", "kube-proxy"],
        files={
            "go.mod": render_node_gomod(
                info.go_line, info.godebug_lines, info.staging_modules, b.kube_version
            )
        },
        build_args=[
            "-trimpath",
            "-ldflags",
            kube_ldflags(b.kube_version),
            "-o",
            "../node-bin/",
            *NODE_PACKAGES,
        ],
        progress=progress,
        layout=b,
        jobs=jobs,
    )
    coredns_gomod = (
        f"module {COREDNS_WRAPPER_MODULE}\n\n{info.go_line}\n\n"
        f"require github.com/coredns/coredns {layout.coredns_version}\n"
    )
    built |= await _build_module(
        what=f"coredns {layout.coredns_version}",
        src=layout.coredns_dir / "src",
        bin_dir=layout.coredns_dir / "bin",
        names=["coredns"],
        files={"go.mod": coredns_gomod, "main.go": COREDNS_MAIN_GO},
        build_args=["-trimpath", "-ldflags", "-s -w", "-o", "../bin/coredns", "."],
        progress=progress,
        layout=b,
        jobs=jobs,
    )
    built |= await _build_module(
        what="pause",
        src=layout.pause_dir / "src",
        bin_dir=layout.pause_dir / "bin",
        names=["pause"],
        files={"go.mod": f"module {PAUSE_MODULE}\n\n{info.go_line}\n", "main.go": PAUSE_MAIN_GO},
        build_args=["-trimpath", "-ldflags", "-s -w", "-o", "../bin/pause", "."],
        progress=progress,
        layout=b,
        jobs=jobs,
    )
    return built


async def build_node_locked(layout: NodeLayout, progress: Progress, jobs: int | None = None) -> bool:
    """build_node under the control-plane build's lock (never two Go builds at once)."""
    async with build_lock(layout.build, progress):
        return await build_node(layout, progress, jobs)
