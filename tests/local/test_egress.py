"""The local egress filter's hostile suite: what a sandboxed server may send its proxy (a corpus of
request heads, each with its clear answer, and a property test of the request-line parser)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.platform.local import egress
from mcpfleet.platform.local.egress import EgressPolicy, parse_target


def test_policy_matches_hosts_and_ports() -> None:
    policy = EgressPolicy(hosts=(".example.com", "api.test"), ports=(443,))
    assert policy.allows("example.com", 443) and policy.allows("a.b.EXAMPLE.com.", 443)
    assert policy.allows("api.test", 443)
    assert not policy.allows("evilexample.com", 443)  # a suffix is a whole label
    assert not policy.allows("sub.api.test", 443)  # an exact name is only itself
    assert not policy.allows("example.com", 80)
    assert EgressPolicy(ports=(8080,)).allows("anything", 8080)
    assert EgressPolicy(hosts=("h",)).allows("h", 1)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"CONNECT h.example:443 HTTP/1.1\r\n\r\n", ("h.example", 443, True)),
        (b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", ("::1", 8443, True)),
        (b"GET http://h.example/x?y HTTP/1.1\r\nHost: h\r\n\r\n", ("h.example", 80, False)),
        (b"POST http://h.example:8080/ HTTP/1.0\r\n\r\n", ("h.example", 8080, False)),
    ],
)
def test_targets(head: bytes, expected: tuple[str, int, bool]) -> None:
    assert parse_target(head) == expected


@pytest.mark.parametrize(
    "head",
    [
        b"GET / HTTP/1.1\r\n\r\n",  # origin-form: not a proxy request
        b"GET https://h.example/ HTTP/1.1\r\n\r\n",  # https goes through CONNECT
        b"CONNECT h.example HTTP/1.1\r\n\r\n",
        b"CONNECT h.example:https HTTP/1.1\r\n\r\n",
        b"CONNECT h.example:443 SPDY/3\r\n\r\n",
        b"CONNECT  h:1 HTTP/1.1\r\n\r\n",
        b"\xff\xfe\r\n\r\n",
        b"\r\n\r\n",
    ],
)
def test_malformed_targets_refused(head: bytes) -> None:
    with pytest.raises(ValueError):
        parse_target(head)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_head_parses_or_is_a_value_error(head: bytes) -> None:
    try:
        host, port, _ = parse_target(head)
    except ValueError:
        return
    assert isinstance(host, str) and 0 <= port <= 65535


async def _ask(path: Path, data: bytes) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(data)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(4096), 15)
    writer.close()
    return answer


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_hostile_requests_get_clear_answers(tmp_path: Path) -> None:
    closed = _closed_port()
    handler = egress._Outside(EgressPolicy(hosts=("127.0.0.1",), ports=(closed,)))
    path = tmp_path / "s.sock"
    server = await asyncio.start_unix_server(handler.handle, path=str(path), limit=egress.MAX_HEAD)
    try:
        corpus = [
            (
                b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n",
                b"403 Forbidden",
                b"spec.permissionProfile network.outbound",
            ),
            (b"CONNECT localhost:%d HTTP/1.1\r\n\r\n" % closed, b"403 Forbidden", b"localhost"),
            (b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % closed, b"502 Bad Gateway", b"not reached"),
            (b"GET / HTTP/1.1\r\n\r\n", b"400 Bad Request", b"absolute http:// URL"),
            (
                b"CONNECT x HTTP/1.1\r\n" + b"A: " + b"a" * 20000 + b"\r\n\r\n",
                b"400 Bad Request",
                b"too large",
            ),
            (b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n", b"400 Bad Request", b"incomplete"),  # then EOF
        ]
        for data, status, text in corpus:
            if data.endswith(b"\r\n\r\n"):
                answer = await _ask(path, data)
            else:
                reader, writer = await asyncio.open_unix_connection(str(path))
                writer.write(data)
                writer.write_eof()
                answer = await asyncio.wait_for(reader.read(4096), 15)
                writer.close()
            assert answer.startswith(b"HTTP/1.1 " + status), (data[:60], answer)
            assert text in answer, (data[:60], answer)
            assert b"Traceback" not in answer
        # Still serving after all of it.
        assert (await _ask(path, b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
    finally:
        server.close()
        await server.wait_closed()


def test_main_needs_a_command() -> None:
    with pytest.raises(SystemExit):
        egress.main(["outside", "--socket-dir", "/nonexistent", "--"])


async def test_serve_on_tcp_filters_like_the_local_filter() -> None:
    """The Kubernetes egress proxy's mode: the same filter on a TCP port."""
    port = _closed_port()
    task = asyncio.create_task(egress.serve("127.0.0.1", port, EgressPolicy(hosts=("allowed.test",))))
    try:
        for _ in range(100):
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.05)
        writer.write(b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")
        answer = await asyncio.wait_for(reader.read(4096), 15)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 403 Forbidden") and b"127.0.0.1:1 is not allowed" in answer
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_serve_needs_an_address() -> None:
    with pytest.raises(SystemExit):
        egress.main(["serve"])
