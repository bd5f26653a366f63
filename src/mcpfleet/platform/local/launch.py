"""The one place `mcpfleet up` starts a process: what it is given, and that it dies with `up`.

Every process of the local fleet starts through `spawn` — a workload's own process
(`supervisor.Managed`) and the stdio server behind a proxy hosted in `up` (`hosted.py` hands
`spawn` to the proxy's `ChildProcess`). A sandbox wraps a launch here (`Launch` in, `Launch` out:
the argv and environment to run), so no process escapes it by taking another path.

What a launch guarantees:
* its environment is `server_env`: the workload's declared `env` and secrets over a minimal base
  (`base_env`), never `up`'s own environment (docs/security.md, "What a local server inherits");
* it carries the fleet's tag (`reaper.FLEET_ENV` / `RUN_ENV`), which its own children inherit:
  `down`, the next `up` and the watchdog find it by that tag in `/proc`;
* it gets the parent-death signal (`PR_SET_PDEATHSIG`, SIGKILL): when `up` dies, even by SIGKILL,
  the kernel kills it at once. The signal fires when the *thread* that forked exits, so `spawn` must
  run on the event loop's thread, which lives as long as `up` (asyncio forks there). The signal is
  not inherited across fork; what the process starts itself is ended by the watchdog (`reaper`);
* its own session and process group (stopping it stops what it started).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpfleet.deathsig import die_with_parent
from mcpfleet.platform.local.reaper import FLEET_ENV, RUN_ENV

STATE_ENV = "MCPFLEET_LOCAL_STATE"
"""The resolved state dir, in every process's environment (the dataplane finds its state by it)."""
_LOCALE = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
_PROXY = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")
_CA_FILES = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)
_TOOL_PREFIXES = ("UV_", "PIP_", "NPM_CONFIG_")
_CREDENTIAL = re.compile(
    r"TOKEN|PASSWORD|PASSWD|SECRET|AUTH|CREDENTIAL|USERNAME|_KEY\b|KEYRING", re.IGNORECASE
)
"""A package tool's setting that names a credential (npm's `_authToken`, uv's index passwords)
stays in `up`'s environment: the launcher would pass it to the server it runs."""
_OWN_PREFIXES = ("MCPFLEET_", "OTEL_")
"""Configuration of mcpfleet's own processes (gateway, registry): passed to them, not to servers."""


@dataclass(frozen=True)
class Launch:
    """A process to start: exactly this argv, environment and working directory."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path


def fleet_id(state_dir: Path) -> str:
    """The fleet's tag value: a digest of the resolved state dir (one fleet per state dir)."""
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:16]


def _user_caches(environ: Mapping[str, str]) -> dict[str, str]:
    """The user's package caches (where `uvx` / `npx` keep what they downloaded), named explicitly:
    the server's HOME is private, so the tools' defaults under HOME would be empty folders."""
    home = Path(environ.get("HOME") or Path.home())
    cache = Path(environ.get("XDG_CACHE_HOME") or home / ".cache")
    data = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    npm_cache = environ.get("npm_config_cache") or environ.get("NPM_CONFIG_CACHE") or str(home / ".npm")
    return {
        "UV_CACHE_DIR": environ.get("UV_CACHE_DIR") or str(cache / "uv"),
        "UV_PYTHON_INSTALL_DIR": environ.get("UV_PYTHON_INSTALL_DIR") or str(data / "uv" / "python"),
        "npm_config_cache": npm_cache,
        # Models a server downloads (an EmbeddingServer's) stay in the user's cache, not per HOME.
        "HF_HOME": environ.get("HF_HOME") or str(cache / "huggingface"),
    }


def base_env(environ: Mapping[str, str], *, fleet: str, run: str, state_dir: Path) -> dict[str, str]:
    """What every process of the fleet gets from `up`'s environment `environ`, and nothing more.

    PATH (the venv first: `uvx` and `mcpfleet` beside this interpreter), the locale and time zone,
    the machine's network settings (proxy variables, CA bundles) and package tools' settings
    without credentials, the user's package caches, and the fleet's tag. HOME is set per workload
    (`server_env`).
    """
    env: dict[str, str] = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), environ.get("PATH", os.defpath)]),
        "PYTHONUNBUFFERED": "1",
    }
    for name, value in environ.items():
        upper = name.upper()
        if (
            name in _LOCALE
            or upper in _PROXY
            or name in _CA_FILES
            or (upper.startswith(_TOOL_PREFIXES) and not _CREDENTIAL.search(name))
        ):
            env[name] = value
    env.update(_user_caches(environ))
    env[FLEET_ENV] = fleet
    env[RUN_ENV] = run
    env[STATE_ENV] = str(state_dir.resolve())
    return env


def own_config(environ: Mapping[str, str]) -> dict[str, str]:
    """mcpfleet's own settings in `environ` (`MCPFLEET_*` but no secret, `OTEL_*`), for the
    gateway and registry processes: they are mcpfleet, not a server."""
    return {
        k: v
        for k, v in environ.items()
        if k.startswith(_OWN_PREFIXES)
        and not k.startswith("MCPFLEET_SECRET_")
        and k not in (FLEET_ENV, RUN_ENV)
    }


def server_env(base: Mapping[str, str], home: Path, declared: Mapping[str, str]) -> dict[str, str]:
    """A workload's environment: the base, its private HOME, then what it declares (`env`, secrets)."""
    env = {**base, "HOME": str(home)}
    env.update(declared)
    # The tag is the platform's: a manifest cannot remove it (and hide from `down`) nor forge another.
    for name in (FLEET_ENV, RUN_ENV):
        env[name] = base[name]
    return env


def prepared(launch: Launch) -> Launch:
    """What is really started for `launch`: the hook where a sandbox wraps the argv and environment
    (today unchanged). Every local process passes here, through `spawn`. A wrapper must keep the
    fleet's tag in the environment the server finally sees (`down` and the watchdog find it by
    that), and is itself the direct child that gets the parent-death signal (bubblewrap's
    `--die-with-parent` carries it to what runs inside)."""
    return launch


async def spawn(launch: Launch, **pipes: Any) -> asyncio.subprocess.Process:
    """Start `launch` (as `prepared` makes it) with the guarantees of the module docstring; `pipes` are
    `create_subprocess_exec`'s stdin / stdout / stderr / limit."""
    final = prepared(launch)
    return await asyncio.create_subprocess_exec(
        *final.argv,
        cwd=str(final.cwd),
        env=dict(final.env),
        start_new_session=True,  # own process group: stopping it stops its children too
        preexec_fn=die_with_parent(),
        **pipes,
    )
