"""Container images under `mcpfleet up`: the machine's container runtime (podman, else docker) and
the `run` command line that gives a server's container exactly its permission profile.

Owns:
* `find_runtime`: which runtime runs images on this machine. `MCPFLEET_CONTAINER_RUNTIME` decides
  when set (`podman`, `docker`, a path to either, or `none`); otherwise podman on PATH, else docker
  on PATH whose daemon answers. Without one an image MCPServer is refused, as before.
* `run_argv`: `RUNTIME run` for a stdio server, its stdin and stdout attached to the proxy that
  starts it (an http server: its `mcpPort` published on 127.0.0.1, nothing else), and nothing more
  than the profile grants:
  - `--network none` for a profile without network; the runtime's default network when outbound is
    open (builtin `network`, `insecure_allow_all`); allow-lists are refused before this (no egress
    filter for containers yet);
  - `--read-only` root with a private `/tmp`, `--cap-drop ALL`, `--security-opt no-new-privileges`,
    `--pids-limit`, ulimits no higher than `up`'s own, an init process (`--init`) that passes
    signals on;
  - only the profile's `read` paths (read-only) and `write` paths mounted, at the same place;
  - only the declared environment, from a mode-0600 file (`--env-file`), never on the command line
    and never the runtime's own environment (`--http-proxy=false` for podman, which would otherwise
    copy the proxy variables in);
  - labels carrying the fleet's tag (`mcpfleet.dev/fleet`, `mcpfleet.dev/fleet-run`) and the
    server's name, by which `reaper.end_containers` removes them: the watchdog after a crash of
    `up`, `down`, a new `up`. A stdio server's container has no fixed name: the proxy may run a
    second child for 2026-07-28 (`--modern-era separate`), and a restarted child must not wait for its predecessor's removal. An
    http server's (podman) is named after the fleet and the server and replaces its predecessor. `--rm -i`: the container's stdin
    closes when its client ends (however it ends), a stdio server then exits and the runtime
    removes the container.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mcpfleet.api.hostvolume import HostVolume
from mcpfleet.api.permissions import PermissionProfile
from mcpfleet.platform.local.errors import LocalPlatformError
from mcpfleet.platform.local.reaper import FLEET_LABEL, RUN_LABEL
from mcpfleet.platform.local.sandbox import usable_profile_paths, usable_volumes

RUNTIME_ENV = "MCPFLEET_CONTAINER_RUNTIME"
"""`podman`, `docker`, a path to one of them, or `none` (no image runs locally)."""
RUNTIMES = ("podman", "docker")
SERVER_LABEL = "mcpfleet.dev/server"
PIDS_LIMIT = 1024
"""Processes a server's container may have (a fork bomb stays inside)."""
MAX_NOFILE = 65536
MAX_NPROC = 4096
"""A runtime raises the container's limits to its defaults unless told (which fails without
CAP_SYS_RESOURCE when they are above `up`'s): the container gets `up`'s, capped at these."""
CLIENT_ENV = (
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "CONTAINERS_CONF",
    "CONTAINERS_STORAGE_CONF",
    "CONTAINERS_REGISTRIES_CONF",
    "CONTAINER_HOST",
    "CONTAINER_CONNECTION",
    "REGISTRY_AUTH_FILE",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "DOCKER_CONTEXT",
    "DOCKER_TLS_VERIFY",
    "DOCKER_CERT_PATH",
)
"""What the runtime's client itself needs from `up`'s environment to find its storage or daemon
(never passed into the container)."""


class ContainerError(LocalPlatformError, RuntimeError):
    """The container cannot be started as asked; the message names the cause (the server is Failed)."""


@dataclass(frozen=True)
class Runtime:
    name: str
    """`podman` or `docker`."""
    path: str


def find_runtime(environ: Mapping[str, str]) -> tuple[Runtime | None, str]:
    """The runtime images run with, or None and why not."""
    wanted = environ.get(RUNTIME_ENV, "").strip()
    path = environ.get("PATH", os.defpath)
    if wanted == "none":
        return None, f"{RUNTIME_ENV}=none"
    candidates = [wanted] if wanted else list(RUNTIMES)
    reasons = []
    for candidate in candidates:
        found = shutil.which(candidate, path=path)
        name = os.path.basename(candidate)
        if found is None or name not in RUNTIMES:
            reasons.append(
                f"{candidate}: not found" if found is None else f"{candidate}: not podman or docker"
            )
            continue
        problem = _answers(found, name)
        if problem is None:
            return Runtime(name, found), ""
        reasons.append(problem)
    return None, "; ".join(reasons) or "no podman or docker on PATH"


