"""The local sandbox of an MCP server process: bubblewrap (`bwrap`) with the server's permission profile.

`sandbox_argv` takes the server's argv, its environment and its profile and returns the argv that runs
it inside `bwrap`: a private mount namespace where only these are visible

* read-only: the system (`/usr`, `/etc`, and `/bin`, `/lib`, `/lib64`, `/sbin` as on the host), the
  folders on the server's PATH, the Python installation mcpfleet runs from (uvx's interpreter), a
  `node_modules` folder holding the command, and the profile's `read` paths;
* read-write: the server's own work folder (its HOME and working directory), its package cache
  (`UV_CACHE_DIR`, `npm_config_cache`: per package, so one server cannot plant code in another's
  cache or in the user's), and the profile's `write` paths;
* private: `/tmp` (a tmpfs), `/proc`, `/dev`;
* at their `mountPath`: MCPServer `spec.volumes` (read-only unless `readOnly: false`).

Nothing else of the user's home is there (no `~/.ssh`, no shell history, no other server's folder).
Every namespace is unshared (`--unshare-all`: user, IPC, PID, UTS, cgroup, network); the network is
shared back (`--share-net`) only when the profile's outbound network is open. With allow-lists the
sandbox leads out only through the egress filter (`egress.py`). Without open network a `uvx` / `npx`
package is first fetched into its cache by a step with network (`prefetch_command`), then the
server runs offline. `--die-with-parent` ends the server with the process that started it;
`--new-session` keeps it off the terminal.

Set-up problems (bwrap missing, namespaces refused by the kernel, a profile path that does not exist
or that the user cannot use) raise `SandboxError` with the cause: the server then is Failed, never
run without its sandbox.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mcpfleet.api.hostvolume import HostVolume
from mcpfleet.api.permissions import MAX_PROFILE_BYTES, PermissionProfile
from mcpfleet.platform.local import egress
from mcpfleet.platform.local.errors import LocalPlatformError
from mcpfleet.platform.local.paths import PathEscapeError, safe_join
from mcpfleet.sandboxcmd import BWRAP

if TYPE_CHECKING:
    from mcpfleet.api.mcpserver import MCPServer

SYSTEM_DIRS = ("/usr", "/etc", "/opt")
SYSTEM_LINKS = ("/bin", "/lib", "/lib64", "/lib32", "/sbin")
# Where /etc/resolv.conf may point (systemd-resolved): DNS inside a sandbox with network.
RESOLVER_DIRS = ("/run/systemd/resolve",)
# Variables that name folders of the user's session the sandbox does not show.
UNSET = ("XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")


class SandboxError(LocalPlatformError, RuntimeError):
    """The sandbox cannot be set up; the message says why (the server is then Failed)."""


def profile_documents(state_dir: Path, servers: Sequence[MCPServer]) -> dict[tuple[str, str], str]:
    """The ConfigMap keys the servers' permission profiles name, read from the local ConfigMap source
    (`STATE/configmaps/NAME/KEY`, as volumes read them); a key that is missing or unreadable is left
    out (the server is then Failed naming it). Bounded: a document over the limit is cut, then refused."""
    documents: dict[tuple[str, str], str] = {}
    for server in servers:
        ref = server.spec.permission_profile
        if ref is None or ref.type != "configmap" or ref.key is None:
            continue
        try:
            path = safe_join(state_dir, "configmaps", ref.name, ref.key)
            with path.open("rb") as file:
                documents[(ref.name, ref.key)] = file.read(MAX_PROFILE_BYTES + 1).decode(errors="replace")
        except (OSError, PathEscapeError):
            continue
    return documents


def sandbox_cache_root() -> Path:
    """Where the per-package caches live: the user's cache folder (XDG), beside mcpfleet's others."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mcpfleet" / "packages"


def package_cache(cache_root: Path, argv: Sequence[str], profile: PermissionProfile) -> Path:
    """The package cache of a server: one per package (launcher and package spec, with its version)
    and profile, reused by every run, so a package is fetched once per machine. Another package
    cannot plant code in it, and servers under different profiles never share one (a cache both
    could write would be a channel between a sandbox that reads and one that sends)."""
    launcher = os.path.basename(argv[0]) if argv else ""
    package = next((a for a in argv[1:] if not a.startswith("-")), "") if launcher in ("uvx", "npx") else None
    identity = [launcher, package] if package is not None else list(argv)
    key = json.dumps([identity, profile.model_dump(mode="json")], sort_keys=True)
    return cache_root / hashlib.sha256(key.encode()).hexdigest()[:16]


