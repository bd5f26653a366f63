"""What tracing costs the vMCP gateway: `tools/call` through the gateway to the bare ASGI backend with
tracing off, on with a discarding exporter (the in-process cost: spans, attributes, `traceparent`,
batching), on with the real OTLP/HTTP exporter of `mcpfleet vmcp serve --otlp-endpoint` sending
to a local sink, and the same sampling 10 % of the traces (`OTEL_TRACES_SAMPLER=parentbased_traceidratio`,
`OTEL_TRACES_SAMPLER_ARG=0.1`). Short wrk runs (default 3 s at 1 and at 16 clients each); the `off` gateway is run
again at the end so the spread between the two `off` rows shows the machine's noise. Besides wrk's
figures it reports the gateway process's CPU time per call during the 16-client run (user + system,
from /proc), which other load on a shared machine disturbs much less than latency or throughput.

    .venv/bin/python -P bench/vmcp_tracing.py [--duration 3] [--baseline DIR]

`--micro` only times, in this process, the span work the gateway does per forwarded `tools/call` (a
SERVER span made current, a CLIENT span, `traceparent` injection, the same attributes), all spans
sampled and 10 % sampled, into a batching processor with a discarding exporter.

`--baseline DIR` adds a row for a gateway run from another source tree (`DIR/src` first on
PYTHONPATH), e.g. a commit from before tracing: `git archive COMMIT src | tar -x -C DIR`.
"""

from __future__ import annotations

import sys

# bench/ holds scripts named like stdlib modules (operator.py); never import from it by accident.
sys.path[:] = [p for p in sys.path if p.rstrip("/") != __file__.rsplit("/", 1)[0]]

import argparse  # noqa: E402
import contextlib  # noqa: E402
import importlib.util  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator, Sequence  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

HERE = Path(__file__).resolve().parent


def _bench_vmcp() -> Any:
    spec = importlib.util.spec_from_file_location("bench_vmcp", HERE / "vmcp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def micro(n: int = 20000) -> None:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio, Sampler
    from opentelemetry.trace import SpanKind, Tracer, set_span_in_context

    from mcpfleet import telemetry

    class Discard(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    server_attrs = {
        telemetry.MCP_METHOD: "tools/call",
        telemetry.VMCP_ERA: "legacy",
        telemetry.JSONRPC_REQUEST_ID: "7",
        telemetry.MCP_PROTOCOL_VERSION: "2025-11-25",
        telemetry.MCP_SESSION_ID: "0" * 32,
        telemetry.TOOL_NAME: "bare_echo",
    }
    client_attrs = {
        telemetry.MCP_METHOD: "tools/call",
        telemetry.VMCP_BACKEND: "bare",
        telemetry.VMCP_ERA: "legacy",
        "url.full": "http://127.0.0.1:8080/mcp",
        "server.address": "127.0.0.1",
        "server.port": 8080,
        telemetry.TOOL_NAME: "echo",
    }
    headers = {"host": "127.0.0.1:4483", "content-type": "application/json"}

    def one_call(tracer: Tracer) -> None:
        parent = telemetry.extract(headers) if "traceparent" in headers else None
        with telemetry.current_span(tracer, "tools/call bare_echo", SpanKind.SERVER, server_attrs, parent):
            span = tracer.start_span(
                "tools/call echo",
                kind=SpanKind.CLIENT,
                attributes=client_attrs,
                record_exception=False,
                set_status_on_exception=False,
            )
            out: dict[str, str] = {}
            telemetry.inject(out, set_span_in_context(span))
            span.set_attribute(telemetry.VMCP_OUTCOME, "ok")
            span.end()

    samplers: list[tuple[str, Sampler | None]] = [
        ("all sampled", None),
        ("10 % sampled", ParentBasedTraceIdRatio(0.1)),
    ]
    for label, sampler in samplers:
        provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Discard()))
        tracer = provider.get_tracer("bench")
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                one_call(tracer)
            best = min(best, (time.perf_counter() - t0) / n * 1e6)
        provider.shutdown()
        print(f"span work per forwarded call, {label}: {best:.1f} µs (best of 5 x {n})", flush=True)


