"""Hostile input against a real vMCP gateway over HTTP (issue 11, defects 6, 7, 13, 14).

Each case was a 500 (a traceback in the log), a silently accepted invalid message or an
unbounded read on the code before the fix. The gateway runs as `mcpfleet vmcp serve` runs it
(`BodyLimits` + the guarded uvicorn protocol), in a background thread.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from mcpfleet.httplimits import HttpLimits
from mcpfleet.vmcp.config import parse_config
from mcpfleet.vmcp.server import ServeOptions, build_app
from tests.conformance import harness
from tests.hostile import (
    BASE_HEADERS,
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
from tests.vmcp.servers import sdk_backend


def start_gateway(limits: HttpLimits = TEST_LIMITS) -> tuple[ThreadServers, str]:
    servers = ThreadServers()
    backend = servers.add(sdk_backend("alpha").streamable_http_app(), None)
    cfg = parse_config({"name": "hostile", "backends": [{"name": "alpha", "url": f"{backend}/mcp"}]})
    base = servers.add(
        build_app(cfg, ServeOptions(host="127.0.0.1", max_json_depth=limits.max_json_depth)), limits
    )
    servers.start()
    return servers, base


@pytest.fixture(scope="module")
def vmcp() -> Iterator[str]:
    with running(start_gateway) as base:
        yield base


@pytest.fixture(scope="module")
def sid(vmcp: str) -> str:
    return open_session(vmcp)


def legacy(base: str, sid: str, message: Any, **headers: str) -> Any:
    reply = post(base, encode(message), {**legacy_headers(sid), **headers})
    assert_sane(reply, message)
    return reply


def modern(base: str, message: Any, **headers: str) -> Any:
    reply = post(base, encode(message), {**modern_headers(message), **headers})
    assert_sane(reply, message)
    return reply


def error_of(reply: Any) -> dict[str, Any]:
    msgs = reply.messages()
    assert msgs and "error" in msgs[-1], reply
    return dict(msgs[-1]["error"])


# -- defect 6: wrongly typed fields -------------------------------------------------------------

LEGACY_TYPED = [
    ({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": [1, 2]}, -32602, "params"),
    (
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "completion/complete",
            "params": {"ref": "x", "argument": {"name": "a", "value": "b"}},
        },
        -32602,
        "params.ref",
    ),
    ({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 5}}, -32602, "params.name"),
    ({"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": ["x"]}}, -32602, "params.name"),
    ({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": {}}}, -32602, "params.uri"),
    (
        {"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": 3}},
        -32602,
        "params.level",
    ),
    (
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {"progressToken": [1]}}},
        -32602,
        "progressToken",
    ),
]


@pytest.mark.parametrize(
    ("message", "code", "field"), LEGACY_TYPED, ids=[f"{m['method']}-{f}" for m, _c, f in LEGACY_TYPED]
)
def test_legacy_wrong_types_are_invalid_params(
    vmcp: str, sid: str, message: Any, code: int, field: str
) -> None:
    with error_log() as log:
        err = error_of(legacy(vmcp, sid, message))
    assert err["code"] == code and field in err["message"], err
    assert not log.tracebacks()
    good_tools_list(vmcp, LEGACY, sid)


def test_initialize_with_string_params(vmcp: str) -> None:
    msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": "x"}
    reply = post(vmcp, orjson.dumps(msg), BASE_HEADERS)
    assert_sane(reply, msg)
    assert reply.status == 400 and error_of(reply)["code"] == -32600
    assert "params" in error_of(reply)["message"]
    msg["params"] = {
        "protocolVersion": LEGACY,
        "capabilities": [],
        "clientInfo": {"name": "t", "version": "1"},
    }
    reply = post(vmcp, orjson.dumps(msg), BASE_HEADERS)
    assert_sane(reply, msg)
    err = error_of(reply)
    assert err["code"] == -32602 and "params.capabilities" in err["message"], err


def test_cancel_with_list_request_id(vmcp: str, sid: str) -> None:
    msg = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}}
    with error_log() as log:
        reply = legacy(vmcp, sid, msg)
    assert reply.status == 400 and "requestId" in error_of(reply)["message"]
    assert not log.tracebacks()
    good_tools_list(vmcp, LEGACY, sid)


MODERN_TYPED = [
    (
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "subscriptions/listen",
            "params": {"notifications": "all", "_meta": META},
        },
        "params.notifications",
    ),
    (
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "completion/complete",
            "params": {"ref": "x", "argument": {"name": "a", "value": "b"}, "_meta": META},
        },
        "params.ref",
    ),
    (
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "alpha_echo", "arguments": [1], "_meta": META},
        },
        "params.arguments",
    ),
]


@pytest.mark.parametrize(("message", "field"), MODERN_TYPED, ids=[str(m["method"]) for m, _f in MODERN_TYPED])
def test_modern_wrong_types_are_invalid_params(vmcp: str, message: Any, field: str) -> None:
    with error_log() as log:
        reply = modern(vmcp, message)
    err = error_of(reply)
    assert reply.status == 400 and err["code"] == -32602 and field in err["message"], err
    assert not log.tracebacks()
    good_tools_list(vmcp, MODERN, None)


# -- defect 13: invalid JSON-RPC envelopes --------------------------------------------------------


@pytest.mark.parametrize("era", [LEGACY, MODERN])
@pytest.mark.parametrize(("message", "field"), ENVELOPES, ids=[str(i) for i in range(len(ENVELOPES))])
def test_invalid_envelopes_are_refused(vmcp: str, sid: str, era: str, message: Any, field: str) -> None:
    reply = legacy(vmcp, sid, message) if era == LEGACY else modern(vmcp, message)
    check_envelope_refused(reply, field)


@pytest.mark.parametrize("era", [LEGACY, MODERN])
@pytest.mark.parametrize("ctype", ["text/plain", "application/jsonx", ""])
def test_content_type_must_be_json(vmcp: str, sid: str, era: str, ctype: str) -> None:
    check_content_type(vmcp, era, sid, ctype)


# -- defect 7: nesting ---------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [62, 63, 300, 1100])
@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_deep_arguments(vmcp: str, sid: str, era: str, depth: int) -> None:
    msg = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "alpha_echo", "arguments": nested(depth)},
    }
    if era == MODERN:
        msg["params"]["_meta"] = META  # type: ignore[index]
    headers = legacy_headers(sid) if era == LEGACY else modern_headers(msg)
    with error_log() as log:
        reply = post(vmcp, encode_deep(msg), headers)
    assert_sane(reply, f"depth {depth}")
    assert not log.tracebacks()
    if depth <= 62:  # message, params, then `depth` levels: exactly the limit of 64
        assert reply.status == 200 and "result" in reply.messages()[-1], reply
        return
    err = error_of(reply)
    if depth > 1024:  # beyond what the JSON decoder takes at all
        assert err["code"] == -32700
    else:
        assert err["code"] == -32600 and "params.arguments" in err["message"] and "64" in err["message"], err
    good_tools_list(vmcp, era, sid)


# -- defect 14: body size, body time, header time ---------------------------------------------------


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_oversized_body_is_413_without_reading_it(vmcp: str, sid: str, era: str) -> None:
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META, "pad": "x" * 70_000}}
    headers = legacy_headers(sid) if era == LEGACY else modern_headers(msg)
    reply = post(vmcp, orjson.dumps(msg), headers)
    assert reply.status == 413 and "--max-body-bytes" in reply.json()["error"]["message"]
    # Announced as 50 MB and never sent: refused from the header alone.
    host, port = vmcp.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(
            b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"content-length: 52428800\r\n\r\n{"
        )
        assert s.recv(100).startswith(b"HTTP/1.1 413")
    # Chunked (no length): cut off once the limit is passed.
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(
            b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        chunk = b"x" * 16384
        for _ in range(5):
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        assert s.recv(100).startswith(b"HTTP/1.1 413")


def test_stalled_body_is_408(vmcp: str) -> None:
    host, port = vmcp.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(
            b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b'content-length: 100\r\n\r\n{"jsonrpc"'
        )
        t0 = time.monotonic()
        answer = s.recv(200)
        assert answer.startswith(b"HTTP/1.1 408") and b"--body-timeout" in answer + s.recv(400)
        assert time.monotonic() - t0 < 4


def test_stalled_headers_are_closed(vmcp: str) -> None:
    host, port = vmcp.removeprefix("http://").split(":")
    with (
        socket.create_connection((host, int(port)), timeout=5) as silent,
        socket.create_connection((host, int(port)), timeout=5) as partial,
    ):
        partial.sendall(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        t0 = time.monotonic()
        assert silent.recv(100).startswith(b"HTTP/1.1 408")
        assert partial.recv(100).startswith(b"HTTP/1.1 408")
        assert time.monotonic() - t0 < 4


def test_huge_headers_are_431(vmcp: str) -> None:
    host, port = vmcp.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: " + b"a" * 70_000 + b"\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431")


@pytest.mark.parametrize("entry", ["cli-flags", "local-platform-env"])
def test_cli_releases_stalled_connections(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, entry: str) -> None:
    """The gateway as a process - `mcpfleet vmcp serve` with the limits as flags, and the local
    platform's entry (what `mcpfleet up` starts) with them in the environment: 500 connections that
    never finish their headers are closed within seconds, an oversized body is 413, it still answers."""
    cfg = tmp_path / "vmcp.yaml"
    cfg.write_text(
        f"name: stalled\nbackends:\n  - name: gone\n    url: http://127.0.0.1:{harness.free_port()}/mcp\n"
    )
    port = harness.free_port()
    if entry == "cli-flags":
        cmd = [sys.executable, "-m", "mcpfleet.cli.main", "vmcp", "serve", "--config", str(cfg)]
        cmd += ["--port", str(port), "--header-timeout", "1", "--max-body-bytes", "1000"]
    else:
        monkeypatch.setenv("MCPFLEET_HEADER_TIMEOUT", "1")
        monkeypatch.setenv("MCPFLEET_MAX_BODY_BYTES", "1000")
        cmd = [
            sys.executable,
            "-m",
            "mcpfleet.platform.local.dataplane",
            "vmcp",
            "--state-dir",
            str(tmp_path),
        ]
        cmd += ["--config", str(cfg), "--port", str(port)]
    with harness.serving(cmd, f"http://127.0.0.1:{port}/health"):
        closed, elapsed = stall(port, 500, budget=10)
        assert closed == 500 and elapsed < 6
        big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 2000}}
        assert post(f"http://127.0.0.1:{port}", orjson.dumps(big), BASE_HEADERS).status == 413
