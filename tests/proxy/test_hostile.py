"""Hostile input against a real proxy over HTTP (issue 11, defects 7, 13, 14), both eras.

The proxy serves the conformance fixture server (a real stdio child) the way `mcpfleet proxy`
serves it (`BodyLimits` + the guarded uvicorn protocol). Each case was a silently accepted
invalid message, a broken relay or an unbounded read before the fix.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from mcpfleet.httplimits import HttpLimits
from mcpfleet.proxy.serve import build_stdio_app
from tests.conformance import harness
from tests.hostile import (
    LEGACY,
    META,
    MODERN,
    ThreadServers,
    assert_sane,
    encode_deep,
    error_log,
    free_port,
    good_tools_list,
    legacy_headers,
    modern_headers,
    nested,
    open_session,
    post,
)

LIMITS = HttpLimits(max_body_bytes=64 * 1024, body_timeout=1.0, header_timeout=1.0, max_json_depth=64)


def start_proxy(limits: HttpLimits = LIMITS) -> tuple[ThreadServers, str]:
    servers = ThreadServers()
    app = build_stdio_app(
        harness.fixture_stdio_command(), host="127.0.0.1", max_json_depth=limits.max_json_depth
    )
    base = servers.add(app, limits)
    servers.start()
    return servers, base


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    servers, base = start_proxy()
    try:
        yield base
    finally:
        servers.stop()


@pytest.fixture(scope="module")
def sid(proxy: str) -> str:
    return open_session(proxy)


def send(base: str, era: str, sid: str, message: Any, body: bytes | None = None) -> Any:
    headers = legacy_headers(sid) if era == LEGACY else modern_headers(message)
    reply = post(base, body if body is not None else orjson.dumps(message), headers)
    assert_sane(reply, message)
    return reply


ENVELOPES = [
    ({"jsonrpc": "2.0", "id": 5}, '"method"'),
    ({"jsonrpc": "2.0", "id": 5, "method": 123}, '"method"'),
    ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}, '"id"'),
    ({"jsonrpc": "2.0", "id": [1], "method": "tools/list"}, '"id"'),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, '"id"'),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": "x"}, '"params"'),
    (
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"progressToken": {}}}},
        "progressToken",
    ),
    ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}}, "requestId"),
    ([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], "batch"),
]


@pytest.mark.parametrize("era", [LEGACY, MODERN])
@pytest.mark.parametrize(("message", "field"), ENVELOPES, ids=[str(i) for i in range(len(ENVELOPES))])
def test_invalid_envelopes_are_refused(proxy: str, sid: str, era: str, message: Any, field: str) -> None:
    with error_log() as log:
        reply = send(proxy, era, sid, message)
    assert reply.status == 400, reply
    err = reply.json()
    assert err["error"]["code"] in (-32600, -32602) and field in err["error"]["message"], err
    assert err["id"] in (None, 1, 5)
    assert not log.tracebacks()
    good_tools_list(proxy, era, sid)


@pytest.mark.parametrize("era", [LEGACY, MODERN])
@pytest.mark.parametrize("ctype", ["text/plain", "application/jsonx", ""])
def test_content_type_must_be_json(proxy: str, sid: str, era: str, ctype: str) -> None:
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    headers = legacy_headers(sid) if era == LEGACY else modern_headers(msg)
    headers["content-type"] = ctype
    assert post(proxy, orjson.dumps(msg), headers).status == 415


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


def test_cli_releases_1000_stalled_connections() -> None:
    """`mcpfleet proxy` as a process, --header-timeout 2: a thousand connections that never send
    complete headers are all closed by the server within seconds, and it still serves."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 4096), hard), hard))
    port = free_port()
    env = {**os.environ, "MCPFLEET_HEADER_TIMEOUT": "2"}
    cmd = [
        sys.executable,
        "-m",
        "mcpfleet.cli.main",
        "proxy",
        "--port",
        str(port),
        "--",
        *harness.fixture_stdio_command(),
    ]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    sockets: list[socket.socket] = []
    try:
        assert proc.stderr is not None
        assert "listening" in proc.stderr.readline()
        base = f"http://127.0.0.1:{port}"
        for i in range(1000):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            if i % 2:
                s.sendall(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")  # headers never finished
            sockets.append(s)
        t0 = time.monotonic()
        closed = 0
        for s in sockets:
            s.settimeout(max(0.1, 15 - (time.monotonic() - t0)))
            try:
                while s.recv(4096):
                    pass
                closed += 1
            except TimeoutError:
                pass
        elapsed = time.monotonic() - t0
        print(f"1000 stalled connections: {closed} closed by the server after {elapsed:.1f} s")
        assert closed == 1000 and elapsed < 10
        assert good_tools_list(base, MODERN, None)
    finally:
        for s in sockets:
            s.close()
        proc.terminate()
        proc.wait(10)


def test_sse_transport_messages_are_checked() -> None:
    """The deprecated HTTP+SSE transport's `/messages/` POSTs get the same envelope checks."""
    import http.client

    servers = ThreadServers()
    app = build_stdio_app(harness.fixture_stdio_command(), host="127.0.0.1", transport="sse")
    base = servers.add(app, LIMITS)
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
