"""Supervised stdio child process: spawn, line-framed JSON-RPC I/O, restart with exponential backoff.

The child speaks newline-delimited JSON-RPC on stdin/stdout (the MCP stdio transport). Its
stderr is drained continuously (a full pipe would block the child), passed through to the
proxy's own stderr (so the proxy's log shows why a server died) and the last lines are kept
for `/health` and status. When the child exits the supervisor reports it through
`on_exit` (so in-flight requests can be failed) and starts it again after a backoff that
doubles on every quick crash and resets once a run lasted `stable_after` seconds.

A proxy hosted inside another process (`mcpfleet up` hosts every local stdio proxy in-process,
`platform/local/hosted.py`) passes `ChildHooks`: the exact environment (not merged into the host's,
which holds other workloads' secrets), where stderr lines go instead of the host's stderr, and the
pid of each spawn (recorded so `mcpfleet down` can find the child), and how to start the child
(`mcpfleet up` starts every process through `platform/local/launch.spawn`). Started here, the child
gets the parent-death signal (`deathsig`): a proxy that dies takes its server with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from mcpfleet import jsonrpc
from mcpfleet.backoff import Backoff
from mcpfleet.deathsig import die_with_parent
from mcpfleet.proxy.unavailable import give_up, offline_miss
from mcpfleet.sandboxcmd import server_command

log = logging.getLogger(__name__)

MessageHandler = Callable[[dict[str, Any]], Awaitable[None]]
LifecycleHandler = Callable[[], Awaitable[None]]
Spawner = Callable[..., Awaitable[asyncio.subprocess.Process]]

# A single JSON-RPC line may be large (embedded resources, images); 64 MiB bounds memory.
_LINE_LIMIT = 64 * 1024 * 1024
_PASSED_LINE_LIMIT = 8192
"""A child's stderr line is passed to our stderr cut to this many characters."""


@dataclass(frozen=True)
class ChildHooks:
    """How a host that is not a proxy process of its own runs children (see the module docstring)."""

    inherit_env: bool = True
    """False: the child's environment is exactly `env`, nothing of the host's own."""
    stderr_sink: Callable[[str], None] | None = None
    """Receives each stderr line (cut to _PASSED_LINE_LIMIT) instead of the host's stderr."""
    on_pid: Callable[[int], None] | None = None
    """Called with the pid of every spawn."""
    spawn: Spawner | None = None
    """Starts the child instead of `create_subprocess_exec` (argv, env, cwd, then the pipes)."""


class ChildUnavailableError(RuntimeError):
    """The child is not running (starting, restarting or stopped)."""


@dataclass
class ChildStatus:
    """What `/health` and status report about the child."""

    command: list[str]
    running: bool = False
    pid: int | None = None
    restarts: int = 0
    last_exit_code: int | None = None
    last_started: float | None = None
    next_restart_in: float | None = None
    stderr_tail: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "running": self.running,
            "pid": self.pid,
            "restarts": self.restarts,
            "lastExitCode": self.last_exit_code,
            "nextRestartIn": self.next_restart_in,
            "stderrTail": self.stderr_tail,
        }


