"""The bodies of `mcpfleet up` and `down` (the typer module only parses options; `get` and `logs`
are in `views`, which loads less).

`up` owns the process tree: it takes the state dir's lock (`lock.UpLock`, an OS file lock held
until it exits), starts the runner, shows progress until every workload settled, prints the URLs,
then reports changes until Ctrl-C / SIGTERM / `mcpfleet down`, and stops every child on the way
out. A second `up` that finds the lock held is refused before it opens the state, so it cannot
disturb the first. `down` signals the lock's holder (by pid) and then stops anything recorded that
is still alive, checking each pid really belongs to this state dir first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape

from mcpfleet.api.kinds import MEMBER_KINDS
from mcpfleet.api.mcpregistry import MCPRegistry
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.platform.local import issuer
from mcpfleet.platform.local.containers import find_runtime
from mcpfleet.platform.local.display import SETTLED, failure_block, headline, progress_table
from mcpfleet.platform.local.launch import fleet_id
from mcpfleet.platform.local.lock import LockHeld, UpLock, holder_pid
from mcpfleet.platform.local.paths import PathEscapeError, check_state_dir
from mcpfleet.platform.local.reaper import SCAN_LIMIT, can_scan, end_containers, end_tagged, start_watchdog
from mcpfleet.platform.local.runner import WORKLOAD_ORDER, Runner
from mcpfleet.platform.local.snapshot import DB_FILENAME, StoredObject
from mcpfleet.platform.local.state import State
from mcpfleet.platform.local.views import pid_alive
from mcpfleet.yamlread import ManifestLimits

META_UP_PID = "up_pid"
"""Information only (the lock is `lock.UpLock`): the pid of the `up` that holds the lock."""
META_MANIFESTS = "manifests"


SideService = Callable[[State], AbstractAsyncContextManager[str]]
"""Something `up` serves beside the fleet for as long as it runs (the web console, given by the CLI:
the platform does not import it); entering it starts it and yields its URL, printed with the gateway's."""

PROGRESS_LIMIT_SECONDS = 300.0
"""The progress view gives up waiting after this (a cold npx download can be slow) and prints the summary."""


def _settled(objects: list[StoredObject]) -> bool:
    """Every workload reached a phase that will not change by itself, for its current generation.

    The phase says it, with one exception: a gateway Degraded because a backend is still starting
    is not settled; one Degraded because a backend Failed is. (A gateway that has not reported every
    backend yet is Pending, not Ready: the VirtualMCPServer status rule, so `mcpfleet get` agrees.)
    """
    workloads = [o for o in objects if o.kind in WORKLOAD_ORDER]
    failed = {o.name for o in workloads if o.kind in MEMBER_KINDS and o.status.get("phase") == "Failed"}
    for obj in workloads:
        phase = obj.status.get("phase")
        if phase not in SETTLED or obj.status.get("observedGeneration") != obj.generation:
            return False
        if phase == "Degraded":
            down = {
                b.get("name")
                for b in obj.status.get("discoveredBackends") or []
                if b.get("status") in ("unhealthy", "unavailable", "unknown")
            }
            if not down <= failed:
                return False
    return True


# -- up ---------------------------------------------------------------------------------------


async def run_up(
    manifests: Path,
    state_dir: Path,
    *,
    console: Console,
    port_range: tuple[int, int] | None = None,
    progress: bool = True,
    side: SideService | None = None,
) -> int:
    try:
        limits = ManifestLimits.from_env()
    except ValueError as exc:
        console.print(f"error: {exc}", markup=False)
        return 2
    try:
        check_state_dir(state_dir)
    except PathEscapeError as exc:
        console.print(f"error: unsafe state dir: {exc}", markup=False)
        return 2
    lock = UpLock(state_dir)
    try:
        lock.acquire()
    except OSError as exc:  # e.g. up.lock is a symlink (O_NOFOLLOW)
        console.print(f"error: cannot lock {lock.path}: {exc}", markup=False)
        return 2
    except LockHeld as held:
        # Refused before the state is even opened: nothing of the running `up` is touched.
        console.print(
            f"[red]error:[/] mcpfleet up is already running for {escape(str(state_dir))} (pid {held.pid or '?'}); "
            "run `mcpfleet down` first or use another --state-dir"
        )
        return 1
    try:
        state = await State.open(state_dir)
        try:
            await state.set_meta(META_UP_PID, str(os.getpid()))
            await state.set_meta(META_MANIFESTS, str(manifests))
            return await _up(manifests, state, console, port_range, progress, limits, side)
        finally:
            with contextlib.suppress(Exception):
                await state.set_meta(META_UP_PID, None)
            await state.close()
    finally:
        lock.release()


