"""Operator settings: from command-line flags, falling back to MCPFLEET_* environment variables."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mcpfleet.reconcile.model import Images

DEFAULT_IMAGE = "ghcr.io/mcpfleet/mcpfleet:latest"
LogFormat = Literal["text", "json"]
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_LEASE_NAME = "mcpfleet-operator"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True)
class LeaderElectionSettings:
    """`--leader-elect`: hold a coordination.k8s.io/v1 Lease before watching or writing anything."""

    enabled: bool = False
    namespace: str = "default"
    """Namespace of the Lease: the pod's own namespace in a cluster."""
    name: str = DEFAULT_LEASE_NAME
    """Name of the Lease (`--leader-election-id`)."""
    lease_duration: float = 15.0
    """client-go's defaults: a standby takes over 15 s after it last saw the lease change; the leader
    gives up after 10 s without a successful renewal; both retry every 2 s."""
    renew_deadline: float = 10.0
    retry_period: float = 2.0


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
    otlp_endpoint: str | None = None
    """OTLP/HTTP collector the vMCP gateways and registry servers send traces to (None: no tracing)."""
    pending_grace_seconds: float = 2.0
    """How long a new workload's first status may wait for a settled phase (0: write Pending at once).

    Most workloads start within a second or two: waiting spares them the Pending write that would be
    replaced by Running moments later. One still starting after the grace period shows Pending."""
    leader_election: LeaderElectionSettings = field(default_factory=LeaderElectionSettings)
    """Off by default: one process, nothing to hold."""

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces


def _env_list(name: str) -> tuple[str, ...]:
    raw = os.environ.get(name, "")
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def default_leader_namespace() -> str:
    """The pod's own namespace (from its service-account mount), else `default`."""
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def _seconds(
    value: float | str | None, default: str, flag: str, variable: str, *, zero_ok: bool = False
) -> float:
    env_value = os.environ.get(variable)
    raw = value if value is not None else (env_value if env_value not in (None, "") else default)
    try:
        seconds = float(raw)
    except ValueError:
        raise ValueError(f"{flag} / {variable}: not a number of seconds: {raw!r}") from None
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero_ok):
        least = "a non-negative" if zero_ok else "a positive"
        raise ValueError(f"{flag} / {variable}: must be {least} number of seconds, got {raw!r}")
    return seconds


