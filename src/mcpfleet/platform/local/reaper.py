"""Finding and ending a local fleet's processes by their tag; the watchdog that outlives `up`.

Every process `mcpfleet up` starts carries the fleet's tag in its environment: `MCPFLEET_FLEET=<id
of the state dir>` and `MCPFLEET_FLEET_RUN=<id of this run of up>`. Children inherit their
parent's environment, so the tag also marks what a server starts itself (`npm exec` → `node`,
`uvx` → `python`), even after it was re-parented to init. `/proc/PID/environ` is where the kernel
keeps a process's initial environment, readable by its own user only: a scan of `/proc` finds every
process of the fleet, whatever became of its parents, and never one of another user.

A server run from a container image is not a child of `up` (the runtime's monitor, conmon or the
Docker daemon, holds it): its container carries the tag as labels (`FLEET_LABEL`, `RUN_LABEL`), and
`end_containers` asks the runtime to remove every container with them.

Three users of the scan:
* `mcpfleet down` ends every process of the fleet (any run) and reports what the scan verified;
* a new `up` ends what an older run of the same state dir left behind before it starts anything;
* the watchdog (`python -I -S reaper.py FLEET RUN`, started by `up` in a session of its own): it
  blocks reading a pipe whose only writer is `up`. The kernel closes that pipe however `up` ends
  (exit, crash, SIGKILL, the OOM killer), so the read returns and the watchdog ends every process
  of that run: SIGTERM, then SIGKILL after a grace, until a scan finds none.

This file imports only the standard library (the watchdog runs it with `-S`, no site-packages):
starting it costs a bare interpreter, about 10 ms and a few MB for the life of `up`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable

FLEET_ENV = "MCPFLEET_FLEET"
RUN_ENV = "MCPFLEET_FLEET_RUN"
FLEET_LABEL = "mcpfleet.dev/fleet"
RUN_LABEL = "mcpfleet.dev/fleet-run"
RUNTIME_TIMEOUT = 20.0
"""How long one runtime command (list, remove) may take."""
TERM_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL: a server gets that long to exit cleanly (the whole ending
must fit in the 5 s a user waits for, `docs/local.md#lifecycle`)."""
SCAN_LIMIT = 10.0
"""Ending gives up after this (a process stuck in the kernel, state D, cannot be killed)."""


def can_scan() -> bool:
    """Whether this system has the `/proc` the scan reads (Linux)."""
    return os.path.isdir("/proc/self")


def tagged(fleet: str, run: str | None = None, exclude: Iterable[int] = ()) -> list[int]:
    """Live processes whose environment carries this fleet's tag (and this run's, when given)."""
    wanted = {f"{FLEET_ENV}={fleet}".encode()}
    if run is not None:
        wanted.add(f"{RUN_ENV}={run}".encode())
    skip = {os.getpid(), *exclude}
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) in skip:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                # An environment is a few KB; 1 MB bounds a hostile one (its tag comes first anyway).
                environ = handle.read(1 << 20)
        except OSError:  # gone, or another user's (not ours to read, so not ours to end)
            continue
        if wanted <= set(environ.split(b"\0")) and not _zombie(int(entry)):
            found.append(int(entry))
    return found


def _zombie(pid: int) -> bool:
    """A zombie has exited (it waits for its parent to collect its status): nothing to end."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True


def _signal(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def end_tagged(
    fleet: str,
    run: str | None = None,
    grace: float = TERM_GRACE,
    limit: float = SCAN_LIMIT,
    exclude: Iterable[int] = (),
) -> tuple[set[int], list[int]]:
    """End every process of the fleet (of one run when `run` is given): SIGTERM, SIGKILL after
    `grace`; scan again until a scan finds none (a launcher may fork while it is being ended).

    Returns (the pids that were found and ended, the pids still alive when `limit` ran out).
    """
    started = time.monotonic()
    ended: set[int] = set()
    first_seen: dict[int, float] = {}
    while True:
        now = time.monotonic()
        alive = tagged(fleet, run, exclude)
        if not alive:
            return ended, []
        if now - started > limit:
            return ended - set(alive), alive
        for pid in alive:
            if pid not in first_seen:
                first_seen[pid] = now
                _signal([pid], signal.SIGTERM)
        ended.update(alive)
        _signal([p for p in alive if now - first_seen[p] >= grace], signal.SIGKILL)
        time.sleep(0.05)


def end_containers(runtime: str | None, fleet: str, run: str | None = None) -> list[str]:
    """Remove every container of the fleet (of one run when `run` is given) through the runtime at
    path `runtime` (podman or docker): killed at once, then removed. Returns the ids removed;
    an error of the runtime (its daemon gone) ends nothing and returns []."""
    if not runtime:
        return []
    listing = [runtime, "ps", "-a", "--format", "{{.ID}}", "--filter", f"label={FLEET_LABEL}={fleet}"]
    if run is not None:
        listing += ["--filter", f"label={RUN_LABEL}={run}"]
    try:
        done = subprocess.run(listing, capture_output=True, text=True, timeout=RUNTIME_TIMEOUT, check=False)
        names = [n for n in done.stdout.split() if n] if done.returncode == 0 else []
        if names:
            subprocess.run(
                [runtime, "rm", "-f", *names],
                capture_output=True,
                timeout=RUNTIME_TIMEOUT,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return names


def watch(fleet: str, run: str, runtime: str | None = None) -> None:
    """The watchdog: wait until `up` is gone (its pipe on our stdin closes), then end its run."""
    # A closed terminal or a Ctrl-C reaches the terminal's process group; this one has its own
    # session, and ignores both anyway: only the pipe decides when it acts.
    for sig in (signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    while True:
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    # Containers first: their runtime client is among the tagged processes, and the containers
    # themselves are not (the runtime's monitor holds them).
    end_containers(runtime, fleet, run)
    end_tagged(fleet, run)


def start_watchdog(
    fleet: str, run: str, runtime: str | None = None, runtime_env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start the watchdog of run `run`; it acts once the returned process's stdin is closed (by
    `up`, or by the kernel when `up` dies). Its environment is only what the container runtime's
    client (`runtime`) needs to find its storage or daemon (`runtime_env`): it carries no tag itself."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", os.path.abspath(__file__), fleet, run, *([runtime] if runtime else [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(runtime_env or {}),
        start_new_session=True,  # not in the terminal's process group: a hang-up or Ctrl-C misses it
    )


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: reaper.py FLEET RUN [CONTAINER-RUNTIME]")
    watch(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None)
