"""A package launcher that can never succeed: `uvx`/`npx` offline, asked for a package it does not have.

The mcpfleet image runs `uvx://` and `npx://` servers with no package registry (`UV_OFFLINE=1`,
`NPM_CONFIG_OFFLINE=true`, caches filled when the image is built). A package that is not in those
caches fails the same way on every restart, so restarting it forever only hides the cause behind
"0/1 replicas ready". When the child's stderr shows this case, the runner gives up: it writes one
clear message (the package, and that it is not available offline in the image) to the container's
termination log and stops, so Kubernetes shows it in the pod's `lastState.terminated.message`, from
where the operator copies it into the workload's status.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Mapping, Sequence

log = logging.getLogger(__name__)

TERMINATION_LOG = "/dev/termination-log"
"""Kubernetes' default `terminationMessagePath`; `MCPFLEET_TERMINATION_LOG` overrides it."""

_MAX_MESSAGE = 3500
"""Kubernetes keeps at most 4096 bytes of a termination message."""

# What uv and npm print when offline and the package is not cached (uv 0.9, npm 10).
_UV_MARKERS = ("not found in the cache", "network was disabled")
_NPM_MARKERS = ("ENOTCACHED",)


def _enabled(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _package(command: Sequence[str]) -> str | None:
    """The package a launcher command runs: `uvx PKG ...`, `npx [-y] PKG ...`."""
    for arg in command[1:]:
        if not arg.startswith("-"):
            return arg
    return None


def offline_miss(command: Sequence[str], stderr: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The message to show when `command` failed because its package is not in the offline cache."""
    launcher = os.path.basename(command[0]) if command else ""
    text = "\n".join(stderr)
    if launcher == "uvx" and _enabled(env, "UV_OFFLINE") and all(m in text for m in _UV_MARKERS):
        scheme, cache = "uvx", "uv cache"
    elif launcher == "npx" and _enabled(env, "NPM_CONFIG_OFFLINE") and any(m in text for m in _NPM_MARKERS):
        scheme, cache = "npx", "npm cache"
    else:
        return None
    package = _package(command) or "?"
    cause = next(
        (line.strip() for line in stderr if any(m in line for m in (*_UV_MARKERS, *_NPM_MARKERS))), ""
    )
    message = (
        f"package {package} ({scheme}://{package}) is not available offline in the image: it is not in "
        f"the image's {cache} and the pod has no package registry. Build the image with it "
        f"(docs/dev-cluster.md, `make image`) or use an image that has it. {launcher}: {cause}"
    )
    return message[:_MAX_MESSAGE]


def give_up(message: str, env: Mapping[str, str] | None = None) -> None:
    """Record `message` as the container's termination message and stop this process (SIGTERM: the
    server shuts down cleanly; Kubernetes restarts the container with back-off)."""
    env = os.environ if env is None else env
    path = env.get("MCPFLEET_TERMINATION_LOG") or TERMINATION_LOG
    log.error("giving up: %s", message)
    if os.path.exists(path) or "MCPFLEET_TERMINATION_LOG" in env:
        with contextlib.suppress(OSError), open(path, "w", encoding="utf-8") as f:
            f.write(message)
    os.kill(os.getpid(), signal.SIGTERM)
