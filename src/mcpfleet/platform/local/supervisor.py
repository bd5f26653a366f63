"""Supervised local processes: spawn, log, probe health, restart with backoff, stop by process group.

Each process runs in its own session (its pid is its process group), so stopping it also stops
what it started (a proxy's `uvx` child). stdout and stderr go to `state_dir/logs/NAME.log`;
the last stderr lines are also kept in memory, because a process that dies at start-up turns its
workload Failed with them in `status.message`. Readiness comes from polling the health URL; for
`mcpfleet proxy` the health body also tells when the stdio server behind it crashed, which is how a
broken package (not only a broken proxy) ends Failed.

Each run also writes its start-up milestones to the log as `---` lines with the seconds since `up`
started (`+1.23s`): starting, spawned (pid), health answered, MCP initialize answered, ready. That
is the per-workload timeline `mcpfleet describe` shows under Events and `bench/local.py` collects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import httpx

from mcpfleet.backoff import Backoff
from mcpfleet.platform.local.launch import Launch, spawn
from mcpfleet.platform.local.paths import safe_join
from mcpfleet.redact import redact_text

if TYPE_CHECKING:
    from mcpfleet.platform.local.hosted import HostedService
    from mcpfleet.proxy.config import ProxyConfig

log = logging.getLogger(__name__)

STDERR_TAIL_LINES = 20
SHOWN_TAIL_LINES = 8
FAILURE_THRESHOLD = 3
"""Consecutive failed health probes before a ready process counts as not ready."""
PROBE_STARTING_SECONDS = 0.1
"""Probe period until ready: a refused connection costs microseconds, a late Ready costs the user."""
PROBE_READY_SECONDS = 2.0
RECOVERED_AFTER = 5.0
"""Seconds of healthy answers before a process that failed counts as ready again."""


@dataclass(frozen=True)
class ProcessSpec:
    """One process to keep running."""

    key: str
    """kind/namespace/name/container/replica: unique, stable."""
    kind: str
    name: str
    log_name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    port: int | None
    health_url: str | None
    fingerprint: str
    """Changes when the process must be restarted (argv, env, config checksum)."""
    mcp_probe_url: str | None = None
    """When set, ready also needs an MCP `initialize` to succeed here (a proxy is healthy as soon
    as its child process exists; its server may still be downloading)."""
    hosted: bool = False
    """Served in this process (`hosted.HostedService`: a stdio proxy's endpoint, its server a child
    process, or the vMCP / registry); a proxy's `pid` is then its server's, recorded at each spawn."""
    proxy: ProxyConfig | None = None
    """A hosted proxy's configuration (its port and server command included): what it is served from."""


@dataclass
class ProcessState:
    """What the supervisor knows of one process right now."""

    pid: int | None = None
    ready: bool = False
    failed: bool = False
    failure_message: str | None = None
    restarts: int = 0
    started_at: float | None = None
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_TAIL_LINES))


OnChange = Callable[[], None]
OnSpawn = Callable[[ProcessSpec, int, int], Awaitable[None]]
OnExit = Callable[[ProcessSpec], Awaitable[None]]


def _tail_message(prefix: str, lines: list[str]) -> str:
    """`prefix:` and the last distinct non-empty stderr lines (a crash loop repeats the same words
    on every attempt; the cause is shown once)."""
    shown: list[str] = []
    for line in reversed(lines):
        if line.strip() and line not in shown:
            shown.append(line)
            if len(shown) == SHOWN_TAIL_LINES:
                break
    shown.reverse()
    return prefix + (":\n" + "\n".join(shown) if shown else " (no output on stderr)")