def serve_discarding(config: str, port: int) -> None:
    """A gateway as `mcpfleet vmcp serve` runs it, with spans batched to an exporter that drops them."""
    from collections.abc import Sequence as Seq

    import uvicorn
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from mcpfleet.vmcp.config import load_config
    from mcpfleet.vmcp.server import ServeOptions, build_app

    class Discard(SpanExporter):
        def export(self, spans: Seq[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    app = build_app(load_config(Path(config)), ServeOptions(port=port), tracer=provider.get_tracer("bench"))
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        proxy_headers=False,
        timeout_graceful_shutdown=5,
        log_level="warning",
        access_log=False,
    )


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _gateway(cmd: list[str], port: int, wait_port: Any) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its threads (the OTLP exporter's thread included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Sink(BaseHTTPRequestHandler):
    requests = 0
    spans_bytes = 0

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        _Sink.requests += 1
        _Sink.spans_bytes += len(body)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=3, help="seconds per wrk run")
    ap.add_argument("--micro", action="store_true", help="only the in-process span cost per call")
    ap.add_argument("--baseline", type=Path, help="also run the gateway from DIR/src (tracing-free code)")
    ap.add_argument("--serve-discarding", nargs=2, metavar=("CONFIG", "PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve_discarding:
        serve_discarding(args.serve_discarding[0], int(args.serve_discarding[1]))
        return
    if args.micro:
        micro()
        return
    bv = _bench_vmcp()
    py = sys.executable
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    backend = bv.free_port()
    rows: list[tuple[str, dict[str, float], dict[str, float], float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "vmcp.yaml"
        bv.vmcp_config(cfg, [("bare", f"http://127.0.0.1:{backend}/mcp")])
        serve = [
            py,
            "-m",
            "mcpfleet.cli.main",
            "vmcp",
            "serve",
            "--config",
            str(cfg),
            "--log-level",
            "warning",
        ]
        otlp = [*serve, "--otlp-endpoint", f"http://127.0.0.1:{sink.server_port}"]
        sampled = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"}
        modes: list[tuple[str, list[str], dict[str, str]]] = [
            ("off", serve, {}),
            ("on, discarding exporter", [py, __file__, "--serve-discarding", str(cfg)], {}),
            ("on, OTLP/HTTP to a local sink", otlp, {}),
            ("on, OTLP/HTTP, 10 % sampled", otlp, sampled),
            ("off (again)", serve, {}),
        ]
        if args.baseline:
            src = str(args.baseline.resolve() / "src")
            modes.insert(1, (f"baseline source {args.baseline}", serve, {"PYTHONPATH": src}))
        with bv.run([py, str(HERE / "vmcp_backends.py"), "bare", str(backend)], backend):
            for label, cmd, env in modes:
                port = bv.free_port()
                full = [*cmd, str(port)] if "--serve-discarding" in cmd else [*cmd, "--port", str(port)]
                with _environ(env), _gateway(full, port, bv.wait_port) as proc:  # inherits env
                    time.sleep(1.0)
                    url = f"http://127.0.0.1:{port}/mcp"
                    sid = bv.session_id(url)
                    bv.wrk(url, "bare_echo", sid, 1, 1)  # warm-up
                    one = bv.wrk(url, "bare_echo", sid, 1, args.duration)
                    cpu0 = _cpu_seconds(proc.pid)
                    many = bv.wrk(url, "bare_echo", sid, 16, args.duration)
                    time.sleep(0.3)  # let the exporter thread finish its batch
                    cpu_us = (_cpu_seconds(proc.pid) - cpu0) / (many["rps"] * args.duration) * 1e6
                rows.append((label, one, many, cpu_us))
                print(
                    f"{label:32} c1 p50={one['p50']:.3f}ms p99={one['p99']:.2f}ms {one['rps']:.0f}/s | "
                    f"c16 p50={many['p50']:.2f}ms {many['rps']:.0f}/s cpu={cpu_us:.0f}us/call",
                    flush=True,
                )
    sink.shutdown()
    print()
    print(
        "| tracing | p50 (1 client) | p99 (1 client) | calls/s (1) | calls/s (16) | p50 (16) "
        "| gateway CPU per call (16) |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, one, many, cpu_us in rows:
        print(
            f"| {label} | {one['p50']:.3f} ms | {one['p99']:.2f} ms | {one['rps']:,.0f} | "
            f"{many['rps']:,.0f} | {many['p50']:.2f} ms | {cpu_us:.0f} µs |"
        )
    print(f"\nOTLP sink received {_Sink.requests} export requests, {_Sink.spans_bytes / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
