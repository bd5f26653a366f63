"""`mcpfleet operator run`: the Kubernetes operator (kopf) for every mcpfleet kind."""

from __future__ import annotations

import typer

app = typer.Typer(help="The Kubernetes operator.", no_args_is_help=True)


@app.command()
def run(
    namespace: list[str] = typer.Option(
        [],
        "--namespace",
        "-n",
        help="Namespace to watch (repeat for several; globs allowed). Default: $MCPFLEET_NAMESPACES "
        "(comma-separated), else every namespace.",
    ),
    all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A", help="Watch every namespace."),
    kubeconfig: str | None = typer.Option(
        None,
        "--kubeconfig",
        help="Kubeconfig to use out of cluster ($MCPFLEET_KUBECONFIG; default: in-cluster).",
    ),
    resync_seconds: float | None = typer.Option(
        None, "--resync-seconds", help="Full resync period ($MCPFLEET_RESYNC_SECONDS, default 300)."
    ),
    runner_image: str | None = typer.Option(
        None, "--runner-image", help="Image of proxy containers ($MCPFLEET_RUNNER_IMAGE)."
    ),
    vmcp_image: str | None = typer.Option(
        None, "--vmcp-image", help="Image of vMCP containers ($MCPFLEET_VMCP_IMAGE)."
    ),
    registry_image: str | None = typer.Option(
        None, "--registry-image", help="Image of registry containers ($MCPFLEET_REGISTRY_IMAGE)."
    ),
    log_level: str | None = typer.Option(
        None, "--log-level", help="debug, info, warning, error ($MCPFLEET_LOG_LEVEL)."
    ),
    log_format: str | None = typer.Option(None, "--log-format", help="text or json ($MCPFLEET_LOG_FORMAT)."),
    workers: int | None = typer.Option(
        None, "--workers", help="Concurrent reconciles ($MCPFLEET_WORKERS, default 32)."
    ),
    metrics_port: int | None = typer.Option(
        None,
        "--metrics-port",
        help="Port of /metrics, /stats, /healthz ($MCPFLEET_METRICS_PORT, default 8080; "
        "0 = any free port; -1 = off).",
    ),
    metrics_host: str | None = typer.Option(None, "--metrics-host", help="Address of the metrics endpoint."),
    pending_grace_seconds: float | None = typer.Option(
        None,
        "--pending-grace-seconds",
        help="How long a new workload's first status waits for Running before showing Pending "
        "($MCPFLEET_PENDING_GRACE_SECONDS, default 2; 0 = at once).",
    ),
) -> None:
    """Watch mcpfleet objects and reconcile them into Deployments, Services, ConfigMaps and RBAC."""
    import asyncio

    from mcpfleet.operator.app import configure_logging, run_operator
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
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    configure_logging(settings)
    try:
        asyncio.run(run_operator(settings))
    except KeyboardInterrupt:
        pass
