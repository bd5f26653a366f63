"""Entry point of the vMCP and registry processes on the local platform.

`python -m mcpfleet.platform.local.dataplane vmcp|registry --state-dir S -- ARGS` runs the same
server as `mcpfleet vmcp serve ARGS` / `mcpfleet registry serve ARGS`, built through the services'
own assembly functions, with discovery swapped for the local one: the vMCP follows its group in the
local state (`LocalBackendSource`) and writes its status report to a file the reconcile loop reads;
the registry's `kubernetes` sources list the locally running labelled workloads (`LocalWorkloads`)
and re-sync as soon as they change. This is to the local platform what the ServiceAccount and RBAC
rules are on Kubernetes: how the workload reaches the platform's state, not what it runs.
Tracing follows the standard `OTEL_*` environment variables the children inherit from `mcpfleet up`
(docs/observability.md).

`mcpfleet up` usually runs these in its own process (`run_hosted`, from `hosted.HostedService`):
the same functions, with the uvicorn server handed to the host (which stops it) instead of taking
over the process' signal handlers, and messages going to the workload's log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from pathlib import Path
from typing import Any

from mcpfleet import malloctune, telemetry
from mcpfleet.httplimits import BodyLimits, HttpLimits, uvicorn_options
from mcpfleet.platform.local import hosted
from mcpfleet.platform.local.discovery import LocalBackendSource, LocalWorkloads, state_changes
from mcpfleet.reconcile.model import is_member_backend

log = logging.getLogger("mcpfleet.local.dataplane")
FOLLOW_INTERVAL = 2.0
"""The registry re-reads the labelled workloads at least this often; at once on a state change."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcpfleet-local-dataplane")
    parser.add_argument("service", choices=("vmcp", "registry"))
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--config", "-c", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--status-file", type=Path, default=None)
    parser.add_argument("--log-level", default="info")
    # vMCP session limits, as `mcpfleet vmcp serve` (default: $MCPFLEET_VMCP_*, else built in).
    parser.add_argument("--max-sessions", default=None)
    parser.add_argument("--session-idle-timeout", default=None)
    # VirtualMCPServer authServerConfig, as `mcpfleet vmcp serve --authserver-config`.
    parser.add_argument("--authserver-config", default=None)
    return parser


async def _serve(
    app: object,
    host: str,
    port: int,
    limits: HttpLimits | None = None,
    protocol: dict[str, Any] | None = None,
) -> None:
    """Serve `app`; with `limits`, within them, as `mcpfleet vmcp serve` does (docs/security.md);
    `protocol`: uvicorn options of an app already wrapped in its limits (the registry's)."""
    import uvicorn

    protocol = protocol or {"http": "httptools"}
    if limits is not None:
        app = BodyLimits(app, limits)  # type: ignore[arg-type]
        protocol = uvicorn_options(limits)
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        loop="none",
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
        **protocol,
    )
    server = uvicorn.Server(config)
    if not hosted.hand_over(server):
        await server.serve()
        return
    await server._serve()  # in `up`: its signals stay `up`'s; the host stops the server


def _say(text: str) -> None:
    """A line for the operator: the process' stderr, or the workload's log when hosted by `up`."""
    if not hosted.say(text):
        print(text, file=sys.stderr, flush=True)