def _print_new(console: Console, label: str, items: list[str], shown: list[str]) -> list[str]:
    """Prints the items (manifest errors, superseded-field warnings) not printed yet, each after its
    label (rich markup); returns the list now shown."""
    for item in items:
        if item not in shown:
            console.print(f"{label} {escape(item)}", highlight=False)
    return list(items)


async def _watch(runner: Runner, console: Console, stop: asyncio.Event, loop_task: asyncio.Task[None]) -> int:
    """While `up` runs: prints what changes (moved ports, manifest errors, superseded-field warnings)
    until asked to stop (0), or says the reconcile loop stopped (1)."""
    shown_errors = [str(e) for e in runner.load_errors]
    shown_warnings = list(runner.load_warnings)
    shown_notices = len(runner.port_notices)
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)
        if loop_task.done():
            console.print(f"[red]error:[/] the reconcile loop stopped: {escape(repr(loop_task.exception()))}")
            return 1
        for notice in runner.port_notices[shown_notices:]:
            console.print(f"[yellow bold]port moved:[/] {escape(notice)}", highlight=False)
        shown_notices = len(runner.port_notices)
        errors = [str(e) for e in runner.load_errors]
        shown_errors = _print_new(console, "[red]invalid manifest[/]", errors, shown_errors)
        shown_warnings = _print_new(console, "[yellow]warning[/]", list(runner.load_warnings), shown_warnings)
    return 0


