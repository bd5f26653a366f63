"""`mcpfleet dev-cluster`: build, start, stop and inspect the local Kubernetes control plane.

Heavy imports (cryptography, httpx, the devcluster package) stay inside the command bodies so that
`mcpfleet --help` remains fast.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import typer

app = typer.Typer(
    help="A real Kubernetes control plane on 127.0.0.1 (etcd, apiserver, controllers, scheduler, kwok).",
    no_args_is_help=True,
)

StateDirOption = typer.Option(
    None,
    "--state-dir",
    envvar="MCPFLEET_DEV_CLUSTER_DIR",
    help="State dir (kubeconfig, certificates, etcd data, pid and log files). "
    "Default: ~/.cache/mcpfleet/dev-cluster.",
)


def _state_dir(value: Path | None) -> Path:
    from mcpfleet.devcluster.cluster import default_state_dir

    return value if value is not None else default_state_dir()


def _progress(message: str) -> None:
    # Progress goes to stderr: stdout carries only the result (kubeconfig path, env lines).
    typer.echo(message, err=True)


@app.command()
def build(
    jobs: int | None = typer.Option(None, "--jobs", "-p", help="go build -p: packages built in parallel."),
    helm: bool = typer.Option(
        False, "--helm", help="Also build Helm (for the charts under deploy/helm/), into its own bin dir."
    ),
    cluster: bool = typer.Option(
        True, "--cluster/--no-cluster", help="Build the cluster binaries (--no-cluster --helm: only Helm)."
    ),
    mcp_publisher: bool = typer.Option(
        False,
        "--mcp-publisher",
        help="Also build the official registry's mcp-publisher CLI (for the registry's login tests).",
    ),
    real_node: bool = typer.Option(
        False, "--real-node", help="Also build kubelet, kube-proxy, CoreDNS and the pause program."
    ),
) -> None:
    """Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok (once).

    Prints the bin directories (one a line); `mcpfleet dev-cluster env` puts them on PATH.

    Examples:

    \b
      mcpfleet dev-cluster build
    """
    from mcpfleet.devcluster.build import BuildError, BuildLayout, build_tools, default_cache_root
    from mcpfleet.devcluster.nodebuild import NodeLayout, build_node_locked

    layout = BuildLayout(default_cache_root())
    try:
        asyncio.run(
            build_tools(layout, _progress, jobs, cluster=cluster, helm=helm, mcp_publisher=mcp_publisher)
        )
        if real_node:
            asyncio.run(build_node_locked(NodeLayout(layout), _progress, jobs))
    except BuildError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    if cluster:
        typer.echo(str(layout.kube_bin))
    if helm:
        typer.echo(str(layout.helm_bin))
    if mcp_publisher:
        typer.echo(str(layout.mcp_publisher_bin))


@app.command()
def up(
    state_dir: Path | None = StateDirOption,
    nodes: int = typer.Option(3, "--nodes", "-n", min=1, max=500, help="Number of fake (kwok) nodes."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds to wait for each readiness step."),
    real_node: bool = typer.Option(
        False,
        "--real-node",
        help="Also attach one real node (kubelet, containerd, CNI bridge, kube-proxy, CoreDNS) "
        "where pods really run. Needs root; `down` undoes every host change.",
    ),
) -> None:
    """Start the cluster (building binaries the first time); prints the kubeconfig path.

    Examples:

    \b
      mcpfleet dev-cluster up
      eval "$(mcpfleet dev-cluster env)"
    """
    from mcpfleet.devcluster.build import BuildError
    from mcpfleet.devcluster.cluster import ClusterError, DevCluster
    from mcpfleet.devcluster.ociimage import ImageError
    from mcpfleet.devcluster.realnode import RealNodeError

    cluster = DevCluster(_state_dir(state_dir))
    try:
        info = asyncio.run(
            cluster.up(nodes=nodes, progress=_progress, ready_timeout=timeout, real_node=real_node)
        )
    except (ClusterError, BuildError, RealNodeError, ImageError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(str(info.kubeconfig))


@app.command()
def down(
    state_dir: Path | None = StateDirOption,
    purge: bool = typer.Option(False, "--purge", help="Also delete etcd data, certificates and logs."),
) -> None:
    """Stop every process `up` started (by pid); keep the data unless --purge.

    Examples:

    \b
      mcpfleet dev-cluster down
      mcpfleet dev-cluster down --purge
    """
    from mcpfleet.devcluster.cluster import ClusterError, DevCluster

    cluster = DevCluster(_state_dir(state_dir))
    try:
        stopped = asyncio.run(cluster.down(purge=purge))
    except ClusterError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
    if purge:
        typer.echo(f"purged: {cluster.state_dir}")


@app.command()
def status(state_dir: Path | None = StateDirOption) -> None:
    """Say which components run, whether the apiserver is ready and how many nodes are Ready.

    Exit status 0 when every component runs and /readyz answers, 1 otherwise.

    Examples:

    \b
      mcpfleet dev-cluster status && kubectl get nodes
    """
    from mcpfleet.devcluster.cluster import DevCluster

    cluster = DevCluster(_state_dir(state_dir))
    st = asyncio.run(cluster.status())
    typer.echo(f"state dir:  {st.state_dir}")
    for c in st.components:
        state = f"running (pid {c.pid})" if c.running else "stopped"
        typer.echo(f"  {c.name:<24} {state:<22} log {c.log}")
    typer.echo(f"apiserver:  {st.server or '-'} ({st.ready_detail})")
    if st.ports:
        typer.echo("ports:      " + ", ".join(f"{k}={v}" for k, v in st.ports.items()))
    typer.echo(f"nodes:      {st.nodes_ready} Ready")
    from mcpfleet.devcluster.realnode import RealNode

    node = RealNode(cluster)
    if node.attached():
        typer.echo(f"real node:  {asyncio.run(node.node_summary())}")
        for s in node.component_states():
            state = f"running (pid {s.pid})" if s.running else "stopped"
            typer.echo(f"  {s.name:<24} {state:<22} log {cluster.procs.log_file('realnode-' + s.name)}")
    else:
        typer.echo("real node:  not attached (`up --real-node` attaches one)")
    typer.echo(f"kubeconfig: {st.kubeconfig or '-'}")
    if not (st.all_running and st.ready):
        raise typer.Exit(1)


@app.command()
def env(state_dir: Path | None = StateDirOption) -> None:
    """Print shell lines exporting KUBECONFIG and putting the built kubectl (and helm) first on PATH.

    Use: eval "$(mcpfleet dev-cluster env)"

    Examples:

    \b
      eval "$(mcpfleet dev-cluster env)"
    """
    from mcpfleet.devcluster.build import BuildLayout, default_cache_root
    from mcpfleet.devcluster.cluster import DevCluster

    cluster = DevCluster(_state_dir(state_dir))
    layout = BuildLayout(default_cache_root())
    if not cluster.kubeconfig.exists():
        typer.echo(f"# no kubeconfig yet in {cluster.state_dir}: run `mcpfleet dev-cluster up`", err=True)
    sys.stdout.write(f"export KUBECONFIG={shlex.quote(str(cluster.kubeconfig))}\n")
    bins = f"{shlex.quote(str(layout.kube_bin))}:{shlex.quote(str(layout.helm_bin))}"
    sys.stdout.write(f'export PATH={bins}:"$PATH"\n')


@app.command()
def image(
    state_dir: Path | None = StateDirOption,
    repo: Path = typer.Option(Path("."), "--repo", help="The mcpfleet checkout to build the wheel from."),
    load: bool = typer.Option(
        True, "--load/--no-load", help="Import it into the real node's containerd if one is attached."
    ),
) -> None:
    """Build the mcpfleet OCI image with no registry and no Docker (debootstrap + wheel + umoci).

    Prints the image reference (`localhost/mcpfleet:<content hash>`). Needs root.

    Examples:

    \b
      mcpfleet dev-cluster image --repo .
      make image
    """
    from mcpfleet.devcluster.cluster import DevCluster
    from mcpfleet.devcluster.image import ImageBuildError, build_image
    from mcpfleet.devcluster.ociimage import ImageError, image_present, import_archive
    from mcpfleet.devcluster.realnode import RealNode

    try:
        ref, archive = build_image(repo.resolve(), _progress)
        node = RealNode(DevCluster(_state_dir(state_dir)))
        if load and node.containerd_socket.exists():
            if image_present(ref, str(node.containerd_socket)):
                _progress(f"{ref} is in the real node's containerd already")
            else:
                _progress(f"importing {ref} into the real node's containerd")
                import_archive(archive, str(node.containerd_socket))
        elif load:
            _progress("no real node attached: not imported (`up --real-node` imports it)")
    except (ImageBuildError, ImageError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(ref)


@app.command("install-operator")
def install_operator(
    state_dir: Path | None = StateDirOption,
    repo: Path = typer.Option(Path("."), "--repo", help="The mcpfleet checkout whose deploy/ is applied."),
    image_ref: str | None = typer.Option(
        None, "--image", help="Image to run (default: the one `mcpfleet dev-cluster image` built last)."
    ),
    timeout: int = typer.Option(180, "--timeout", help="Seconds to wait for the rollout."),
) -> None:
    """Install the operator in-cluster: `kubectl apply -k` of deploy/ with the local image, then wait.

    Examples:

    \b
      mcpfleet dev-cluster install-operator
      kubectl -n mcpfleet-system get pods
    """
    import subprocess

    from mcpfleet.devcluster.build import BuildLayout, default_cache_root
    from mcpfleet.devcluster.cluster import DevCluster
    from mcpfleet.devcluster.handle import ClusterHandle
    from mcpfleet.devcluster.image import ImageLayout
    from mcpfleet.devcluster.operator_install import DEPLOYMENT, NAMESPACE, write_overlay

    cluster = DevCluster(_state_dir(state_dir))
    ref_file = ImageLayout(default_cache_root()).ref_file
    ref = image_ref or (ref_file.read_text().strip() if ref_file.is_file() else "")
    if not ref:
        typer.echo("error: no image: run `make image` (or pass --image)", err=True)
        raise typer.Exit(1)
    overlay = write_overlay(repo.resolve() / "deploy", cluster.state_dir / "operator-overlay", ref)
    crds = repo.resolve() / "deploy" / "crds"
    handle = ClusterHandle(cluster.info())
    # deploy/'s CRDs convert through the operator's Service; the dev control plane serves that webhook
    # itself (the overlay turns the operator's off): swap the client to the Service for the apply
    # (server-side apply would otherwise keep both, which is refused), then back to the dev webhook.
    handle.use_shipped_conversion_clients(crds)
    kubectl = [str(BuildLayout(default_cache_root()).binary("kubectl")), f"--kubeconfig={cluster.kubeconfig}"]
    for args in (
        ["apply", "--server-side", "--force-conflicts", "-k", str(overlay)],
        ["-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", f"--timeout={timeout}s"],
    ):
        proc = subprocess.run([*kubectl, *args], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            typer.echo(f"error: kubectl {' '.join(args)}:\n{proc.stdout}{proc.stderr}", err=True)
            raise typer.Exit(1)
        if args[0] == "apply":
            handle.apply_crds(crds)
    typer.echo(f"operator {NAMESPACE}/{DEPLOYMENT} running {ref}")
