"""Services hosted inside `mcpfleet up`: one interpreter for the whole local fleet.

On Kubernetes every stdio MCPServer runs `mcpfleet proxy -- COMMAND` in its own pod. Locally, one
Python interpreter per proxy cost ~60-90 MB each; `up` instead serves each such proxy's HTTP
endpoint from its own event loop (same app, same port, same `/health`, assembled by the same
`proxy.assemble.build_proxy` from the same `ProxyConfig`, the runner's reading of the rendered
`proxy.json` with the port it allocated: no argv is parsed) while the stdio server stays a child process of its own
(its own session and process group). What stays isolated per workload:

* a crash of a server: its proxy's `ChildProcess` restarts it with backoff, touching nothing else;
* a failure of the hosted endpoint itself (bind error, startup failure): the supervisor restarts
  that endpoint alone, with the same backoff as a process;
* logs: the child's stderr and the proxy's log records go to the workload's own log file, found
  through a context variable set for the endpoint's task (tasks it creates inherit it).

The vMCP gateway and the registry server are hosted the same way (`dataplane.run_hosted`: the
same assembly as their own process), when they need no environment of their own (no secrets, no
`OTEL_*` tracing set up: those are per process).

`hostable(command, has_env, proxy)` says which workloads run in-process: plain stdio proxies (a
`command`) without incoming auth (a relay to a remote, an attach and an `authConfig` keep their own
process: `ProxyConfig.needs_own_process`), the vMCP and the registry. `MCPFLEET_LOCAL_INPROCESS=0` runs each as its own process,
as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpfleet.proxy.config import ProxyConfig

INPROCESS_ENV = "MCPFLEET_LOCAL_INPROCESS"

_sink: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "mcpfleet_hosted_sink", default=None
)


_servers: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "mcpfleet_hosted_servers", default=None
)
DATAPLANE_MODULE = "mcpfleet.platform.local.dataplane"


def hostable(command: Sequence[str], has_env: bool = False, proxy: ProxyConfig | None = None) -> bool:
    """True when a container `command` runs in `up`'s process (see the module docstring); a proxy's
    `command` is judged by its config `proxy`."""
    if os.environ.get(INPROCESS_ENV, "1") == "0" or tuple(command[:1]) != ("mcpfleet",):
        return False
    if tuple(command[1:3]) in (("vmcp", "serve"), ("registry", "serve")):
        return not has_env and not any(name.startswith("OTEL_") for name in os.environ)
    return tuple(command[1:2]) == ("proxy",) and proxy is not None and not proxy.needs_own_process


def hand_over(server: Any) -> bool:
    """Called by a hosted service with its uvicorn server (the host stops it); False when not hosted."""
    slot = _servers.get()
    if slot is None:
        return False
    slot.append(server)
    return True


def say(text: str) -> bool:
    """Write a line to the current hosted workload's log; False when not hosted."""
    sink = _sink.get()
    if sink is None:
        return False
    sink(text)
    return True


class _ToWorkloadLog(logging.Filter):
    """Sends a record logged from a hosted endpoint's task to that workload's log, not `up`'s."""

    def filter(self, record: logging.LogRecord) -> bool:
        sink = _sink.get()
        if sink is None:
            return True
        with contextlib.suppress(Exception):
            sink(f"{record.levelname} {record.name}: {record.getMessage()}")
        return False


_FILTER = _ToWorkloadLog()
_filtered: set[str] = set()


def _route_logs() -> None:
    """Filter every proxy and uvicorn logger (a logger's filters do not apply to its children)."""
    prefixes = ("mcpfleet.proxy", "mcpfleet.vmcp", "mcpfleet.registry", "mcpfleet.local.dataplane")
    names = [n for n in logging.root.manager.loggerDict if n.startswith((*prefixes, "uvicorn", "mcp."))]
    for name in ["uvicorn", "uvicorn.error", *names]:
        if name not in _filtered:
            logging.getLogger(name).addFilter(_FILTER)
            _filtered.add(name)