@functools.cache
def _bwrap_works(bwrap: str) -> None:
    """Run bwrap once with every namespace unshared: the kernel's answer is the cause of a failure.
    Only success is remembered (functools.cache does not keep raised errors)."""
    try:
        done = subprocess.run(
            [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"bubblewrap ({bwrap}) cannot run: {exc}") from None
    if done.returncode != 0:
        cause = done.stderr.decode(errors="replace").strip()[:300] or f"exit code {done.returncode}"
        raise SandboxError(f"bubblewrap cannot create the sandbox's namespaces: {cause}")


def find_bwrap(env: Mapping[str, str]) -> str:
    """The bwrap executable, checked to work; SandboxError naming the cause otherwise."""
    found = shutil.which(BWRAP, path=env.get("PATH", os.defpath))
    if found is None:
        raise SandboxError(
            "bubblewrap (bwrap) is not installed; the server runs only inside its sandbox"
            " (Debian/Ubuntu: apt-get install bubblewrap)"
        )
    _bwrap_works(found)
    return found


def _covered(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _tool_dirs(argv: Sequence[str], env: Mapping[str, str], home: str, work: str) -> list[str]:
    """Read-only folders the command needs: PATH entries, mcpfleet's Python, a node_modules tree;
    never one holding the home folder or the work folder (that would show the state dir's secrets)."""
    dirs: list[str] = []
    for entry in env.get("PATH", "").split(os.pathsep):
        if not entry.startswith("/") or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        dirs.append(real)
    dirs += [os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)]
    exe = shutil.which(argv[0], path=env.get("PATH")) if argv else None
    if exe is not None:
        real = os.path.realpath(exe)
        parts = real.split("/")
        if "node_modules" in parts:
            dirs.append("/".join(parts[: parts.index("node_modules") + 1]))
        else:
            dirs.append(os.path.dirname(real))
    # A folder that is the home or the work folder, or above one, would show all of it: skipped.
    return [d for d in dirs if d != "/" and not _covered(home, [d]) and not _covered(work, [d])]


def usable_profile_paths(profile: PermissionProfile, error: type[Exception]) -> list[tuple[str, str, str]]:
    """(key, path, where) of the profile's `read` and `write` paths, each checked to exist and to be
    readable / writable by this user; `error(message naming the field)` otherwise. The sandbox and the
    container runtime both mount exactly these."""
    out: list[tuple[str, str, str]] = []
    for key, paths, access in (("read", profile.read, os.R_OK), ("write", profile.write, os.W_OK)):
        for index, path in enumerate(paths):
            where = f"spec.permissionProfile: {key}[{index}] {path}"
            if not os.path.exists(path):
                raise error(f"{where}: does not exist")
            if not os.access(path, access):
                raise error(f"{where}: not {'readable' if key == 'read' else 'writable'} by this user")
            out.append((key, path, where))
    return out


def usable_volumes(volumes: Sequence[HostVolume], error: type[Exception]) -> list[tuple[HostVolume, bool]]:
    """(volume, read_only) of MCPServer `spec.volumes`, each host path checked as a profile path is
    (exists, readable, writable when mounted writable); `error(message naming the field)` otherwise."""
    out: list[tuple[HostVolume, bool]] = []
    for index, volume in enumerate(volumes):
        read_only = volume.local_read_only()
        where = f"spec.volumes[{index}] ({volume.name}): hostPath {volume.host_path}"
        if not os.path.exists(volume.host_path):
            raise error(f"{where}: does not exist")
        if not os.access(volume.host_path, os.R_OK if read_only else os.R_OK | os.W_OK):
            raise error(f"{where}: not {'readable' if read_only else 'writable'} by this user")
        out.append((volume, read_only))
    return out


def _volume_binds(volumes: Sequence[HostVolume]) -> list[str]:
    args: list[str] = []
    for volume, read_only in usable_volumes(volumes, SandboxError):
        args += ["--ro-bind" if read_only else "--bind", volume.host_path, volume.mount_path]
    return args


def _profile_paths(profile: PermissionProfile) -> list[str]:
    """`--ro-bind` / `--bind` arguments of the profile's paths, each checked to exist and to be usable."""
    args: list[str] = []
    for key, path, _ in usable_profile_paths(profile, SandboxError):
        args += ["--ro-bind" if key == "read" else "--bind", path, path]
    return args


def sandbox_argv(
    argv: Sequence[str],
    env: Mapping[str, str],
    profile: PermissionProfile,
    work_dir: Path,
    cache_dir: Path,
    volumes: Sequence[HostVolume] = (),
) -> list[str]:
    """The argv running `argv` inside its sandbox (see the module docstring), with MCPServer
    `spec.volumes` bound in at their mountPath; creates work_dir and cache_dir. SandboxError when the
    sandbox cannot be set up."""
    work, cache = str(work_dir.resolve()), str(cache_dir.resolve())
    work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    args = _bwrap_args(find_bwrap(env), argv, env, profile, work, cache, volumes)
    if profile.network_mode == "all":
        return [*_with_network(args), "--", *argv]
    # Without open network the package manager runs offline, from the package cache that a first
    # step (`prefetch`) fills with network; the server itself never has more than its profile.
    offline = ["--setenv", "UV_OFFLINE", "1", "--setenv", "npm_config_offline", "true"]
    fetch = prefetch_command(argv)
    if profile.network_mode == "restricted":
        run = _filtered([*args, *offline], argv, profile, work)
    else:
        run = [*args, *offline, "--", *argv]
    if fetch is None:
        return run
    first = [*_with_network(args), "--", *fetch]
    return [sys.executable, "-I", egress.__file__, "then", f"--first={json.dumps(first)}", "--", *run]


def _with_network(args: list[str]) -> list[str]:
    """bwrap options with the network shared back: after `--unshare-all` (bwrap reads them in order)."""
    assert args[1] == "--unshare-all"
    return [*args[:2], "--share-net", *args[2:]]


def prefetch_command(argv: Sequence[str]) -> list[str] | None:
    """The command that fetches a `uvx` / `npx` server's package into its cache without running the
    server (None for other commands): `uvx --from PKG python -c ''`, `npx -y --package=PKG -- true`."""
    launcher = os.path.basename(argv[0]) if argv else ""
    package = next((a for a in argv[1:] if not a.startswith("-")), None)
    if package is None:
        return None
    if launcher == "uvx":
        return [argv[0], "--from", package, "python", "-c", ""]
    if launcher == "npx":
        return [argv[0], "-y", f"--package={package}", "--", "true"]
    return None


def _bwrap_args(
    bwrap: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    profile: PermissionProfile,
    work: str,
    cache: str,
    volumes: Sequence[HostVolume] = (),
) -> list[str]:
    """bwrap and its options (no network namespace shared back, no command)."""
    home = os.path.realpath(os.path.expanduser("~"))
    args = [bwrap, "--unshare-all"]
    args += ["--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    bound: list[str] = []
    for path in SYSTEM_LINKS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
            bound.append(path)
    for path in (*SYSTEM_DIRS, *RESOLVER_DIRS, *_tool_dirs(argv, env, home, work)):
        if os.path.isdir(path) and not _covered(path, bound):
            args += ["--ro-bind", path, path]
            bound.append(path)
    args += _profile_paths(profile) + _volume_binds(volumes)
    args += ["--bind", work, work, "--bind", cache, cache, "--chdir", work]
    # The sandbox's own root (where bwrap made the mount points) is read-only too: writes go only to
    # the work folder, the cache, the profile's write paths and the private /tmp.
    args += ["--remount-ro", "/"]
    args += ["--setenv", "HOME", work, "--setenv", "TMPDIR", "/tmp"]
    args += ["--setenv", "UV_CACHE_DIR", f"{cache}/uv", "--setenv", "npm_config_cache", f"{cache}/npm"]
    for name in UNSET:
        if name in env:
            args += ["--unsetenv", name]
    return args


def _filtered(bwrap_args: list[str], argv: Sequence[str], profile: PermissionProfile, work: str) -> list[str]:
    """The sandbox behind the egress filter (`egress.py`): no network of its own, the filter's
    socket folder and relay script bound in, the filtering proxy outside around it."""
    digest = hashlib.sha256(work.encode()).hexdigest()[:16]
    # Short (a unix socket path has ~107 bytes) and private (0700, checked by the filter).
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    socket_dir = os.path.join(base, f"mcpfleet-egress-{digest}")
    Path(socket_dir).mkdir(mode=0o700, exist_ok=True)
    outbound = profile.outbound
    allow = [f"--allow-host={h}" for h in outbound.allow_host] + [
        f"--allow-port={p}" for p in outbound.allow_port
    ]
    relay = egress.RELAY
    outside = [sys.executable, "-I", egress.__file__, "outside", f"--socket-dir={socket_dir}", *allow, "--"]
    # Bound in before the sandbox's root turns read-only (bwrap makes the mount points there).
    at = bwrap_args.index("--remount-ro")
    binds = ["--ro-bind", socket_dir, egress.INSIDE_DIR, "--ro-bind", egress.__file__, relay]
    bwrap_args = [*bwrap_args[:at], *binds, *bwrap_args[at:]]
    inside = [sys.executable, "-I", relay, "inside", f"--socket-dir={egress.INSIDE_DIR}", "--", *argv]
    return [*outside, *bwrap_args, "--", *inside]