class ChildProcess:
    """One supervised stdio MCP server process."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        on_message: MessageHandler,
        on_exit: LifecycleHandler | None = None,
        on_start: LifecycleHandler | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        backoff: Backoff | None = None,
        stderr_lines: int = 50,
        name: str = "child",
        hooks: ChildHooks | None = None,
    ) -> None:
        if not command:
            raise ValueError("command: at least the executable is required")
        self._command = list(command)
        # What messages and status name: the server's own command, not its sandbox's wrapper.
        self._shown = server_command(command)
        self._on_message = on_message
        self._on_exit = on_exit
        self._on_start = on_start
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._backoff = backoff or Backoff()
        self._stderr: deque[str] = deque(maxlen=stderr_lines)
        self._name = name
        self._hooks = hooks or ChildHooks()
        self._proc: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._write_lock = asyncio.Lock()
        self._running = asyncio.Event()
        self._stopping = False
        self._restarts = 0
        self._failures = 0
        self._last_exit: int | None = None
        self._last_started: float | None = None
        self._next_restart_at: float | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start supervising; returns once the first spawn was attempted."""
        if self._supervisor is not None:
            return
        self._stopping = False
        first = asyncio.get_running_loop().create_future()
        self._supervisor = asyncio.create_task(self._supervise(first), name=f"{self._name}-supervisor")
        await first

    async def stop(self, grace: float = 3.0) -> None:
        """Stop the child's process group (SIGTERM, then SIGKILL after `grace`) and the supervisor.

        The whole group: launchers such as `uvx` or `npx` run the actual server as their own child.
        """
        self._stopping = True
        proc = self._proc
        if proc is not None and proc.returncode is None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            _signal_group(proc, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                _signal_group(proc, signal.SIGKILL)
                await proc.wait()
            # A launcher may exit on SIGTERM before its own child does; make sure none lingers.
            _signal_group(proc, signal.SIGKILL)
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None

    @property
    def running(self) -> bool:
        return self._running.is_set()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def status(self) -> ChildStatus:
        next_in = None
        if self._next_restart_at is not None:
            next_in = max(0.0, round(self._next_restart_at - time.monotonic(), 3))
        return ChildStatus(
            command=self._shown,
            running=self.running,
            pid=self.pid if self.running else None,
            restarts=self._restarts,
            last_exit_code=self._last_exit,
            last_started=self._last_started,
            next_restart_in=next_in,
            stderr_tail=list(self._stderr),
        )

    # -- I/O -------------------------------------------------------------------------------------

    async def send(self, message: Mapping[str, Any]) -> None:
        """Write one JSON-RPC message as a line on the child's stdin."""
        proc = self._proc
        if not self.running or proc is None or proc.stdin is None:
            raise ChildUnavailableError(f"{self._name} is not running")
        data = orjson.dumps(message) + b"\n"
        async with self._write_lock:
            try:
                proc.stdin.write(data)
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise ChildUnavailableError(f"{self._name} closed its stdin") from exc

    # -- internals -------------------------------------------------------------------------------

    async def _supervise(self, first: asyncio.Future[None]) -> None:
        try:
            while not self._stopping:
                started = time.monotonic()
                try:
                    await self._spawn()
                except OSError as exc:
                    self._stderr.append(f"[mcpfleet] cannot start {self._shown[0]}: {exc}")
                    log.error("%s: cannot start %s: %s", self._name, self._shown[0], exc)
                    self._last_exit = None
                else:
                    if not first.done():
                        first.set_result(None)
                    await self._run_until_exit()
                if not first.done():
                    first.set_result(None)
                if self._stopping:
                    break
                unavailable = offline_miss(
                    self._shown, list(self._stderr), {**os.environ, **(self._env or {})}
                )
                if unavailable is not None:
                    # Restarting cannot help (docs/dev-cluster.md): say why once and stop the runner.
                    self._stderr.append(f"[mcpfleet] {unavailable}")
                    give_up(unavailable)
                    break
                ran_for = time.monotonic() - started
                self._failures = self._backoff.failures_after(self._failures, ran_for)
                delay = self._backoff.delay(self._failures)
                log.warning(
                    "%s exited (code %s) after %.1fs; restarting in %.2fs",
                    self._name,
                    self._last_exit,
                    ran_for,
                    delay,
                )
                self._next_restart_at = time.monotonic() + delay
                await asyncio.sleep(delay)
                self._next_restart_at = None
                self._restarts += 1
        finally:
            if not first.done():
                first.set_result(None)

    async def _spawn(self) -> None:
        env = None
        if self._env is not None:
            env = {**os.environ, **self._env} if self._hooks.inherit_env else dict(self._env)
        pipes: dict[str, Any] = {
            "stdin": asyncio.subprocess.PIPE,
            "stdout": asyncio.subprocess.PIPE,
            "stderr": asyncio.subprocess.PIPE,
            "limit": _LINE_LIMIT,
        }
        if self._hooks.spawn is not None:
            self._proc = await self._hooks.spawn(self._command, env, self._cwd, **pipes)
        else:
            self._proc = await asyncio.create_subprocess_exec(
                *self._command,
                env=env,
                cwd=self._cwd,
                # Own process group: a Ctrl-C on the proxy's terminal must not reach the child
                # before the proxy has drained it.
                start_new_session=True,
                preexec_fn=die_with_parent(),
                **pipes,
            )
        self._last_started = time.time()
        self._running.set()
        if self._hooks.on_pid is not None:
            self._hooks.on_pid(self._proc.pid)
        log.info("%s started (pid %s): %s", self._name, self._proc.pid, " ".join(self._command))
        if self._on_start is not None:
            await self._on_start()

    async def _run_until_exit(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        stderr_task = asyncio.create_task(self._drain_stderr(proc.stderr))
        try:
            while True:
                try:
                    line = await proc.stdout.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    log.error("%s wrote a line over %d bytes; dropping it", self._name, _LINE_LIMIT)
                    continue
                if not line:
                    break
                line = line.strip()
                if line:
                    await deliver_line(line, self._on_message, self._stderr, self._name)
            self._last_exit = await proc.wait()
        finally:
            self._running.clear()
            # Give stderr a moment to flush the child's last words (why it died), then stop.
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(stderr_task), 0.5)
            stderr_task.cancel()
            if proc.returncode is None:
                _signal_group(proc, signal.SIGKILL)
                self._last_exit = await proc.wait()
            if self._on_exit is not None:
                try:
                    await self._on_exit()
                except Exception:
                    log.exception("%s: exit handler failed", self._name)

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await stream.readline()
            except (ValueError, asyncio.LimitOverrunError):
                continue
            if not line:
                return
            text = line.decode(errors="replace").rstrip()
            self._stderr.append(text)
            if self._hooks.stderr_sink is not None:
                self._hooks.stderr_sink(text[:_PASSED_LINE_LIMIT])
                continue
            # Passed through to our own stderr, as a container runtime would: the cause of a crash
            # (uv's "not found in the package registry") belongs in the proxy's log, not only in /health.
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(text[:_PASSED_LINE_LIMIT] + "\n")
                sys.stderr.flush()


async def deliver_line(line: bytes, on_message: MessageHandler, stderr: deque[str], name: str) -> None:
    """One stdout line of a stdio server (a local child or an attached container): a JSON-RPC
    object goes to `on_message`; anything else is kept in the stderr tail, never fatal (servers
    sometimes print banners on stdout), and a failing handler is logged, not raised."""
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        stderr.append(f"[stdout, not JSON] {line[:500].decode(errors='replace')}")
        return
    # One nested too deep to relay (orjson writes 255 levels) is answered as an error naming the
    # server, in every era and transport, instead of failing later as it is written (a 500).
    checked = jsonrpc.relayable(message, line, f"server {name!r}")
    if checked is not message:
        stderr.append(f"[stdout, nested too deep] {line[:200].decode(errors='replace')}")
        message = checked
    if isinstance(message, dict):
        try:
            await on_message(message)
        except Exception:
            log.exception("%s: handling a message from the server failed", name)


def _signal_group(proc: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    """Signal the child's process group (it leads its own session), or the child alone if that fails."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
