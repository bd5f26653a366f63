"""Tracing through the gateway: server, client and composite spans, their links, and `traceparent`
reaching real backends over HTTP. Spans go to an in-memory exporter (no collector involved)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mcp.client.client import Client
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode, Tracer

from mcpfleet.vmcp.config import parse_config
from mcpfleet.vmcp.server import ServeOptions, build_app
from mcpfleet.vmcp.wire import BACKEND_UNAVAILABLE
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.otlp_sink import otlp_sink
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend, Served, free_port

MODES = ["legacy", "2026-07-28"]


@pytest.fixture
async def traced_gateway(
    served: Callable[[Any], Awaitable[Served]], tracing: tuple[Tracer, InMemorySpanExporter]
) -> AsyncIterator[GatewayFactory]:
    apps: list[Any] = []

    async def start(raw: dict[str, Any]) -> Served:
        port = free_port()
        app = build_app(parse_config(raw), ServeOptions(host="127.0.0.1", port=port), tracer=tracing[0])
        apps.append(app)
        return await served(app, port)

    yield start
    for app in apps:
        await app.aclose()


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, f"{name}: {[s.name for s in spans]}"
    return found[0]


def traceparent_of(span: ReadableSpan) -> str:
    ctx = span.get_span_context()
    assert ctx is not None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx.span_id


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.mark.parametrize("mode", MODES)
async def test_tool_call_spans_and_traceparent_reach_backends_of_both_eras(
    traced_gateway: GatewayFactory,
    served: Any,
    tracing: tuple[Tracer, InMemorySpanExporter],
    mode: str,
) -> None:
    old = JsonRpcBackend("old")  # 2025-11-25 only: the call goes on its shared session
    new = JsonRpcBackend("new", modern_only=True)  # 2026-07-28 only: sessionless POSTs
    so, sn = await served(old), await served(new)
    gw = await traced_gateway({"backends": [{"name": "old", "url": so.url}, {"name": "new", "url": sn.url}]})
    exporter = tracing[1]
    exporter.clear()  # start-up (connects, list fetches) makes no spans anyway
    async with Client(gw.url, mode=mode) as c:  # type: ignore[arg-type]
        assert text(await c.call_tool("old_echo", {"v": 1})).startswith("old:echo")
        assert text(await c.call_tool("new_echo", {"v": 2})).startswith("new:echo")
    spans = list(exporter.get_finished_spans())
    era = "legacy" if mode == "legacy" else "modern"
    version = "2025-11-25" if mode == "legacy" else "2026-07-28"
    for backend, be, served_at in (("old", old, so), ("new", new, sn)):
        server = one(spans, f"tools/call {backend}_echo")
        assert server.kind == SpanKind.SERVER
        assert server.parent is None  # the client sent no traceparent
        attrs = dict(server.attributes or {})
        assert attrs["mcp.method.name"] == "tools/call"
        assert attrs["gen_ai.tool.name"] == f"{backend}_echo"
        assert attrs["mcpfleet.vmcp.era"] == era
        assert attrs["mcp.protocol.version"] == version
        assert ("mcp.session.id" in attrs) == (mode == "legacy")
        assert "jsonrpc.request.id" in attrs
        assert server.status.status_code == StatusCode.UNSET
        # The backend call: a CLIENT child of the server span, named after the backend's own tool.
        client = next(s for s in spans if s.name == "tools/call echo" and parent_id(s) == span_id(server))
        assert client.kind == SpanKind.CLIENT
        assert client.context.trace_id == server.context.trace_id
        cattrs = dict(client.attributes or {})
        assert cattrs["mcpfleet.vmcp.backend"] == backend
        assert cattrs["url.full"] == served_at.url
        assert cattrs["server.address"] == "127.0.0.1"
        assert cattrs["server.port"] == served_at.port
        assert cattrs["gen_ai.tool.name"] == "echo"
        assert cattrs["mcpfleet.vmcp.outcome"] == "ok"
        # W3C trace context of the client span went out on the backend request.
        assert be.headers_by_method["tools/call"]["traceparent"] == traceparent_of(client)
    if mode == "legacy":
        init = one(spans, "initialize")
        assert init.kind == SpanKind.SERVER
        assert dict(init.attributes or {})["mcp.protocol.version"] == "2025-11-25"
    # Health pings, list fetches and the handshake to backends are not traced: only forwarded calls.
    assert all(s.kind != SpanKind.CLIENT or s.name == "tools/call echo" for s in spans)


async def test_incoming_traceparent_is_the_parent(
    traced_gateway: GatewayFactory, served: Any, tracing: tuple[Tracer, InMemorySpanExporter]
) -> None:
    be = JsonRpcBackend("solo")
    s = await served(be)
    gw = await traced_gateway({"backends": [{"name": "solo", "url": s.url}]})
    trace_id, caller = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    async with aiohttp.ClientSession() as h:
        async with h.post(gw.url, json=initialize_request(), headers=STREAMABLE_HTTP_HEADERS) as r:
            sid = r.headers["mcp-session-id"]
        hdrs = {
            **STREAMABLE_HTTP_HEADERS,
            "mcp-session-id": sid,
            "mcp-protocol-version": "2025-11-25",
            "traceparent": f"00-{trace_id}-{caller}-01",
        }
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "solo_echo"}}
        async with h.post(gw.url, json=call, headers=hdrs) as r:
            assert r.status == 200
            await r.read()
    spans = list(tracing[1].get_finished_spans())
    server = one(spans, "tools/call solo_echo")
    assert server.parent is not None and server.parent.is_remote
    assert f"{server.parent.span_id:016x}" == caller
    assert f"{server.context.trace_id:032x}" == trace_id
    assert dict(server.attributes or {})["mcp.session.id"] == sid
    assert dict(server.attributes or {})["jsonrpc.request.id"] == "7"
    client = one(spans, "tools/call echo")
    assert parent_id(client) == span_id(server)
    sent = be.headers_by_method["tools/call"]["traceparent"]
    assert sent == traceparent_of(client) and sent.split("-")[1] == trace_id


async def test_composite_steps_are_child_spans(
    alpha_beta: tuple[Served, Served],
    traced_gateway: GatewayFactory,
    tracing: tuple[Tracer, InMemorySpanExporter],
) -> None:
    a, b = alpha_beta
    composite = {
        "name": "combo",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        "steps": [  # no `output`: the result is the last step's
            {"id": "maybe", "tool": "beta.echo", "condition": "{{.params.skip}}"},
            {"id": "bad", "tool": "alpha.fail", "onError": {"action": "continue"}},
            {"id": "up", "tool": "alpha.upper", "arguments": {"text": "{{.params.text}}"}},
            {
                "id": "echo",
                "tool": "beta.echo",
                "arguments": {"text": "{{.steps.up.output.result}}"},
                "dependsOn": ["up"],
            },
        ],
    }
    cfg = {
        "name": "test",
        "backends": [{"name": "alpha", "url": a.url}, {"name": "beta", "url": b.url}],
        "compositeTools": [composite],
    }
    gw = await traced_gateway(cfg)
    async with Client(gw.url, mode="legacy") as c:
        res = await c.call_tool("combo", {"text": "hi"})
        assert not res.is_error, text(res)
        assert text(res) == "beta:HI"
    spans = list(tracing[1].get_finished_spans())
    server = one(spans, "tools/call combo")
    run = one(spans, "composite combo")
    assert run.kind == SpanKind.INTERNAL and parent_id(run) == span_id(server)
    assert dict(run.attributes or {})["mcpfleet.vmcp.composite"] == "combo"
    steps = {sid: one(spans, f"composite.step {sid}") for sid in ("up", "echo", "maybe", "bad")}
    for sid, step in steps.items():
        assert parent_id(step) == span_id(run), sid
        assert step.context.trace_id == server.context.trace_id
        assert dict(step.attributes or {})["mcpfleet.vmcp.step.id"] == sid
    outcome = {sid: dict(s.attributes or {})["mcpfleet.vmcp.outcome"] for sid, s in steps.items()}
    assert outcome == {"up": "ok", "echo": "ok", "maybe": "skipped", "bad": "continued"}
    assert steps["bad"].status.status_code == StatusCode.ERROR
    assert dict(steps["up"].attributes or {})["mcpfleet.vmcp.step.tool"] == "alpha.upper"
    # Each step that ran made one backend call, a CLIENT span under that step.
    clients = [s for s in spans if s.kind == SpanKind.CLIENT]
    by_parent = {parent_id(s): s for s in clients}
    assert len(clients) == 3
    assert dict(by_parent[span_id(steps["up"])].attributes or {})["mcpfleet.vmcp.backend"] == "alpha"
    assert dict(by_parent[span_id(steps["echo"])].attributes or {})["mcpfleet.vmcp.backend"] == "beta"
    failed = by_parent[span_id(steps["bad"])]
    assert dict(failed.attributes or {})["mcpfleet.vmcp.outcome"] == "tool_error"
    assert span_id(steps["maybe"]) not in by_parent  # skipped: no backend call


async def test_error_outcomes(
    alpha_beta: tuple[Served, Served],
    traced_gateway: GatewayFactory,
    served: Any,
    tracing: tuple[Tracer, InMemorySpanExporter],
) -> None:
    a, _ = alpha_beta
    be = JsonRpcBackend("gone")
    g = await served(be)
    gw = await traced_gateway({"backends": [{"name": "alpha", "url": a.url}, {"name": "gone", "url": g.url}]})
    async with Client(gw.url, mode="legacy") as c:
        failed = await c.call_tool("alpha_fail", {"message": "nope"})
        assert failed.is_error
        await g.stop()
        with pytest.raises(Exception, match="unavailable"):
            await c.call_tool("gone_echo", {})
    spans = list(tracing[1].get_finished_spans())
    server = one(spans, "tools/call alpha_fail")
    assert server.status.status_code == StatusCode.ERROR
    assert dict(server.attributes or {})["error.type"] == "tool_error"
    client = one(spans, "tools/call fail")
    assert dict(client.attributes or {})["mcpfleet.vmcp.outcome"] == "tool_error"
    down = one(spans, "tools/call gone_echo")
    assert down.status.status_code == StatusCode.ERROR
    assert dict(down.attributes or {})["rpc.response.status_code"] == str(BACKEND_UNAVAILABLE)
    down_client = next(s for s in spans if s.name == "tools/call echo" and parent_id(s) == span_id(down))
    dattrs = dict(down_client.attributes or {})
    assert dattrs["mcpfleet.vmcp.outcome"] == "unavailable"
    assert dattrs["error.type"] == str(BACKEND_UNAVAILABLE)
    assert down_client.status.status_code == StatusCode.ERROR


async def test_tracing_off_sends_no_traceparent(gateway: GatewayFactory, served: Any) -> None:
    be = JsonRpcBackend("solo")
    s = await served(be)
    gw = await gateway({"backends": [{"name": "solo", "url": s.url}]})
    assert gw.app.tracer is None and gw.app.gateway.tracer is None
    async with Client(gw.url, mode="legacy") as c:
        await c.call_tool("solo_echo", {})
    assert "traceparent" not in be.headers_by_method["tools/call"]


async def test_serve_exports_otlp_and_backends_continue_the_trace(served: Any, tmp_path: Path) -> None:
    """`mcpfleet vmcp serve --otlp-endpoint`: a real process exporting OTLP/HTTP to a sink of ours."""
    be = JsonRpcBackend("solo")
    s = await served(be)
    cfg = tmp_path / "vmcp.json"
    cfg.write_text(json.dumps({"name": "traced", "backends": [{"name": "solo", "url": s.url}]}))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_BSP_SCHEDULE_DELAY"] = "100"
    with otlp_sink() as sink:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-m", "mcpfleet.cli.main", "vmcp", "serve", "--config", str(cfg), "--port", str(port)),
            *("--otlp-endpoint", sink.url, "--log-level", "warning"),
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}/mcp"
            trace_id, caller = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
            async with aiohttp.ClientSession() as h:
                for _ in range(300):
                    with contextlib.suppress(aiohttp.ClientError):
                        async with h.get(f"http://127.0.0.1:{port}/readyz") as r:
                            if r.status == 200:
                                break
                    assert proc.returncode is None, "the gateway exited"
                    await asyncio.sleep(0.1)
                async with h.post(url, json=initialize_request(), headers=STREAMABLE_HTTP_HEADERS) as r:
                    sid = r.headers["mcp-session-id"]
                hdrs = {
                    **STREAMABLE_HTTP_HEADERS,
                    "mcp-session-id": sid,
                    "mcp-protocol-version": "2025-11-25",
                    "traceparent": f"00-{trace_id}-{caller}-01",
                }
                call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "solo_echo"}}
                async with h.post(url, json=call, headers=hdrs) as r:
                    assert r.status == 200
                    await r.read()
            for _ in range(100):
                names = {x.name for x in sink.spans()}
                if {"tools/call solo_echo", "tools/call echo"} <= names:
                    break
                await asyncio.sleep(0.1)
        finally:
            proc.terminate()
            await proc.wait()
    spans = sink.spans()
    server = next(x for x in spans if x.name == "tools/call solo_echo")
    client = next(x for x in spans if x.name == "tools/call echo")
    assert server.service == client.service == "mcpfleet-vmcp"
    assert server.trace_id == client.trace_id == trace_id
    assert server.parent_span_id == caller and client.parent_span_id == server.span_id
    assert client.attributes["mcpfleet.vmcp.backend"] == "solo"
    assert client.attributes["url.full"] == s.url
    assert client.attributes["mcpfleet.vmcp.outcome"] == "ok"
    sent = be.headers_by_method["tools/call"]["traceparent"]
    assert sent.startswith(f"00-{trace_id}-{client.span_id}-")
