"""`mcpfleet operator run`: the Kubernetes operator (kopf) for every mcpfleet kind."""

from __future__ import annotations

import typer

app = typer.Typer(help="The Kubernetes operator.", no_args_is_help=True)
LEADERSHIP_LOST_EXIT = 3
"""Exit status after losing the lease (the pod restarts as a standby)."""


# The options, declared once here so that the command reads as its parameters and its body.
_NAMESPACE = typer.Option(
    [],
    "--namespace",
    "-n",
    help="Namespace to watch (repeat for several; globs allowed). Default: $MCPFLEET_NAMESPACES "
    "(comma-separated), else every namespace.",
)
_ALL_NAMESPACES = typer.Option(False, "--all-namespaces", "-A", help="Watch every namespace.")
_KUBECONFIG = typer.Option(
    None,
    "--kubeconfig",
    help="Kubeconfig to use out of cluster ($MCPFLEET_KUBECONFIG; default: in-cluster).",
)
_RESYNC_SECONDS = typer.Option(
    None, "--resync-seconds", help="Full resync period ($MCPFLEET_RESYNC_SECONDS, default 300)."
)
_RUNNER_IMAGE = typer.Option(
    None, "--runner-image", help="Image of proxy containers ($MCPFLEET_RUNNER_IMAGE)."
)
_VMCP_IMAGE = typer.Option(None, "--vmcp-image", help="Image of vMCP containers ($MCPFLEET_VMCP_IMAGE).")
_REGISTRY_IMAGE = typer.Option(
    None, "--registry-image", help="Image of registry containers ($MCPFLEET_REGISTRY_IMAGE)."
)
_LOG_LEVEL = typer.Option(None, "--log-level", help="debug, info, warning, error ($MCPFLEET_LOG_LEVEL).")
_LOG_FORMAT = typer.Option(None, "--log-format", help="text or json ($MCPFLEET_LOG_FORMAT).")
_WORKERS = typer.Option(None, "--workers", help="Concurrent reconciles ($MCPFLEET_WORKERS, default 32).")
_METRICS_PORT = typer.Option(
    None,
    "--metrics-port",
    help="Port of /metrics, /stats, /healthz ($MCPFLEET_METRICS_PORT, default 8080; "
    "0 = any free port; -1 = off).",
)
_METRICS_HOST = typer.Option(None, "--metrics-host", help="Address of the metrics endpoint.")
_OTLP_ENDPOINT = typer.Option(
    None,
    "--otlp-endpoint",
    help="OTLP/HTTP collector the vMCP gateways and registry servers send traces to "
    "($MCPFLEET_OTLP_ENDPOINT; default: no tracing).",
)
_PENDING_GRACE_SECONDS = typer.Option(
    None,
    "--pending-grace-seconds",
    help="How long a new workload's first status waits for Running before showing Pending "
    "($MCPFLEET_PENDING_GRACE_SECONDS, default 2; 0 = at once).",
)
_LEADER_ELECT = typer.Option(
    None,
    "--leader-elect/--no-leader-elect",
    help="Hold a coordination.k8s.io Lease before watching or writing, so that several replicas can "
    "run and one leads ($MCPFLEET_LEADER_ELECT, default off).",
)
_LEADER_ELECTION_NAMESPACE = typer.Option(
    None,
    "--leader-election-namespace",
    help="Namespace of the Lease ($MCPFLEET_LEADER_ELECTION_NAMESPACE; default: the pod's own "
    "namespace, else default).",
)
_LEADER_ELECTION_ID = typer.Option(
    None,
    "--leader-election-id",
    help="Name of the Lease ($MCPFLEET_LEADER_ELECTION_ID, default mcpfleet-operator).",
)
_LEADER_ELECTION_LEASE_DURATION = typer.Option(
    None,
    "--leader-election-lease-duration",
    help="Seconds a standby waits after the lease last changed before taking it over "
    "($MCPFLEET_LEADER_ELECTION_LEASE_DURATION, default 15).",
)
_LEADER_ELECTION_RENEW_DEADLINE = typer.Option(
    None,
    "--leader-election-renew-deadline",
    help="Seconds the leader keeps trying to renew before it stops leading and exits "
    "($MCPFLEET_LEADER_ELECTION_RENEW_DEADLINE, default 10).",
)
_LEADER_ELECTION_RETRY_PERIOD = typer.Option(
    None,
    "--leader-election-retry-period",
    help="Seconds between renewals and acquire attempts ($MCPFLEET_LEADER_ELECTION_RETRY_PERIOD, default 2).",
)


@app.command()
def run(
    namespace: list[str] = _NAMESPACE,
    all_namespaces: bool = _ALL_NAMESPACES,
    kubeconfig: str | None = _KUBECONFIG,
    resync_seconds: float | None = _RESYNC_SECONDS,
    runner_image: str | None = _RUNNER_IMAGE,
    vmcp_image: str | None = _VMCP_IMAGE,
    registry_image: str | None = _REGISTRY_IMAGE,
    log_level: str | None = _LOG_LEVEL,
    log_format: str | None = _LOG_FORMAT,
    workers: int | None = _WORKERS,
    metrics_port: int | None = _METRICS_PORT,
    metrics_host: str | None = _METRICS_HOST,
    otlp_endpoint: str | None = _OTLP_ENDPOINT,
    pending_grace_seconds: float | None = _PENDING_GRACE_SECONDS,
    leader_elect: bool | None = _LEADER_ELECT,
    leader_election_namespace: str | None = _LEADER_ELECTION_NAMESPACE,
    leader_election_id: str | None = _LEADER_ELECTION_ID,
    leader_election_lease_duration: float | None = _LEADER_ELECTION_LEASE_DURATION,
    leader_election_renew_deadline: float | None = _LEADER_ELECTION_RENEW_DEADLINE,
    leader_election_retry_period: float | None = _LEADER_ELECTION_RETRY_PERIOD,
) -> None:
    """Watch mcpfleet objects and reconcile them into Deployments, Services, ConfigMaps and RBAC.

    Examples:

    \b
      mcpfleet operator run --kubeconfig "$KUBECONFIG" --namespace default
      MCPFLEET_LOG_LEVEL=debug mcpfleet operator run -A
    """
    import asyncio

    from mcpfleet.operator.app import configure_logging, run_operator
    from mcpfleet.operator.leader import LeadershipLost
    from mcpfleet.operator.settings import from_environment

    try:
        settings = from_environment(
            namespaces=namespace,
            all_namespaces=all_namespaces,
            resync_seconds=resync_seconds,
            runner_image=runner_image,
            vmcp_image=vmcp_image,
            registry_image=registry_image,
            log_level=log_level,
            log_format=log_format,
            kubeconfig=kubeconfig,
            workers=workers,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            pending_grace_seconds=pending_grace_seconds,
            otlp_endpoint=otlp_endpoint,
            leader_elect=leader_elect,
            leader_election_namespace=leader_election_namespace,
            leader_election_id=leader_election_id,
            leader_election_lease_duration=leader_election_lease_duration,
            leader_election_renew_deadline=leader_election_renew_deadline,
            leader_election_retry_period=leader_election_retry_period,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    configure_logging(settings)
    try:
        asyncio.run(run_operator(settings))
    except KeyboardInterrupt:
        pass
    except LeadershipLost as exc:
        # Exit non-zero: the pod restarts and joins again as a standby (client-go's controllers exit too).
        typer.echo(f"mcpfleet operator: leadership lost: {exc}; exiting", err=True)
        raise typer.Exit(LEADERSHIP_LOST_EXIT) from None
