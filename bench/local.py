"""Benchmark of the local platform: `mcpfleet up examples/quickstart` until every workload is ready.

Measures, per run, the wall time from starting `mcpfleet up` to every workload Running / Ready (read
from the state file, as `mcpfleet get` does) and the memory of the whole process tree (`up`, proxies,
package servers, vMCP, registry) once ready: summed RSS (counts shared pages once per process) and
summed PSS (shared pages split between their users, so it adds up to the fleet's real footprint). Warm runs reuse the uv and npm caches;
cold runs point uv and npm at empty cache folders, so packages are downloaded again.

    .venv/bin/python -P bench/local.py [--warm 3] [--cold 1] [--json results.json]
    .venv/bin/python -P bench/local.py --cold 0 --warm 3 --modes inprocess,processes --servers 0,2,20

`--mcpfleet A,B` runs each given `mcpfleet` executable in turn (e.g. this branch's and main's
`.venv/bin/mcpfleet`), alternating run by run, so both see the same load; the summary is per
executable. It also prints, per workload and start-up milestone, the median seconds since `up`'s
supervisor started (the timeline `mcpfleet describe` shows), and "before the supervisor": the time
from launching `up` to its supervisor's start (the wall time to all ready minus the last workload's
final status milestone).

`--clients`: once ready, connect the mcp SDK client in both protocol eras (handshake and
2026-07-28) to every MCPServer and to the gateway and list their tools, before measuring: the memory
of a fleet in use by clients of both eras (issue 29: before, the first 2026-07-28 request started a
second process of each stdio server).

`--modes`: `inprocess` (the default: `up` hosts every stdio proxy's endpoint itself) and/or
`processes` (`MCPFLEET_LOCAL_INPROCESS=0`: one `mcpfleet proxy` interpreter per stdio server, as
before); the modes alternate run by run, so both see the same machine load. `--servers N` (0 = the
quickstart) runs a generated folder of N stdio `uvx://mcp-server-time` MCPServers instead, to
measure what each additional server adds. "mcpfleet PSS" sums only mcpfleet's own processes (`up`,
proxies, vMCP, registry), not the MCP servers and their uv / npm launchers.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
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
    return {f"{k}/{n}": _phase(json.loads(s or "{}")) for k, n, s in rows}


def _phase(status: dict[str, object]) -> str:
    """The phase. A gateway is Ready only once it has reported every backend (the VirtualMCPServer
    status rule); builds from before that rule showed it Ready with backends still `unknown`, so
    such a status is not counted as ready either: `--mcpfleet` then compares like with like."""
    phase = str(status.get("phase") or "")
    backends = status.get("discoveredBackends")
    if isinstance(backends, list) and any(
        isinstance(b, dict) and b.get("status") == "unknown" for b in backends
    ):
        return f"{phase} (backends unknown)"
    return phase


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


def _is_mcpfleet(cmdline: str) -> bool:
    """`up`, a `mcpfleet proxy` or the vMCP / registry entry: mcpfleet's own processes."""
    words = cmdline.split()
    return any(w.endswith("/mcpfleet") or w.startswith("mcpfleet.") for w in words[:3])


def _servers_folder(root: Path, count: int) -> Path:
    folder = root / "servers"
    folder.mkdir()
    docs = [
        "apiVersion: mcpfleet.dev/v1alpha1\nkind: MCPServer\nmetadata:\n"
        f"  name: time-{i}\nspec:\n  image: uvx://mcp-server-time\n  transport: stdio\n"
        '  args: ["--local-timezone=UTC"]\n'
        for i in range(count)
    ]
    (folder / "servers.yaml").write_text("---\n".join(docs))
    return folder


def _timelines(state_dir: Path) -> dict[str, list[str]]:
    """Per workload log: the start-up milestones `up` writes (`+1.23s since up: ready`)."""
    out: dict[str, list[str]] = {}
    for log in sorted((state_dir / "logs").glob("*.log")):
        lines = [line[4:].strip() for line in log.read_text(errors="replace").splitlines()]
        out[log.stem] = [line.replace(" since up:", "") for line in lines if "s since up:" in line]
    return out


def _stages(timelines: dict[str, list[str]]) -> dict[str, float]:
    """`workload: milestone` -> seconds (the first occurrence; pids and phases kept in the name)."""
    out: dict[str, float] = {}
    for workload, lines in timelines.items():
        for line in lines:
            seconds, _, what = line.partition("s ")
            what = what.split(" (pid")[0]
            with contextlib.suppress(ValueError):
                out.setdefault(f"{workload}: {what}", float(seconds.lstrip("+")))
    return out


def _urls(state_dir: Path) -> list[str]:
    """The MCP URLs of every MCPServer and VirtualMCPServer, from their status."""
    with sqlite3.connect(f"file:{state_dir / 'state.db'}?mode=ro", uri=True, timeout=2) as db:
        rows = db.execute(
            "select status from objects where kind in ('MCPServer', 'VirtualMCPServer')"
        ).fetchall()
    return [str(url) for (s,) in rows if (url := json.loads(s or "{}").get("url"))]


def _connect_both_eras(urls: list[str]) -> list[str]:
    """Connect and list tools in both eras; what failed, as `MODE URL: error` lines (the fleet may
    still have started a process for it, which is what the memory figure is about)."""
    import asyncio

    from mcp.client.client import Client

    failures: list[str] = []

    async def connect() -> None:
        for mode in ("legacy", "2026-07-28"):
            for url in urls:
                try:
                    async with Client(url, mode=mode) as client:
                        await client.list_tools()
                except Exception as exc:  # reported in the result; the run goes on
                    failures.append(f"{mode} {url}: {str(exc).splitlines()[0][:200]}")

    asyncio.run(connect())
    return failures


