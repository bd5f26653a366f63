"""The local token issuer (`mcpfleet auth`): a gateway protected without an identity provider.

End to end as a person runs it (the real commands, a real `mcpfleet up` in the background, the MCP
SDK client): a token from `mcpfleet auth token` is accepted; no token, a tampered one, an expired
one and one signed by another key are refused. And the issuer's endpoint as hostile input: a corpus
of requests and a property test over methods, paths and Host values, each answered 2xx only for its
two documents, never 5xx.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from mcpfleet.platform.local import issuer
from mcpfleet.platform.local.issuer import IssuerError, IssuerSettings, ensure_issuer, issue_token


def test_issuer_key_and_settings_are_private_and_stable(tmp_path: Path) -> None:
    first = ensure_issuer(tmp_path)
    assert ensure_issuer(tmp_path) == first
    folder = tmp_path / "auth"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "issuer-key.pem").stat().st_mode) == 0o600
    token = issue_token(tmp_path, "alice", 3600)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["sub"] == "alice" and claims["iss"] == first.url and claims["aud"] == first.audience
    assert claims["exp"] - claims["iat"] == 3600


@pytest.mark.parametrize(
    ("user", "ttl", "message"),
    [
        ("", 3600, "--user"),
        ("a\nb", 3600, "--user"),
        ("x" * 300, 3600, "--user"),
        ("bob", 10, "--ttl"),
        ("bob", 10**9, "--ttl"),
    ],
)
def test_token_refusals_name_the_flag(tmp_path: Path, user: str, ttl: int, message: str) -> None:
    ensure_issuer(tmp_path)
    with pytest.raises(IssuerError, match=message):
        issue_token(tmp_path, user, ttl)


def test_token_without_issuer_says_how(tmp_path: Path) -> None:
    with pytest.raises(IssuerError, match="auth enable"):
        issue_token(tmp_path, "alice", 3600)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[IssuerSettings]:
    settings = ensure_issuer(tmp_path)
    server = issuer.server(tmp_path, settings)

    def run() -> None:
        asyncio.run(server._serve())

    import threading

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    try:
        yield settings
    finally:
        server.should_exit = True
        thread.join(10)


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def test_issuer_serves_its_two_documents(served: IssuerSettings) -> None:
    discovery = httpx.get(served.url + "/.well-known/openid-configuration").json()
    assert discovery["issuer"] == served.url and discovery["jwks_uri"] == served.jwks_url
    keys = httpx.get(served.jwks_url).json()["keys"]
    assert [k["alg"] for k in keys] == ["ES256"] and "d" not in keys[0]  # public part only


CORPUS = [
    (b"POST /jwks.json HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\n\r\nxxxx", b" 405 "),
    (b"DELETE /.well-known/openid-configuration HTTP/1.1\r\nHost: localhost\r\n\r\n", b" 405 "),
    (b"GET /../auth/issuer-key.pem HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b" 404 "),
    (b"GET /issuer-key.pem HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b" 404 "),
    (b"GET /jwks.json HTTP/1.1\r\nHost: evil.example\r\n\r\n", b" 421 "),
    (b"GET /jwks.json HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n", b" 421 "),
    (b"GET /jwks.json HTTP/1.1\r\n\r\n", b" 4"),
    (b"GET /jwks.json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n", b" 431 "),
    (b"GET /%00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b" 404 "),
    (b"BREW / HTCPCP/1.0\r\n\r\n", b" 400 "),
]


@pytest.mark.parametrize(("request_bytes", "status"), CORPUS, ids=[str(i) for i in range(len(CORPUS))])
def test_issuer_refuses_hostile_requests(served: IssuerSettings, request_bytes: bytes, status: bytes) -> None:
    answer = _raw(served.port, request_bytes)
    assert status in answer.split(b"\r\n", 1)[0], answer[:200]


METHODS = st.sampled_from(["GET", "HEAD", "POST", "PUT", "OPTIONS", "PATCH", "TRACE"])
PATHS = st.one_of(
    st.sampled_from(["/jwks.json", "/.well-known/openid-configuration", "/", "//jwks.json"]),
    st.text(
        alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="#?"), max_size=60
    ).map(lambda p: "/" + p),
)
HOSTS = st.sampled_from(["127.0.0.1", "localhost", "127.0.0.2", "example.com", "[::1]", ""])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=METHODS, path=PATHS, host=HOSTS)
def test_issuer_answers_every_request_without_5xx(
    served: IssuerSettings, method: str, path: str, host: str
) -> None:
    headers = {"Host": f"{host}:{served.port}"} if host else {"Host": ""}
    try:
        response = httpx.request(method, f"{served.url}{path}", headers=headers, timeout=10)
    except httpx.HTTPError:
        return  # a request line httpx itself refuses to send
    assert response.status_code < 500
    exact = path in ("/jwks.json", "/.well-known/openid-configuration")
    if response.status_code == 200:
        assert exact and method in ("GET", "HEAD") and host in ("127.0.0.1", "localhost", "[::1]")


# -- end to end -------------------------------------------------------------------------------


def _mcpfleet(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpfleet.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


async def _call(url: str, token: str | None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            result = await client.call_tool("time_get_current_time", {"timezone": "UTC"})
    return str(result.content[0].text)  # type: ignore[union-attr]


def _status(url: str, token: str | None) -> int:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    try:
        return httpx.post(url, json=body, headers=headers, timeout=30).status_code
    except httpx.TransportError:
        return 0  # the gateway restarting with its new settings


def test_protected_gateway_in_three_commands(tmp_path: Path) -> None:
    env = {**os.environ, "MCPFLEET_HOME": str(tmp_path / "home")}
    env.pop("MCPFLEET_STATE_DIR", None)
    state = tmp_path / "home" / "state"
    try:
        started = _mcpfleet("run", "time", env=env)
        assert started.returncode == 0, started.stdout + started.stderr
        url = re.search(r"gateway \(every server of the fleet\): (\S+)", started.stdout)
        assert url, started.stdout
        gateway = url.group(1)
        assert _mcpfleet("auth", "enable", env=env).returncode == 0
        token_file = tmp_path / "alice.token"
        made = _mcpfleet("auth", "token", "--user", "alice", "-o", str(token_file), env=env)
        assert made.returncode == 0, made.stderr
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        deadline = time.monotonic() + 120
        while _status(gateway, None) != 401:  # the running up applies the edit like any other
            assert time.monotonic() < deadline, "the gateway never required a token"
            time.sleep(0.5)
        # The issuer up serves follows the state folder: the signing key `auth enable` made reaches its
        # JWKS within the follow interval, and a gateway refetches the JWKS for an unknown key at most
        # once a second; until both happened the token is refused with "unknown signing key".
        while _status(gateway, token) != 200:
            assert time.monotonic() < deadline, "the gateway never accepted the token"
            time.sleep(0.5)
        assert "UTC" in asyncio.run(_call(gateway, token))
        settings = issuer.read_settings(state)
        assert settings is not None
        claims = jwt.decode(token, options={"verify_signature": False})
        other = ec.generate_private_key(ec.SECP256R1())
        forged = jwt.encode(
            claims, other, algorithm="ES256", headers={"kid": jwt.get_unverified_header(token)["kid"]}
        )
        assert _status(gateway, forged) == 401
        assert _status(gateway, token[:-2] + ("AA" if token[-2:] != "AA" else "BB")) == 401
        key = issuer._signing_key(state)
        stale = claims | {"iat": int(time.time()) - 7200, "exp": int(time.time()) - 3600}
        expired = jwt.encode(stale, key.private, algorithm="ES256", headers={"kid": key.kid})
        assert _status(gateway, expired) == 401
        assert _status(gateway, token) == 200
    finally:
        _mcpfleet("down", "--state-dir", str(state), env=env)
