"""Tracing of the registry server: a span per HTTP request (route template, status) and per source sync,
in-process with an in-memory exporter, and end to end through `mcpfleet registry serve` exporting OTLP
to a small HTTP sink of the test's own (no collector)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode, Tracer

from mcpfleet.registry.app import create_app
from mcpfleet.registry.config import RegistryConfig
from mcpfleet.registry.service import RegistryService
from tests.otlp_sink import OtlpSink, otlp_sink
from tests.reference import TOOLHIVE_FILE
from tests.registry.conftest import make_config, server_doc, write_json

ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def traced(
    config: RegistryConfig, base_dir: Path, tracer: Tracer
) -> AsyncIterator[tuple[RegistryService, httpx.AsyncClient]]:
    service = RegistryService(config, base_dir, run_loops=False, tracer=tracer)
    await service.start()
    app = create_app(service, manage_lifespan=False, tracer=tracer)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://registry.test"
        ) as client:
            yield service, client
    finally:
        await service.stop()


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


async def test_sync_spans(tmp_path: Path, tracing: tuple[Tracer, InMemorySpanExporter]) -> None:
    tracer, exporter = tracing
    good = [server_doc("com.example/a"), server_doc("com.example/b")]
    path = write_json(tmp_path / "r.json", [*good, {"name": "broken"}])
    cfg = make_config([{"name": "s", "file": {"path": str(path)}}], f"sqlite+aiosqlite:///{tmp_path}/r.db")
    async with traced(cfg, tmp_path, tracer) as (service, _):
        await service.syncer.sync_all()
        await service.syncer.sync_source("s")
        path.write_text("{broken")
        await service.syncer.sync_source("s")
    spans = named(list(exporter.get_finished_spans()), "registry.sync s")
    assert len(spans) == 3
    results = [dict(s.attributes or {}) for s in spans]
    assert [r["mcpfleet.registry.sync.result"] for r in results] == ["applied", "unchanged", "failed"]
    first = results[0]
    assert first["mcpfleet.registry.source"] == "s"
    assert first["mcpfleet.registry.source.kind"] == "file"
    assert first["mcpfleet.registry.sync.entries"] == 2
    assert first["mcpfleet.registry.sync.entry_errors"] == 1
    assert spans[0].kind == SpanKind.INTERNAL
    assert spans[0].status.status_code == StatusCode.UNSET
    failed = spans[2]
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.status.description  # the source's error message
    assert results[2]["error.type"] == "sync_failed"
    assert results[2]["mcpfleet.registry.sync.entries"] == 2  # the last good data stays served


async def test_request_spans(tmp_path: Path, tracing: tuple[Tracer, InMemorySpanExporter]) -> None:
    tracer, exporter = tracing
    path = write_json(tmp_path / "r.json", [server_doc("com.example/a")])
    cfg = make_config([{"name": "s", "file": {"path": str(path)}}], f"sqlite+aiosqlite:///{tmp_path}/r.db")
    async with traced(cfg, tmp_path, tracer) as (service, client):
        await service.syncer.sync_all()
        exporter.clear()
        trace_id, caller = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        parent = {"traceparent": f"00-{trace_id}-{caller}-01"}
        assert (await client.get("/v0.1/servers", headers=parent)).status_code == 200
        assert (await client.get("/v0/servers/com.example%2Fa/versions/latest")).status_code == 200
        assert (await client.get("/v0.1/servers/com.example%2Fzz/versions")).status_code == 404
        assert (await client.post("/v0.1/servers")).status_code == 405
        assert (await client.get("/version")).status_code == 200
        assert (await client.get("/nowhere")).status_code == 404
        assert (await client.get("/health")).status_code == 200
        assert (await client.get("/metrics")).status_code == 200
    spans = list(exporter.get_finished_spans())
    got = [
        (
            s.name,
            dict(s.attributes or {}).get("http.route"),
            dict(s.attributes or {})["http.response.status_code"],
        )
        for s in spans
    ]
    assert got == [
        ("GET /v0.1/servers", "/v0.1/servers", 200),
        (
            "GET /v0/servers/{serverName}/versions/{version}",
            "/v0/servers/{serverName}/versions/{version}",
            200,
        ),
        ("GET /v0.1/servers/{serverName}/versions", "/v0.1/servers/{serverName}/versions", 404),
        ("POST /v0.1/servers", "/v0.1/servers", 405),
        ("GET /version", "/version", 200),
        ("GET", None, 404),  # no route matched: no template, the bare method as the name
    ]  # /health and /metrics (probes, scrapes) are not traced
    for s in spans:
        assert s.kind == SpanKind.SERVER
        assert s.status.status_code == StatusCode.UNSET  # 4xx is the client's error, not the server's
        assert dict(s.attributes or {})["http.request.method"] in ("GET", "POST")
    first = spans[0]
    assert first.parent is not None and f"{first.parent.span_id:016x}" == caller
    assert f"{first.context.trace_id:032x}" == trace_id
    assert dict(first.attributes or {})["url.path"] == "/v0.1/servers"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("entry", ["cli", "local-platform"])
def test_serve_exports_otlp_from_the_environment(tmp_path: Path, entry: str) -> None:
    """`OTEL_EXPORTER_OTLP_ENDPOINT` alone turns tracing on; spans arrive as OTLP/HTTP protobuf. Both
    `mcpfleet registry serve` and the local platform's registry process (what `mcpfleet up` starts)."""
    with otlp_sink() as sink:
        _serve_and_check(tmp_path, entry, sink)


def _serve_and_check(tmp_path: Path, entry: str, sink: OtlpSink) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        json.dumps(
            {
                "registryName": "traced",
                "sources": [{"name": "th", "format": "toolhive", "file": {"path": str(TOOLHIVE_FILE)}}],
            }
        )
    )
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url,
            "OTEL_SERVICE_NAME": "registry-under-test",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if entry == "cli":
        cmd = [sys.executable, "-m", "mcpfleet.cli.main", "registry", "serve", "--config", str(cfg)]
    else:
        (tmp_path / "state").mkdir()
        cmd = [sys.executable, "-m", "mcpfleet.platform.local.dataplane", "registry", "--config", str(cfg)]
        cmd += ["--state-dir", str(tmp_path / "state")]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    wanted = {"registry.sync th", "GET /v0.1/servers"}
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readiness", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.time() < deadline, "registry did not become ready"
            time.sleep(0.2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v0.1/servers?limit=3") as r:
            assert r.status == 200
        deadline = time.time() + 20
        while not wanted <= {s.name for s in sink.spans()} and time.time() < deadline:
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    spans = sink.spans()
    assert wanted <= {s.name for s in spans}, [s.name for s in spans]
    assert {s.service for s in spans} == {"registry-under-test"}
    request = next(s for s in spans if s.name == "GET /v0.1/servers")
    assert request.attributes["http.route"] == "/v0.1/servers"
    assert request.attributes["http.response.status_code"] == 200
    sync = next(s for s in spans if s.name == "registry.sync th")
    assert sync.attributes["mcpfleet.registry.sync.result"] == "applied"
    assert sync.attributes["mcpfleet.registry.sync.entries"] > 100


def test_serve_refuses_an_unknown_exporter(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"registryName": "r", "sources": [{"name": "a", "file": {"path": "x.json"}}]}))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcpfleet.cli.main",
            "registry",
            "serve",
            "--config",
            str(cfg),
            "--trace-exporter",
            "zipkin",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert "zipkin" in result.stderr and "--trace-exporter" in result.stderr
