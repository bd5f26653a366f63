"""A ledger of the host changes the real node makes, recorded BEFORE they happen and undone at `down`.

Owns: `<state>/realnode/host-changes.json` and the snapshot/restore of each kind of change:
- sysctls the kubelet, kube-proxy and the CNI bridge plugin write (their values before `up`);
- iptables and ip6tables rules (a full `*-save` of every table before `up`; tables that did not
  exist then are flushed and emptied of chains);
- network links we create (the node bridge), deleted at `down`;
- directories the node's daemons create outside the state dir even when told to use another root
  (e.g. /run/containerd for shim sockets, /run/netns, /var/lib/cni, /var/lib/kubelet/device-plugins):
  those that did not exist before are removed;
- cgroups (v1 controllers or the v2 root): top-level groups that appeared (kubepods, k8s.io) are
  removed bottom-up once their processes are gone;
- mounts: any mount point that appeared under one of the node's paths is unmounted, deepest first.

The ledger is written to disk before each change, so a crash mid-`up` still leaves `down` able to
undo what was done. Restoring is idempotent: a second `down` finds nothing left to do.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# What the kubelet (setupKernelTunables), kube-proxy and the CNI bridge plugin may write.
SYSCTLS: tuple[str, ...] = (
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.ipv4.ip_forward",
    "net.ipv4.conf.all.route_localnet",
    "net.ipv6.conf.all.forwarding",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
)

# Directories created outside the state dir (hard-coded in containerd 1.6, the kubelet or libcni).
HOST_DIRS: tuple[str, ...] = (
    "/run/containerd",
    "/run/netns",
    "/var/run/netns",
    "/var/lib/cni",
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/etc/cni",
    "/opt/cni",
    "/usr/libexec/kubernetes",
)

IPTABLES_TABLES: tuple[str, ...] = ("filter", "nat", "mangle", "raw")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def read_sysctl(key: str) -> str | None:
    try:
        return _sysctl_path(key).read_text().strip()
    except OSError:
        return None


def _cgroup_dirs() -> list[Path]:
    """The hierarchy roots: each v1 controller dir, or the v2 root itself."""
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        return [CGROUP_ROOT]
    out = []
    for child in sorted(CGROUP_ROOT.iterdir()):
        if child.is_dir() and not child.is_symlink() and (child / "cgroup.procs").exists():
            out.append(child)
    return out


def _cgroup_children() -> dict[str, list[str]]:
    return {str(d): sorted(c.name for c in d.iterdir() if c.is_dir()) for d in _cgroup_dirs() if d.is_dir()}


def _mount_points() -> list[str]:
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            # Field 5 is the mount point, with spaces etc. octal-escaped.
            out.append(line.split()[4].encode().decode("unicode_escape"))
    return out


def _save_iptables(binary: str) -> dict[str, str] | None:
    """{table: iptables-save text} for tables that exist now, or None if the tool is missing."""
    if shutil.which(binary) is None:
        return None
    out: dict[str, str] = {}
    for table in IPTABLES_TABLES:
        proc = subprocess.run([binary, "-t", table], capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            out[table] = proc.stdout
    return out


@dataclass
class HostLedger:
    """The recorded state; `path` is where it is persisted (JSON)."""

    path: Path
    sysctls: dict[str, str | None] = field(default_factory=dict)
    iptables: dict[str, dict[str, str] | None] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)
    absent_dirs: list[str] = field(default_factory=list)
    cgroups: dict[str, list[str]] = field(default_factory=dict)
    mounts: list[str] = field(default_factory=list)
    mount_prefixes: list[str] = field(default_factory=list)

    # ---- persistence --------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path) -> HostLedger | None:
        try:
            data: dict[str, Any] = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return cls(path=path, **data)

    def save(self) -> None:
        data = {k: v for k, v in self.__dict__.items() if k != "path"}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.path)

    # ---- record -------------------------------------------------------------------------------
    @classmethod
    def record(cls, path: Path, mount_prefixes: Iterable[str]) -> HostLedger:
        """Snapshots everything the node may change; called once, before the first change."""
        ledger = cls(path=path)
        ledger.sysctls = {k: read_sysctl(k) for k in SYSCTLS}
        ledger.iptables = {b: _save_iptables(f"{b}-save") for b in ("iptables", "ip6tables")}
        ledger.absent_dirs = [d for d in HOST_DIRS if not os.path.lexists(d)]
        ledger.cgroups = _cgroup_children()
        ledger.mounts = _mount_points()
        ledger.mount_prefixes = sorted(
            set(mount_prefixes) | {"/run/netns", "/var/run/netns", "/run/containerd"}
        )
        ledger.save()
        return ledger

    def add_link(self, name: str) -> None:
        """Notes (before creating it) a network link that `restore` deletes."""
        if name not in self.links:
            self.links.append(name)
            self.save()

    # ---- restore ------------------------------------------------------------------------------
    def restore(self) -> list[str]:
        """Undoes every recorded change; returns one line per action taken (for the `down` output)."""
        done: list[str] = []
        done += self._restore_mounts()
        for link in list(self.links):
            if Path(f"/sys/class/net/{link}").exists():
                subprocess.run(["ip", "link", "delete", link], check=False, capture_output=True)
                done.append(f"deleted link {link}")
        done += self._restore_iptables()
        for key, before in self.sysctls.items():
            now = read_sysctl(key)
            if before is not None and now is not None and now != before:
                with contextlib.suppress(OSError):
                    _sysctl_path(key).write_text(before)
                    done.append(f"sysctl {key}: {now} -> {before}")
        done += self._restore_cgroups()
        for d in self.absent_dirs:
            if os.path.lexists(d):
                shutil.rmtree(d, ignore_errors=True)
                done.append(f"removed {d}")
        return done

    def _restore_mounts(self) -> list[str]:
        before = set(self.mounts)
        new = [
            m
            for m in _mount_points()
            if m not in before
            and any(m == p or m.startswith(p.rstrip("/") + "/") for p in self.mount_prefixes)
        ]
        done = []
        # Deepest first; a mount point may appear twice (stacked mounts): unmount each occurrence.
        for m in sorted(new, key=lambda p: p.count("/"), reverse=True):
            proc = subprocess.run(["umount", "-l", m], capture_output=True, text=True, check=False)
            if proc.returncode == 0:
                done.append(f"unmounted {m}")
        return done

    def _restore_iptables(self) -> list[str]:
        done = []
        for family, saved in self.iptables.items():
            if saved is None:
                continue
            current = _save_iptables(f"{family}-save") or {}
            for table in IPTABLES_TABLES:
                if current.get(table) is None:
                    continue
                if table in saved:
                    if _rules(current[table]) == _rules(saved[table]):
                        continue
                    proc = subprocess.run(
                        [f"{family}-restore", "-T", table], input=saved[table], text=True, capture_output=True
                    )
                    if proc.returncode == 0:
                        done.append(f"{family} table {table} restored")
                    else:
                        done.append(f"{family} table {table}: restore failed: {proc.stderr.strip()}")
                elif _rules(current[table]):
                    subprocess.run([family, "-t", table, "-F"], check=False, capture_output=True)
                    subprocess.run([family, "-t", table, "-X"], check=False, capture_output=True)
                    done.append(f"{family} table {table} emptied (did not exist before)")
        return done

    def _restore_cgroups(self) -> list[str]:
        done = []
        for root, children in _cgroup_children().items():
            before = set(self.cgroups.get(root, []))
            for name in children:
                if name in before:
                    continue
                if _rmdir_cgroup(Path(root) / name):
                    done.append(f"removed cgroup {root}/{name}")
        return done


def _rules(save_text: str) -> list[str]:
    """The chain and rule lines of an iptables-save dump (no comments, counters or COMMIT)."""
    out = []
    for line in save_text.splitlines():
        if line.startswith(("#", "*", "COMMIT")):
            continue
        out.append(line.split(" [", 1)[0] if line.startswith(":") else line)
    return out


def _rmdir_cgroup(path: Path) -> bool:
    """Removes a cgroup and its descendants, deepest first (cgroupfs dirs are removed with rmdir)."""
    ok = True
    for child in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        try:
            child.rmdir()
        except OSError:
            ok = False
    try:
        path.rmdir()
    except OSError:
        return False
    return ok


def snapshot_for_proof(prefixes: Iterable[str]) -> dict[str, Any]:
    """Everything `restore` promises to put back, in one comparable dict (tests diff two of these)."""
    prefix_list = list(prefixes)
    return {
        "sysctls": {k: read_sysctl(k) for k in SYSCTLS},
        "iptables": {
            fam: {t: _rules(v) for t, v in (_save_iptables(f"{fam}-save") or {}).items() if _rules(v)}
            for fam in ("iptables", "ip6tables")
        },
        "links": sorted(os.listdir("/sys/class/net")),
        "dirs": {d: os.path.lexists(d) for d in HOST_DIRS},
        "cgroups": _cgroup_children(),
        "mounts": sorted(
            m
            for m in _mount_points()
            if any(m.startswith(p) for p in [*prefix_list, "/run/netns", "/run/containerd"])
        ),
    }
