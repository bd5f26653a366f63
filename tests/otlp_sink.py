"""A tiny OTLP/HTTP receiver for tests: collects the spans a process exports (no collector needed)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ExportedSpan:
    name: str
    service: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]


@dataclass
class OtlpSink:
    url: str
    requests: list[tuple[str, str, bytes]] = field(default_factory=list)

    def spans(self) -> list[ExportedSpan]:
        """Every span received so far (decoded from the protobuf export requests)."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        out: list[ExportedSpan] = []
        for path, ctype, body in list(self.requests):
            assert path == "/v1/traces" and ctype == "application/x-protobuf", (path, ctype)
            req = ExportTraceServiceRequest.FromString(body)
            for rs in req.resource_spans:
                service = next(
                    (a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), ""
                )
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        attrs: dict[str, Any] = {}
                        for a in s.attributes:
                            kind = a.value.WhichOneof("value")
                            attrs[a.key] = getattr(a.value, kind) if kind else None
                        out.append(
                            ExportedSpan(
                                s.name,
                                service,
                                s.trace_id.hex(),
                                s.span_id.hex(),
                                s.parent_span_id.hex(),
                                attrs,
                            )
                        )
        return out


@contextmanager
def otlp_sink() -> Iterator[OtlpSink]:
    sink: OtlpSink

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            sink.requests.append((self.path, self.headers.get("content-type", ""), body))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    sink = OtlpSink(f"http://127.0.0.1:{server.server_port}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()