def _flag_bool(value: bool | None, flag: str, variable: str) -> bool:
    if value is not None:
        return value
    raw = os.environ.get(variable, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{flag} / {variable}: expected true or false, got {raw!r}")


def leader_election_settings(
    *,
    leader_elect: bool | None = None,
    namespace: str | None = None,
    lease_name: str | None = None,
    lease_duration: float | None = None,
    renew_deadline: float | None = None,
    retry_period: float | None = None,
) -> LeaderElectionSettings:
    """Flags win over the environment; validated as client-go validates its config."""
    env = os.environ
    elect = _flag_bool(leader_elect, "--leader-elect", "MCPFLEET_LEADER_ELECT")
    ns = namespace or env.get("MCPFLEET_LEADER_ELECTION_NAMESPACE") or default_leader_namespace()
    if len(ns) > 63 or not _DNS_LABEL.fullmatch(ns):
        raise ValueError(
            f"--leader-election-namespace / MCPFLEET_LEADER_ELECTION_NAMESPACE: not a namespace name: {ns!r}"
        )
    name = lease_name or env.get("MCPFLEET_LEADER_ELECTION_ID") or DEFAULT_LEASE_NAME
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        raise ValueError(f"--leader-election-id / MCPFLEET_LEADER_ELECTION_ID: not a Lease name: {name!r}")
    lease = _seconds(
        lease_duration, "15", "--leader-election-lease-duration", "MCPFLEET_LEADER_ELECTION_LEASE_DURATION"
    )
    renew = _seconds(
        renew_deadline, "10", "--leader-election-renew-deadline", "MCPFLEET_LEADER_ELECTION_RENEW_DEADLINE"
    )
    retry = _seconds(
        retry_period, "2", "--leader-election-retry-period", "MCPFLEET_LEADER_ELECTION_RETRY_PERIOD"
    )
    if lease < 1:
        raise ValueError(
            "--leader-election-lease-duration / MCPFLEET_LEADER_ELECTION_LEASE_DURATION: "
            f"must be at least 1 second, got {lease:g}"
        )
    if renew >= lease:
        raise ValueError(
            "--leader-election-renew-deadline / MCPFLEET_LEADER_ELECTION_RENEW_DEADLINE: "
            f"must be shorter than the lease duration ({renew:g}s >= {lease:g}s)"
        )
    if renew <= 1.2 * retry:
        raise ValueError(
            "--leader-election-retry-period / MCPFLEET_LEADER_ELECTION_RETRY_PERIOD: "
            f"the renew deadline ({renew:g}s) must exceed 1.2 x the retry period ({retry:g}s)"
        )
    return LeaderElectionSettings(
        enabled=elect,
        namespace=ns,
        name=name,
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
    )


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
    otlp_endpoint: str | None = None,
    pending_grace_seconds: float | None = None,
    leader_elect: bool | None = None,
    leader_election_namespace: str | None = None,
    leader_election_id: str | None = None,
    leader_election_lease_duration: float | None = None,
    leader_election_renew_deadline: float | None = None,
    leader_election_retry_period: float | None = None,
) -> OperatorSettings:
    """Flags win over the environment; a bad value raises ValueError naming the flag and variable."""
    env = os.environ
    chosen = () if all_namespaces else tuple(namespaces or ()) or _env_list("MCPFLEET_NAMESPACES")
    if "*" in chosen:
        chosen = ()
    resync = _seconds(resync_seconds, "300", "--resync-seconds", "MCPFLEET_RESYNC_SECONDS")
    grace = _seconds(
        pending_grace_seconds,
        "2",
        "--pending-grace-seconds",
        "MCPFLEET_PENDING_GRACE_SECONDS",
        zero_ok=True,
    )
    level, fmt = _log_settings(log_level, log_format)
    default_image = env.get("MCPFLEET_IMAGE", DEFAULT_IMAGE)
    images = Images(
        runner=runner_image or env.get("MCPFLEET_RUNNER_IMAGE", default_image),
        vmcp=vmcp_image or env.get("MCPFLEET_VMCP_IMAGE", default_image),
        registry=registry_image or env.get("MCPFLEET_REGISTRY_IMAGE", default_image),
    )
    port = _metrics_port(metrics_port)
    leader_election = leader_election_settings(
        leader_elect=leader_elect,
        namespace=leader_election_namespace,
        lease_name=leader_election_id,
        lease_duration=leader_election_lease_duration,
        renew_deadline=leader_election_renew_deadline,
        retry_period=leader_election_retry_period,
    )
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
        otlp_endpoint=_otlp_endpoint(otlp_endpoint or env.get("MCPFLEET_OTLP_ENDPOINT") or None),
        pending_grace_seconds=grace,
        leader_election=leader_election,
    )


def _log_settings(log_level: str | None, log_format: str | None) -> tuple[str, str]:
    env = os.environ
    level = (log_level or env.get("MCPFLEET_LOG_LEVEL", "info")).lower()
    if level not in ("debug", "info", "warning", "error"):
        raise ValueError(
            f"--log-level / MCPFLEET_LOG_LEVEL: expected debug, info, warning or error, got {level!r}"
        )
    fmt = (log_format or env.get("MCPFLEET_LOG_FORMAT", "text")).lower()
    if fmt not in ("text", "json"):
        raise ValueError(f"--log-format / MCPFLEET_LOG_FORMAT: expected text or json, got {fmt!r}")
    return level, fmt


def _metrics_port(metrics_port: int | None) -> int | None:
    """The metrics port; None (no endpoint) for -1, none or empty."""
    env = os.environ
    port_raw: str | int | None = (
        metrics_port if metrics_port is not None else env.get("MCPFLEET_METRICS_PORT", "8080")
    )
    try:
        port = int(port_raw) if port_raw not in (None, "", "none") else None
    except ValueError:
        raise ValueError(f"--metrics-port / MCPFLEET_METRICS_PORT: not a port: {port_raw!r}") from None
    if port is not None and port < 0:
        port = None
    return port


def _otlp_endpoint(value: str | None) -> str | None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValueError(
            f"--otlp-endpoint / MCPFLEET_OTLP_ENDPOINT: expected an http(s):// URL, got {value!r}"
        )
    return value
