"""Benchmark of the local sandbox's start-up cost per server: launch -> first `initialize` answer.

The same stdio server (`bench/stdio_responder.py`: the standard library only, it starts like a bare
`python -c pass`) is started directly and through `sandbox_argv` under each kind of profile —
`network` (bwrap with the network shared), `none` (bwrap, own network namespace) and allow-lists
(bwrap behind the egress filter: two more small Python processes) — and sent `initialize`; reported:
median and min seconds over `--runs`, runs alternating between the modes so each sees the same
load, and the load average before and after. A `uvx` / `npx` package adds its package manager's
start, the same with or without the sandbox (its cache is warm after the first start).

    .venv/bin/python -P bench/sandbox.py [--runs 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcpfleet.api.permissions import BUILTIN, PermissionProfile
from mcpfleet.platform.local.sandbox import sandbox_argv

RESPONDER = Path(__file__).with_name("stdio_responder.py")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "b", "version": "1"},
    },
}
MODES: dict[str, PermissionProfile | None] = {
    "direct (no sandbox)": None,
    "sandbox, network": BUILTIN["network"],
    "sandbox, none": BUILTIN["none"],
    "sandbox, allow-lists (egress filter)": PermissionProfile.model_validate(
        {"network": {"outbound": {"allow_host": ["127.0.0.1"], "allow_port": [9]}}}
    ),
}


def _once(argv: list[str]) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    proc.kill()
    proc.wait()
    if b'"result"' not in line:
        raise SystemExit(f"no initialize answer from {argv[:3]}…: {line[:200]!r}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", type=Path, default=None)
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-sandbox-"))
    # The server's file in its own work folder (what a sandbox sees of the user's files).
    (folder / "work").mkdir(mode=0o700)
    server = folder / "work" / RESPONDER.name
    server.write_text(RESPONDER.read_text())
    command = [sys.executable, "-P", str(server)]
    argvs = {
        mode: command
        if profile is None
        else sandbox_argv(command, dict(os.environ), profile, folder / "work", folder / "cache")
        for mode, profile in MODES.items()
    }
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(options.runs):
        for mode, argv in argvs.items():
            times[mode].append(_once(argv))
    results = {
        mode: {"median_s": round(statistics.median(t), 4), "min_s": round(min(t), 4)}
        for mode, t in times.items()
    }
    width = max(len(m) for m in MODES)
    print(f"{'mode':<{width}}  median s  min s   (launch -> initialize answered, {options.runs} runs)")
    for mode, result in results.items():
        print(f"{mode:<{width}}  {result['median_s']:>8.4f}  {result['min_s']:.4f}")
    print(f"load average before {load_before}, after {os.getloadavg()}")
    if options.json is not None:
        options.json.write_text(json.dumps({"runs": options.runs, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