async def _up(
    manifests: Path,
    state: State,
    console: Console,
    port_range: tuple[int, int] | None,
    progress: bool,
    limits: ManifestLimits,
    side: SideService | None = None,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    reporter = _Reporter(console)
    runner = Runner(manifests, state, port_range=port_range, on_status=reporter.on_status, limits=limits)
    leftovers = await runner.stop_leftovers()
    if leftovers:
        console.print(f"ended {leftovers} process(es) left behind by an earlier `mcpfleet up`")
    # Before the first spawn: from here on, however `up` ends, the watchdog ends this run's processes.
    runtime = runner.runtime
    watchdog = start_watchdog(
        runner.fleet, runner.run_id, runtime.path if runtime else None, runner.runtime_env()
    )
    started = time.monotonic()
    loop_task = asyncio.create_task(runner.run(stop), name="reconcile")
    issuer_task = asyncio.create_task(
        issuer.follow(state.state_dir, stop, lambda text: console.print(text, markup=False, highlight=False)),
        name="local-issuer",
    )
    services = contextlib.AsyncExitStack()
    try:
        side_url = await _start_side(services, side, state, console)
        await _show_progress(runner, state, console, stop, progress, reporter.changed)
        if not stop.is_set():
            objects = await state.objects()
            _print_summary(console, objects, runner, time.monotonic() - started, state.state_dir, side_url)
            reporter.live = True
        return await _watch(runner, console, stop, loop_task)
    finally:
        stop.set()
        _say(console, "stopping…")
        with contextlib.suppress(Exception):
            await services.aclose()
        with contextlib.suppress(asyncio.CancelledError):
            await loop_task
        with contextlib.suppress(asyncio.CancelledError):
            await issuer_task
        await runner.shutdown()
        # An image server's container is held by the runtime, not by its (stopped) client.
        await asyncio.to_thread(
            end_containers, runtime.path if runtime else None, runner.fleet, runner.run_id
        )
        # What a server started itself and left running (another session, a daemon): found by tag.
        _ended, alive = await asyncio.to_thread(end_tagged, runner.fleet, runner.run_id)
        await asyncio.to_thread(_release_watchdog, watchdog)
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
        if alive:
            _say(console, f"[red]error:[/] could not end process(es) {', '.join(map(str, alive))}")
        else:
            _say(console, "stopped every process started by `mcpfleet up`")


async def _start_side(
    services: contextlib.AsyncExitStack, side: SideService | None, state: State, console: Console
) -> str | None:
    """Starts the side service; one that cannot start (its port taken) is reported, `up` goes on."""
    if side is None:
        return None
    try:
        return await services.enter_async_context(side(state))
    except Exception as exc:
        console.print(f"[yellow]warning:[/] the console did not start: {escape(str(exc))}", highlight=False)
        return None


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Each ends `up` cleanly: Ctrl-C, `mcpfleet down` / a service manager, a closed terminal."""


def _say(console: Console, text: str) -> None:
    """Print, unless the terminal is gone (after a hang-up, writes fail): clean-up must go on."""
    with contextlib.suppress(OSError, ValueError):
        console.print(text)


def _release_watchdog(watchdog: subprocess.Popen[bytes]) -> None:
    """Close the watchdog's pipe (it then checks this run's processes are gone, and exits)."""
    if watchdog.stdin is not None:
        with contextlib.suppress(OSError):
            watchdog.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        watchdog.wait(SCAN_LIMIT)


class _Reporter:
    """After the first summary, prints one line per phase / URL / message change (and removals).

    A message change with the same phase is printed too (a Failed server failing for a new
    reason); a failure comes with its last stderr lines.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = False
        self.changed = asyncio.Event()
        self._last: dict[tuple[str, str, str], tuple[Any, Any, Any]] = {}

    def on_status(self, kind: str, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.changed.set()  # the progress view looks again at once (not at its next 0.125 s tick)
        key = (kind, namespace, name)
        now = (status.get("phase"), status.get("url"), status.get("message"))
        before = self._last.get(key)
        self._last[key] = now
        if not self.live or before == now:
            return
        stamp = time.strftime("%H:%M:%S")
        if not status:
            self.console.print(f"{stamp} {kind}/{name} removed", markup=False, highlight=False)
        elif kind in WORKLOAD_ORDER:
            if now[0] == "Failed":
                self.console.print(f"{stamp} {kind}/{name} Failed", markup=False, highlight=False)
                for line in failure_block(kind, name, status.get("message")):
                    self.console.print(line, markup=False, highlight=False)
                return
            detail = status.get("url") or headline(status.get("message"))
            self.console.print(f"{stamp} {kind}/{name} {now[0]} {detail}", markup=False, highlight=False)


async def _show_progress(
    runner: Runner,
    state: State,
    console: Console,
    stop: asyncio.Event,
    progress: bool,
    changed: asyncio.Event | None = None,
) -> None:
    """Until every workload settled (or Ctrl-C): a live table on a terminal, nothing otherwise.

    Looks again every 0.125 s (the spinner's frame) and at once when a status changed (`changed`).
    """
    changed = changed or asyncio.Event()
    frame = 0
    use_live = progress and console.is_terminal
    live = Live(console=console, refresh_per_second=8, transient=True) if use_live else None
    deadline = time.monotonic() + PROGRESS_LIMIT_SECONDS
    with live if live is not None else contextlib.nullcontext():
        while not stop.is_set() and time.monotonic() < deadline:
            changed.clear()  # before reading: a change after the read wakes the wait below
            objects = await state.objects()
            if live is not None and runner.passes:
                # Not before the first pass: until then the state holds the rows of the previous run.
                workloads = [o for o in objects if o.kind in WORKLOAD_ORDER]
                live.update(progress_table(workloads, runner.load_errors, frame))
            if runner.passes and not runner.reload_pending and _settled(objects):
                return
            frame += 1
            waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(changed.wait())]
            await asyncio.wait(waiters, timeout=0.125, return_when=asyncio.FIRST_COMPLETED)
            for waiter in waiters:
                waiter.cancel()


