"""How one container of a workload's plan becomes a local process: its argv, its environment and the
files it reads (config files, secret files, a container's env file), all inside the state dir.

`ProcessBuilder` owns these translations for the local runner (`runner.py`, which decides what runs
and when): `{port}` and friends substituted, `--host 0.0.0.0` narrowed to loopback, mcpfleet's own
data-plane commands routed through `platform.local.dataplane`, the server wrapped in its sandbox or
run in the machine's container runtime, a proxy hosted from its rendered `proxy.json`
(`proxy_config`), and Secret keys read from the environment or `STATE/secrets/<name>/<key>`. Every
path named from manifest values goes through `paths.safe_join`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.meta import SecretKeyRef
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.platform.local import containers
from mcpfleet.platform.local.hosted import DATAPLANE_MODULE, hostable
from mcpfleet.platform.local.launch import own_config, server_env
from mcpfleet.platform.local.paths import PathEscapeError, safe_join, write_file
from mcpfleet.platform.local.reaper import FLEET_ENV, RUN_ENV
from mcpfleet.platform.local.sandbox import SandboxError, package_cache, sandbox_argv, sandbox_cache_root
from mcpfleet.platform.local.supervisor import ProcessSpec
from mcpfleet.platform.local.volumes import VolumeError, write_volumes
from mcpfleet.proxy.config import CONFIG_FILE as PROXY_CONFIG_FILE
from mcpfleet.proxy.config import ProxyConfig, ProxyConfigError, load_proxy_config
from mcpfleet.reconcile.model import (
    LOCAL_SECRET_DIR,
    LOCAL_VOLUME_DIR,
    Container,
    SecretEnv,
    VolumeFiles,
    WorkloadPlan,
    config_map_volume,
)

LOOPBACK = "127.0.0.1"
CONTAINER_ENV_DIGEST = "MCPFLEET_CONTAINER_ENV_DIGEST"
"""In the runtime client's environment: the digest of its container's env file."""


class LocalRunError(Exception):
    """A plan this machine cannot run as asked (a missing local secret, a container image)."""


def mcpfleet_argv() -> list[str]:
    """How to run `mcpfleet` itself: the script beside this interpreter, else `python -m`."""
    script = Path(sys.executable).parent / "mcpfleet"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mcpfleet.cli.main"]


def _secret_env_name(name: str, key: str) -> str:
    return "MCPFLEET_SECRET_" + re.sub(r"[^A-Za-z0-9]", "_", f"{name}_{key}").upper()


def restart_checksum(plan: WorkloadPlan) -> str:
    """The config checksum whose change restarts the processes: the plan's rollout checksum (the
    local gateway follows the group live from the state, `discovery.LocalBackendSource`)."""
    return plan.rollout_checksum


def process_spec(
    key: str,
    plan: WorkloadPlan,
    container: Container,
    replica: int,
    argv: list[str],
    env: dict[str, str],
    port: int | None,
    config_dir: Path,
) -> ProcessSpec:
    """What the supervisor runs for one container of one replica: its command, how its readiness is
    probed, its log name, and the fingerprint whose change restarts it."""
    proxy = proxy_config(container, plan, argv, port, config_dir)
    health = probe = None
    if container.name == plan.serving_container and port is not None:
        health = (
            f"http://{LOOPBACK}:{port}{plan.health_path}" if plan.health_path else f"tcp://{LOOPBACK}:{port}"
        )
        if (
            plan.kind == MCPServer.KIND
            and plan.health_path == "/health"
            and proxy is not None
            and proxy.auth_config is None
            and proxy.authserver_config is None
        ):
            # A stdio server behind `mcpfleet proxy`: Running means it answers MCP (not probed
            # through incoming auth / the embedded authorization server: the probe holds no token).
            probe = f"http://{LOOPBACK}:{port}/mcp"
    single = len(plan.containers) == 1 and plan.replicas <= 1
    log_name = plan.name if single else f"{plan.name}-{container.name}-{replica}"
    if plan.kind != MCPServer.KIND:
        log_name = f"{plan.kind.lower()}-{log_name}"
    hosted = hostable(container.command, bool(container.env or container.secret_env), proxy)
    fingerprint = hashlib.sha256(
        json.dumps([argv, sorted(env.items()), restart_checksum(plan)]).encode()
    ).hexdigest()
    return ProcessSpec(
        key=key,
        kind=plan.kind,
        name=plan.name,
        log_name=log_name,
        argv=tuple(argv),
        env=env,
        cwd=config_dir,
        port=port,
        health_url=health,
        fingerprint=fingerprint,
        mcp_probe_url=probe,
        hosted=hosted,
        proxy=proxy if hosted else None,
    )


def proxy_config(
    container: Container, plan: WorkloadPlan, argv: list[str], port: int | None, config_dir: Path
) -> ProxyConfig | None:
    """A proxy container's configuration: the rendered file, served on this platform's address and
    `port`, its server the command after `--` (as launched: in its sandbox or container)."""
    if tuple(container.command[:2]) != ("mcpfleet", "proxy"):
        return None
    if not any(f.filename == PROXY_CONFIG_FILE for f in plan.config_files):
        raise LocalRunError(f"container {container.name}: the proxy's {PROXY_CONFIG_FILE} is not rendered")
    overrides: dict[str, Any] = {"host": LOOPBACK, "port": port or 0}
    if "--" in argv:
        overrides["command"] = argv[argv.index("--") + 1 :]
    try:
        return load_proxy_config(safe_join(config_dir, PROXY_CONFIG_FILE), overrides)
    except ProxyConfigError as exc:
        raise LocalRunError(f"proxy config: {exc}") from exc


class ProcessBuilder:
    """Argv, environment and files of the processes of one state dir's workloads."""

    def __init__(
        self,
        state_dir: Path,
        *,
        fleet: str,
        run_id: str,
        base_env: dict[str, str],
        runtime: Callable[[], containers.Runtime | None],
    ) -> None:
        self.state_dir = state_dir
        self.fleet = fleet
        self.run_id = run_id
        self.base_env = base_env
        self._runtime = runtime
        self._written: dict[Path, str] = {}
        """What was last written to each file: an unchanged file is not rewritten (nor re-read)."""

    def write_files(self, plan: WorkloadPlan) -> tuple[Path, Path]:
        """The plan's config files, secret files and volumes written; its config folder (also the
        processes' working directory) and data folder returned."""
        try:
            config_dir = self.config_dir(plan.kind, plan.namespace, plan.name)
            data_dir = safe_join(self.state_dir, "data", plan.kind.lower(), plan.namespace, plan.name)
            config_paths = [(safe_join(config_dir, c.filename), c.content) for c in plan.config_files]
        except PathEscapeError as exc:
            raise LocalRunError(f"refused to write outside the state dir: {exc}") from exc
        config_dir.mkdir(parents=True, exist_ok=True)
        for path, content in config_paths:
            self.write(path, content)
        self.write_secret_files(config_dir, plan)
        # The user's ConfigMap keys a pod would mount (e.g. OIDC settings) are volumes here too.
        volumes = plan.volume_files + tuple(
            VolumeFiles(
                config_map_volume(f.filename),
                config_map=f.config_map.name,
                items=((f.config_map.key, f.filename),),
            )
            for f in plan.config_map_files
        )
        if volumes or safe_join(config_dir, LOCAL_VOLUME_DIR).exists():
            try:
                write_volumes(
                    config_dir,
                    self.state_dir,
                    volumes,
                    lambda name, key: self.secret(SecretEnv(key, SecretKeyRef(name=name, key=key))),
                )
            except VolumeError as exc:
                raise LocalRunError(str(exc)) from exc
        if plan.data_dir:
            data_dir.mkdir(parents=True, exist_ok=True)
        return config_dir, data_dir

    def config_dir(self, kind: str, namespace: str, name: str) -> Path:
        """STATE/config/KIND/NAMESPACE/NAME, checked to stay inside the state dir (PathEscapeError)."""
        return safe_join(self.state_dir, "config", kind.lower(), namespace, name)

    def status_file(self, namespace: str, name: str) -> Path:
        return safe_join(self.config_dir(VirtualMCPServer.KIND, namespace, name), "status.json")

    def write(self, path: Path, content: str) -> None:
        if self._written.get(path) == content:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or not path.exists() or path.read_text() != content:
            write_file(path, content)
        self._written[path] = content

    def _argv(
        self, container: Container, plan: WorkloadPlan, port: int | None, config_dir: Path, data_dir: Path
    ) -> list[str]:
        if not container.command:
            raise LocalRunError(f"container {container.name}: a container image cannot run locally")
        values = {"{port}": str(port), "{config_dir}": str(config_dir), "{data_dir}": str(data_dir)}
        argv = []
        for part in container.command:
            for placeholder, value in values.items():
                part = part.replace(placeholder, value)
            argv.append(part)
        if plan.data_dir:
            argv = [
                part.replace(plan.data_dir, str(data_dir)) if part.startswith(plan.data_dir) else part
                for part in argv
            ]
        for index in range(len(argv) - 1):
            if argv[index] == "--host" and argv[index + 1] in ("0.0.0.0", "::"):
                argv[index + 1] = LOOPBACK
        if argv[0] != "mcpfleet":
            return argv
        if argv[1:3] in (["vmcp", "serve"], ["registry", "serve"]):
            extra = ["--state-dir", str(self.state_dir), "--namespace", plan.namespace]
            if argv[1] == "vmcp":
                extra += ["--status-file", str(self.status_file(plan.namespace, plan.name))]
            return [sys.executable, "-m", "mcpfleet.platform.local.dataplane", argv[1], *extra, *argv[3:]]
        return [*mcpfleet_argv(), *argv[1:]]

    def _sandboxed(
        self, argv: list[str], container: Container, env: dict[str, str], plan: WorkloadPlan
    ) -> list[str]:
        """`argv` with the server inside its sandbox (`sandbox.py`): a proxy's child after `--`, or
        the whole command of a server run directly. LocalRunError (the workload Failed) when the
        sandbox cannot be set up: never run without it."""
        if container.permission_profile is None:
            return argv
        start = argv.index("--") + 1 if tuple(container.command[:2]) == ("mcpfleet", "proxy") else 0
        try:
            work_dir = safe_join(self.state_dir, "sandbox", plan.namespace, plan.name)
            cache = package_cache(sandbox_cache_root(), argv[start:], container.permission_profile)
            wrapped = sandbox_argv(
                argv[start:], env, container.permission_profile, work_dir, cache, container.host_volumes
            )
        except (PathEscapeError, SandboxError) as exc:
            raise LocalRunError(f"sandbox: {exc}") from exc
        return [*argv[:start], *wrapped]

    def launch(
        self, container: Container, plan: WorkloadPlan, port: int | None, config_dir: Path, data_dir: Path
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment of one container's process: its server in a container of the
        runtime (an image), else inside its sandbox."""
        if container.local_image is not None:
            # A proxy whose child is the image, or (no command) the image itself, an http server.
            argv = self._argv(container, plan, port, config_dir, data_dir) if container.command else []
            return self._in_container(argv, container, plan, config_dir, None if container.command else port)
        argv = self._argv(container, plan, port, config_dir, data_dir)
        env = self._env(container, plan, argv)
        return self._sandboxed(argv, container, env, plan), env

    def _in_container(
        self, argv: list[str], container: Container, plan: WorkloadPlan, config_dir: Path, publish: int | None
    ) -> tuple[list[str], dict[str, str]]:
        """A proxy whose child is a container image (`containers.py`): the runtime's `run` after
        `--`, the image's declared environment in a mode-0600 env file, and the environment of the
        proxy and the runtime's client: the base with the user's HOME (the runtime's image store)
        and the proxy's own secrets, never the image's variables (a manifest must not configure the
        runtime, e.g. `CONTAINERS_CONF`)."""
        runtime = self._runtime()
        profile = container.permission_profile
        if runtime is None or container.local_image is None or profile is None:
            raise LocalRunError("no container runtime (podman or docker) on this machine")
        declared = dict(container.env)
        for secret in container.secret_env:
            declared[secret.env_name] = self.secret(secret)
        inside = {k: v for k, v in declared.items() if k in container.local_image_env}
        outside = {k: v for k, v in declared.items() if k not in container.local_image_env}
        # The fleet's tag inside too: `down` finds the container's processes in /proc as well.
        inside.update({FLEET_ENV: self.fleet, RUN_ENV: self.run_id})
        try:
            folder = safe_join(config_dir, "container")
            env_file = safe_join(folder, "env")
            folder.mkdir(mode=0o700, exist_ok=True)
            folder.chmod(0o700)
            content = containers.env_file_text(inside)
            if self._written.get(env_file) != content:
                write_file(env_file, content, 0o600)
                self._written[env_file] = content
            run = containers.run_argv(
                runtime,
                image=container.local_image,
                args=container.args,
                entrypoint=container.local_entrypoint,
                profile=profile,
                env_file=env_file,
                publish=publish,
                name=containers.container_name(self.fleet, plan.namespace, plan.name),
                labels=containers.fleet_labels(self.fleet, self.run_id, plan.namespace, plan.name),
                volumes=container.host_volumes,
            )
        except PathEscapeError as exc:
            raise LocalRunError(f"refused a path outside the state dir: {exc}") from exc
        except containers.ContainerError as exc:
            raise LocalRunError(f"container: {exc}") from exc
        env = containers.client_env(os.environ, self.base_env)
        env.update({k: v for k, v in outside.items() if k not in env})
        # A changed env file restarts the server like a changed environment does (the fingerprint).
        env[CONTAINER_ENV_DIGEST] = hashlib.sha256(content.encode()).hexdigest()
        start = argv.index("--") + 1 if "--" in argv else 0
        return [*argv[:start], *run], env

    def _env(self, container: Container, plan: WorkloadPlan, argv: list[str]) -> dict[str, str]:
        """The process's whole environment (`launch.server_env`): the base, a private HOME in the
        workload's work folder, its declared `env` and secrets; mcpfleet's own gateway and registry
        also get mcpfleet's settings (`launch.own_config`)."""
        declared = dict(container.env)
        for secret in container.secret_env:
            declared[secret.env_name] = self.secret(secret)
        if DATAPLANE_MODULE in argv:
            declared = {**own_config(os.environ), **declared}
        try:
            home = safe_join(self.state_dir, "work", plan.kind.lower(), plan.namespace, plan.name, "home")
        except PathEscapeError as exc:
            raise LocalRunError(f"refused a work folder outside the state dir: {exc}") from exc
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        return server_env(self.base_env, home, declared)

    def write_secret_files(self, config_dir: Path, plan: WorkloadPlan) -> None:
        """The plan's SecretFiles as mode-0600 files in a mode-0700 folder; stale ones removed."""
        try:
            folder = safe_join(config_dir, LOCAL_SECRET_DIR)
            paths = {f.filename: safe_join(folder, f.filename) for f in plan.secret_files}
        except PathEscapeError as exc:
            raise LocalRunError(f"refused to write a secret outside the state dir: {exc}") from exc
        wanted = {f.filename for f in plan.secret_files}
        if folder.is_dir():
            for stale in folder.iterdir():
                if stale.name in wanted:
                    continue
                if stale.is_dir() and not stale.is_symlink():
                    shutil.rmtree(stale)  # inside the checked folder: a leftover folder, not a secret
                else:
                    stale.unlink(missing_ok=True)  # a symlink is removed itself, never its target
        if not plan.secret_files:
            return
        folder.mkdir(mode=0o700, exist_ok=True)
        folder.chmod(0o700)
        for secret_file in plan.secret_files:
            path = paths[secret_file.filename]
            try:
                value = self.secret(SecretEnv(secret_file.filename, secret_file.secret))
            except LocalRunError:
                if not secret_file.optional:
                    raise
                path.unlink(missing_ok=True)  # an optional Secret that is gone: no file, as on Kubernetes
                continue
            with contextlib.suppress(OSError):
                if not path.is_symlink() and path.read_text() == value:
                    continue
            # Created 0600 (not chmod-ed after the write): the value is never readable by others.
            # Replaced atomically: the service reads the new value at its next use, as with a Secret volume.
            write_file(path, value, 0o600)

    def secret(self, secret: SecretEnv) -> str:
        name, key = secret.secret.name, secret.secret.key
        variable = _secret_env_name(name, key)
        if variable in os.environ:
            return os.environ[variable]
        try:
            path = safe_join(self.state_dir, "secrets", name, key)
        except PathEscapeError as exc:
            raise LocalRunError(f"secret {name} key {key}: not a usable file name ({exc})") from exc
        if path.is_file():
            return path.read_text().rstrip("\n")
        raise LocalRunError(f"secret {name} key {key}: not found locally; set ${variable} or write {path}")