class HostedService:
    """One workload's HTTP endpoint (a stdio proxy, the vMCP, the registry) served in this process."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        *,
        sink: Callable[[str], None],
        on_pid: Callable[[int], None],
        proxy: ProxyConfig | None = None,
    ) -> None:
        self.argv = list(argv)
        self.proxy = proxy
        self.env = dict(env)
        self.cwd = cwd
        self.sink = sink
        self.on_pid = on_pid
        self._servers: list[Any] = []
        self._stopping = False

    async def serve(self) -> None:
        """Serve until stopped (returns) or until it cannot (raises, the message for the status)."""
        _sink.set(self.sink)
        _servers.set(self._servers)
        in_dataplane = DATAPLANE_MODULE in self.argv
        # The service's imports run in a thread: seconds of work on a loaded machine that would
        # otherwise stall the event loop, i.e. every other endpoint, probe and status write of `up`.
        await asyncio.to_thread(_preload, _DATAPLANE_MODULES if in_dataplane else _PROXY_MODULES)
        _route_logs()
        if in_dataplane:
            from mcpfleet.platform.local import dataplane

            code = await dataplane.run_hosted(self.argv[self.argv.index(DATAPLANE_MODULE) + 1 :])
            if code != 0:
                raise RuntimeError(f"stopped with code {code}")
        else:
            server, sock = self._build_proxy()
            self._servers.append(server)
            await server._serve(sockets=[sock])  # `serve()` would take over `up`'s signal handlers
        _route_logs()
        if not self._stopping and not all(s.started for s in self._servers):
            raise RuntimeError("the endpoint did not start (see its log)")

    def _build_proxy(self) -> tuple[Any, Any]:
        import uvicorn

        from mcpfleet.httplimits import BodyLimits, uvicorn_options
        from mcpfleet.proxy.assemble import ChildContext, build_proxy
        from mcpfleet.proxy.child import ChildHooks
        from mcpfleet.proxy.config import ProxyConfigError
        from mcpfleet.proxy.serve import bind

        config = self.proxy
        if config is None:
            raise RuntimeError("a hosted proxy needs its config (proxy.json)")
        hooks = ChildHooks(inherit_env=False, stderr_sink=self.sink, on_pid=self.on_pid, spawn=self._spawn)
        try:
            app, limits = build_proxy(config, ChildContext(env=self.env, cwd=str(self.cwd), hooks=hooks))
        except ProxyConfigError as exc:  # what `mcpfleet proxy` would print: the field and the problem
            raise RuntimeError(str(exc)) from exc
        sock = bind(config.host, config.port)
        self.sink(f"mcpfleet proxy (in mcpfleet up, pid {os.getpid()}) listening on port {config.port}")
        uvicorn_config = uvicorn.Config(
            BodyLimits(app, limits),  # type: ignore[arg-type]
            loop="none",
            lifespan="on",
            log_level=config.log_level,
            access_log=False,
            timeout_graceful_shutdown=3,
            **uvicorn_options(limits),
        )
        return uvicorn.Server(uvicorn_config), sock

    async def _spawn(
        self, argv: Sequence[str], env: Mapping[str, str] | None, cwd: str | None, **pipes: Any
    ) -> asyncio.subprocess.Process:
        """The proxy's stdio server, started like every process of the fleet (`launch.spawn`)."""
        from mcpfleet.platform.local.launch import Launch, spawn

        return await spawn(Launch(tuple(argv), dict(env or self.env), Path(cwd or self.cwd)), **pipes)

    async def stop(self, task: asyncio.Task[None], grace: float = 5.0) -> None:
        """Ask the endpoint to shut down (a proxy's lifespan stops its child's process group), then wait."""
        self._stopping = True
        for server in self._servers:
            server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(task), grace)
        except (TimeoutError, Exception):
            for server in self._servers:
                server.force_exit = True
            with contextlib.suppress(TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(task), 2.0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


_PROXY_MODULES = ("uvicorn", "mcpfleet.proxy.assemble", "mcpfleet.proxy.serve", "mcpfleet.proxy.http_app")
_DATAPLANE_MODULES = (
    "uvicorn",
    "mcpfleet.vmcp.server",
    "mcpfleet.vmcp.backends",
    "mcpfleet.vmcp.status",
    "mcpfleet.registry.app",
    "mcpfleet.registry.service",
)


def _preload(modules: Sequence[str]) -> None:
    for name in modules:
        importlib.import_module(name)