def _print_summary(
    console: Console,
    objects: list[StoredObject],
    runner: Runner,
    seconds: float,
    state_dir: Path,
    console_url: str | None = None,
) -> None:
    workloads = [o for o in objects if o.kind in WORKLOAD_ORDER]
    # Invalid manifests are printed once, in full, below the table (not also as table rows).
    console.print(progress_table(workloads, []))
    for obj in workloads:
        if obj.status.get("phase") == "Failed":
            for line in failure_block(obj.kind, obj.name, obj.status.get("message")):
                console.print(line, markup=False, highlight=False)
    for error in runner.load_errors:
        console.print(f"[red]invalid manifest[/] {escape(str(error))}", highlight=False)
    for warning in runner.load_warnings:
        console.print(f"[yellow]warning[/] {escape(warning)}", highlight=False)
    running = sum(1 for o in workloads if o.status.get("phase") in ("Running", "Ready", "Degraded"))
    console.print(
        f"\n{running}/{len(workloads)} workloads up in {seconds:.1f}s (state: {escape(str(state_dir))})"
    )
    for obj in workloads:
        if obj.kind == VirtualMCPServer.KIND and obj.status.get("url"):
            console.print(f"[bold]vMCP {obj.name}:[/] {escape(str(obj.status['url']))}")
        if obj.kind == MCPRegistry.KIND and obj.status.get("url"):
            console.print(f"[bold]registry {obj.name}:[/] {escape(str(obj.status['url']))}/v0.1/servers")
    if console_url:
        console.print(f"[bold]console:[/] {escape(console_url)}")
    for notice in runner.port_notices:
        console.print(f"[yellow bold]port moved:[/] {escape(notice)}", highlight=False)
    if not runner.loaded_count and not runner.load_errors:
        console.print(
            f"[yellow]warning:[/] no manifests in {escape(str(runner.manifests))}: expected *.yaml files "
            "with apiVersion: mcpfleet.dev/v1alpha1 (see examples/quickstart); waiting for some",
            highlight=False,
        )
    console.print(
        f"watching {escape(str(runner.manifests))} for changes; Ctrl-C or `mcpfleet down` stops everything"
    )


# -- down -------------------------------------------------------------------------------------


async def run_down(state_dir: Path, console: Console, wait_seconds: float = 20.0) -> int:
    if not (state_dir / DB_FILENAME).exists():
        console.print(f"nothing to stop: no state in {state_dir}", markup=False)
        return 0
    state = await State.open(state_dir)
    try:
        # The lock's holder is the running `up`; a pid row alone may be stale (the lock is the truth).
        up_pid = holder_pid(state_dir)
        if up_pid is not None and pid_alive(up_pid):
            os.kill(up_pid, signal.SIGTERM)
            console.print(f"asked mcpfleet up (pid {up_pid}) to stop")
            deadline = time.monotonic() + wait_seconds
            while pid_alive(up_pid) and time.monotonic() < deadline:  # noqa: ASYNC110 - a foreign pid has no event
                await asyncio.sleep(0.1)
            if pid_alive(up_pid):
                # It did not answer SIGTERM: never report "stopped" while it still runs.
                os.kill(up_pid, signal.SIGKILL)
                console.print(f"mcpfleet up (pid {up_pid}) did not stop in {wait_seconds:.0f}s; killed it")
        # Whatever still carries the fleet's tag outlived its `up` (killed, or it did not answer):
        # found in /proc, whichever run started it and whatever became of its parent.
        runtime, _why = await asyncio.to_thread(find_runtime, os.environ)
        removed = await asyncio.to_thread(
            end_containers, runtime.path if runtime else None, fleet_id(state_dir)
        )
        ended, alive = await asyncio.to_thread(end_tagged, fleet_id(state_dir), None, DOWN_GRACE)
        for row in await state.processes():
            await state.forget_process(row.key)
        if holder_pid(state_dir) is None:
            await state.set_meta(META_UP_PID, None)
        if not can_scan():
            console.print("down: cannot verify (no /proc on this system)", markup=False)
            return 1
        if alive:
            console.print(
                f"down: {len(alive)} process(es) of this fleet could not be ended: "
                + ", ".join(map(str, sorted(alive))),
                markup=False,
            )
            return 1
        console.print(
            "down: no process started by `mcpfleet up` is running (checked in /proc)"
            + (f"; ended {len(ended)} left behind" if ended else "")
            + (f"; removed {len(removed)} container(s)" if removed else ""),
            markup=False,
        )
        return 0
    finally:
        await state.close()


DOWN_GRACE = 5.0
"""Seconds a leftover process gets between SIGTERM and SIGKILL from `down`."""
