"""Benchmark of the local platform: `mcpfleet up examples/quickstart` until every workload is ready.

Measures, per run, the wall time from starting `mcpfleet up` to every workload Running / Ready (read
from the state file, as `mcpfleet get` does) and the memory of the whole process tree (`up`, proxies,
package servers, vMCP, registry) once ready: summed RSS (counts shared pages once per process) and
summed PSS (shared pages split between their users, so it adds up to the fleet's real footprint). Warm runs reuse the uv and npm caches;
cold runs point uv and npm at empty cache folders, so packages are downloaded again.

    .venv/bin/python bench/local.py [--warm 3] [--cold 1] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MCPFLEET = str(Path(sys.executable).parent / "mcpfleet")
READY = {"Running", "Ready"}


def _statuses(state_dir: Path) -> dict[str, str]:
    try:
        with sqlite3.connect(f"file:{state_dir / 'state.db'}?mode=ro", uri=True, timeout=2) as db:
            rows = db.execute(
                "select kind, name, status from objects where kind in "
                "('MCPServer','MCPRemoteProxy','VirtualMCPServer','MCPRegistry')"
            ).fetchall()
    except sqlite3.Error:
        return {}
    return {f"{k}/{n}": json.loads(s or "{}").get("phase") or "" for k, n, s in rows}


def _children(pid: int) -> list[int]:
    """Every descendant of pid (through /proc), including processes in their own sessions."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        for child in parents.get(current, []):
            out.append(child)
            todo.append(child)
    return out


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pss_kib(pid: int) -> int:
    """Proportional set size: shared pages split between the processes that share them."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def one_run(cold: bool, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mcpfleet-bench-") as tmp:
        state_dir = Path(tmp) / "state"
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        if cold:
            env["UV_CACHE_DIR"] = str(Path(tmp) / "uv-cache")
            env["npm_config_cache"] = str(Path(tmp) / "npm-cache")
        started = time.monotonic()
        up = subprocess.Popen(
            [
                MCPFLEET,
                "up",
                str(ROOT / "examples" / "quickstart"),
                "--state-dir",
                str(state_dir),
                "--no-progress",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            first_ready: dict[str, float] = {}
            while True:
                elapsed = time.monotonic() - started
                if up.poll() is not None:
                    raise RuntimeError(f"mcpfleet up exited with {up.returncode}")
                if elapsed > timeout:
                    raise RuntimeError(f"not ready after {timeout}s: {_statuses(state_dir)}")
                phases = _statuses(state_dir)
                for key, phase in phases.items():
                    if phase in READY:
                        first_ready.setdefault(key, round(elapsed, 2))
                if len(phases) == 4 and all(p in READY for p in phases.values()):
                    break
                time.sleep(0.05)
            ready_after = time.monotonic() - started
            time.sleep(2.0)  # let the gateway and registry finish their first connections and syncs
            tree = [up.pid, *_children(up.pid)]
            rss = {pid: _rss_kib(pid) for pid in tree}
            pss = {pid: _pss_kib(pid) for pid in tree}
            names = {}
            for pid in tree:
                try:
                    names[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
                except OSError:
                    names[pid] = "?"
            return {
                "cold": cold,
                "ready_seconds": round(ready_after, 2),
                "ready_at": first_ready,
                "processes": len(tree),
                "rss_mib": round(sum(rss.values()) / 1024, 1),
                "pss_mib": round(sum(pss.values()) / 1024, 1),
                "rss_by_process_mib": {
                    names[p]: round(v / 1024, 1) for p, v in sorted(rss.items(), key=lambda i: -i[1])
                },
            }
        finally:
            up.send_signal(signal.SIGINT)
            try:
                up.wait(60)
            except subprocess.TimeoutExpired:
                up.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=3, help="warm-cache runs")
    parser.add_argument("--cold", type=int, default=1, help="cold-cache runs (downloads packages)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    one_run(cold=False, timeout=args.timeout)  # fill the caches first, so "warm" means warm
    results = [one_run(cold=True, timeout=args.timeout) for _ in range(args.cold)]
    results += [one_run(cold=False, timeout=args.timeout) for _ in range(args.warm)]
    for result in results:
        print(json.dumps(result, indent=2))
    for label, cold in (("cold", True), ("warm", False)):
        runs = [r for r in results if r["cold"] is cold]
        if runs:
            times = [r["ready_seconds"] for r in runs]
            rss = [r["rss_mib"] for r in runs]
            pss = [r["pss_mib"] for r in runs]
            print(
                f"{label}: all ready in median {statistics.median(times):.1f}s (min {min(times):.1f}, "
                f"max {max(times):.1f}, n={len(runs)}); fleet RSS median {statistics.median(rss):.0f} MiB, "
                f"PSS median {statistics.median(pss):.0f} MiB"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