def one_run(
    cold: bool,
    timeout: float,
    mode: str = "inprocess",
    servers: int = 0,
    mcpfleet: str = MCPFLEET,
    clients: bool = False,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mcpfleet-bench-") as tmp:
        state_dir = Path(tmp) / "state"
        folder = _servers_folder(Path(tmp), servers) if servers else ROOT / "examples" / "quickstart"
        expected = servers or 4
        env = dict(os.environ)
        env["MCPFLEET_LOCAL_INPROCESS"] = "1" if mode == "inprocess" else "0"
        env["PATH"] = f"{Path(mcpfleet).parent}{os.pathsep}{env.get('PATH', '')}"
        if cold:
            env["UV_CACHE_DIR"] = str(Path(tmp) / "uv-cache")
            env["npm_config_cache"] = str(Path(tmp) / "npm-cache")
        started = time.monotonic()
        up = subprocess.Popen(
            [
                mcpfleet,
                "up",
                str(folder),
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
                if len(phases) == expected and all(p in READY for p in phases.values()):
                    break
                time.sleep(0.05)
            ready_after = time.monotonic() - started
            client_errors = _connect_both_eras(_urls(state_dir)) if clients else []
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
            own = [p for p in tree if _is_mcpfleet(names[p])]
            timelines = _timelines(state_dir)
            stages = _stages(timelines)
            final = max((v for k, v in stages.items() if ": status " in k), default=0.0)
            return {
                "mcpfleet": mcpfleet,
                "before_supervisor_seconds": round(ready_after - final, 2),
                "stages": stages,
                "mode": mode,
                "servers": servers,
                "cold": cold,
                "ready_seconds": round(ready_after, 2),
                "ready_at": first_ready,
                "timelines": timelines,
                "clients": clients,
                "client_errors": client_errors,
                "processes": len(tree),
                "rss_mib": round(sum(rss.values()) / 1024, 1),
                "pss_mib": round(sum(pss.values()) / 1024, 1),
                "mcpfleet_processes": len(own),
                "mcpfleet_pss_mib": round(sum(pss[p] for p in own) / 1024, 1),
                "pss_by_process_mib": {
                    names[p]: round(v / 1024, 1) for p, v in sorted(pss.items(), key=lambda i: -i[1])
                },
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
    parser.add_argument("--modes", default="inprocess", help="inprocess and/or processes, comma-separated")
    parser.add_argument("--servers", default="0", help="0 (the quickstart) and/or N generated servers")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument(
        "--mcpfleet", default=MCPFLEET, help="mcpfleet executable(s) to compare, comma-separated"
    )
    parser.add_argument(
        "--clients",
        action="store_true",
        help="connect both eras' clients to every server and the gateway first",
    )
    args = parser.parse_args()
    modes = args.modes.split(",")
    sizes = [int(n) for n in args.servers.split(",")]
    executables = args.mcpfleet.split(",")
    for exe in executables:  # fill the caches first, so "warm" means warm
        one_run(cold=False, timeout=args.timeout, mcpfleet=exe)
    results = []
    for servers in sizes:
        for cold, count in ((True, args.cold), (False, args.warm)):
            for _ in range(count):
                for mode in modes:  # alternating: both modes (and executables) see the same neighbours
                    for exe in executables:
                        result = one_run(
                            cold=cold,
                            timeout=args.timeout,
                            mode=mode,
                            servers=servers,
                            mcpfleet=exe,
                            clients=args.clients,
                        )
                        print(json.dumps(result, indent=2), flush=True)
                        results.append(result)
    kinds = (("cold", True), ("warm", False))
    for exe, servers, mode, (label, cold) in itertools.product(executables, sizes, modes, kinds):
        runs = [
            r
            for r in results
            if r["cold"] is cold and r["mode"] == mode and r["servers"] == servers and r["mcpfleet"] == exe
        ]
        if runs:
            _summary(runs, exe if len(executables) > 1 else "", servers, mode, label)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def _summary(runs: list[dict[str, Any]], exe: str, servers: int, mode: str, label: str) -> None:
    times = [r["ready_seconds"] for r in runs]
    before = [r["before_supervisor_seconds"] for r in runs]
    print(
        f"{exe + ' ' if exe else ''}{'quickstart' if not servers else f'{servers} servers'} {mode} {label}: all ready in "
        f"median {statistics.median(times):.2f}s (min {min(times):.2f}, max {max(times):.2f}, "
        f"n={len(runs)}); before the supervisor median {statistics.median(before):.2f}s; "
        f"fleet RSS median {statistics.median(r['rss_mib'] for r in runs):.0f} MiB, "
        f"PSS median {statistics.median(r['pss_mib'] for r in runs):.0f} MiB, mcpfleet PSS median "
        f"{statistics.median(r['mcpfleet_pss_mib'] for r in runs):.0f} MiB "
        f"({runs[0]['mcpfleet_processes']} processes)"
    )
    stages: dict[str, list[float]] = {}
    for r in runs:
        for stage, seconds in r["stages"].items():
            stages.setdefault(stage, []).append(seconds)
    for stage, values in sorted(stages.items(), key=lambda item: statistics.median(item[1])):
        print(f"    +{statistics.median(values):5.2f}s  {stage}  (n={len(values)})")


if __name__ == "__main__":
    sys.exit(main())
