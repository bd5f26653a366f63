"""The registry's connection handling as served (issue 27 item 17): `mcpfleet registry serve` and the
local platform's registry entry apply the config's `server.*` limits — a connection that never
finishes its headers gets a 408 and is closed, oversized headers a 431, an oversized or stalled body a
413 / 408 problem document — and the server keeps answering. Plus a property test: arbitrary bytes on a
raw connection never get a 5xx and never hold the connection past the header deadline."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.registry.config import ConfigError, http_limits, parse_config
from tests.conformance import harness
from tests.hostile import stall
from tests.registry.conftest import server_doc, write_json

LIMITS = {"headerTimeout": "1s", "bodyTimeout": "1s", "maxBodyBytes": 4096, "maxHeaderBytes": 8192}


def _config(tmp_path: Path, port: int) -> Path:
    source = write_json(tmp_path / "servers.json", [server_doc("io.example/one")])
    cfg = tmp_path / "registry.json"
    cfg.write_text(
        json.dumps(
            {
                "registryName": "conn",
                "sources": [{"name": "file", "file": {"path": str(source)}}],
                "server": {"port": port, **LIMITS},
            }
        )
    )
    return cfg


@pytest.fixture(scope="module", params=["cli", "local-platform"])
def registry_port(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    tmp_path = tmp_path_factory.mktemp("conn")
    port = harness.free_port()
    cfg = _config(tmp_path, port)
    if request.param == "cli":
        cmd = [sys.executable, "-m", "mcpfleet.cli.main", "registry", "serve", "--config", str(cfg)]
        cmd += ["--log-level", "warning"]
    else:
        cmd = [sys.executable, "-m", "mcpfleet.platform.local.dataplane", "registry"]
        cmd += ["--state-dir", str(tmp_path), "--config", str(cfg), "--port", str(port)]
    with harness.serving(cmd, f"http://127.0.0.1:{port}/readiness", timeout=60):
        yield port


def _exchange(port: int, data: bytes, timeout: float = 8.0) -> tuple[bytes, float]:
    """Send `data` on a new connection and read until the server closes it: (answer, seconds)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        t0 = time.monotonic()
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        return answer, time.monotonic() - t0


def test_stalled_connections_are_closed_within_the_header_deadline(registry_port: int) -> None:
    # Half send nothing, half stop inside their headers: all closed within seconds (was: never).
    closed, elapsed = stall(registry_port, 100, budget=10)
    assert closed == 100 and elapsed < 6
    answer, elapsed = _exchange(registry_port, b"GET /v0.1/servers HTTP/1.1\r\nhost: 127.0.0.1\r\n")
    assert answer.startswith(b"HTTP/1.1 408") and elapsed < 5


def test_oversized_headers_are_431(registry_port: int) -> None:
    request = b"GET /v0.1/servers HTTP/1.1\r\nhost: 127.0.0.1\r\nx-big: " + b"a" * 20_000 + b"\r\n\r\n"
    answer, _ = _exchange(registry_port, request)
    assert answer.startswith(b"HTTP/1.1 431")


def test_oversized_body_is_413_problem_naming_the_limit(registry_port: int) -> None:
    request = (
        b"POST /v0.1/publish HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b"content-length: 52428800\r\n\r\n{"
    )
    answer, _ = _exchange(registry_port, request)
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"application/problem+json" in answer and b"server.maxBodyBytes" in answer


def test_stalled_body_is_408_problem(registry_port: int) -> None:
    request = (
        b"POST /v0.1/publish HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        b'content-length: 100\r\n\r\n{"name"'
    )
    answer, elapsed = _exchange(registry_port, request)
    assert answer.startswith(b"HTTP/1.1 408") and b"server.bodyTimeout" in answer
    assert elapsed < 5


def test_it_still_answers(registry_port: int) -> None:
    answer, _ = _exchange(
        registry_port, b"GET /v0.1/servers HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"
    )
    assert answer.startswith(b"HTTP/1.1 200") and b"io.example/one" in answer


_REQUEST_LINES = st.sampled_from(
    [b"GET /v0.1/servers HTTP/1.1\r\n", b"POST /v0.1/publish HTTP/1.1\r\n", b"OPTIONS * HTTP/1.1\r\n", b""]
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=_REQUEST_LINES, junk=st.binary(max_size=300))
def test_any_bytes_get_a_4xx_or_a_timely_close(registry_port: int, line: bytes, junk: bytes) -> None:
    answer, elapsed = _exchange(registry_port, line + junk)
    assert elapsed < 6  # the header deadline (1 s) bounds every unfinished request
    if answer:
        status = answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/1.1 ") else b""
        assert status.isdigit() and int(status) < 500, answer[:200]


def test_limits_config_defaults_and_errors() -> None:
    base = {"registryName": "r", "sources": [{"name": "a", "file": {"path": "x"}}]}
    limits = http_limits(parse_config(base))
    # The proxy's and gateway's defaults.
    assert (limits.header_timeout, limits.body_timeout, limits.keep_alive_timeout) == (10.0, 30.0, 5)
    assert (limits.max_header_bytes, limits.max_body_bytes) == (64 * 1024, 4 * 1024 * 1024)
    for key, value in [
        ("headerTimeout", "0s"),
        ("bodyTimeout", "soon"),
        ("maxBodyBytes", 10),
        ("maxHeaderBytes", -1),
        ("keepAliveTimeout", "0s"),
    ]:
        with pytest.raises(ConfigError, match=f"server.{key}"):
            parse_config({**base, "server": {key: value}})
