"""Stdio proxies hosted inside `mcpfleet up`: one interpreter for the whole local fleet.

On Kubernetes every stdio MCPServer runs `mcpfleet proxy -- COMMAND` in its own pod. Locally, one
Python interpreter per proxy cost ~60-90 MB each; `up` instead serves each such proxy's HTTP
endpoint from its own event loop (same app, same port, same `/health`, built by the same
`cli.proxy.build` from the same argv) while the stdio server stays a child process of its own
(its own session and process group). What stays isolated per workload:

* a crash of a server: its proxy's `ChildProcess` restarts it with backoff, touching nothing else;
* a failure of the hosted endpoint itself (bind error, startup failure): the supervisor restarts
  that endpoint alone, with the same backoff as a process;
* logs: the child's stderr and the proxy's log records go to the workload's own log file, found
  through a context variable set for the endpoint's task (tasks it creates inherit it).

`hostable(argv)` says which argv run in-process: plain stdio proxies (a command after `--`) without
incoming auth; `--remote`, `--attach` and `--auth-config` keep their own process. Setting
`MCPFLEET_LOCAL_INPROCESS=0` runs every proxy as its own process, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

INPROCESS_ENV = "MCPFLEET_LOCAL_INPROCESS"
_OWN_PROCESS_FLAGS = ("--remote", "--attach", "--auth-config")

_sink: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "mcpfleet_hosted_sink", default=None
)


def hostable(argv: Sequence[str]) -> bool:
    """True when `argv` is a `mcpfleet proxy` that `up` serves in-process (see the module docstring)."""
    if os.environ.get(INPROCESS_ENV, "1") == "0":
        return False
    if tuple(argv[:2]) != ("mcpfleet", "proxy") or "--" not in argv:
        return False
    options = argv[2 : list(argv).index("--")]
    return not any(o == flag or o.startswith(flag + "=") for o in options for flag in _OWN_PROCESS_FLAGS)


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
    names = [
        n for n in logging.root.manager.loggerDict if n.startswith(("mcpfleet.proxy", "uvicorn", "mcp."))
    ]
    for name in ["uvicorn", "uvicorn.error", *names]:
        if name not in _filtered:
            logging.getLogger(name).addFilter(_FILTER)
            _filtered.add(name)


class HostedProxy:
    """One stdio proxy's HTTP endpoint served in this process until `stop()`."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        *,
        sink: Callable[[str], None],
        on_pid: Callable[[int], None],
    ) -> None:
        self.argv = list(argv)
        self.env = dict(env)
        self.cwd = cwd
        self.sink = sink
        self.on_pid = on_pid
        self._server: Any = None

    async def serve(self) -> None:
        """Build the app from the argv and serve it; returns when stopped, raises when it cannot."""
        _sink.set(self.sink)
        server, sock = self._build()
        self._server = server
        await server._serve(sockets=[sock])  # `serve()` would take over `up`'s signal handlers
        if server.started is False and not server.should_exit:
            raise RuntimeError("the proxy endpoint did not start (see its log)")

    def _build(self) -> tuple[Any, Any]:
        import click
        import uvicorn

        from mcpfleet.cli import proxy as proxy_cli
        from mcpfleet.httplimits import BodyLimits, uvicorn_options
        from mcpfleet.proxy.child import ChildHooks
        from mcpfleet.proxy.serve import bind

        hooks = ChildHooks(inherit_env=False, stderr_sink=self.sink, on_pid=self.on_pid)
        try:
            # After `proxy`: the argv starts with the mcpfleet script or `python -m mcpfleet.cli.main`.
            options = self.argv[self.argv.index("proxy") + 1 :]
            ctx = _proxy_command().make_context("proxy", options)
            params = dict(ctx.params)
            app, limits = proxy_cli.build(
                list(ctx.args), **params, env=self.env, cwd=str(self.cwd), hooks=hooks
            )
        except click.ClickException as exc:  # a usage error, as `mcpfleet proxy` would print it
            raise RuntimeError(exc.format_message()) from exc
        _route_logs()
        sock = bind(str(params["host"]), int(params["port"]))
        self.sink(f"mcpfleet proxy (in mcpfleet up, pid {os.getpid()}) listening on port {params['port']}")
        config = uvicorn.Config(
            BodyLimits(app, limits),  # type: ignore[arg-type]
            loop="none",
            lifespan="on",
            log_level=str(params["log_level"]),
            access_log=False,
            timeout_graceful_shutdown=3,
            **uvicorn_options(limits),
        )
        return uvicorn.Server(config), sock

    async def stop(self, task: asyncio.Task[None], grace: float = 5.0) -> None:
        """Ask the endpoint to shut down (its lifespan stops the child's process group), then wait."""
        if self._server is not None:
            self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(task), grace)
        except (TimeoutError, Exception):
            if self._server is not None:
                self._server.force_exit = True
            with contextlib.suppress(TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(task), 2.0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


_command: Any = None


def _proxy_command() -> Any:
    """The click command of `mcpfleet proxy`, built once: its parser turns the argv into params."""
    global _command
    if _command is None:
        import typer

        from mcpfleet.cli import proxy as proxy_cli

        app = typer.Typer()
        app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
            proxy_cli.proxy
        )
        _command = typer.main.get_command(app)
    return _command