async def run_vmcp(args: argparse.Namespace) -> int:
    from mcpfleet.vmcp.backends import BackendSource, CombinedBackendSource
    from mcpfleet.vmcp.config import ConfigError, load_config
    from mcpfleet.vmcp.server import (
        ServeOptions,
        build_app,
        load_auth_server,
        session_limits,
        static_specs,
        with_auth_server,
    )
    from mcpfleet.vmcp.status import FileStatusWriter, NoopStatusWriter, StatusWriter

    try:
        config = load_config(args.config)
        limit, idle = session_limits(args.max_sessions, args.session_idle_timeout)
        # HTTP limits from the $MCPFLEET_* variables `mcpfleet up` passes on, as for the CLI.
        limits = HttpLimits.from_env()
        auth_server = load_auth_server(args.authserver_config, None) if args.authserver_config else None
    except (ConfigError, ValueError) as exc:
        _say(f"error: {exc}")
        return 2
    source: BackendSource
    static = static_specs(config)
    if config.group_ref:
        # Members were rendered with the URLs of that moment; the live source replaces them.
        static = [s for s in static if not is_member_backend({"metadata": dict(s.metadata)})]
        namespace = config.namespace or args.namespace
        local = LocalBackendSource(args.state_dir, config.group_ref, namespace)
        source = CombinedBackendSource(static, local) if static else local
    else:
        from mcpfleet.vmcp.backends import StaticBackendSource

        source = StaticBackendSource(static)
    writer: StatusWriter = FileStatusWriter(args.status_file) if args.status_file else NoopStatusWriter()
    options = ServeOptions(
        host=args.host,
        port=args.port,
        max_sessions=limit,
        session_idle_seconds=idle,
        max_json_depth=limits.max_json_depth,
        config_file=str(args.config),
    )
    try:
        provider = telemetry.setup_tracing(
            "mcpfleet-vmcp", resource_attributes={"mcpfleet.vmcp.name": config.name}
        )
    except telemetry.TracingConfigError as exc:
        _say(f"error: {exc}")
        return 2
    try:
        gateway = build_app(
            config,
            options,
            source=source,
            status_writer=writer,
            tracer=telemetry.tracer_of(provider),
            auth_server=auth_server,
        )
    except ConfigError as exc:
        _say(f"error: {exc}")
        return 2
    app = with_auth_server(gateway, auth_server) if auth_server is not None else gateway
    _say(f"mcpfleet vmcp listening on http://{args.host}:{args.port}/mcp")
    try:
        await _serve(app, args.host, args.port, limits)
    finally:
        telemetry.shutdown(provider)
    return 0


async def run_registry(args: argparse.Namespace) -> int:
    from mcpfleet.registry.app import create_app, served
    from mcpfleet.registry.config import ConfigError, load_config
    from mcpfleet.registry.service import RegistryService

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        _say(f"error: {exc}")
        return 2
    namespaces = sorted({ns for s in config.sources if s.kubernetes for ns in s.kubernetes.namespaces})
    try:
        provider = telemetry.setup_tracing(
            "mcpfleet-registry", resource_attributes={"mcpfleet.registry.name": config.registryName}
        )
    except telemetry.TracingConfigError as exc:
        _say(f"error: {exc}")
        return 2
    tracer = telemetry.tracer_of(provider)
    service = RegistryService(
        config,
        args.config.resolve().parent,
        workloads=LocalWorkloads(args.state_dir, config.registryName, namespaces),
        tracer=tracer,
    )
    await service.start()
    follower = asyncio.create_task(
        _follow_workloads(service, args.state_dir, config.registryName, namespaces)
    )
    _say(f"mcpfleet registry listening on http://{args.host}:{args.port}")
    try:
        # Within the config's `server.*` connection and body limits, as `mcpfleet registry serve`.
        asgi, options = served(create_app(service, manage_lifespan=False, tracer=tracer))
        await _serve(asgi, args.host, args.port, protocol=options)
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        await service.stop()
        telemetry.shutdown(provider)
    return 0


async def _follow_workloads(service: object, state_dir: Path, registry: str, namespaces: list[str]) -> None:
    """Re-sync the registry's kubernetes sources as soon as the labelled local workloads change."""
    from mcpfleet.registry.service import RegistryService

    assert isinstance(service, RegistryService)
    watcher = LocalWorkloads(state_dir, registry, namespaces)
    sources = [s.name for s in service.config.sources if s.kubernetes is not None]
    last: str | None = None
    try:
        async for _ in state_changes(state_dir, FOLLOW_INTERVAL):
            try:
                current = await watcher.fingerprint()
            except Exception as exc:
                log.debug("reading the local state failed: %s", exc)
                continue
            if current != last:
                # Also on the first read: workloads may have changed since the initial sync round.
                for name in sources:
                    await service.syncer.sync_source(name)
                last = current
    finally:
        await watcher.close()


async def run_hosted(argv: list[str]) -> int:
    """Run the service of `argv` (this module's arguments) in the running loop, for `up`."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse's usage error must not end `up`
        return exc.code if isinstance(exc.code, int) else 2
    return await (run_vmcp if args.service == "vmcp" else run_registry)(args)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    runner = run_vmcp if args.service == "vmcp" else run_registry
    malloctune.tune()
    try:
        import uvloop

        return uvloop.run(runner(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
