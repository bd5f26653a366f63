"""Hostile input against a real proxy over HTTP (issue 11, defects 7, 13, 14), both eras.

The proxy serves the conformance fixture server (a real stdio child) the way `mcpfleet proxy`
serves it (`BodyLimits` + the guarded uvicorn protocol). Each case was a silently accepted
invalid message, a broken relay or an unbounded read before the fix.
"""

from __future__ import annotations

import resource
import socket
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from mcpfleet.httplimits import HttpLimits
from mcpfleet.proxy.serve import build_stdio_app
from tests.conformance import harness
from tests.hostile import (
    ENVELOPES,
    LEGACY,
    META,
    MODERN,
    TEST_LIMITS,
    ThreadServers,
    assert_sane,
    check_content_type,
    check_envelope_refused,
    encode,
    encode_deep,
    error_log,
    good_tools_list,
    legacy_headers,
    modern_headers,
    nested,
    open_session,
    post,
    running,
    stall,
)


def start_proxy(limits: HttpLimits = TEST_LIMITS) -> tuple[ThreadServers, str]:
    servers = ThreadServers()
    app = build_stdio_app(
        harness.fixture_stdio_command(), host="127.0.0.1", max_json_depth=limits.max_json_depth
    )
    base = servers.add(app, limits)
    servers.start()
    return servers, base


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    with running(start_proxy) as base:
        yield base


@pytest.fixture(scope="module")
def sid(proxy: str) -> str:
    return open_session(proxy)


def send(base: str, era: str, sid: str, message: Any, body: bytes | None = None) -> Any:
    headers = legacy_headers(sid) if era == LEGACY else modern_headers(message)
    reply = post(base, body if body is not None else encode(message), headers)
    assert_sane(reply, message)
    return reply


@pytest.mark.parametrize("era", [LEGACY, MODERN])
@pytest.mark.parametrize(("message", "field"), ENVELOPES, ids=[str(i) for i in range(len(ENVELOPES))])
def test_invalid_envelopes_are_refused(proxy: str, sid: str, era: str, message: Any, field: str) -> None:
    with error_log() as log:
        reply = send(proxy, era, sid, message)
    check_envelope_refused(reply, field)
    assert not log.tracebacks()
    good_tools_list(proxy, era, sid)


@pytest.mark.parametrize("era", [LEGACY, MODERN])
@pytest.mark.parametrize("ctype", ["text/plain", "application/jsonx", ""])
def test_content_type_must_be_json(proxy: str, sid: str, era: str, ctype: str) -> None:
    check_content_type(proxy, era, sid, ctype)


@pytest.mark.parametrize("depth", [62, 63, 300])
@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_deep_arguments(proxy: str, sid: str, era: str, depth: int) -> None:
    params: dict[str, Any] = {"name": "test_simple_text", "arguments": nested(depth)}
    if era == MODERN:
        params["_meta"] = META
    msg = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
    with error_log() as log:
        reply = send(proxy, era, sid, msg, encode_deep(msg))
    assert not log.tracebacks()
    answer = reply.messages()[-1]
    if depth <= 62:
        assert "result" in answer, reply
    else:
        assert reply.status == 400 and answer["error"]["code"] == -32600, reply
        assert "params.arguments" in answer["error"]["message"]
    good_tools_list(proxy, era, sid)


def test_oversized_and_stalled_bodies(proxy: str) -> None:
    host, port = proxy.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(
            b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"content-length: 52428800\r\n\r\n{"
        )
        assert s.recv(100).startswith(b"HTTP/1.1 413")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(
            b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"content-length: 100\r\n\r\n{"
        )
        assert s.recv(100).startswith(b"HTTP/1.1 408")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 408")


def test_cli_releases_1000_stalled_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """`mcpfleet proxy` as a process, the header deadline from the environment: a thousand
    connections that never send complete headers are all closed within seconds, and it still serves."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 4096), hard), hard))
    monkeypatch.setenv("MCPFLEET_HEADER_TIMEOUT", "2")
    port = harness.free_port()
    cmd = harness.proxy_command(port, "--", *harness.fixture_stdio_command())
    with harness.serving(cmd, f"http://127.0.0.1:{port}/health"):
        closed, elapsed = stall(port, 1000, budget=15)
        print(f"1000 stalled connections: {closed} closed by the server after {elapsed:.1f} s")
        assert closed == 1000 and elapsed < 10
        assert good_tools_list(f"http://127.0.0.1:{port}", MODERN, None)


def test_sse_transport_messages_are_checked() -> None:
    """The deprecated HTTP+SSE transport's `/messages/` POSTs get the same envelope checks."""
    import http.client

    servers = ThreadServers()
    app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1", transport="sse")
    base = servers.add(app, TEST_LIMITS)
    servers.start()
    try:
        host, port = base.removeprefix("http://").split(":")
        stream = http.client.HTTPConnection(host, int(port), timeout=30)
        stream.request("GET", "/sse", headers={"accept": "text/event-stream"})
        resp = stream.getresponse()
        endpoint = b""
        while b"session_id=" not in endpoint:
            endpoint += resp.read1(1024)
        path = next(line for line in endpoint.splitlines() if line.startswith(b"data:"))[5:].strip().decode()
        bad = [
            {"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 5},
            {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"arguments": nested(100)}},
        ]
        for message in bad:
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            conn.request(
                "POST", path, body=encode_deep(message), headers={"content-type": "application/json"}
            )
            reply = conn.getresponse()
            body = reply.read()
            assert reply.status == 400 and orjson.loads(body)["error"]["code"] == -32600, body
            conn.close()
        stream.close()
    finally:
        servers.stop()