@functools.cache
def _answers(path: str, name: str) -> str | None:
    """None when the runtime answers (docker: its daemon too), else why not. Asked once per process
    (`up` looks once): a daemon started later is seen by the next `up`."""
    check = [
        path,
        "version",
        "--format",
        "{{.Server.Version}}" if name == "docker" else "{{.Client.Version}}",
    ]
    try:
        done = subprocess.run(check, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{name}: {exc}"
    if done.returncode != 0 or not done.stdout.strip():
        return f"{name}: {(done.stderr.strip() or f'exit code {done.returncode}')[:200]}"
    return None


def _limit(which: int, cap: int) -> int:
    soft, hard = resource.getrlimit(which)
    values = [v for v in (soft, hard, cap) if v != resource.RLIM_INFINITY]
    return min(values)


def env_file_text(declared: Mapping[str, str]) -> str:
    """The `--env-file` content: one `NAME=VALUE` a line. A value with a line break cannot be written
    there (neither runtime reads quotes): refused naming the variable."""
    lines = []
    for name, value in declared.items():
        if "\n" in value or "\r" in value or "\0" in value:
            raise ContainerError(
                f"env {name}: a value with a line break cannot be passed to a container by mcpfleet up"
            )
        if not name or "=" in name or name.strip() != name or name.startswith("#") or name.endswith("*"):
            raise ContainerError(f"env {name!r}: not a name a container runtime reads from an env file")
        lines.append(f"{name}={value}\n")
    return "".join(lines)


def run_argv(
    runtime: Runtime,
    *,
    image: str,
    args: Sequence[str],
    entrypoint: Sequence[str] | None,
    profile: PermissionProfile,
    env_file: Path,
    labels: Mapping[str, str],
    publish: int | None = None,
    name: str | None = None,
    volumes: Sequence[HostVolume] = (),
) -> list[str]:
    """`RUNTIME run …` for one server (see the module docstring): a stdio server attached to its
    proxy, or an http server whose port `publish` (its `mcpPort`) is published on 127.0.0.1 at the
    same number. ContainerError when a profile path cannot be mounted."""
    # Every option as `--flag=value`: a value that starts with `-` stays a value.
    # A stdio server reads the proxy's requests on stdin (`-i`); an http server's stdin is nothing.
    argv = [runtime.path, "run", "--rm", *(["-i"] if publish is None else [])]
    if runtime.name == "podman":
        argv += ["--http-proxy=false", "--read-only-tmpfs=true"]
        if publish is not None and name is not None:
            # One container per http server: a restart replaces one that did not stop (its port).
            argv += [f"--name={name}", "--replace"]
    else:
        argv += ["--tmpfs=/tmp:rw,nosuid,nodev,size=256m"]
    argv += [f"--label={key}={value}" for key, value in sorted(labels.items())]
    nofile, nproc = _limit(resource.RLIMIT_NOFILE, MAX_NOFILE), _limit(resource.RLIMIT_NPROC, MAX_NPROC)
    argv += [
        "--init",
        "--read-only",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        f"--pids-limit={PIDS_LIMIT}",
        f"--ulimit=nofile={nofile}:{nofile}",
        f"--ulimit=nproc={nproc}:{nproc}",
        # stderr reaches the proxy (and the workload's log) through the attached client.
        "--log-driver=none",
        f"--env-file={env_file}",
    ]
    if publish is not None:
        argv += [f"--publish=127.0.0.1:{publish}:{publish}"]
    if profile.network_mode == "none":
        argv += ["--network=none"]
    elif profile.network_mode != "all":
        raise ContainerError(
            "spec.permissionProfile: outbound allow-lists are not enforced for container images under"
            " mcpfleet up yet; use builtin none or network"
        )
    argv += mounts(profile) + volume_mounts(volumes)
    if entrypoint and runtime.name == "podman":
        # podman reads a JSON array as the whole entrypoint (no shell, no splitting).
        argv += [f"--entrypoint={json.dumps(list(entrypoint))}"]
    elif entrypoint:
        argv += [f"--entrypoint={entrypoint[0]}"]
        args = [*entrypoint[1:], *args]
    return [*argv, "--", image, *args]


def volume_mounts(volumes: Sequence[HostVolume]) -> list[str]:
    """`--volume` arguments of MCPServer `spec.volumes` (hostPath at mountPath), checked as the sandbox checks them."""
    argv: list[str] = []
    for volume, read_only in usable_volumes(volumes, ContainerError):
        if any(c in p for p in (volume.host_path, volume.mount_path) for c in ",:"):
            raise ContainerError(
                f"spec.volumes ({volume.name}): a path with ',' or ':' cannot be mounted by a container runtime"
            )
        argv += [f"--volume={volume.host_path}:{volume.mount_path}:{'ro' if read_only else 'rw'}"]
    return argv


def mounts(profile: PermissionProfile) -> list[str]:
    """`--volume` arguments of the profile's paths (same place inside), each checked to exist and be usable."""
    argv: list[str] = []
    for key, path, where in usable_profile_paths(profile, ContainerError):
        if "," in path or ":" in path:
            raise ContainerError(f"{where}: a path with ',' or ':' cannot be mounted by a container runtime")
        argv += [f"--volume={path}:{path}:{'ro' if key == 'read' else 'rw'}"]
    return argv


def client_env(environ: Mapping[str, str], base: Mapping[str, str]) -> dict[str, str]:
    """The environment of the runtime's client process: the fleet's base (PATH, locale, the tag) with
    the user's real HOME and the runtime's own settings, so it finds its image store or daemon."""
    env = dict(base)
    env["HOME"] = environ.get("HOME") or str(Path.home())
    for name in CLIENT_ENV:
        if name in environ:
            env[name] = environ[name]
    return env


def container_name(fleet: str, namespace: str, server: str) -> str:
    """The name of an http server's container (podman): the fleet's id, the namespace and the name."""
    return f"mcpfleet-{fleet[:12]}-{namespace}-{server}"


def fleet_labels(fleet: str, run: str, namespace: str, server: str) -> dict[str, str]:
    return {FLEET_LABEL: fleet, RUN_LABEL: run, SERVER_LABEL: f"{namespace}.{server}"}
