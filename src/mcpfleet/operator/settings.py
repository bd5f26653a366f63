"""Operator settings: from command-line flags, falling back to MCPFLEET_* environment variables."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from mcpfleet.reconcile.model import Images

DEFAULT_IMAGE = "ghcr.io/mcpfleet/mcpfleet:latest"
LogFormat = Literal["text", "json"]


@dataclass(frozen=True)
class OperatorSettings:
    """Everything `mcpfleet operator run` can be told."""

    namespaces: tuple[str, ...] = ()
    """Namespaces to watch; empty means every namespace (cluster-wide)."""
    resync_seconds: float = 300.0
    """Period of the full resync (every object reconciled again; idle ones write nothing)."""
    images: Images = field(default_factory=Images)
    log_level: str = "info"
    log_format: LogFormat = "text"
    kubeconfig: str | None = None
    """Out-of-cluster: this kubeconfig; in-cluster: the pod's service account when None."""
    workers: int = 32
    """Reconciles running at the same time (they mostly wait on the API server)."""
    metrics_port: int | None = 8080
    """Port of /metrics and /healthz (None: no endpoint; 0: any free port, printed at start)."""
    metrics_host: str = "0.0.0.0"
    pending_grace_seconds: float = 2.0
    """How long a new workload's first status may wait for a settled phase (0: write Pending at once).

    Most workloads start within a second or two: waiting spares them the Pending write that would be
    replaced by Running moments later. One still starting after the grace period shows Pending."""

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces


def _env_list(name: str) -> tuple[str, ...]:
    raw = os.environ.get(name, "")
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def from_environment(
    *,
    namespaces: list[str] | None = None,
    all_namespaces: bool = False,
    resync_seconds: float | None = None,
    runner_image: str | None = None,
    vmcp_image: str | None = None,
    registry_image: str | None = None,
    log_level: str | None = None,
    log_format: str | None = None,
    kubeconfig: str | None = None,
    workers: int | None = None,
    metrics_port: int | None = None,
    metrics_host: str | None = None,
    pending_grace_seconds: float | None = None,
) -> OperatorSettings:
    """Flags win over the environment; a bad value raises ValueError naming the flag and variable."""
    env = os.environ
    chosen = () if all_namespaces else tuple(namespaces or ()) or _env_list("MCPFLEET_NAMESPACES")
    if "*" in chosen:
        chosen = ()
    resync_raw = resync_seconds if resync_seconds is not None else env.get("MCPFLEET_RESYNC_SECONDS", "300")
    try:
        resync = float(resync_raw)
    except ValueError:
        raise ValueError(
            f"--resync-seconds / MCPFLEET_RESYNC_SECONDS: not a number: {resync_raw!r}"
        ) from None
    if resync <= 0:
        raise ValueError("--resync-seconds / MCPFLEET_RESYNC_SECONDS: must be positive")
    grace_raw = (
        pending_grace_seconds
        if pending_grace_seconds is not None
        else env.get("MCPFLEET_PENDING_GRACE_SECONDS", "2")
    )
    try:
        grace = float(grace_raw)
    except ValueError:
        raise ValueError(
            f"--pending-grace-seconds / MCPFLEET_PENDING_GRACE_SECONDS: not a number: {grace_raw!r}"
        ) from None
    if grace < 0:
        raise ValueError("--pending-grace-seconds / MCPFLEET_PENDING_GRACE_SECONDS: must not be negative")
    level = (log_level or env.get("MCPFLEET_LOG_LEVEL", "info")).lower()
    if level not in ("debug", "info", "warning", "error"):
        raise ValueError(
            f"--log-level / MCPFLEET_LOG_LEVEL: expected debug, info, warning or error, got {level!r}"
        )
    fmt = (log_format or env.get("MCPFLEET_LOG_FORMAT", "text")).lower()
    if fmt not in ("text", "json"):
        raise ValueError(f"--log-format / MCPFLEET_LOG_FORMAT: expected text or json, got {fmt!r}")
    default_image = env.get("MCPFLEET_IMAGE", DEFAULT_IMAGE)
    images = Images(
        runner=runner_image or env.get("MCPFLEET_RUNNER_IMAGE", default_image),
        vmcp=vmcp_image or env.get("MCPFLEET_VMCP_IMAGE", default_image),
        registry=registry_image or env.get("MCPFLEET_REGISTRY_IMAGE", default_image),
    )
    port_raw: str | int | None = (
        metrics_port if metrics_port is not None else env.get("MCPFLEET_METRICS_PORT", "8080")
    )
    try:
        port = int(port_raw) if port_raw not in (None, "", "none") else None
    except ValueError:
        raise ValueError(f"--metrics-port / MCPFLEET_METRICS_PORT: not a port: {port_raw!r}") from None
    if port is not None and port < 0:
        port = None
    return OperatorSettings(
        namespaces=chosen,
        resync_seconds=resync,
        images=images,
        log_level=level,
        log_format=fmt,  # type: ignore[arg-type]
        kubeconfig=kubeconfig or env.get("MCPFLEET_KUBECONFIG") or None,
        workers=workers if workers is not None else int(env.get("MCPFLEET_WORKERS", "32")),
        metrics_port=port,
        metrics_host=metrics_host or env.get("MCPFLEET_METRICS_HOST", "0.0.0.0"),
        pending_grace_seconds=grace,
    )
