"""What a failed `dev-cluster up` leaves behind: nothing it started.

Owns the rule and the report. Before starting anything, `up` notes which processes of its state dir
run (pid + kernel start time); when it fails, at any step and with or without `--real-node`, it stops
every process it started and says which:
- when this `up` started the control plane (it did not run before, or ran only in part and was
  restarted), the whole cluster goes (DevCluster._stop_all: the real node first, its host changes
  undone, then the control plane);
- when the control plane ran before and was kept, only what came after it goes (a real node this
  `up` attached), and the cluster stays as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mcpfleet.devcluster.processes import ProcessRecord, is_running, stop

if TYPE_CHECKING:
    from mcpfleet.devcluster.cluster import DevCluster

Progress = Callable[[str], None]
Running = frozenset[tuple[str, int, int]]


def _key(record: ProcessRecord) -> tuple[str, int, int]:
    return (record.name, record.pid, record.start_time)


def running(cluster: DevCluster) -> Running:
    """The processes of the cluster's state dir that run now, each by name, pid and start time."""
    return frozenset(_key(r) for r in cluster.procs.records() if is_running(r))


async def stop_started(cluster: DevCluster, before: Running) -> list[str]:
    """Stops what runs now but did not before `up` (see the module doc); returns what it stopped."""
    now = running(cluster)
    control_plane_kept = any(name == "kube-apiserver" for name, _, _ in before & now)
    if not control_plane_kept:
        return await cluster._stop_all()
    stopped: list[str] = []
    node = cluster.real_node()
    new = [r for r in cluster.procs.records() if _key(r) in now - before]
    if any(r.name.startswith("realnode-") for r in new):
        stopped += [a for a in await node.down() if a.startswith("stopped ")]
    for record in new:
        if not record.name.startswith("realnode-") and await stop(record):
            stopped.append(record.name)
            cluster.procs.pid_file(record.name).unlink(missing_ok=True)
    return stopped


async def roll_back(cluster: DevCluster, before: Running, progress: Progress) -> None:
    """Called while `up` fails: stops what it started and says so; the original error is the one
    `up` raises, so a failure to stop is reported, never raised in its place."""
    try:
        stopped = await stop_started(cluster, before)
    except Exception as exc:  # the failure of `up` is what the caller reports and raises
        progress(f"dev-cluster up failed; stopping what it started failed too: {exc!r}")
        return
    if stopped:
        progress(f"dev-cluster up failed: stopped what it had started: {', '.join(stopped)}")
    else:
        progress("dev-cluster up failed: nothing it started is left running")
