"""What rate limiting costs the vMCP gateway: `tools/call` through the gateway to the bare ASGI
backend with rate limiting off (the baseline), on with in-memory buckets (one replica), and on with
buckets in Redis (several replicas: one Lua script per call), in one run, side by side. Every call
takes from three buckets (`shared`, `perUser` and the tool's own), limits high enough that none is
refused. The three gateways run at the same time and are measured in interleaved short wrk rounds
at 1 client (best and median p50 per mode: the best is the least disturbed by other load on a
shared machine), then once at 16 clients with the gateway's CPU time per call (from /proc).

    .venv/bin/python -P bench/vmcp_ratelimit.py [--duration 2] [--rounds 5]

`--micro` only times `Limiter.check` in this process (memory, and Redis over loopback).
Needs `wrk` and `redis-server` (scripts/system-deps.sh).
"""

from __future__ import annotations

import sys

# bench/ holds scripts named like stdlib modules (operator.py); never import from it by accident.
sys.path[:] = [p for p in sys.path if p.rstrip("/") != __file__.rsplit("/", 1)[0]]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import secrets  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

HERE = Path(__file__).resolve().parent
LIMITS = {
    "shared": {"maxTokens": 1_000_000_000, "refillPeriod": "1s"},
    "perUser": {"maxTokens": 1_000_000_000, "refillPeriod": "1s"},
    "tools": [{"name": "bare_echo", "shared": {"maxTokens": 1_000_000_000, "refillPeriod": "1s"}}],
}


def _load(name: str) -> Any:
    """A sibling bench script as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bench_vmcp() -> Any:
    return _load("vmcp")


@contextlib.contextmanager
def redis_server(tmp: Path, port: int) -> Iterator[str]:
    """A private redis-server on `port` with a password; yields the password."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed: run scripts/system-deps.sh")
    password = secrets.token_hex(16)
    conf = tmp / "redis.conf"
    conf.write_text(
        f'port {port}\nbind 127.0.0.1\nrequirepass {password}\nsave ""\nappendonly no\ndir {tmp}\n'
    )
    proc = subprocess.Popen([binary, str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _bench_vmcp().wait_port(port, proc)
        yield password
    finally:
        proc.terminate()
        proc.wait(10)


def micro(n: int = 20000) -> None:
    from mcpfleet.api.ratelimit import RateLimiting, SessionStorage
    from mcpfleet.ratelimit import build

    limits = RateLimiting.model_validate(LIMITS)

    async def timed(storage: SessionStorage | None, calls: int) -> float:
        limiter = build(limits, storage, "bench/gw")
        assert limiter is not None
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(calls):
                await limiter.check("user", "tools/call", "bare_echo")
            best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        await limiter.aclose()
        return best

    print(f"Limiter.check, memory: {asyncio.run(timed(None, n)):.1f} µs (best of 5 x {n})", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        port = _bench_vmcp().free_port()
        with redis_server(Path(tmp), port) as password:
            os.environ["MCPFLEET_REDIS_PASSWORD"] = password
            storage = SessionStorage(provider="redis", address=f"127.0.0.1:{port}")
            n_redis = n // 10
            print(
                f"Limiter.check, Redis: {asyncio.run(timed(storage, n_redis)):.1f} µs (best of 5 x {n_redis})",
                flush=True,
            )


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=2, help="seconds per wrk run")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved 1-client rounds per mode")
    ap.add_argument("--micro", action="store_true", help="only the in-process Limiter.check cost")
    args = ap.parse_args(argv)
    if args.micro:
        micro()
        return
    bv = _bench_vmcp()
    tracing = _load("vmcp_tracing")  # its gateway runner, environment and /proc CPU helpers
    py = sys.executable
    backend = bv.free_port()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        redis_port = bv.free_port()
        base = tmp / "base.yaml"
        bv.vmcp_config(base, [("bare", f"http://127.0.0.1:{backend}/mcp")])
        configs: dict[str, Path] = {"off": base}
        for mode, storage in (
            ("memory", None),
            ("redis", {"provider": "redis", "address": f"127.0.0.1:{redis_port}"}),
        ):
            path = tmp / f"{mode}.yaml"
            extra = {"rateLimiting": LIMITS, **({"sessionStorage": storage} if storage else {})}
            path.write_text(base.read_text() + "".join(f"{k}: {json.dumps(v)}\n" for k, v in extra.items()))
            configs[mode] = path
        labels = {"off": "off (baseline)", "memory": "memory buckets", "redis": "Redis buckets"}
        p50s: dict[str, list[float]] = {m: [] for m in labels}
        cpu: dict[str, float] = {}
        rps16: dict[str, float] = {}
        with contextlib.ExitStack() as stack:
            password = stack.enter_context(redis_server(tmp, redis_port))
            stack.enter_context(bv.run([py, str(HERE / "vmcp_backends.py"), "bare", str(backend)], backend))
            stack.enter_context(tracing._environ({"MCPFLEET_REDIS_PASSWORD": password}))
            gateways: dict[str, tuple[Any, str, str]] = {}
            for mode in labels:  # all three run at once, so they share the machine's conditions
                port = bv.free_port()
                cmd = [py, "-m", "mcpfleet.cli.main", "vmcp", "serve", "--config", str(configs[mode])]
                cmd += ["--log-level", "warning", "--port", str(port)]
                proc = stack.enter_context(tracing._gateway(cmd, port, bv.wait_port))
                url = f"http://127.0.0.1:{port}/mcp"
                time.sleep(1.0)
                sid = bv.session_id(url)
                bv.wrk(url, "bare_echo", sid, 1, 1)  # warm-up
                gateways[mode] = (proc, url, sid)
            # Interleaved rounds at 1 client: each mode's best p50 (the least disturbed by other
            # load) and its median; the added p50 compares best with best.
            for r in range(args.rounds):
                for mode, (_, url, sid) in gateways.items():
                    p50s[mode].append(bv.wrk(url, "bare_echo", sid, 1, args.duration)["p50"])
                print(f"round {r + 1}: " + ", ".join(f"{m} {p50s[m][-1]:.3f} ms" for m in labels), flush=True)
            for mode, (proc, url, sid) in gateways.items():
                cpu0 = tracing._cpu_seconds(proc.pid)
                many = bv.wrk(url, "bare_echo", sid, 16, args.duration)
                rps16[mode] = many["rps"]
                cpu[mode] = (tracing._cpu_seconds(proc.pid) - cpu0) / (many["rps"] * args.duration) * 1e6
    best_off = min(p50s["off"])
    print()
    print(
        "| rate limiting | best p50 (1 client) | added p50 (best vs best) | median p50 (1 client) "
        "| calls/s (16) | gateway CPU per call (16) |"
    )
    print("|---|---|---|---|---|---|")
    for mode, label in labels.items():
        best = min(p50s[mode])
        print(
            f"| {label} | {best:.3f} ms | {(best - best_off) * 1000:+.0f} µs | "
            f"{statistics.median(p50s[mode]):.3f} ms | {rps16[mode]:,.0f} | {cpu[mode]:.0f} µs |"
        )


if __name__ == "__main__":
    main()