class Managed:
    """One supervised process: the restart loop and the health probe."""

    def __init__(
        self,
        spec: ProcessSpec,
        logs_dir: Path,
        on_change: OnChange,
        on_spawn: OnSpawn,
        backoff: Backoff,
        http: httpx.AsyncClient,
        origin: float | None = None,
    ) -> None:
        self.spec = spec
        self._origin = time.monotonic() if origin is None else origin
        self._logfile: TextIO | None = None
        self.state = ProcessState()
        self.logs_dir = logs_dir
        self.log_path = logs_dir / f"{spec.log_name}.log"
        self._on_change = on_change
        self._on_spawn = on_spawn
        self._backoff = backoff
        self._http = http
        self._proc: asyncio.subprocess.Process | None = None
        self._hosted: tuple[HostedService, asyncio.Task[None]] | None = None
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Future[None]] = set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"supervise {self.spec.key}")

    def milestone(self, text: str) -> None:
        """A timeline line in the log: `--- +SECONDS since up: text` (see the module docstring)."""
        if self._logfile is not None:
            with contextlib.suppress(OSError, ValueError):
                self._logfile.write(f"--- +{time.monotonic() - self._origin:.2f}s since up: {text}\n")

    def _set(self, **changes: Any) -> None:
        if changes.get("ready") and not self.state.ready:
            self.milestone("ready")
        changed = False
        for name, value in changes.items():
            if getattr(self.state, name) != value:
                setattr(self.state, name, value)
                changed = True
        if changed:
            self._on_change()

    async def _loop(self) -> None:
        failures = 0
        while not self._stopping:
            started = time.monotonic()
            try:
                await self._run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # e.g. the executable does not exist: a failure, never a crash of `up`
                self.state.stderr_tail.append(f"cannot start {self.spec.argv[0]}: {exc}")
                log.warning("%s: cannot start: %s", self.spec.key, exc)
                self._set(
                    pid=None,
                    ready=False,
                    failed=True,
                    failure_message=f"cannot start {self.spec.argv[0]}: {exc}",
                )
            if self._stopping:
                break
            ran = time.monotonic() - started
            failures = self._backoff.failures_after(failures, ran)
            self._set(restarts=self.state.restarts + 1)
            delay = self._backoff.delay(failures)
            log.info("%s exited after %.1fs; restarting in %.1fs", self.spec.key, ran, delay)
            await asyncio.sleep(delay)

    async def _run_once(self) -> None:
        if self.spec.hosted:
            await self._run_hosted()
            return
        spec = self.spec
        # Checked at every start: a symlink planted at logs/NAME.log must not redirect the log.
        self.log_path = safe_join(self.logs_dir, f"{spec.log_name}.log")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a", buffering=1) as logfile:
            # The command line may hold a URL with credentials (`mcpfleet proxy --remote`).
            shown = redact_text(" ".join(spec.argv))
            logfile.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {shown}\n")
            self._logfile = logfile
            self.milestone("starting")
            proc = await spawn(
                Launch(spec.argv, spec.env, spec.cwd),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=logfile,
                stderr=asyncio.subprocess.PIPE,
            )
            self._proc = proc
            self.state.started_at = time.monotonic()
            self._set(pid=proc.pid, ready=False)
            self.milestone(f"spawned (pid {proc.pid})")
            await self._on_spawn(spec, proc.pid, self.state.restarts)
            assert proc.stderr is not None
            drain = asyncio.create_task(self._drain(proc.stderr, logfile))
            probe = asyncio.create_task(self._probe()) if spec.health_url else None
            if probe is None:
                self._set(ready=True)
            code = await proc.wait()
            if probe is not None:
                probe.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await probe
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(drain, 2.0)
            logfile.write(f"--- exited with code {code}\n")
            self._logfile = None
        self._proc = None
        was_ready = self.state.ready
        if self._stopping:
            self._set(pid=None, ready=False)
            return
        if not was_ready:
            # Died before ever serving: that is a start-up crash, shown with its last stderr lines.
            message = _tail_message(
                f"{spec.log_name} exited with code {code} during start-up", list(self.state.stderr_tail)
            )
            self._set(pid=None, ready=False, failed=True, failure_message=message)
        else:
            self._set(pid=None, ready=False)

    async def _run_hosted(self) -> None:
        """As `_run_once`, for an endpoint served in this process (its server is a child process)."""
        from mcpfleet.platform.local.hosted import HostedService

        spec = self.spec
        self.log_path = safe_join(self.logs_dir, f"{spec.log_name}.log")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a", buffering=1) as logfile:
            shown = redact_text(" ".join(spec.argv))
            logfile.write(
                f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {shown} (in mcpfleet up's process)\n"
            )
            self._logfile = logfile
            self.milestone("starting (in-process)")

            def sink(line: str) -> None:
                self.state.stderr_tail.append(line[:2000])
                with contextlib.suppress(OSError, ValueError):
                    logfile.write(line + "\n")

            def on_pid(pid: int) -> None:
                self._set(pid=pid)
                self.milestone(f"server spawned (pid {pid})")
                spawned = asyncio.ensure_future(self._on_spawn(spec, pid, self.state.restarts))
                self._background.add(spawned)
                spawned.add_done_callback(self._background.discard)

            hosted = HostedService(spec.argv, spec.env, spec.cwd, sink=sink, on_pid=on_pid, proxy=spec.proxy)
            self.state.started_at = time.monotonic()
            self._set(pid=None, ready=False)
            serving = asyncio.create_task(hosted.serve(), name=f"serve {spec.key}")
            self._hosted = (hosted, serving)
            probe = asyncio.create_task(self._probe()) if spec.health_url else None
            code = 0
            try:
                await asyncio.shield(serving)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                code = 1
                sink(f"{spec.log_name}: {exc}")
            finally:
                self._hosted = None
                if probe is not None:
                    probe.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await probe
            logfile.write(f"--- stopped{'' if code == 0 else ' with an error'}\n")
            self._logfile = None
        was_ready = self.state.ready
        if self._stopping or was_ready:
            self._set(pid=None, ready=False)
            return
        message = _tail_message(f"{spec.log_name} stopped during start-up", list(self.state.stderr_tail))
        self._set(pid=None, ready=False, failed=True, failure_message=message)

    async def _drain(self, stream: asyncio.StreamReader, logfile: TextIO) -> None:
        # Chunks, not readline(): a huge line without a newline must not stop the draining (a full
        # pipe would block the child).
        pending = b""
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                if pending:
                    self._stderr_line(pending, logfile)
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._stderr_line(line, logfile)
            if len(pending) > 65536:
                self._stderr_line(pending, logfile)
                pending = b""

    def _stderr_line(self, line: bytes, logfile: TextIO) -> None:
        text = line.decode(errors="replace")
        self.state.stderr_tail.append(text[:2000])
        logfile.write(text + "\n")

    async def _probe(self) -> None:
        """Poll the health URL, fast until ready; a crashed stdio server behind a proxy fails it."""
        assert self.spec.health_url is not None
        healthy_since: float | None = None
        answered = self.spec.mcp_probe_url is None
        misses = 0
        health_seen = False
        while True:
            healthy = False
            body: Any = None
            if self.spec.health_url.startswith("tcp://"):
                healthy = await _tcp_open(self.spec.health_url)
            else:
                try:
                    response = await self._http.get(self.spec.health_url, timeout=2.0)
                    healthy = response.status_code == 200
                    with contextlib.suppress(ValueError):
                        body = response.json()
                except httpx.HTTPError:
                    pass
            now = time.monotonic()
            crashed = _crashed_child(body) if not healthy else None
            if healthy and not health_seen:
                health_seen = True
                self.milestone("health answered")
            if healthy and not answered:
                assert self.spec.mcp_probe_url is not None
                answered = await mcp_initialize(self._http, self.spec.mcp_probe_url)
                healthy = answered
                now = time.monotonic()
                if answered:
                    self.milestone("MCP initialize answered")
            if healthy:
                misses = 0
                healthy_since = healthy_since or now
                # One good answer makes a first start ready (Kubernetes' successThreshold 1); after a
                # crash, a longer healthy run is demanded so that a crash loop does not flap to Ready.
                needed = RECOVERED_AFTER if self.state.failed else 0.0
                if now - healthy_since >= needed:
                    self._set(ready=True, failed=False, failure_message=None)
            else:
                healthy_since = None
                misses += 1
                if crashed is not None:
                    self._set(ready=False, failed=True, failure_message=crashed)
                elif self.state.ready and misses >= FAILURE_THRESHOLD:
                    # One slow answer on a loaded machine is not an outage (a readiness failureThreshold).
                    self._set(ready=False)
            await asyncio.sleep(PROBE_READY_SECONDS if self.state.ready else PROBE_STARTING_SECONDS)

    async def stop(self, grace: float = 5.0) -> None:
        self._stopping = True
        if self._hosted is not None:
            hosted, serving = self._hosted
            await hosted.stop(serving, grace)
        proc = self._proc
        if proc is not None and proc.returncode is None:
            signal_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                signal_group(proc.pid, signal.SIGKILL)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), 2.0)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.state.pid = None
        self.state.ready = False


