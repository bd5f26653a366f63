"""The embedded authorization server on Redis, reached through a real Sentinel (redis-server
--sentinel) with the ACL user and password from files: two proxy instances with the same keys share
registrations, codes and refresh tokens (a replica or a restart keeps the logins), and Redis holds
no code or refresh token in the clear (only their HMACs)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.authserver.flow import REDIRECT, authorize, discover, register, token
from tests.authserver.test_flow import idp, start_proxy  # noqa: F401 - the fixture
from tests.oidc import Issuer
from tests.redis_server import RedisServer, redis_server  # noqa: F401 - the fixture
from tests.vmcp.servers import JsonRpcBackend, Served


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def sentinel(redis_server: RedisServer, tmp_path: Path) -> Iterator[int]:  # noqa: F811
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed: run scripts/system-deps.sh"
    port = _free_port()
    conf = tmp_path / "sentinel.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor mymaster 127.0.0.1 {redis_server.port} 1\n"
        f"sentinel auth-pass mymaster {redis_server.password}\n"
    )
    proc = subprocess.Popen(
        [binary, str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 20
    while True:
        try:
            if client.execute_command("SENTINEL", "get-master-addr-by-name", "mymaster"):  # type: ignore[no-untyped-call]
                break
        except redis.exceptions.ConnectionError:
            pass
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        assert time.monotonic() < deadline, "the sentinel did not come up within 20 s"
        time.sleep(0.05)
    yield port
    proc.terminate()
    proc.wait(10)


async def test_redis_sentinel_storage_is_shared_and_holds_no_token(
    tmp_path: Path,
    idp: Issuer,  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
    sentinel: int,
) -> None:
    (tmp_path / "redis-user").write_text("default\n")
    (tmp_path / "redis-password").write_text(redis_server.password + "\n")
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (tmp_path / "signing.pem").write_bytes(pem)
    overrides: dict[str, Any] = {
        "storage": "redis",
        "redis": {
            "sentinelAddrs": [f"127.0.0.1:{sentinel}"],
            "masterName": "mymaster",
            "usernameFile": str(tmp_path / "redis-user"),
            "passwordFile": str(tmp_path / "redis-password"),
        },
        "signingKeyFiles": [str(tmp_path / "signing.pem")],
    }
    backend_served = await Served(JsonRpcBackend("backend")).start()
    first, document = await start_proxy(tmp_path, backend_served.url, idp, **overrides)
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            metadata = await discover(http, first.url)
            client_id = await register(http, metadata)
            code, verifier = await authorize(http, metadata, client_id)
            # A second instance (another replica, or the same after a restart) redeems the code.
            await first.stop()
            second, _ = await start_proxy(tmp_path, backend_served.url, idp, **overrides)
            assert second.port != first.port
            metadata_second = {**metadata, "token_endpoint": second.base + "/oauth/token"}
            form = {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": REDIRECT,
                "client_id": client_id,
                "code_verifier": verifier,
            }
            answer = await token(http, metadata_second, form)
            assert answer.status_code == 200, answer.text
            tokens = answer.json()
            again = await token(http, metadata_second, form)
            assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
            stored = redis_server.client()
            keys = [
                k.decode() if isinstance(k, bytes) else str(k) for k in stored.keys("mcpfleet:authserver:*")
            ]
            assert any(k.startswith("mcpfleet:authserver:client:") for k in keys), keys
            assert any(k.startswith("mcpfleet:authserver:refresh:") for k in keys), keys
            dump = " ".join(keys) + " ".join(str(stored.get(k)) for k in keys)
            assert code not in dump and tokens["refresh_token"] not in dump
            await second.stop()
    finally:
        await backend_served.stop()
    assert document["issuer"].startswith("http://127.0.0.1:")