PROBE_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "mcpfleet-local-probe", "version": "1"},
    },
}


async def mcp_initialize(http: httpx.AsyncClient, url: str, limit: float = 15.0) -> bool:
    """True once the MCP server behind `url` answers `initialize` (its session is closed again)."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    try:
        response = await http.post(url, json=PROBE_INITIALIZE, headers=headers, timeout=limit)
    except httpx.HTTPError:
        return False
    answered = response.status_code == 200 and '"result"' in response.text
    session = response.headers.get("mcp-session-id")
    if session:
        with contextlib.suppress(httpx.HTTPError):
            await http.delete(url, headers={"mcp-session-id": session}, timeout=2.0)
    return answered


async def _tcp_open(url: str) -> bool:
    """A server without an HTTP health endpoint is ready once its port accepts connections."""
    host, _, port = url.removeprefix("tcp://").rpartition(":")
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 2.0)
    except (OSError, TimeoutError, ValueError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def _crashed_child(body: Any) -> str | None:
    """From a `mcpfleet proxy` /health body: why its stdio server is down, when it exited."""
    if not isinstance(body, dict) or not isinstance(body.get("children"), dict):
        return None
    for era, child in body["children"].items():
        if not isinstance(child, dict) or child.get("running") or child.get("lastExitCode") is None:
            continue
        tail = [str(line) for line in child.get("stderrTail") or []]
        command = " ".join(str(c) for c in child.get("command") or []) or era
        return _tail_message(f"{command} exited with code {child['lastExitCode']}", tail)
    return None


def signal_group(pid: int, sig: int) -> None:
    """Signal a process group we created (pid == pgid); a gone group is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class Supervisor:
    """Keeps a set of ProcessSpecs running; `ensure` (re)starts, `stop` stops, `state` observes."""

    def __init__(
        self,
        logs_dir: Path,
        on_change: OnChange,
        on_spawn: OnSpawn,
        on_exit: OnExit,
        backoff: Backoff | None = None,
    ) -> None:
        self.logs_dir = logs_dir
        self._on_change = on_change
        self._on_spawn = on_spawn
        self._on_exit = on_exit
        self._backoff = backoff or Backoff()
        self._managed: dict[str, Managed] = {}
        self._http = httpx.AsyncClient(trust_env=False)
        self._origin = time.monotonic()

    def keys(self) -> set[str]:
        return set(self._managed)

    def state(self, key: str) -> ProcessState | None:
        managed = self._managed.get(key)
        return None if managed is None else managed.state

    def ports_in_use(self) -> set[int]:
        return {m.spec.port for m in self._managed.values() if m.spec.port is not None}

    def milestone(self, key: str, text: str) -> None:
        """A timeline line in the log of process `key` (see the module docstring)."""
        managed = self._managed.get(key)
        if managed is not None:
            managed.milestone(text)

    def log_path(self, key: str) -> Path | None:
        managed = self._managed.get(key)
        return None if managed is None else managed.log_path

    async def ensure(self, spec: ProcessSpec) -> None:
        """Run `spec`; a running process with another fingerprint is replaced (stop, then start)."""
        current = self._managed.get(spec.key)
        if current is not None and current.spec.fingerprint == spec.fingerprint:
            return
        if current is not None:
            log.info("%s changed; restarting", spec.key)
            await self.stop(spec.key)
        managed = Managed(
            spec, self.logs_dir, self._on_change, self._on_spawn, self._backoff, self._http, self._origin
        )
        self._managed[spec.key] = managed
        managed.start()
        self._on_change()

    async def stop(self, key: str) -> None:
        managed = self._managed.pop(key, None)
        if managed is None:
            return
        await managed.stop()
        await self._on_exit(managed.spec)
        self._on_change()

    async def stop_all(self) -> None:
        await asyncio.gather(*(self.stop(key) for key in list(self._managed)))
        await self._http.aclose()
